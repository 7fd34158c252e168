"""Scatter, index and masked ops beyond _index.py; sorting and searching.

# NOTE [Scatters as flat writes]
# Every op here that writes into a copy of its input (scatter, scatter_add,
# scatter_reduce, index_add, index_copy, index_fill, index_put,
# masked_scatter) finds, on the backend's integer arrays, the flat positions
# it writes to (``_positions``: one per element of the index), and then is
# ``put_flat`` of those positions (_inplace_ops.py), a differentiable
# primitive whose rule is ``take_flat`` and back: gradients of every order
# follow, and repeated positions add up where the op accumulates.  The values
# written are the part of ``src`` the index addresses (``take_flat`` of its
# leading block when ``src`` is larger than the index).
#
# scatter_reduce's "prod", "amax" and "amin" group the values written to one
# position into a row of a matrix (``_rows``), the input's own value first
# when ``include_self``, padded with the reduction's identity, and reduce the
# rows with prod / amax / amin: their rules give PyTorch's gradients (the
# product of the others, exact with zeros; ties of an extreme share the
# gradient evenly, the input's value among them; without ``include_self``
# an input equal to the result still counts among the ties, as in PyTorch,
# though its share goes nowhere).  "sum" and "mean" are
# ``put_flat`` with accumulation ("mean" then divides by the count).
#
# sort, argsort and topk find the permutation on the backend (a stable sort;
# PyTorch's order of ties is unspecified unless ``stable=True``, and this one
# is the stable order), and their values are ``gather`` of it.  unique,
# nonzero, searchsorted and bucketize give integers or values without a
# derivative: unique's result records a node that raises in backward, as
# PyTorch's does.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._tensor import _NUMBERS, Tensor
from ._core import GradOps, node_class, record, same_device, wrap
from ._index import _check_range, _index_tensor, gather, getitem
from ._inplace_ops import put_flat, take_flat
from ._reduce import amax, amin, prod
from ._shape import _norm_dim, broadcast_to, clone, dim_or_axis, reshape
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_add",
    "index_copy",
    "index_fill",
    "index_put",
    "masked_select",
    "masked_scatter",
    "take",
    "nonzero",
    "sort",
    "argsort",
    "topk",
    "unique",
    "searchsorted",
    "bucketize",
    "SortResult",
    "TopKResult",
]

_INT64 = np.int64


# -- a node that cannot go backward ---------------------------------------------------------
def _not_implemented_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    exc, msg = n.attrs
    raise exc(msg)


#: the node of a result PyTorch records but cannot differentiate (its backward raises)
NotImplementedBackward = node_class("NotImplemented", _not_implemented_rule)
Unique2Backward0 = node_class("Unique2Backward0", _not_implemented_rule)


# -- helpers: arguments and flat positions -----------------------------------------------------
def _tensor_arg(x: Any, name: str, arg: str = "input") -> Tensor:
    return x if x.__class__ is Tensor else tensor_input(x, name, arg)


def _strides(shape: tuple[int, ...]) -> list[int]:
    """Element strides of a C-ordered array of ``shape``."""
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return out


def _positions(xp: Any, shape: tuple[int, ...], dim: int | None, idx: Any) -> Any:
    """Flat positions in an array of ``shape`` addressed by ``idx`` along ``dim``.

    Element ``i`` of ``idx`` (an integer array of ``shape``'s rank) stands
    for ``(i_0, .., idx[i], .., i_n)`` as in gather and scatter; with ``dim``
    None, ``idx`` is a shape and the positions are those of its leading block.
    """
    ishape = tuple(idx.shape) if dim is not None else tuple(idx)
    strides = _strides(shape)
    n = len(ishape)
    pos = xp.zeros(ishape, dtype=_INT64)
    for d, size in enumerate(ishape):
        if d == dim:
            pos += idx.astype(_INT64, copy=False) * strides[d]
        elif size > 1:
            pos += xp.arange(size, dtype=_INT64).reshape((size,) + (1,) * (n - 1 - d)) * strides[d]
    return pos


def _dims_error(x_shape: tuple[int, ...], i_shape: tuple[int, ...], d: int, s: Any) -> str:
    msg = f"Expected index {list(i_shape)} to be no larger than self {list(x_shape)} apart "
    msg += f"from dimension {d}"
    if s is not None:
        msg += f" and to be no larger size than src {list(s)}"
    return msg


def _scatter_args(
    name: str, x: Tensor, dim: Any, index: Any, src: Tensor | None
) -> tuple[Any, tuple[int, ...]]:
    """Check a scatter's arguments; ``(flat positions, the index's shape as >= 1-d)``."""
    if dim is None:
        raise TypeError(f"{name}() missing required argument 'dim'")
    if index is None:
        raise TypeError(f"{name}() missing required argument 'index'")
    d = _norm_dim(dim, x.data.ndim)
    _, a = _index_tensor(index, x, name)
    xs = x.data.shape or (1,)
    ish = a.shape or (1,)
    if len(ish) != len(xs):
        raise RuntimeError(
            f"{name}(): Index tensor must have the same number of dimensions as self tensor "
            f"(index {list(a.shape)}, self {list(x.data.shape)})"
        )
    ss = None
    if src is not None:
        same_device(x, src)
        ss = src.data.shape or (1,)
        if len(ss) != len(ish):
            raise RuntimeError(
                f"{name}(): Index tensor must have the same number of dimensions as src tensor "
                f"(index {list(a.shape)}, src {list(src.data.shape)})"
            )
        if src.data.dtype != x.data.dtype:
            raise RuntimeError(
                f"{name}(): Expected self.dtype to be equal to src.dtype (got {x.data.dtype} "
                f"and {src.data.dtype}); convert one with .to(dtype)"
            )
    if a.size:
        for i, si in enumerate(ish):
            if (i != d and si > xs[i]) or (ss is not None and si > ss[i]):
                raise RuntimeError(f"{name}(): " + _dims_error(xs, ish, d, ss))
    _check_range(a, xs[d], d, name, exc=RuntimeError)
    xp = x._device.backend.xp
    return _positions(xp, xs, d, a.reshape(ish)), ish


def _src_values(src: Tensor, ish: tuple[int, ...]) -> Tensor:
    """The elements of ``src`` the index addresses (its leading block of ``ish``), shaped ``ish``."""
    ss = src.data.shape or (1,)
    if ss == ish:
        return src if src.data.shape == ish else reshape(src, ish)
    xp = src._device.backend.xp
    return take_flat(src, _positions(xp, ss, None, ish))


def _constant(a: Any, like: Tensor) -> Tensor:
    return Tensor._make(a, False, like._device)


# -- scatter / scatter_add -----------------------------------------------------------------------
def _scatter_reduce_deprecated(x: Tensor, pos: Any, vals: Tensor, reduce: str) -> Tensor:
    """scatter's deprecated ``reduce=`` ("add", "multiply"): no derivative, as PyTorch."""
    if reduce not in ("add", "multiply"):
        raise RuntimeError(
            f"scatter(): reduce argument must be either add or multiply, got {reduce!r}"
        )
    plain_x, plain_v = _constant(x.data, x), _constant(vals.data, x)
    if reduce == "add":
        out = put_flat(plain_x, pos, plain_v, True).data
    else:  # (grouped rows rather than multiply.at, which CuPy lacks)
        out = _rows(plain_x, pos, plain_v, "prod", True).data
    msg = "derivative for aten::scatter.reduce is not implemented; use scatter_reduce"
    return record(NotImplementedBackward, out, x._device, (x, vals), attrs=(RuntimeError, msg))


