"""Creating tensors: from data, filled, ranges, and random numbers."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..core._modes import _inference
from ._device import CPU, Device
from ._dtype import as_dtype, bool_, default_complex, get_default_dtype, int64
from ._tensor import _NUMBERS, NUMERIC_KINDS, Tensor, _to_array

__all__ = [
    "check_random_dtype",
    "tensor",
    "as_tensor",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "linspace",
    "eye",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand",
    "randn",
    "rand_like",
    "randn_like",
    "manual_seed",
    "Generator",
    "default_generator",
    "generator_rng",
]


class _NoRandomOfDtype(NotImplementedError, TypeError):
    """Random numbers of a dtype that has none (an int, bool): PyTorch raises
    NotImplementedError (a RuntimeError); the argument is also of the wrong type."""


def check_random_dtype(dt: np.dtype[Any], name: str) -> None:
    """Refuse random numbers of an int or bool dtype, as PyTorch (see ``_NoRandomOfDtype``).

    PyTorch's text: ``"check_uniform_bounds" not implemented for 'Long'``.
    """
    if dt.kind not in "fc":
        raise _NoRandomOfDtype(
            f"{name}(): random numbers need a floating point dtype, got {dt}; pass "
            "dtype=ae.float32 (or ae.float64)"
        )


def _dtype(dtype: Any) -> np.dtype[Any] | None:
    """A ``dtype`` argument as a numpy dtype (None stays None), checked to be numeric."""
    dt = as_dtype(dtype)
    if dt is not None and dt.kind not in NUMERIC_KINDS:
        raise TypeError(
            f"dtype must be a numeric dtype (e.g. ae.float32, ae.int64, ae.bool_), got {dtype!r}"
        )
    return dt


def _check_number(value: Any, what: str) -> None:
    """``value`` (a fill value) must be a number, as PyTorch's ``Number`` arguments."""
    if isinstance(value, Tensor):
        if value.data.ndim:
            raise ValueError(
                f"{what} must be a number or a 0-d tensor, got a tensor of shape "
                f"{tuple(value.data.shape)}"
            )
        return
    if not isinstance(value, _NUMBERS):
        raise TypeError(
            f"{what} must be a number (bool, int, float, complex), not {type(value).__name__}"
        )
    if type(value) is int and not -(2**63) <= value < 2**63:
        raise ValueError(
            f"{what} {value} cannot be converted to int64 without overflow; pass a float"
        )


def _scalar(value: Any, what: str) -> Any:
    """A number argument (a 0-d tensor gives its value), checked."""
    _check_number(value, what)
    return value.item() if isinstance(value, Tensor) else value


def _finish(data: Any, dev: Device, requires_grad: bool) -> Tensor:
    t = Tensor._make(data, False, dev)
    if _inference.get():
        t._inference = True
    if requires_grad is not False:
        if requires_grad.__class__ is not bool:  # PyTorch's text
            raise TypeError(
                f"argument 'requires_grad' must be bool, not {type(requires_grad).__name__}"
            )
        t.requires_grad_(True)
    return t


def tensor(
    data: Any, *, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False
) -> Tensor:
    """A new leaf tensor holding a copy of ``data`` (numbers, lists, arrays).

    Without ``dtype`` the dtype is PyTorch's: Python floats give the default
    dtype (float32, see :func:`set_default_dtype`), ints int64, bools bool;
    numpy arrays, numpy scalars and Tensors keep theirs; a list the
    promotion of its items.

    Example::

        >>> import aengine as ae
        >>> import numpy as np
        >>> ae.tensor([[1, 2], [3, 4]], dtype=ae.float32).shape
        (2, 2)
        >>> ae.tensor([1.0, 2]).dtype, ae.tensor([1, 2]).dtype
        (dtype('float32'), dtype('int64'))
        >>> ae.tensor(np.array([1.0, 2.0])).dtype
        dtype('float64')
    """
    dev = Device(device)
    return _finish(_to_array(data, _dtype(dtype), dev), dev, requires_grad)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor sharing memory with ``data`` where possible (a numpy array, a Tensor).

    Python data gets PyTorch's dtypes, as :func:`tensor`.
    """
    if isinstance(data, Tensor):
        t = data
        if dtype is not None or device is not None:
            t = t.to(device=device, dtype=dtype)
        return t
    dev = CPU if device is None else Device(device)
    return _finish(_to_array(data, _dtype(dtype), dev, copy=False), dev, False)


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    """Sizes given as ``f(2, 3)`` or ``f((2, 3))``: ints, numpy integers included."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if s.__class__ is not int:
            if isinstance(s, (bool, np.bool_)) or not hasattr(s, "__index__"):
                raise TypeError(
                    f"sizes must be non-negative integers, got {size} (an element of type "
                    f"{type(s).__name__})"
                )
            s = operator.index(s)
        if s < 0:
            raise ValueError(f"sizes must be non-negative integers, got {size}")
        out.append(s)
    return tuple(out)


