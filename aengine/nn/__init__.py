"""``ae.nn``: modules, parameters, initialisation and the functional layers, as torch.nn.

``ae.nn.functional`` holds the functional forms (layers, activations, losses)
from the operator table; ``ae.nn.Module`` and ``ae.nn.Parameter`` build
models as torch's do::

    >>> import aengine as ae
    >>> net = ae.nn.Sequential(ae.nn.Flatten(), ae.nn.Identity())
    >>> net(ae.ones(2, 3, 4)).shape
    (2, 12)
"""

from . import functional, init, utils
from ._activations import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
    Tanh,
)
from ._containers import ModuleDict, ModuleList, Sequential
from ._conv import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    MaxPool1d,
    MaxPool2d,
)
from ._layers import Bilinear, Dropout, Embedding, Flatten, Identity, Linear, Unflatten
from ._losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from ._module import Buffer, IncompatibleKeys, Module, Parameter
from ._norms import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm
from ._transformer import (
    MultiheadAttention,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "Buffer", "IncompatibleKeys",
    "Sequential", "ModuleList", "ModuleDict", "Identity", "Flatten", "Unflatten",
    "Linear", "Bilinear", "Embedding", "Dropout",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm",
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Softplus",
    "Softsign", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid", "Sigmoid", "Tanh",
    "Softmax", "LogSoftmax", "Softmin", "GLU",
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "MultiheadAttention", "TransformerEncoderLayer",
    "TransformerEncoder", "TransformerDecoderLayer", "Conv1d", "Conv2d", "ConvTranspose1d",
    "ConvTranspose2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
]  # fmt: skip