def scatter(
    input: Tensor,
    dim: int | None = None,
    index: Tensor | None = None,
    src: Any = None,
    *,
    value: Any = None,
    reduce: str | None = None,
    axis: int | None = None,
) -> Tensor:
    """A copy of ``input`` with ``src`` (a tensor, or the number ``value``) written at ``index`` along ``dim``.

    ``out[index[i][j]][j] = src[i][j]`` for dim 0 (and so on): the inverse of
    :func:`gather`.  ``index`` (int64) has ``input``'s number of dimensions and
    is no larger than ``src``, nor than ``input`` outside ``dim``; where it
    repeats a position, which value lands there is unspecified (PyTorch's
    too).  ``reduce`` ("add" or "multiply") is PyTorch's deprecated form
    (no derivative): use :func:`scatter_reduce`.  Gradients: ``input`` gets
    zero where it was overwritten, ``src`` the gradient gathered at ``index``
    (zero outside the index's block, where PyTorch's backward fails).

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3).scatter(1, ae.tensor([[2], [0]]), ae.tensor([[1.0], [2.0]])).tolist()
        [[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]
    """
    x = _tensor_arg(input, "scatter")
    dim = dim_or_axis(dim, axis, "scatter", required=True)
    if src is not None and not isinstance(src, Tensor):
        if value is not None or not isinstance(src, _NUMBERS):
            raise TypeError(
                f"scatter(): argument 'src' must be a Tensor (or 'value' a number), "
                f"not {type(src).__name__}"
            )
        value, src = src, None
    if src is None and value is None:
        raise TypeError("scatter() missing required argument 'src' (a Tensor) or 'value'")
    if src is not None and value is not None:
        raise TypeError("scatter(): pass either 'src' or 'value', not both")
    if value is not None and not isinstance(value, _NUMBERS):
        raise TypeError(f"scatter(): argument 'value' must be a number, not {type(value).__name__}")
    pos, ish = _scatter_args("scatter", x, dim, index, src)
    vals: Any = value if src is None else _src_values(src, ish)
    if reduce is not None:
        if not isinstance(vals, Tensor):
            vals = _constant(x._device.backend.xp.full(ish, value, dtype=x.data.dtype), x)
        return _scatter_reduce_deprecated(x, pos, vals, reduce)
    return put_flat(x, pos, vals)