def _fill_dtype(value: Any) -> np.dtype[Any]:
    """The dtype of ``full``'s fill value without ``dtype=`` (PyTorch: by its kind alone).

    A bool gives bool, an integer int64, a real number the default dtype, a
    complex number the default complex dtype; numpy scalars and 0-d tensors
    count by their kind too (``full((2,), np.float64(1))`` is float32).
    """
    kind = value.data.dtype.kind if isinstance(value, Tensor) else np.asarray(value).dtype.kind
    if kind == "b":
        return bool_
    if kind in "iu":
        return int64
    if kind == "c":
        return default_complex()
    return get_default_dtype()


def _filled(
    kind: str,
    size: tuple[Any, ...],
    dtype: Any,
    device: Any,
    requires_grad: bool,
    value: Any = None,
) -> Tensor:
    dev = Device(device)
    xp = dev.backend.xp
    shape = _size(size)
    dt = _dtype(dtype) or get_default_dtype()
    if kind == "zeros":
        arr = xp.zeros(shape, dtype=dt)
    elif kind == "ones":
        arr = xp.ones(shape, dtype=dt)
    elif kind == "empty":
        arr = xp.empty(shape, dtype=dt)
    else:
        _check_number(value, "fill_value")
        if dtype is None:
            dt = _fill_dtype(value)
        if isinstance(value, Tensor):
            value = value.item()
        arr = xp.full(shape, value, dtype=dt)
    return _finish(arr, dev, requires_grad)


def zeros(
    *size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False
) -> Tensor:
    """A tensor of zeros (of the default dtype, float32, unless ``dtype`` says otherwise).

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3).dtype
        dtype('float32')
    """
    return _filled("zeros", size, dtype, device, requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False) -> Tensor:
    """A tensor of ones (of the default dtype, float32, unless ``dtype`` says otherwise)."""
    return _filled("ones", size, dtype, device, requires_grad)


def empty(
    *size: Any, dtype: Any = None, device: Any = "cpu", requires_grad: bool = False
) -> Tensor:
    """An uninitialised tensor (of the default dtype unless ``dtype`` says otherwise)."""
    return _filled("empty", size, dtype, device, requires_grad)


