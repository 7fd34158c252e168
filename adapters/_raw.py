"""The raw ops namespace: what backward rules call when no graph is recorded.

# NOTE [The F namespace]
# Rules are written against ``F`` (see NOTE [Operator rules] in
# aengine/ops/_core.py), typed by the Protocol ``GradOps``
# (aengine/tensors/_tensor_ops.py), which lists its functions.  This class
# implements it on a backend's arrays (mypy checks that in aengine/ops/_raw.py:
# the backends import nothing of aengine); ``TensorOps`` (_tensor_ops.py)
# implements it with differentiable aengine ops.  Arithmetic and comparisons use Python operators, which both
# kinds of values support.  Elementwise functions are the backend's own ufuncs,
# bound once per backend: the plain backward calls them with no wrapper.
"""

from __future__ import annotations

from math import prod
from typing import Any, Protocol

__all__ = ["RawOps", "sum_to_axes"]


class _OnDevice(Protocol):
    """A device (``aengine.tensors.Device``): what ``to_device`` needs of it."""

    @property
    def backend(self) -> Any: ...  # (its Backend)


#: results up to this many elements are materialised rather than broadcast views
_SMALL = 4096
#: up to this many elements a gradient broadcast from one value is filled, not viewed
_FILL_MAX = 1 << 20