def scatter_add(
    input: Tensor,
    dim: int | None = None,
    index: Tensor | None = None,
    src: Tensor | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim``; repeated indices add up.

    ``out[index[i][j]][j] += src[i][j]`` for dim 0 (and so on), with the
    shapes of :func:`scatter`.  The gradient of :func:`gather`.

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(3).scatter_add(0, ae.tensor([0, 2, 0]), ae.tensor([1.0, 2.0, 3.0])).tolist()
        [4.0, 0.0, 2.0]
    """
    x = _tensor_arg(input, "scatter_add")
    dim = dim_or_axis(dim, axis, "scatter_add", required=True)
    s = _tensor_arg(src, "scatter_add", "src")
    pos, ish = _scatter_args("scatter_add", x, dim, index, s)
    return put_flat(x, pos, _src_values(s, ish), True)


# -- scatter_reduce --------------------------------------------------------------------------------
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _pad_value(dtype: Any, reduce: str) -> Any:
    """The identity of ``reduce`` in ``dtype``: what pads the rows of ``_rows``."""
    if reduce == "prod":
        return 1
    kind = np.dtype(dtype).kind
    if kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _rows(x: Tensor, pos: Any, vals: Tensor, reduce: str, include_self: bool) -> Tensor:
    """scatter_reduce's prod / amax / amin (NOTE [Scatters as flat writes])."""
    xp = x._device.backend.xp
    t = pos.reshape(-1)
    m = int(t.size)
    if m == 0:
        return clone(x)
    order = xp.argsort(t, kind="stable")
    ts = t[order]
    new = xp.ones(m, dtype=bool)
    new[1:] = ts[1:] != ts[:-1]
    starts = xp.flatnonzero(new)
    gid = xp.cumsum(new) - 1
    rank = xp.arange(m, dtype=_INT64) - starts[gid]
    uniq = ts[starts]
    u = int(uniq.size)
    extreme = reduce != "prod"
    off = 1 if include_self or extreme else 0
    k = int(rank.max()) + 1 + off
    slots = xp.empty(m, dtype=_INT64)
    slots[order] = gid * k + rank + off
    pad = xp.full((u, k), _pad_value(x.data.dtype, reduce), dtype=x.data.dtype)
    if extreme and not include_self:
        _tie_with_self(xp, pad, slots, vals.data, x.data.reshape(-1)[uniq], reduce)
    mat = put_flat(_constant(pad, x), slots, reshape(vals, (m,)))
    if include_self:
        mat = put_flat(mat, xp.arange(u, dtype=_INT64) * k, take_flat(x, uniq))
    fn = prod if reduce == "prod" else amax if reduce == "amax" else amin
    return put_flat(x, uniq, fn(mat, 1))


def _tie_with_self(xp: Any, pad: Any, slots: Any, vals: Any, xu: Any, reduce: str) -> None:
    """Column 0 of ``pad``: the input's value where it ties with the result, as a constant.

    PyTorch's amax / amin backward with ``include_self=False`` shares the
    gradient among the ties counting the input's own value (whose share is
    then dropped); a constant copy of that value in the row does the same
    without changing the row's extreme.
    """
    tmp = pad.copy()
    tmp.reshape(-1)[slots] = vals.reshape(-1)
    res = tmp.max(axis=1) if reduce == "amax" else tmp.min(axis=1)
    pad[:, 0] = xp.where(xu == res, xu, pad[:, 0])


def _mean(x: Tensor, pos: Any, vals: Tensor, include_self: bool) -> Tensor:
    xp = x._device.backend.xp
    base = x if include_self else put_flat(x, pos, 0)
    total = put_flat(base, pos, vals, True)
    count = xp.zeros(x.data.size, dtype=_INT64)
    xp.add.at(count, pos.reshape(-1), 1)
    if include_self:
        count += 1
    count = xp.maximum(count, 1).reshape(x.data.shape)
    if x.data.dtype.kind != "f":  # integers: floor division, as PyTorch
        return wrap(xp.floor_divide(total.data, count).astype(x.data.dtype), x._device)
    return total / _constant(count.astype(x.data.dtype), x)


def scatter_reduce(
    input: Tensor,
    dim: int | None = None,
    index: Tensor | None = None,
    src: Tensor | None = None,
    reduce: str | None = None,
    *,
    include_self: bool = True,
    axis: int | None = None,
) -> Tensor:
    """``input`` with the values of ``src`` reduced into it at ``index`` along ``dim``.

    ``reduce`` is "sum", "prod", "mean", "amax" or "amin"; the positions
    the index addresses reduce ``input``'s own value too when
    ``include_self``, only the scattered values otherwise (the others keep
    ``input``'s).  Shapes as in :func:`scatter`.  Gradients as PyTorch's:
    the product of the other values for "prod" (exact with zeros), shared
    evenly among ties for "amax" / "amin"; "mean" of integers rounds down.
    See NOTE [Scatters as flat writes].

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 5.0])
        >>> x.scatter_reduce(0, ae.tensor([0, 0, 1]), ae.tensor([3.0, 2.0, 4.0]), "amax").tolist()
        [3.0, 5.0]
    """
    x = _tensor_arg(input, "scatter_reduce")
    dim = dim_or_axis(dim, axis, "scatter_reduce", required=True)
    s = _tensor_arg(src, "scatter_reduce", "src")
    if reduce is None:
        raise TypeError("scatter_reduce() missing required argument 'reduce'")
    if reduce not in _REDUCES:
        raise RuntimeError(
            f"scatter_reduce(): reduce argument must be one of {', '.join(_REDUCES)}, "
            f"got {reduce!r}"
        )
    pos, ish = _scatter_args("scatter_reduce", x, dim, index, s)
    vals = _src_values(s, ish)
    if reduce == "mean":
        return _mean(x, pos, vals, include_self)
    if reduce == "sum":
        base = x if include_self else put_flat(x, pos, 0)
        return put_flat(base, pos, vals, True)
    return _rows(x, pos, vals, reduce, include_self)


# -- index_add / index_copy / index_fill --------------------------------------------------------
def _index_vector(name: str, x: Tensor, index: Any, d: int) -> Any:
    """``index`` as a 1-d integer array (a 0-d one as one element)."""
    if index is None:
        raise TypeError(f"{name}() missing required argument 'index'")
    _, a = _index_tensor(index, x, name)
    if a.ndim > 1:
        raise IndexError(
            f"{name}(): Index is supposed to be a vector, but got dim: {a.ndim} with "
            f"size: {list(a.shape)}"
        )
    return a.reshape(-1)


def _slice_positions(x: Tensor, d: int, a: Any) -> Any:
    """Flat positions of the slices ``a`` (1-d) along ``d``: shape ``x``'s with ``len(a)`` at ``d``."""
    xs = x.data.shape or (1,)
    shape = list(xs)
    shape[d] = int(a.size)
    kshape = [1] * len(xs)
    kshape[d] = int(a.size)
    xp = x._device.backend.xp
    full = xp.broadcast_to(a.reshape(kshape), tuple(shape))
    return _positions(xp, xs, d, full)


def _index_source(
    name: str, x: Tensor, d: int, a: Any, source: Any, arg: str, exc: type[Exception]
) -> Tensor:
    """Check ``source`` against ``x`` and the index; shaped as the slices it writes."""
    s = _tensor_arg(source, name, arg)
    same_device(x, s)
    if s.data.dtype != x.data.dtype:
        raise RuntimeError(
            f"{name}(): self ({x.data.dtype}) and {arg} ({s.data.dtype}) must have the same "
            "dtype; convert one with .to(dtype)"
        )
    if s.data.ndim != x.data.ndim:
        raise (exc if x.data.ndim else RuntimeError)(
            f"{name}(): {arg} tensor shape must match self tensor shape, excluding the "
            f"specified dimension. Got self.shape = {list(x.data.shape)} {arg}.shape = "
            f"{list(s.data.shape)}"
        )
    if not x.data.ndim:
        if a.size != 1:
            raise IndexError(
                f"{name}(): Dimension specified as 0 but tensor has no dimensions "
                f"(a 0-d self takes one index, got {a.size})"
            )
        return reshape(s, (1,))
    xs, ss = x.data.shape, s.data.shape
    if ss[d] != a.size:
        raise exc(
            f"{name}(): Number of indices ({a.size}) should be equal to {arg}.size(dim) "
            f"({ss[d]}), for dim: {d}"
        )
    if any(si != xi for i, (si, xi) in enumerate(zip(ss, xs)) if i != d):
        raise RuntimeError(
            f"{name}(): {arg} tensor shape must match self tensor shape, excluding the "
            f"specified dimension. Got self.shape = {list(xs)} {arg}.shape = {list(ss)}"
        )
    return s


def index_add(
    input: Tensor,
    dim: int | None = None,
    index: Tensor | None = None,
    source: Tensor | None = None,
    *,
    alpha: Any = 1,
    axis: int | None = None,
) -> Tensor:
    """A copy of ``input`` with ``alpha * source`` added to the slices ``index`` along ``dim``.

    ``index`` is a 1-d int64 tensor, ``source`` has ``input``'s shape with
    ``len(index)`` at ``dim``; repeated indices add up.

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(3).index_add(0, ae.tensor([0, 0, 2]), ae.tensor([1.0, 2.0, 3.0])).tolist()
        [3.0, 0.0, 3.0]
    """
    x = _tensor_arg(input, "index_add")
    dim = dim_or_axis(dim, axis, "index_add", required=True)
    d = _norm_dim(dim, x.data.ndim)
    a = _index_vector("index_add", x, index, d)
    s = _index_source("index_add", x, d, a, source, "source", RuntimeError)
    _check_range(a, (x.data.shape or (1,))[d], d, "index_add", exc=RuntimeError)
    if alpha != 1:
        s = s * alpha
    return put_flat(x, _slice_positions(x, d, a), s, True)


def index_copy(
    input: Tensor,
    dim: int | None = None,
    index: Tensor | None = None,
    source: Tensor | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """A copy of ``input`` whose slices ``index`` along ``dim`` are those of ``source``.

    Shapes as in :func:`index_add`; with a repeated index which slice lands
    there is unspecified (PyTorch's too).

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(3).index_copy(0, ae.tensor([2, 0]), ae.tensor([1.0, 2.0])).tolist()
        [2.0, 0.0, 1.0]
    """
    x = _tensor_arg(input, "index_copy")
    dim = dim_or_axis(dim, axis, "index_copy", required=True)
    d = _norm_dim(dim, x.data.ndim)
    a = _index_vector("index_copy", x, index, d)
    s = _index_source("index_copy", x, d, a, source, "source", IndexError)
    _check_range(a, (x.data.shape or (1,))[d], d, "index_copy")
    return put_flat(x, _slice_positions(x, d, a), s)


def index_fill(
    input: Tensor,
    dim: int | None = None,
    index: Tensor | None = None,
    value: Any = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """A copy of ``input`` whose slices ``index`` along ``dim`` are filled with ``value``.

    ``index`` is a 1-d (or 0-d) int64 tensor, negative indices count from the
    end; ``value`` a number or a 0-d tensor (which then gets a gradient).

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3).index_fill(1, ae.tensor([0, -1]), 5.0).tolist()
        [[5.0, 0.0, 5.0], [5.0, 0.0, 5.0]]
    """
    x = _tensor_arg(input, "index_fill")
    dim = dim_or_axis(dim, axis, "index_fill", required=True)
    d = _norm_dim(dim, x.data.ndim)
    if index is None:
        raise TypeError("index_fill() missing required argument 'index'")
    _, a = _index_tensor(index, x, "index_fill", IndexError)
    if a.ndim > 1:
        raise RuntimeError(f"index_fill(): Index has to be a vector/scalar, got shape {a.shape}")
    size = (x.data.shape or (1,))[d]
    _check_range(a, size, d, "index_fill", negative=True)
    a = a.reshape(-1) % max(size, 1)
    pos = _slice_positions(x, d, a)
    if isinstance(value, Tensor):
        same_device(x, value)
        if value.data.ndim != 0:
            raise RuntimeError(
                "index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.data.ndim} dimension(s)."
            )
        v = value if value.data.dtype == x.data.dtype else value.to(dtype=x.data.dtype)
        return put_flat(x, pos, broadcast_to(v, pos.shape))
    if not isinstance(value, _NUMBERS):
        raise TypeError(
            f"index_fill(): argument 'value' must be a number or a 0-d tensor, not "
            f"{type(value).__name__}"
        )
    return put_flat(x, pos, value)


# -- index_put -----------------------------------------------------------------------------------
def _broadcast_error(a: tuple[int, ...], b: tuple[int, ...]) -> RuntimeError | None:
    """PyTorch's error for shapes that do not broadcast (None when they do)."""
    for i in range(1, builtins.min(len(a), len(b)) + 1):
        sa, sb = a[-i], b[-i]
        if sa != sb and sa != 1 and sb != 1:
            return RuntimeError(
                f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at "
                f"non-singleton dimension {builtins.max(len(a), len(b)) - i}"
            )
    return None


def _broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    err = _broadcast_error(a, b)
    if err is not None:
        raise err
    return tuple(np.broadcast_shapes(a, b))


def index_put(
    input: Tensor,
    indices: Sequence[Tensor] | None = None,
    values: Tensor | None = None,
    accumulate: bool = False,
) -> Tensor:
    """A copy of ``input`` with ``values`` written (or added: ``accumulate``) at ``input[indices]``.

    ``indices`` is a tuple (or list) of int64 or bool tensors, indexing as
    ``input[indices]`` does; ``values`` broadcasts to that result's shape.
    Without ``accumulate`` a repeated position keeps one of its values
    (unspecified which, as PyTorch); with it they add up.

    Example::

        >>> import aengine as ae
        >>> x = ae.zeros(2, 2)
        >>> x.index_put((ae.tensor([0, 1]), ae.tensor([1, 0])), ae.tensor(3.0)).tolist()
        [[0.0, 3.0], [3.0, 0.0]]
    """
    x = _tensor_arg(input, "index_put")
    if not isinstance(indices, (tuple, list)):
        raise TypeError(
            "index_put(): argument 'indices' must be a tuple of Tensors, not "
            f"{type(indices).__name__}"
        )
    v = _tensor_arg(values, "index_put", "values")
    same_device(x, v)
    for i, it in enumerate(indices):
        if not isinstance(it, Tensor):
            raise TypeError(
                f"index_put(): expected Tensor as element {i} in argument 'indices', but got "
                f"{type(it).__name__}"
            )
    if v.data.dtype != x.data.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got "
            f"{x.data.dtype} for the destination and {v.data.dtype} for the source."
        )
    xp = x._device.backend.xp
    flat = _constant(xp.arange(x.data.size, dtype=_INT64).reshape(x.data.shape), x)
    pos = getitem(flat, tuple(indices)).data
    if v.data.shape != pos.shape:
        err = _broadcast_error(v.data.shape, pos.shape)
        if err is not None or len(v.data.shape) > len(pos.shape):
            raise RuntimeError(
                f"shape mismatch: value tensor of shape {list(v.data.shape)} cannot be "
                f"broadcast to indexing result of shape {list(pos.shape)}"
            )
        v = broadcast_to(v, pos.shape)
    return put_flat(x, pos, v, bool(accumulate))


# -- masked_select / masked_scatter / take -----------------------------------------------------
def _bool_mask(name: str, x: Tensor, mask: Any, what: str) -> Tensor:
    mt = mask if isinstance(mask, Tensor) else Tensor._make(x._device.backend.asarray(mask))
    same_device(x, mt)
    if mt.data.dtype.kind != "b":
        raise RuntimeError(f"{what}, but got mask with dtype {mt.data.dtype}")
    return mt


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where the bool ``mask`` holds, as a 1-d tensor (both broadcast).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> x.masked_select(x > 1.5).tolist()
        [2.0, 3.0, 4.0]
    """
    x = _tensor_arg(input, "masked_select")
    mt = _bool_mask("masked_select", x, mask, "masked_select: expected BoolTensor for mask")
    shape = _broadcast_shapes(x.data.shape, mt.data.shape)
    xp = x._device.backend.xp
    m = mt.data if mt.data.shape == shape else xp.broadcast_to(mt.data, shape)
    xb = x if x.data.shape == shape else broadcast_to(x, shape)
    return take_flat(xb, xp.flatnonzero(m))


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``input`` with the first elements of ``source`` written, in order, where ``mask`` holds.

    ``mask`` (bool) and ``input`` broadcast; ``source`` has at least as many
    elements as the mask holds (its shape does not matter).

    Example::

        >>> import aengine as ae
        >>> x = ae.zeros(4)
        >>> x.masked_scatter(ae.tensor([True, False, True, False]), ae.tensor([7.0, 8.0])).tolist()
        [7.0, 0.0, 8.0, 0.0]
    """
    x = _tensor_arg(input, "masked_scatter")
    mt = _bool_mask("masked_scatter", x, mask, "masked_scatter_ only supports boolean masks")
    s = _tensor_arg(source, "masked_scatter", "source")
    same_device(x, s)
    if s.data.dtype != x.data.dtype:
        raise RuntimeError(
            f"masked_scatter: expected self and source to have same dtypes but got "
            f"{x.data.dtype} and {s.data.dtype}"
        )
    shape = _broadcast_shapes(x.data.shape, mt.data.shape)
    xp = x._device.backend.xp
    pos = xp.flatnonzero(xp.broadcast_to(mt.data, shape))
    count = int(pos.size)
    if count > s.data.size:
        raise RuntimeError(
            f"masked_scatter: Number of elements of source ({s.data.size}) < number of ones "
            f"in mask ({count})"
        )
    xb = x if x.data.shape == shape else broadcast_to(x, shape)
    return put_flat(xb, pos, take_flat(s, xp.arange(count, dtype=_INT64)))


def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of ``input`` (read as 1-d) at ``index``, shaped like ``index``.

    ``index`` is an int64 tensor; negative indices count from the end.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 2.0], [3.0, 4.0]]).take(ae.tensor([[3, 0]])).tolist()
        [[4.0, 1.0]]
    """
    x = _tensor_arg(input, "take")
    it = _tensor_arg(index, "take", "index")
    same_device(x, it)
    a = it.data
    if a.dtype != _INT64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {a.dtype}")
    n = int(x.data.size)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(
                f"take(): out of range: tried to access index {bad} on a tensor of {n} elements."
            )
    return take_flat(x, a % builtins.max(n, 1) if a.size else a)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """The indices of the nonzero elements: an int64 tensor of shape (count, ndim).

    With ``as_tuple`` a tuple of one 1-d tensor per dimension (a 0-d
    input counts as 1-d).  Not differentiable.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[0.0, 1.0], [2.0, 0.0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
    """
    x = _tensor_arg(input, "nonzero")
    xp = x._device.backend.xp
    dev = x._device
    data = x.data if x.data.ndim else x.data.reshape(1)
    parts = xp.nonzero(data)
    if as_tuple:
        return tuple(wrap(p.astype(_INT64), dev) for p in parts)
    if not x.data.ndim:
        return wrap(xp.zeros((int(parts[0].size), 0), dtype=_INT64), dev)
    return wrap(xp.stack(parts, axis=1).astype(_INT64).reshape(-1, data.ndim), dev)


# -- sort / argsort / topk ---------------------------------------------------------------------
class SortResult(NamedTuple):
    """``(values, indices)`` of :func:`sort` (as ``torch.return_types.sort``)."""

    values: Tensor
    indices: Tensor


class TopKResult(NamedTuple):
    """``(values, indices)`` of :func:`topk` (as ``torch.return_types.topk``)."""

    values: Tensor
    indices: Tensor


def _argsort(xp: Any, a: Any, d: int, descending: bool) -> Any:
    """A stable sort's permutation along ``d``; NaN sorts as the largest value, as PyTorch."""
    if a.ndim == 0:
        return xp.zeros((), dtype=_INT64)
    if not descending:
        return xp.argsort(a, axis=d, kind="stable").astype(_INT64, copy=False)
    # descending and stable: ascending on the reversed array, reversed back
    rev = xp.argsort(xp.flip(a, axis=d), axis=d, kind="stable")
    return (a.shape[d] - 1 - xp.flip(rev, axis=d)).astype(_INT64, copy=False)


def _sort_dim(x: Tensor, dim: Any, axis: Any, name: str) -> int:
    """``dim`` (default -1) or its alias ``axis``, wrapped into [0, ndim)."""
    if axis is not None:
        if dim != -1:
            raise TypeError(f"{name}(): got both 'dim' and its alias 'axis'; pass only one")
        dim = axis
    return _norm_dim(dim, x.data.ndim)


def sort(
    input: Tensor,
    dim: int = -1,
    descending: bool = False,
    *,
    stable: bool = False,
    axis: int | None = None,
) -> SortResult:
    """``(values, indices)``: ``input`` sorted along ``dim`` and the positions they came from.

    The sort is stable whatever ``stable`` says (PyTorch's order of equal
    elements is unspecified without it); NaN sorts as the largest value.
    The gradient of ``values`` goes back to the positions at ``indices``.

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([3.0, 1.0, 2.0]).sort()
        >>> v.tolist(), i.tolist()
        ([1.0, 2.0, 3.0], [1, 2, 0])
    """
    x = _tensor_arg(input, "sort")
    d = _sort_dim(x, dim, axis, "sort")
    idx = _argsort(x._device.backend.xp, x.data, d, bool(descending))
    it = wrap(idx, x._device)
    return SortResult(gather(x, d, it), it)


def argsort(
    input: Tensor,
    dim: int = -1,
    descending: bool = False,
    *,
    stable: bool = False,
    axis: int | None = None,
) -> Tensor:
    """The indices that sort ``input`` along ``dim`` (int64; a stable sort, as :func:`sort`).

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([3.0, 1.0, 2.0]).argsort(descending=True).tolist()
        [0, 2, 1]
    """
    x = _tensor_arg(input, "argsort")
    d = _sort_dim(x, dim, axis, "argsort")
    return wrap(_argsort(x._device.backend.xp, x.data, d, bool(descending)), x._device)


def topk(
    input: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    axis: int | None = None,
) -> TopKResult:
    """``(values, indices)`` of the ``k`` largest (or smallest) elements along ``dim``.

    They come sorted (also with ``sorted=False``, whose order PyTorch leaves
    unspecified); of equal elements the first ones are taken.

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([1.0, 5.0, 3.0, 4.0]).topk(2)
        >>> v.tolist(), i.tolist()
        ([5.0, 4.0], [1, 3])
    """
    x = _tensor_arg(input, "topk")
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"topk(): argument 'k' must be an int, not {type(k).__name__}")
    k = int(k)
    d = _sort_dim(x, dim, axis, "topk")
    size = x.data.shape[d] if x.data.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, size {size})")
    xp = x._device.backend.xp
    idx = _argsort(xp, x.data, d, bool(largest))
    if x.data.ndim and k != size:
        idx = xp.take(idx, xp.arange(k), axis=d)
    it = wrap(idx, x._device)
    return TopKResult(gather(x, d, it), it)


