"""``ae.nn.init``: fill parameters in place, with torch.nn.init's formulas.

Random fills draw from aengine's generator (``ae.manual_seed`` seeds the
default one; every function takes ``generator=``).  The formulas (fans,
gains, bounds) are torch's, so a layer's initial values have the same
distribution as torch's; the numbers themselves come from another stream.

Example::

    >>> import aengine as ae
    >>> w = ae.empty(3, 4)
    >>> _ = ae.nn.init.xavier_uniform_(w)
    >>> bool((w.abs() <= (6 / 7) ** 0.5).all())
    True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core import no_grad
from ..tensors._creation import Generator, check_random_dtype, generator_rng
from ..tensors._tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
]


def _random_target(tensor: Tensor, name: str) -> Tensor:
    """``tensor``, checked to take random values: a float Tensor (PyTorch's error type)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"expected an ae.Tensor to fill, got {type(tensor).__name__}")
    check_random_dtype(tensor.data.dtype, name)
    return tensor


def _write(tensor: Tensor, values: Any) -> Tensor:
    """Write host ``values`` into ``tensor`` in place (its version bumps); returns it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"expected an ae.Tensor to fill, got {type(tensor).__name__}")
    with no_grad():
        return tensor.copy_(np.asarray(values, dtype=tensor.dtype))


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (torch's table).

    >>> import aengine as ae
    >>> round(ae.nn.init.calculate_gain("relu"), 4)
    1.4142
    """
    linear = {
        "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "sigmoid",
    }  # fmt: skip
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor: Tensor) -> tuple[int, int]:
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(
    tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill with values drawn uniformly from [a, b)."""
    _random_target(tensor, "uniform_")
    return _write(tensor, generator_rng(generator).uniform(a, b, size=tensor.shape))


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill with values drawn from N(mean, std²)."""
    _random_target(tensor, "normal_")
    return _write(tensor, generator_rng(generator).normal(mean, std, size=tensor.shape))


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """Fill from N(mean, std²) truncated to [a, b] (by the inverse CDF, as torch)."""
    _random_target(tensor, "trunc_normal_")
    # lazily: scipy loads only where this is used
    from scipy.special import erfinv

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = generator_rng(generator).uniform(2 * lo - 1, 2 * hi - 1, size=tensor.shape)
    values = np.clip(erfinv(u) * std * math.sqrt(2.0) + mean, a, b)
    return _write(tensor, values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    return _write(tensor, np.full(tensor.shape, val))


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(tensor.shape[0], tensor.shape[1]))


def xavier_uniform_(
    tensor: Tensor, gain: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot normal: N(0, std²) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan)."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He normal: N(0, std²) with std = gain / sqrt(fan)."""
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix (of the tensor flattened to 2-D), times ``gain``."""
    _random_target(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = generator_rng(generator).normal(0.0, 1.0, size=(rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tensor.shape))
