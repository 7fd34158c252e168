"""Random integers, permutations and samples, from aengine's generators.

Every draw comes from an ``ae.Generator`` (``ae.manual_seed`` seeds the
default one), so a program seeded once gives the same numbers on every run.
The streams are numpy's (PCG64), not torch's: the same seed gives other
numbers than torch's generator, with the same distributions.
"""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ._creation import Generator, _dtype, _finish, _size, generator_rng, tensor_input
from ._device import Device
from ._tensor import Tensor

__all__ = ["randint", "randint_like", "randperm", "bernoulli", "multinomial", "from_numpy"]


def _int(value: Any, fn: str, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{fn}(): argument '{name}' must be an int, not {type(value).__name__}"
        ) from None


def randint(
    *args: Any,
    size: Any = None,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """Random integers in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``.

    int64 unless ``dtype``, as torch's.

    Example::

        >>> import aengine as ae
        >>> _ = ae.manual_seed(0)
        >>> t = ae.randint(3, 10, (2, 4))
        >>> t.shape, t.dtype.name, bool(((t >= 3) & (t < 10)).all())
        ((2, 4), 'int64', True)
    """
    if size is not None:
        args = (*args, size)
    if len(args) == 2:
        low, high, shape = 0, args[0], args[1]
    elif len(args) == 3:
        low, high, shape = args
    else:
        raise TypeError(
            "randint() takes (high, size) or (low, high, size), e.g. ae.randint(0, 10, (3,)); "
            f"got {len(args)} positional arguments"
        )
    lo, hi = _int(low, "randint", "low"), _int(high, "randint", "high")
    if lo >= hi:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}"
        )
    dims = _size(tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
    dt = _dtype(dtype) or np.dtype(np.int64)
    _check_bounds(lo, hi, dt)
    host = generator_rng(generator).integers(lo, hi, size=dims)
    dev = Device(device)
    return _finish(dev.backend.from_numpy(host.astype(dt, copy=False)), dev, requires_grad)


def _check_bounds(lo: int, hi: int, dt: np.dtype[Any]) -> None:
    """Raise as torch where ``lo`` or ``hi - 1`` does not fit ``dt``; warn where a float loses integers."""
    if dt.kind == "b":
        bounds: tuple[float, float] | None = (0, 1)
    elif dt.kind in "iu":
        bounds = (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
    else:  # a float: float16's finite range; each float holds every integer up to 2**digits
        bounds = (-65504, 65504) if dt == np.float16 else None
        digits = np.finfo(dt).nmant + 1
    for end, value in (("from", lo), ("to - 1", hi - 1)):
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise RuntimeError(
                f"{end} is out of bounds for {dt.name}: it holds {bounds[0]}..{bounds[1]}; "
                "pass a range within it or a wider dtype"
            )
        if dt.kind == "f" and not -(2**digits) <= value <= 2**digits:
            warnings.warn(
                f"{end} is out of bounds [-(2^{digits}), 2^{digits}]: {dt.name} holds every "
                "integer only within this range, so some values cannot be drawn; pass a "
                "smaller range or dtype=ae.int64",
                UserWarning,
                stacklevel=3,
            )


def randint_like(
    input: Tensor,
    low: int = 0,
    high: int | None = None,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Random integers in [low, high) shaped like ``input`` (``randint_like(t, high)`` too).

    Example::

        >>> import aengine as ae
        >>> ae.randint_like(ae.zeros(2, 3), 5).shape
        (2, 3)
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "randint_like")
    if high is None:
        low, high = 0, low
    return randint(
        low,
        high,
        input.data.shape,
        generator=generator,
        dtype=dtype if dtype is not None else input.data.dtype,
        device=device if device is not None else input.device,
        requires_grad=requires_grad,
    )


def randperm(
    n: int,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``).

    Example::

        >>> import aengine as ae
        >>> sorted(ae.randperm(5).tolist())
        [0, 1, 2, 3, 4]
    """
    count = _int(n, "randperm", "n")
    if count < 0:
        raise RuntimeError(f"n must be non-negative, got {count}")
    dt = _dtype(dtype) or np.dtype(np.int64)
    if dt.kind == "b":
        raise NotImplementedError(
            "\"randperm\" not implemented for 'Bool': pass an integer or floating dtype"
        )
    if dt == np.float16 and count > 2049:
        raise RuntimeError(
            f"n cannot be greater than 2049 for Half type (got {count}): float16 holds every "
            "integer only up to 2048; pass a wider dtype"
        )
    if dt.kind in "iu" and count - 1 > np.iinfo(dt).max:
        raise RuntimeError(
            f"value cannot be converted to type {dt.name} without overflow: a permutation of "
            f"{count} reaches {count - 1}; pass a wider dtype"
        )
    host = generator_rng(generator).permutation(count)
    dev = Device(device)
    return _finish(dev.backend.from_numpy(host.astype(dt, copy=False)), dev, requires_grad)


def bernoulli(
    input: Tensor, p: float | None = None, *, generator: Generator | None = None
) -> Tensor:
    """0 or 1 drawn with probability ``input`` (or ``p``) per element, in ``input``'s dtype.

    The result records no graph (torch records a node whose gradient is
    zero: the same gradients, without the node).

    Example::

        >>> import aengine as ae
        >>> ae.bernoulli(ae.tensor([0.0, 1.0])).tolist()
        [0.0, 1.0]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "bernoulli")
    data = input.data
    if data.dtype.kind not in "fc":
        raise NotImplementedError(
            f'"bernoulli_tensor_cpu_self_" not implemented for {data.dtype}: pass a floating '
            "tensor of probabilities"
        )
    host = input.device.backend.to_numpy(data)
    probs = np.full(host.shape, p, dtype=np.float64) if p is not None else host
    if probs.size and not ((probs >= 0) & (probs <= 1)).all():
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false: probabilities must be "
            "in [0, 1]"
        )
    draws = (generator_rng(generator).random(host.shape) < probs).astype(data.dtype)
    return _finish(input.device.backend.from_numpy(draws), input.device, False)