# -- unique ------------------------------------------------------------------------------------------
def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """The distinct elements of ``input`` (flattened) or its distinct slices along ``dim``, sorted.

    With ``return_inverse`` also where each element (slice) of ``input``
    went, with ``return_counts`` how often each occurs: a tuple then, in
    that order.  The result is always sorted (PyTorch's CPU does the same
    for ``sorted=False``).  Not differentiable: as PyTorch's, its backward
    raises NotImplementedError.

    Example::

        >>> import aengine as ae
        >>> u, c = ae.tensor([3, 1, 3, 2]).unique(return_counts=True)
        >>> u.tolist(), c.tolist()
        ([1, 2, 3], [1, 1, 2])
    """
    x = _tensor_arg(input, "unique")
    xp = x._device.backend.xp
    dev = x._device
    data = x.data
    if dim is None:
        vals, inv, counts = xp.unique(data.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(data.shape)
    else:
        d = _norm_dim(dim, data.ndim)
        if not data.ndim:
            data = data.reshape(1)
        vals, inv, counts = xp.unique(data, return_inverse=True, return_counts=True, axis=d)
        inv = inv.reshape(-1)
    msg = "the derivative for 'unique' is not implemented."
    out = record(Unique2Backward0, vals, dev, (x,), attrs=(NotImplementedError, msg))
    if not (return_inverse or return_counts):
        return out
    res = [out]
    if return_inverse:
        res.append(wrap(inv.astype(_INT64), dev))
    if return_counts:
        res.append(wrap(counts.astype(_INT64), dev))
    return tuple(res)


# -- searchsorted / bucketize ---------------------------------------------------------------------
def _values_array(v: Any, seq: Tensor, name: str) -> Any:
    if isinstance(v, Tensor):
        same_device(seq, v)
        return v.data
    if isinstance(v, _NUMBERS):
        return seq._device.backend.xp.asarray(v)
    raise TypeError(
        f"{name}(): argument 'input' must be a Tensor or a number, not {type(v).__name__}"
    )


def searchsorted(
    sorted_sequence: Tensor,
    input: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """Where ``input``'s values would go in ``sorted_sequence`` (sorted along its last dimension).

    A 1-d ``sorted_sequence`` serves every value; an n-d one has one row per
    row of ``input`` (their leading dimensions match).  ``right`` (or
    ``side="right"``) puts a value after the equal ones; ``sorter`` gives the
    order of an unsorted ``sorted_sequence``.  int64 indices (int32 with
    ``out_int32``); not differentiable.

    Example::

        >>> import aengine as ae
        >>> ae.searchsorted(ae.tensor([1.0, 2.0, 3.0]), ae.tensor([2.0, 0.5])).tolist()
        [1, 0]
    """
    seq = _tensor_arg(sorted_sequence, "searchsorted", "sorted_sequence")
    if side is not None and side not in ("left", "right"):
        raise RuntimeError(
            f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}"
        )
    if side == "left" and right:
        raise RuntimeError(
            "torch.searchsorted(): side and right can't be set to opposites, got side of left "
            "while right was True"
        )
    how = "right" if right or side == "right" else "left"
    xp = seq._device.backend.xp
    s = seq.data
    v = _values_array(input, seq, "searchsorted")
    if s.ndim == 0:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
            "dimension"
        )
    if sorter is not None:
        st = _tensor_arg(sorter, "searchsorted", "sorter")
        if st.data.shape != s.shape or st.data.dtype != _INT64:
            raise RuntimeError(
                "torch.searchsorted(): sorter must be an int64 tensor of the boundaries' shape "
                f"{list(s.shape)}, got {st.data.dtype} of shape {list(st.data.shape)}"
            )
        s = xp.take_along_axis(s, st.data, axis=-1)
    if s.ndim == 1:
        out = xp.searchsorted(s, v, side=how)
    else:
        if v.ndim != s.ndim or v.shape[:-1] != s.shape[:-1]:
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match, but we got "
                f"boundaries tensor {list(s.shape)} and input value tensor {list(v.shape)}"
            )
        rows_s = s.reshape(-1, s.shape[-1])
        rows_v = v.reshape(-1, v.shape[-1])
        out = xp.stack([xp.searchsorted(a, b, side=how) for a, b in zip(rows_s, rows_v)]).reshape(
            v.shape
        )
    return wrap(xp.asarray(out).astype("int32" if out_int32 else _INT64), seq._device)