def sum_to_axes(xshape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of an array of ``xshape`` to sum so that it reshapes to ``shape``."""
    lead = len(xshape) - len(shape)
    axes = list(range(lead))
    for i, s in enumerate(shape):
        if s == 1 and xshape[lead + i] != 1:
            axes.append(lead + i)
    return tuple(axes)


class RawOps:
    """``F`` over the arrays of one backend (numpy or CuPy)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        xp = self.xp = backend.xp
        self.exp = xp.exp
        self.log = xp.log
        self.sqrt = xp.sqrt
        self.sin = xp.sin
        self.cos = xp.cos
        self.tanh = xp.tanh
        self.sign = xp.sign
        self.abs = xp.abs
        self.log1p = xp.log1p
        self.expm1 = xp.expm1
        self.matmul = xp.matmul
        self.maximum = xp.maximum
        self.minimum = xp.minimum
        self.zeros_like = xp.zeros_like
        self.ones_like = xp.ones_like

    def sigmoid(self, x: Any) -> Any:
        return 1.0 / (1.0 + self.xp.exp(-x))

    def sum_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        xshape = x.shape
        if xshape == shape:
            return x
        axes = sum_to_axes(xshape, shape)
        if axes:
            x = x.sum(axis=axes, keepdims=True)
        if x.shape != shape:
            x = x.reshape(shape)
        return x

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        n = prod(shape)
        if n <= _SMALL or (x.size == 1 and n <= _FILL_MAX):
            # numpy's broadcast_to is a Python-level helper costing microseconds;
            # a filled array costs about as much when small or filled from one
            # value, is writable, and keeps later kernels off numpy's slow
            # strided loops (a stride-0 operand made ``g / n`` 4x slower)
            out = self.xp.empty(shape, dtype=x.dtype)
            out[...] = x
            return out
        return self.xp.broadcast_to(x, shape)

    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any:
        return x.reshape(shape)

    def scale_(self, x: Any, c: float) -> Any:
        """``x * c``, computed in place: only for an array the rule itself just made.

        Saves a full-size allocation (fresh memory is what a large
        elementwise gradient mostly costs); ``TensorOps.scale_`` is ``x * c``.
        """
        if self._writable(x):
            x *= c
            return x
        return x * c

    def tanh_grad(self, g: Any, y: Any) -> Any:
        """``g * (1 - y * y)`` (tanh's derivative from its output ``y``).

        One full-size array instead of three, the same bits: the rule's own
        temporary takes the other two steps in place when ``g`` matches it.
        """
        t = y * y
        if not self._owned_like(t, g):
            return g * (1.0 - t)
        xp = self.xp
        xp.subtract(1.0, t, out=t)
        xp.multiply(g, t, out=t)
        return t

    def sigmoid_grad(self, g: Any, y: Any) -> Any:
        """``g * y * (1 - y)`` (sigmoid's derivative from its output ``y``), as tanh_grad."""
        t = g * y
        if not self._owned_like(t, y):
            return t * (1.0 - y)
        u = 1.0 - y  # needed apart: ``t`` holds g * y
        t *= u
        return t

    def _writable(self, x: Any) -> bool:
        """Whether ``x``, an array the rule itself just made, may take a float result in place."""
        return x.__class__ is self.backend.array_types[0] and x.dtype.kind in "fc"

    def _owned_like(self, t: Any, other: Any) -> bool:
        """Whether ``t`` (just made) may be overwritten with a result of its shape and dtype."""
        return self._writable(t) and other.shape == t.shape and other.dtype == t.dtype

    def astype(self, x: Any, dtype: Any) -> Any:
        return self.xp.asarray(x).astype(dtype)

    def sum(self, x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Any:
        return self.xp.sum(x, axis=axis, keepdims=keepdims)

    def prod(self, x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.xp.prod(x, axis=axis, keepdims=keepdims)

    def permute(self, x: Any, axes: tuple[int, ...]) -> Any:
        return self.xp.transpose(x, axes)

    def swapaxes(self, x: Any, a: int, b: int) -> Any:
        return self.xp.swapaxes(x, a, b)

    def expand_dims(self, x: Any, axis: int) -> Any:
        return self.xp.expand_dims(x, axis)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self.xp.where(cond, a, b)

    def zeros(self, shape: tuple[int, ...], like: Any) -> Any:
        return self.xp.zeros(shape, dtype=like.dtype)

    def getitem(self, x: Any, idx: Any) -> Any:
        return x[idx]

    def index_add(self, shape: tuple[int, ...], idx: Any, g: Any, basic: bool) -> Any:
        out = self.xp.zeros(shape, dtype=g.dtype)
        if basic:
            out[idx] = g
        else:
            self.xp.add.at(out, idx, g)
        return out

    def _open_grids(self, shape: tuple[int, ...]) -> list[Any]:
        """Index arrays that broadcast to ``shape``, one per dimension.

        numpy's ``indices(shape, sparse=True)``; ``ix_`` because CuPy has no
        ``sparse`` there.
        """
        xp = self.xp
        return list(xp.ix_(*(xp.arange(n) for n in shape)))

    def gather(self, x: Any, dim: int, idx: Any) -> Any:
        # PyTorch's gather: ``idx`` may be smaller than ``x`` outside ``dim``
        # (take_along_axis would need them to broadcast).
        grids = self._open_grids(idx.shape)
        grids[dim] = idx
        return x[tuple(grids)]

    def scatter_add(self, shape: tuple[int, ...], dim: int, idx: Any, g: Any) -> Any:
        xp = self.xp
        out = xp.zeros(shape, dtype=g.dtype)
        grids = self._open_grids(idx.shape)
        grids[dim] = idx
        xp.add.at(out, tuple(grids), g)
        return out

    def cat(self, xs: list[Any], axis: int) -> Any:
        return self.xp.concatenate(xs, axis=axis)

    def to_device(self, x: Any, device: _OnDevice) -> Any:
        src = self.backend
        dst = device.backend
        if dst is src:
            return x
        return dst.from_numpy(src.to_numpy(x))

    def take_flat(self, x: Any, pos: Any) -> Any:
        return self.xp.asarray(self.xp.reshape(x, (-1,))[pos])

    def put_flat(self, x: Any, pos: Any, v: Any, accumulate: bool = False) -> Any:
        out = self.xp.array(x, order="C", copy=True)
        flat = out.reshape(-1)
        if accumulate:
            self.xp.add.at(flat, pos, v)
        else:
            flat[pos] = v
        return out

    def solve(self, a: Any, b: Any) -> Any:
        """``x`` with ``a @ x == b`` for a matrix ``b`` (..., n, k); batch dims broadcast."""
        xp = self.xp
        batch = _broadcast_shapes(a.shape[:-2], b.shape[:-2])
        if a.shape[:-2] != batch:
            a = xp.broadcast_to(a, (*batch, *a.shape[-2:]))
        if b.shape[:-2] != batch:
            b = xp.broadcast_to(b, (*batch, *b.shape[-2:]))
        return xp.linalg.solve(a, b)

    def einsum(self, equation: str, *operands: Any) -> Any:
        # optimize: contractions of two or more operands through BLAS (tensordot)
        return self.xp.einsum(equation, *operands, optimize=len(operands) > 1)

    def erf(self, x: Any) -> Any:
        return self.backend.special.erf(x)

    def sinh(self, x: Any) -> Any:
        return self.xp.sinh(x)

    def cosh(self, x: Any) -> Any:
        return self.xp.cosh(x)

    def digamma(self, x: Any) -> Any:
        return self.backend.special.digamma(x)

    def polygamma(self, n: int, x: Any) -> Any:
        # n as an array: cupyx's polygamma broadcasts its arguments as arrays
        out = self.backend.special.polygamma(self.xp.asarray(n), x)
        return out if out.dtype == x.dtype else out.astype(x.dtype)

    def div_rounded(self, a: Any, b: Any, mode: str) -> Any:
        """``a / b`` rounded toward zero ("trunc") or down ("floor"), as torch.div.

        Floats: floor is numpy's floor_divide (the same fmod-based algorithm
        as PyTorch's), trunc the truncated true quotient.  Integers: exact.
        """
        xp = self.xp
        if mode == "floor":
            return xp.floor_divide(a, b)
        if _integral(a) and _integral(b):
            q = xp.floor_divide(a, b)
            # floor rounds a negative inexact quotient down: one more toward zero
            return q + ((q < 0) & (q * b != a))
        return xp.trunc(xp.true_divide(a, b))


def _integral(x: Any) -> bool:
    """Whether ``x`` (an array or a Python number) holds integers (or bools)."""
    dtype = getattr(x, "dtype", None)
    return dtype.kind in "biu" if dtype is not None else isinstance(x, int)


def _broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of two shapes (both valid: the forward checked them)."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    return tuple(y if x == 1 else x for x, y in zip(a, b))
