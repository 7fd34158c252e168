"""aengine: reverse-mode autograd on numpy/CuPy whose backward is awaitable.

The engine reproduces PyTorch's autograd semantics (GraphTask, ready queues,
dependency counting, hooks, retain/create graph...) and runs the backward
pass as a cooperative scheduler on anyio, inside asyncio or trio programs::

    import aengine as ae

    x = ae.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    (gx,) = await ae.grad(loss, [x])     # in async code
    (gx,) = ae.sync.grad(loss, [x])      # in plain code

See docs/ for the guide and the architecture.
"""

from . import autograd, distributed, func, functional, linalg, nn, optim, sync, testing, viz
from ._autograd import backward, grad, queue_callback
from ._checkpoint import (
    CheckpointError,
    GraphExecGroup,
    checkpoint,
    checkpoint_sequential,
    set_checkpoint_debug_enabled,
    set_checkpoint_early_stop,
)
from ._function import BackwardCFunction, Function, FunctionCtx
from ._gradcheck import gradcheck, gradgradcheck
from ._hooks import register_multi_grad_hook
from ._once_differentiable import once_differentiable
from ._profile import profile
from ._serialization import load, save
from ._table_api import *  # noqa: F403  (the table's ae. functions)
from ._table_api import __all__ as _table_all
from .core import (
    AccumulateGrad,
    AutogradError,
    BackwardError,
    GradcheckError,
    Node,
    RemovableHandle,
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_detect_anomaly,
    set_grad_enabled,
)
from .ops import (
    MaxResult,
    MinResult,
    abs,
    add,
    amax,
    amin,
    broadcast_to,
    cat,
    chunk,
    clamp,
    clone,
    cos,
    div,
    dot,
    eq,
    exp,
    expand,
    expm1,
    flatten,
    gather,
    ge,
    gt,
    index_select,
    le,
    log,
    log1p,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logsumexp,
    lt,
    masked_fill,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    mul,
    narrow,
    ne,
    neg,
    norm,
    permute,
    pow,
    prod,
    relu,
    reshape,
    select,
    sigmoid,
    sign,
    sin,
    softmax,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    sub,
    sum,
    take_along_dim,
    tanh,
    transpose,
    unbind,
    unsqueeze,
    var,
    where,
)
from .runtime import Engine, EngineStats, current_engine
from .tensors._creation import (
    Generator,
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from .tensors._device import Device, device
from .tensors._dtype import (
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from .tensors._random import bernoulli, from_numpy, multinomial, randint, randint_like, randperm
from .tensors._tensor import Tensor

bool = bool_

__version__ = "0.1.0"

__all__ = [
    "AccumulateGrad", "AutogradError", "BackwardCFunction", "BackwardError", "Function",
    "FunctionCtx", "once_differentiable", "register_multi_grad_hook", "Device", "Engine", "Generator", "Node",
    "RemovableHandle", "Tensor", "abs", "add", "arange", "as_tensor", "backward", "bool",
    "bool_", "broadcast_to", "checkpoint", "CheckpointError", "checkpoint_sequential", "GraphExecGroup", "set_checkpoint_debug_enabled", "set_checkpoint_early_stop", "clamp", "clone", "cos", "detect_anomaly", "device", "div",
    "empty", "empty_like", "enable_grad", "eq", "exp", "expand", "expm1", "eye", "flatten",
    "float16", "float32", "float64", "full", "full_like", "ge", "grad", "gt",
    "inference_mode", "int16", "int32", "int64", "int8", "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled", "is_grad_enabled", "is_inference_mode_enabled", "le", "linspace",
    "log", "log1p", "logical_and", "logical_not", "logical_or", "lt", "manual_seed",
    "matmul", "maximum", "mean", "minimum", "mul", "ne", "neg", "no_grad", "ones",
    "ones_like", "permute", "pow", "queue_callback", "rand", "rand_like", "randn",
    "randn_like", "relu", "reshape", "set_detect_anomaly", "set_grad_enabled", "sigmoid", "sign", "sin", "sqrt",
    "square", "squeeze", "sub", "sum", "sync", "autograd", "func", "functional", "viz", "distributed", "testing", "tanh", "tensor", "transpose", "uint8",
    "unsqueeze", "where", "zeros", "zeros_like", "__version__",
    "MaxResult", "MinResult", "amax", "amin", "log_softmax", "logsumexp", "max", "min",
    "norm", "prod", "softmax", "std", "var",
    "GradcheckError", "gradcheck", "gradgradcheck",
    "cat", "chunk", "gather", "index_select", "masked_fill", "narrow", "select", "split",
    "stack", "take_along_dim", "unbind",
    "complex64", "complex128", "get_default_dtype", "set_default_dtype", "mm", "dot",
    "EngineStats", "current_engine",
    "profile", "linalg", "nn", "optim", "save", "load",
    "bernoulli", "from_numpy", "multinomial", "randint", "randint_like", "randperm",
]  # fmt: skip
__all__ += [n for n in _table_all if n not in __all__]