def bucketize(
    input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    """The bucket of each value of ``input`` between the 1-d, sorted ``boundaries``.

    Index ``i`` with ``boundaries[i-1] < v <= boundaries[i]`` (``<=`` and
    ``<`` swapped with ``right``); int64 (int32 with ``out_int32``); not
    differentiable.

    Example::

        >>> import aengine as ae
        >>> ae.bucketize(ae.tensor([0.5, 2.0, 9.0]), ae.tensor([1.0, 2.0, 3.0])).tolist()
        [0, 1, 3]
    """
    b = _tensor_arg(boundaries, "bucketize", "boundaries")
    if b.data.ndim != 1:
        raise RuntimeError(
            f"bucketize(): boundaries tensor must be 1 dimension, but got dim({b.data.ndim})"
        )
    return searchsorted(b, input, out_int32=out_int32, right=right)


# -- the operator table (NOTE [The operator table]) --------------------------------------------
def _distinct_index(m: Maker, shape: tuple[int, ...], dim: int, high: int) -> np.ndarray:
    """int64 indices in [0, high), no two equal along ``dim`` (one write per position)."""
    n = shape[dim]
    moved = shape[:dim] + shape[dim + 1 :] + (n,)
    lines = int(np.prod(moved[:-1])) if moved[:-1] else 1
    rows = [m.rng.permutation(high)[:n] for _ in range(lines)]
    a = np.array(rows, dtype=np.int64).reshape(moved)
    return np.moveaxis(a, -1, dim).copy()


def _with_zeros(m: Maker, *shape: int) -> np.ndarray:
    return np.where(m.mask(*shape), m.arr(*shape), 0).astype(m.dtype)


def _scatter_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, _distinct_index(m, (2, 4), 0, 3), m.arr(2, 4)))
    yield Sample((m.arr(3, 4), -1, _distinct_index(m, (3, 2), 1, 4), m.arr(3, 2)), note="dim -1")
    yield Sample(
        (m.arr(3, 4), 1, _distinct_index(m, (2, 3), 1, 4), m.arr(3, 5)),
        grad=(0,),
        note="src larger than index (torch's backward fails for src: only input's gradient)",
    )
    yield Sample((m.arr(3, 4), 0, _distinct_index(m, (2, 4), 0, 3)), {"value": 1.5})
    yield Sample((m.arr(2, 3), 1, _distinct_index(m, (2, 2), 1, 3), -2.0), note="value positional")
    yield Sample((m.arr(), 0, np.array(0, dtype=np.int64), m.arr()), note="0-d")
    yield Sample((m.arr(3, 4), 0, m.idx(0, 4, high=3), m.arr(0, 4)), note="empty index")


