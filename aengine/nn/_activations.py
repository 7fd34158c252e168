"""Activation modules: each calls its ``ae.nn.functional`` function (torch.nn's names and reprs)."""

from __future__ import annotations

from ..tensors._tensor import Tensor
from . import functional as F
from ._module import Module

__all__ = [
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Softplus",
    "Softsign", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid", "Sigmoid", "Tanh",
    "Softmax", "LogSoftmax", "Softmin", "GLU",
]  # fmt: skip


class _Inplace(Module):
    """An activation with only ``inplace`` (shown in the repr when True, as torch)."""

    _fn = ""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        out: Tensor = getattr(F, self._fn)(input, inplace=self.inplace)
        return out

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class _Plain(Module):
    """An activation without arguments."""

    _fn = ""

    def forward(self, input: Tensor) -> Tensor:
        out: Tensor = getattr(F, self._fn)(input)
        return out


class ReLU(_Inplace):
    """max(0, x).

    >>> import aengine as ae
    >>> ae.nn.ReLU()(ae.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """

    _fn = "relu"


class ReLU6(_Inplace):
    """min(max(0, x), 6).

    >>> import aengine as ae
    >>> ae.nn.ReLU6()(ae.tensor([-1.0, 8.0])).tolist()
    [0.0, 6.0]
    """

    _fn = "relu6"


class SELU(_Inplace):
    """Scaled ELU with torch's constants.

    >>> import aengine as ae
    >>> ae.nn.SELU()(ae.tensor([0.0])).tolist()
    [0.0]
    """

    _fn = "selu"


class SiLU(_Inplace):
    """x * sigmoid(x).

    >>> import aengine as ae
    >>> ae.nn.SiLU()(ae.tensor([0.0])).tolist()
    [0.0]
    """

    _fn = "silu"


class Mish(_Inplace):
    """x * tanh(softplus(x)).

    >>> import aengine as ae
    >>> ae.nn.Mish()(ae.tensor([0.0])).tolist()
    [0.0]
    """

    _fn = "mish"


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6.

    >>> import aengine as ae
    >>> ae.nn.Hardsigmoid()(ae.tensor([0.0])).tolist()
    [0.5]
    """

    _fn = "hardsigmoid"


class Hardswish(_Inplace):
    """x * relu6(x + 3) / 6.

    >>> import aengine as ae
    >>> ae.nn.Hardswish()(ae.tensor([3.0])).tolist()
    [3.0]
    """

    _fn = "hardswish"


class Softsign(_Plain):
    """x / (1 + |x|).

    >>> import aengine as ae
    >>> ae.nn.Softsign()(ae.tensor([1.0])).tolist()
    [0.5]
    """

    _fn = "softsign"


class LogSigmoid(_Plain):
    """log(sigmoid(x)), computed stably.

    >>> import aengine as ae
    >>> round(ae.nn.LogSigmoid()(ae.tensor([0.0])).item(), 4)
    -0.6931
    """

    _fn = "logsigmoid"


class Sigmoid(_Plain):
    """1 / (1 + exp(-x)).

    >>> import aengine as ae
    >>> ae.nn.Sigmoid()(ae.tensor([0.0])).tolist()
    [0.5]
    """

    _fn = "sigmoid"


class Tanh(_Plain):
    """tanh(x).

    >>> import aengine as ae
    >>> ae.nn.Tanh()(ae.tensor([0.0])).tolist()
    [0.0]
    """

    _fn = "tanh"


class LeakyReLU(Module):
    """x where x > 0, else negative_slope * x.

    >>> import aengine as ae
    >>> ae.nn.LeakyReLU(0.1)(ae.tensor([-1.0, 2.0])).tolist()
    [-0.10000000149011612, 2.0]
    """

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1).

    >>> import aengine as ae
    >>> ae.nn.ELU()(ae.tensor([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """

    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        out: Tensor = getattr(F, self._fn)(input, self.alpha, self.inplace)
        return out

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    >>> import aengine as ae
    >>> ae.nn.CELU()(ae.tensor([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """

    _fn = "celu"


class GELU(Module):
    """x * Phi(x) (``approximate='tanh'``: torch's tanh approximation).

    >>> import aengine as ae
    >>> ae.nn.GELU()(ae.tensor([0.0])).tolist()
    [0.0]
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``).

    >>> import aengine as ae
    >>> round(ae.nn.Softplus()(ae.tensor([0.0])).item(), 4)
    0.6931
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """x clipped to [min_val, max_val].

    >>> import aengine as ae
    >>> ae.nn.Hardtanh()(ae.tensor([-2.0, 0.5])).tolist()
    [-1.0, 0.5]
    """

    def __init__(
        self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
        min_value: float | None = None, max_value: float | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.min_val = min_value if min_value is not None else min_val
        self.max_val = max_value if max_value is not None else max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise ValueError("max_val must be greater than min_val")

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else ""
        )


class _Dim(Module):
    _fn = ""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        out: Tensor = getattr(F, self._fn)(input, self.dim, _stacklevel=5)
        return out

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_Dim):
    """exp(x) / sum(exp(x)) along ``dim``.

    >>> import aengine as ae
    >>> ae.nn.Softmax(dim=0)(ae.zeros(2)).tolist()
    [0.5, 0.5]
    """

    _fn = "softmax"


class LogSoftmax(_Dim):
    """log(softmax(x)) along ``dim``, computed stably.

    >>> import aengine as ae
    >>> round(ae.nn.LogSoftmax(dim=0)(ae.zeros(2))[0].item(), 4)
    -0.6931
    """

    _fn = "log_softmax"


class Softmin(_Dim):
    """softmax(-x) along ``dim``.

    >>> import aengine as ae
    >>> ae.nn.Softmin(dim=0)(ae.zeros(2)).tolist()
    [0.5, 0.5]
    """

    _fn = "softmin"


class GLU(Module):
    """a * sigmoid(b), ``a`` and ``b`` the halves of the input along ``dim``.

    >>> import aengine as ae
    >>> ae.nn.GLU()(ae.zeros(1, 4)).shape
    (1, 2)
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