def full(
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``.

    Without ``dtype``: bool for a bool, int64 for an integer, the default
    dtype for a real number (as PyTorch).
    """
    size = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    return _filled("full", size, dtype, device, requires_grad, fill_value)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``, like numpy.arange.

    Without ``dtype``: int64 when every bound is an integer, else the
    default dtype (as PyTorch).

    Example::

        >>> import aengine as ae
        >>> ae.arange(3).dtype, ae.arange(0, 1, 0.5).dtype
        (dtype('int64'), dtype('float32'))
    """
    dev = Device(device)
    if end is None:
        start, end = 0, start
    start, end, step = _scalar(start, "start"), _scalar(end, "end"), _scalar(step, "step")
    if step == 0:
        raise ValueError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise ValueError(
            f"upper bound and lower bound inconsistent with step sign: arange({start}, {end}, "
            f"{step}); give a step of the other sign"
        )
    dt = _dtype(dtype)
    if dt is None:
        ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dt = int64 if ints else get_default_dtype()
    arr = dev.backend.xp.arange(start, end, step, dtype=dt)
    return _finish(arr, dev, requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (default dtype)."""
    dev = Device(device)
    start = _scalar(start, "linspace(): argument 'start'")
    end = _scalar(end, "linspace(): argument 'end'")
    steps = _int_arg(steps, "linspace", "steps")
    if steps < 0:
        raise ValueError(f"linspace(): number of steps must be non-negative, got {steps}")
    dt = _dtype(dtype) or get_default_dtype()
    arr = dev.backend.xp.linspace(start, end, steps, dtype=dt)
    return _finish(arr, dev, requires_grad)


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """The identity matrix of n rows (and m columns), of the default dtype unless ``dtype``."""
    dev = Device(device)
    n = _int_arg(n, "eye", "n")
    if n < 0:
        raise ValueError(f"n must be greater or equal to 0, got {n}")
    if m is not None:
        m = _int_arg(m, "eye", "m")
        if m < 0:
            raise ValueError(f"m must be greater or equal to 0, got {m}")
    arr = dev.backend.xp.eye(n, m, dtype=_dtype(dtype) or get_default_dtype())
    return _finish(arr, dev, requires_grad)


def tensor_input(x: Any, name: str, arg: str = "input") -> Tensor:
    """``x`` if it is a Tensor, else the TypeError naming ``name``'s argument ``arg``.

    Ops call it only for an argument that is not exactly a Tensor (``if
    x.__class__ is not Tensor``), so a Tensor argument pays nothing for it.
    """
    if isinstance(x, Tensor):
        return x
    raise TypeError(
        f"{name}(): argument '{arg}' must be a Tensor, not {type(x).__name__}; "
        "convert it first with ae.tensor(...)"
    )


def _int_arg(value: Any, fn: str, name: str) -> int:
    """An int argument of ``fn`` (a Python or numpy integer, not a bool), as PyTorch's."""
    if value.__class__ is int:
        return value
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(f"{fn}(): argument '{name}' must be an int, not {type(value).__name__}")
    return operator.index(value)


def _like(name: str, t: Any, dtype: Any, device: Any) -> tuple[Any, Any]:
    if t.__class__ is not Tensor:
        t = tensor_input(t, name)
    return (_dtype(dtype) or t.data.dtype, t._device if device is None else Device(device))


def zeros_like(
    t: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Zeros with the shape (and by default dtype and device) of ``t``."""
    dt, dev = _like("zeros_like", t, dtype, device)
    return _finish(dev.backend.xp.zeros(t.data.shape, dtype=dt), dev, requires_grad)


def ones_like(
    t: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Ones with the shape (and by default dtype and device) of ``t``."""
    dt, dev = _like("ones_like", t, dtype, device)
    return _finish(dev.backend.xp.ones(t.data.shape, dtype=dt), dev, requires_grad)


def full_like(
    t: Tensor,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``fill_value`` with the shape (and by default dtype and device) of ``t``."""
    dt, dev = _like("full_like", t, dtype, device)
    _check_number(fill_value, "fill_value")
    return _finish(dev.backend.xp.full(t.data.shape, fill_value, dtype=dt), dev, requires_grad)


def empty_like(
    t: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """Uninitialised, with the shape (and by default dtype and device) of ``t``."""
    dt, dev = _like("empty_like", t, dtype, device)
    return _finish(dev.backend.xp.empty(t.data.shape, dtype=dt), dev, requires_grad)


class Generator:
    """A random number generator (numpy's PCG64), seedable and independent.

    Example::

        >>> import aengine as ae
        >>> g = ae.Generator().manual_seed(0)
        >>> ae.rand(2, generator=g).shape
        (2,)
    """

    def __init__(self, seed: int | None = None) -> None:
        self._rng = np.random.default_rng(None if seed is None else _seed(seed))

    def manual_seed(self, seed: int) -> Generator:
        """Re-seed; returns the generator."""
        self._rng = np.random.default_rng(_seed(seed))
        return self


def _seed(seed: Any) -> int:
    """A seed: a non-negative int (a Python or numpy integer, not a bool)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return int(seed)


default_generator = Generator(0)


def generator_rng(generator: Generator | None) -> np.random.Generator:
    """The numpy stream of ``generator`` (the default generator's for None), checked."""
    if generator is None:
        return default_generator._rng
    if not isinstance(generator, Generator):
        raise TypeError(
            f"generator must be an ae.Generator (or None), not {type(generator).__name__}"
        )
    return generator._rng


def manual_seed(seed: int) -> Generator:
    """Seed the default generator used by rand/randn; returns it."""
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    return default_generator.manual_seed(seed)


def _random(
    kind: str,
    size: tuple[Any, ...],
    generator: Generator | None,
    dtype: Any,
    device: Any,
    requires_grad: bool,
    name: str | None = None,
) -> Tensor:
    rng = generator_rng(generator)
    dt = _dtype(dtype) or get_default_dtype()
    check_random_dtype(dt, name or kind)
    shape = _size(size)
    host = rng.random(shape) if kind == "rand" else rng.standard_normal(shape)
    dev = Device(device)
    arr = dev.backend.from_numpy(host.astype(dt, copy=False))
    return _finish(arr, dev, requires_grad)


def rand(
    *size: Any,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """Uniform random numbers in [0, 1) (of the default dtype unless ``dtype``)."""
    return _random("rand", size, generator, dtype, device, requires_grad)


def randn(
    *size: Any,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = "cpu",
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal random numbers (of the default dtype unless ``dtype``)."""
    return _random("randn", size, generator, dtype, device, requires_grad)


def rand_like(
    t: Tensor,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform random numbers shaped like ``t``."""
    dt, dev = _like("rand_like", t, dtype, device)
    return _random("rand", t.data.shape, generator, dt, dev, requires_grad, "rand_like")


def randn_like(
    t: Tensor,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal random numbers shaped like ``t``."""
    dt, dev = _like("randn_like", t, dtype, device)
    return _random("randn", t.data.shape, generator, dt, dev, requires_grad, "randn_like")