def _scatter_errors(m: Maker) -> Iterator[ErrorCase]:
    x, s = m.arr(3, 4), m.arr(3, 4)
    yield ErrorCase((x, 0, np.array([[3]]), s), match="out of bounds")
    yield ErrorCase((x, 0, np.array([[-1]]), s), match="out of bounds")
    yield ErrorCase((x, 0, np.array([[1.0]]), s), match="Expected dtype int64 for index")
    yield ErrorCase((x, 0, np.array([1]), s), match="same number of dimensions")
    yield ErrorCase((x, 0, np.zeros((3, 5), np.int64), s), match="no larger than self")
    yield ErrorCase(
        (x, 0, np.zeros((2, 2), np.int64), m.arr(1, 4)), match="no larger size than src"
    )
    yield ErrorCase((x, 0, np.zeros((1, 1), np.int64), s.astype(np.float64)), match="dtype")
    yield ErrorCase((x, 2, np.zeros((1, 1), np.int64), s), exc=IndexError, match="out of range")
    yield ErrorCase(
        (x, 0, np.zeros((1, 1), np.int64), s), {"reduce": "max"}, match="add or multiply"
    )


def _scatter_add_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, m.idx(5, 4, high=3), m.arr(5, 4)), note="repeated indices")
    yield Sample((m.arr(3, 4), -1, m.idx(3, 6, high=4), m.arr(3, 6)), note="dim -1")
    yield Sample(
        (m.arr(3, 4), 1, m.idx(2, 3, high=4), m.arr(3, 5)),
        grad=(0,),
        note="src larger than index",
    )
    yield Sample((m.arr(), 0, np.array(0, dtype=np.int64), m.arr()), note="0-d")
    yield Sample((m.arr(2, 3),), {"axis": 1, "index": m.idx(2, 4, high=3), "src": m.arr(2, 4)})


def _scatter_add_errors(m: Maker) -> Iterator[ErrorCase]:
    x, s = m.arr(3, 4), m.arr(3, 4)
    yield ErrorCase((x, 0, np.array([[3]]), s), match="out of bounds")
    yield ErrorCase((x, 0, np.array([[1.0]]), s), match="Expected dtype int64 for index")
    yield ErrorCase((x, 0, np.zeros((1, 1), np.int64), s.astype(np.float64)), match="dtype")


def _scatter_reduce_samples(m: Maker) -> Iterator[Sample]:
    for reduce in _REDUCES:
        for include_self in (True, False):
            x = m.arr(3, 4) if reduce != "prod" else m.away(3, 4, low=-1.5, high=1.5)
            s = m.arr(5, 4) if reduce != "prod" else m.away(5, 4, low=-1.5, high=1.5)
            yield Sample(
                (x, 0, m.idx(5, 4, high=3), s, reduce),
                {"include_self": include_self},
                note=f"{reduce}, repeated indices",
            )
    yield Sample((m.arr(3, 4), 1, m.idx(3, 6, high=4), m.arr(3, 6), "amax"), note="dim 1")
    zeros = m.away(2, 3)
    zeros[0, 0] = zeros[1, 2] = 0  # one zero per position (torch has no double backward for more)
    yield Sample(
        (m.away(2, 3), 1, np.array([[0, 0, 2], [1, 1, 1]]), zeros, "prod"),
        note="prod with a zero among the values",
    )
    yield Sample(
        (m.arr(3, 4), 0, m.idx(2, 3, high=3), m.arr(4, 4), "mean"),
        grad=(0,),
        note="src larger than index",
    )
    yield Sample((m.arr(3, 4), 0, m.idx(0, 4, high=3), m.arr(0, 4), "amin"), note="empty index")