def multinomial(
    input: Tensor,
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Indices drawn from the categories weighted by each row of ``input`` (int64).

    ``input`` is 1-D (one distribution) or 2-D (one per row), of
    non-negative weights; without ``replacement`` each row gives distinct
    categories, at most as many as it has non-zero weights.

    Example::

        >>> import aengine as ae
        >>> ae.multinomial(ae.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
        [1, 1]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "multinomial")
    if input.data.dtype.kind != "f":
        raise RuntimeError(
            "multinomial only supports floating-point dtypes for input, got: "
            f"{input.data.dtype.name}; pass the weights as floats (.float())"
        )
    k = _int(num_samples, "multinomial", "num_samples")
    host = input.device.backend.to_numpy(input.data).astype(np.float64)
    if host.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got a {host.ndim}-D input")
    if k <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples, got num_samples={k}")
    rows = host.reshape(-1, host.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    rng = generator_rng(generator)
    out = np.empty((rows.shape[0], k), dtype=np.int64)
    for i, w in enumerate(rows):
        total = w.sum()
        if total <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not replacement and k > np.count_nonzero(w):
            raise RuntimeError(
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement: "
                f"{k} samples from {np.count_nonzero(w)} non-zero categories; pass "
                "replacement=True or fewer samples"
            )
        out[i] = rng.choice(w.shape[0], size=k, replace=replacement, p=w / total)
    res = out.reshape(k) if host.ndim == 1 else out
    return _finish(input.device.backend.from_numpy(res), input.device, False)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A cpu tensor sharing memory with the numpy array ``ndarray``.

    Example::

        >>> import aengine as ae, numpy as np
        >>> a = np.zeros(3)
        >>> t = ae.from_numpy(a)
        >>> a[0] = 5.0
        >>> t.tolist()
        [5.0, 0.0, 0.0]
    """
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype.kind not in "biufc":
        raise TypeError(
            f"can't convert np.ndarray of type {ndarray.dtype}: the supported types are bool, "
            "integers, floats and complex numbers"
        )
    return _finish(ndarray, Device("cpu"), False)