def _scatter_reduce_errors(m: Maker) -> Iterator[ErrorCase]:
    x, s, i = m.arr(3, 4), m.arr(3, 4), np.zeros((1, 1), np.int64)
    yield ErrorCase((x, 0, i, s, "bogus"), match="reduce argument must be")
    yield ErrorCase((x, 0, np.array([[3]]), s, "sum"), match="out of bounds")
    yield ErrorCase((x, 0, i, s.astype(np.float64), "amax"), match="dtype")
    yield ErrorCase((x, 0, i, s), exc=TypeError, match="reduce")


def _index_add_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, m.idx(5, high=3), m.arr(5, 4)), note="repeated indices")
    yield Sample((m.arr(3, 4), -1, m.idx(3, high=4), m.arr(3, 3)), {"alpha": 2}, note="alpha")
    yield Sample((m.arr(3, 4), 0, np.array(1, dtype=np.int64), m.arr(1, 4)), note="0-d index")
    yield Sample((m.arr(), 0, np.array([0]), m.arr()), note="0-d input")
    yield Sample((m.arr(2, 3),), {"axis": 1, "index": np.array([2, 2]), "source": m.arr(2, 2)})


def _index_source_errors(m: Maker, exc: type[Exception]) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    i = np.array([0])
    yield ErrorCase((x, 0, i, m.arr(2, 4)), exc=exc, match="Number of indices")
    yield ErrorCase((x, 0, i, m.arr(4)), exc=exc, match="shape must match")
    yield ErrorCase((x, 0, i, m.arr(1, 3)), match="shape must match")
    yield ErrorCase((x, 0, i, m.arr(1, 4).astype(np.float64)), match="dtype")
    yield ErrorCase((x, 0, np.array([[0]]), m.arr(1, 4)), exc=IndexError, match="vector")
    yield ErrorCase((x, 0, np.array([0.0]), m.arr(1, 4)), match="int64")


def _index_add_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from _index_source_errors(m, RuntimeError)
    yield ErrorCase((m.arr(3, 4), 0, np.array([3]), m.arr(1, 4)), match="out of bounds")
    yield ErrorCase((m.arr(3, 4), 0, np.array([-1]), m.arr(1, 4)), match="out of bounds")


def _index_copy_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, m.rng.permutation(3)[:2], m.arr(2, 4)))
    yield Sample((m.arr(3, 4), -1, m.rng.permutation(4), m.arr(3, 4)), note="every slice")
    yield Sample((m.arr(3, 4), 1, m.idx(0, high=4), m.arr(3, 0)), note="no index")


def _index_copy_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from _index_source_errors(m, IndexError)
    yield ErrorCase(
        (m.arr(3, 4), 0, np.array([3]), m.arr(1, 4)), exc=IndexError, match="out of bounds"
    )


def _index_fill_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, m.idx(4, high=3), 1.5), note="repeated indices")
    yield Sample((m.arr(3, 4), 1, np.array([-1, 0]), -2.0), note="negative index")
    yield Sample((m.arr(3, 4), 1, m.idx(2, high=4), m.arr()), note="0-d tensor value")
    yield Sample((m.arr(3, 4), -2, np.array(2, dtype=np.int64), 0.0), note="0-d index")


def _index_fill_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, 0, np.array([[1]]), 1.0), match="vector/scalar")
    yield ErrorCase((x, 0, np.array([1]), m.arr(1)), match="0-dimensional value tensor")
    yield ErrorCase((x, 0, np.array([3]), 1.0), exc=IndexError, match="out of bounds")
    yield ErrorCase((x, 0, np.array([1.0]), 1.0), exc=IndexError, match="int64")


def _index_put_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), (m.rng.permutation(3)[:2],), m.arr(2, 4)), note="rows")
    pos = m.rng.permutation(12)[:5]
    yield Sample((m.arr(3, 4), (pos // 4, pos % 4), m.arr(5)), note="two index tensors")
    yield Sample((m.arr(3, 4), (m.rng.permutation(3)[:2],), m.arr(4)), note="broadcast values")
    yield Sample(
        (m.arr(3, 4), (m.idx(6, high=3), m.idx(6, high=4)), m.arr(6), True),
        note="accumulate, repeated indices",
    )
    yield Sample((m.arr(3, 4), (m.mask(3, 4),), m.arr()), note="bool mask, 0-d value")
    yield Sample(
        (m.arr(2, 3, 2), (np.array([1, 0]), np.array([-1, 2])), m.arr(2, 2)),
        {"accumulate": True},
        note="negative index, trailing dimension",
    )


def _index_put_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, (np.array([0]),), m.arr(1).astype(np.float64)), match="dtypes match")
    yield ErrorCase((x, (np.array([0]),), m.arr(2)), match="shape mismatch")
    yield ErrorCase((x, (np.array([5]),), m.arr(1)), exc=IndexError, match="out of bounds")
    yield ErrorCase((x, np.array([0]), m.arr(1)), exc=TypeError, match="tuple of Tensors")
    yield ErrorCase((x, (np.array([0.0]),), m.arr(1)), exc=IndexError, match="long, int")


def _masked_select_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.mask(3, 4)))
    yield Sample((m.arr(3, 4), m.mask(4)), note="broadcast mask")
    yield Sample((m.arr(4), m.mask(3, 4)), note="broadcast input")
    yield Sample((m.arr(), np.array(True)), note="0-d")


def _masked_select_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, np.ones((3, 4), np.int64)), match="BoolTensor")
    yield ErrorCase((x, np.ones(3, bool)), match="must match the size")


def _masked_scatter_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.mask(3, 4), m.arr(12)))
    yield Sample((m.arr(3, 4), m.mask(4), m.arr(4, 5)), note="broadcast mask, larger source")
    yield Sample((m.arr(4), m.mask(2, 4), m.arr(8)), note="broadcast input")


def _masked_scatter_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    ones = np.ones((3, 4), bool)
    yield ErrorCase((x, ones, m.arr(5)), match="Number of elements of source")
    yield ErrorCase((x, np.ones((3, 4), np.int64), m.arr(12)), match="boolean masks")
    yield ErrorCase((x, ones, m.arr(12).astype(np.float64)), match="same dtypes")


def _take_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.idx(2, 3, high=12) - 6), note="negative and repeated indices")
    yield Sample((m.arr(3, 4), np.array(5, dtype=np.int64)), note="0-d index")
    yield Sample((m.arr(), np.array([0, 0, -1])), note="0-d input")
    yield Sample((m.arr(3, 4), m.idx(0, high=12)), note="empty index")


def _take_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, np.array([12])), exc=IndexError, match="out of range")
    yield ErrorCase((x, np.array([-13])), exc=IndexError, match="out of range")
    yield ErrorCase((x, np.array([1.0])), match="long tensor")


def _nonzero_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_with_zeros(m, 3, 4),))
    yield Sample((_with_zeros(m, 2, 3),), {"as_tuple": True})
    yield Sample((m.pos(),), note="0-d")
    yield Sample((np.zeros((), dtype=m.dtype),), {"as_tuple": True}, note="0-d zero")
    yield Sample((m.arr(0, 3),), note="empty")


def _sort_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_distinct(m, 3, 5),))
    yield Sample((_distinct(m, 4, 3), 0, True), note="dim 0, descending")
    ties = np.array([[2, 1, 2, 1, 0], [1, 1, 1, 0, 0]], dtype=m.dtype)
    yield Sample((ties,), {"stable": True}, note="ties, stable")
    yield Sample((ties,), {"stable": True, "descending": True, "dim": -1}, note="ties, descending")
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 3),), note="empty")
    yield Sample((_distinct(m, 3, 4),), {"axis": 0}, note="axis")


def _sort_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")


def _topk_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_distinct(m, 3, 5), 2))
    yield Sample((_distinct(m, 4, 3), 3, 0), note="dim 0")
    yield Sample((_distinct(m, 2, 5), 2), {"largest": False, "dim": -1}, note="smallest")
    yield Sample((_distinct(m, 2, 4), 0), note="k = 0")
    yield Sample((m.arr(), 1), note="0-d")


def _topk_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 5), match="k out of range")
    yield ErrorCase((m.arr(3, 4), -1), match="k out of range")
    yield ErrorCase((m.arr(3, 4), 1, 2), exc=IndexError, match="Dimension out of range")


def _distinct(m: Maker, *shape: int) -> np.ndarray:
    """Distinct values (no ties), integers too."""
    if m.floating:
        return m.distinct(*shape)
    n = int(np.prod(shape))
    return (m.rng.permutation(n) - n // 2).reshape(shape).astype(m.dtype)


def _repeats(m: Maker, *shape: int) -> np.ndarray:
    return m.rng.integers(-2, 2, size=shape).astype(m.dtype)


def _unique_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_repeats(m, 3, 4),))
    yield Sample((_repeats(m, 10),), {"return_inverse": True, "return_counts": True})
    yield Sample((_repeats(m, 2, 3),), {"return_inverse": True}, note="inverse shaped as input")
    rows = np.array([[1, 2], [0, 1], [1, 2], [0, 0]], dtype=m.dtype)
    yield Sample((rows,), {"dim": 0, "return_inverse": True, "return_counts": True}, note="rows")
    yield Sample((rows.T.copy(),), {"dim": 1, "return_counts": True}, note="columns")
    yield Sample((m.arr(),), {"return_inverse": True, "return_counts": True}, note="0-d")
    yield Sample((_repeats(m, 6), False), note="sorted=False")


def _sorted_seq(m: Maker, *shape: int) -> np.ndarray:
    return np.sort(m.arr(*shape, low=-3, high=3), axis=-1)


def _searchsorted_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_sorted_seq(m, 6), m.arr(3, 4, low=-3, high=3)))
    seq = _sorted_seq(m, 6)
    yield Sample((seq, seq[[0, 2, 2, 5]].copy()), {"right": True}, note="values in the sequence")
    yield Sample((seq, seq[[1, 3]].copy()), {"side": "right"}, note="side")
    yield Sample((_sorted_seq(m, 2, 5), m.arr(2, 3, low=-3, high=3)), note="one row per row")
    unsorted = m.arr(5, low=-3, high=3)
    sorter = np.argsort(unsorted, kind="stable").astype(np.int64)
    yield Sample((unsorted, m.arr(4, low=-3, high=3)), {"sorter": sorter}, note="sorter")
    yield Sample((_sorted_seq(m, 4), 0.5), {"out_int32": True}, note="a number, int32")


def _searchsorted_errors(m: Maker) -> Iterator[ErrorCase]:
    seq, v = _sorted_seq(m, 4), m.arr(2)
    yield ErrorCase((seq, v), {"side": "middle"}, match="side can only be")
    yield ErrorCase((seq, v), {"side": "left", "right": True}, match="can't be set to opposites")
    yield ErrorCase((_sorted_seq(m, 2, 3), v), match="first N-1 dimensions")


def _bucketize_samples(m: Maker) -> Iterator[Sample]:
    b = _sorted_seq(m, 5)
    yield Sample((m.arr(3, 4, low=-3, high=3), b))
    yield Sample((b[[0, 1, 4]].copy(), b), {"right": True}, note="values on the boundaries")
    yield Sample((1.5, b), {"out_int32": True}, note="a number, int32")


def _bucketize_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2), _sorted_seq(m, 2, 3)), match="must be 1 dimension")


register(
    OpInfo(
        "scatter",
        scatter,
        _scatter_samples,
        method=True,
        dtypes=ALL,
        errors=_scatter_errors,
        notes="A ``src`` larger than the index gets zeros outside the index's block "
        "(PyTorch's backward raises there).",
    ),
    OpInfo(
        "scatter_add",
        scatter_add,
        _scatter_add_samples,
        method=True,
        dtypes=ALL,
        errors=_scatter_add_errors,
    ),
    OpInfo(
        "scatter_reduce",
        scatter_reduce,
        _scatter_reduce_samples,
        method=True,
        dtypes=ALL,
        errors=_scatter_reduce_errors,
    ),
    OpInfo(
        "index_add",
        index_add,
        _index_add_samples,
        method=True,
        dtypes=ALL,
        errors=_index_add_errors,
    ),
    OpInfo(
        "index_copy",
        index_copy,
        _index_copy_samples,
        method=True,
        dtypes=ALL,
        errors=_index_copy_errors,
    ),
    OpInfo(
        "index_fill",
        index_fill,
        _index_fill_samples,
        method=True,
        dtypes=ALL,
        errors=_index_fill_errors,
    ),
    OpInfo(
        "index_put",
        index_put,
        _index_put_samples,
        method=True,
        dtypes=ALL,
        errors=_index_put_errors,
    ),
    OpInfo(
        "masked_select",
        masked_select,
        _masked_select_samples,
        method=True,
        dtypes=ALL,
        errors=_masked_select_errors,
    ),
    OpInfo(
        "masked_scatter",
        masked_scatter,
        _masked_scatter_samples,
        method=True,
        dtypes=ALL,
        errors=_masked_scatter_errors,
    ),
    OpInfo("take", take, _take_samples, method=True, dtypes=ALL, errors=_take_errors),
    OpInfo("nonzero", nonzero, _nonzero_samples, method=True, dtypes=ALL, grad=False),
    OpInfo("sort", sort, _sort_samples, method=True, dtypes=ALL, errors=_sort_errors),
    OpInfo(
        "argsort", argsort, _sort_samples, method=True, dtypes=ALL, errors=_sort_errors, grad=False
    ),
    OpInfo("topk", topk, _topk_samples, method=True, dtypes=ALL, errors=_topk_errors),
    OpInfo(
        "unique",
        unique,
        _unique_samples,
        method=True,
        dtypes=ALL,
        notes="Not differentiable, as in PyTorch (its backward raises NotImplementedError); "
        "always sorted.",
        grad=False,
    ),
    OpInfo(
        "searchsorted",
        searchsorted,
        _searchsorted_samples,
        dtypes=ALL,
        errors=_searchsorted_errors,
        grad=False,
    ),
    OpInfo(
        "bucketize",
        bucketize,
        _bucketize_samples,
        dtypes=ALL,
        errors=_bucketize_errors,
        grad=False,
    ),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "sort": "dim:dim",
        "argsort": "dim:dim",
        "topk": "dim:dim",
    }
)
