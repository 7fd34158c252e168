"""Joining and splitting: cat, stack, split, chunk, unbind.

# NOTE [Multi-output views]
# split, chunk and unbind record ONE node with an output per piece (as
# PyTorch does: ``SplitBackward0``, ``SplitWithSizesBackward0``,
# ``UnbindBackward0``); each piece is a view of the input made with
# ``creation="multi_output:<node>"``, which the in-place machinery uses to
# forbid in-place changes of such views.  The rule receives the list of
# output gradients, with None for pieces that got none, and fills those with
# zeros before concatenating.  Node classes are made per number of outputs
# (``num_outputs`` is a class attribute) and cached.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..core._modes import _grad_enabled
from ..tensors._creation import tensor_input
from ..tensors._tensor import Tensor
from ..tensors._tensor_ops import ViewFn
from ._core import (
    GradOps,
    OpNode,
    Rule,
    ShapeError,
    as_view,
    node_class,
    record,
    record_multi,
    same_device,
)
from ._forward import linear
from ._index import SliceBackward0, _basic, getitem
from ._reshape import atleast_1d, atleast_2d, atleast_3d
from ._shape import _norm_dim, dim_or_axis
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "cat",
    "stack",
    "split",
    "chunk",
    "unbind",
    "hstack",
    "vstack",
    "dstack",
    "concat",
    "concatenate",
    "tensor_split",
]

_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _tensor_list(tensors: Any, what: str) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{what}() expects a list or tuple of Tensors, got {type(tensors).__name__}"
        )
    ts = list(tensors)
    if not ts:
        raise ShapeError(f"{what}(): expected a non-empty list of Tensors")
    for i, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"{what}(): expected Tensors, but element {i} of the list is "
                f"{type(t).__name__}; convert it with ae.tensor(...)"
            )
    return ts


def _result_type(ts: list[Tensor]) -> Any:
    """The promoted dtype of several dimensioned tensors (PyTorch's result_type)."""
    best = ts[0].data.dtype
    for t in ts[1:]:
        dt = t.data.dtype
        if dt == best:
            continue
        cb, cd = _CATEGORY[best.kind], _CATEGORY[dt.kind]
        if cd > cb:
            best = dt
        elif cd == cb:
            best = np.promote_types(best, dt)
    return best


def _cast(ts: list[Tensor], dtype: Any) -> tuple[list[Any], bool]:
    arrays = [t.data for t in ts]
    changed = False
    for i, a in enumerate(arrays):
        if a.dtype != dtype:
            arrays[i] = a.astype(dtype)
            changed = True
    return arrays, changed


# -- cat -----------------------------------------------------------------------------------
def _cat_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    d, bounds = n.attrs
    pre = (slice(None),) * d
    grads: list[Any] = []
    for b, need in zip(bounds, n.needs):
        if not need:
            grads.append(None)
        elif b is None:
            grads.append(F.zeros((0,), g))
        else:
            grads.append(F.getitem(g, (*pre, slice(b[0], b[1]))))
    return grads


CatBackward0 = node_class("CatBackward0", _cat_rule, jvp=linear(lambda a, xs: cat(xs, a[0])))


def cat(tensors: Any, dim: Any = None, *, axis: Any = None) -> Tensor:
    """Concatenate tensors along an existing dimension ``dim`` (0 by default; or ``axis``).

    Shapes must match outside ``dim`` (no broadcasting); dtypes are promoted
    as in PyTorch; 1-D empty tensors are skipped (PyTorch's legacy rule).

    Example::

        >>> import aengine as ae
        >>> ae.cat([ae.zeros(1, 2), ae.ones(2, 2)]).shape
        (3, 2)
    """
    if axis is not None:
        dim = dim_or_axis(dim, axis, "cat")
    if dim is None:
        dim = 0
    ts = _tensor_list(tensors, "cat")
    ref = next((t for t in ts if t.data.shape != (0,)), ts[0])
    rshape = ref.data.shape
    nd = len(rshape)
    if nd == 0:
        raise ShapeError(
            f"zero-dimensional tensor (at position {ts.index(ref)}) cannot be concatenated; "
            "use ae.stack, or reshape it to 1-D first"
        )
    d = _norm_dim(dim, nd)
    dev = ref._device
    bounds: list[tuple[int, int] | None] = []
    used: list[Tensor] = []
    pos = 0
    for i, t in enumerate(ts):
        a = t.data
        if t._device is not dev:
            same_device(ref, t)
        shp = a.shape
        if shp == (0,) and nd != 1:
            bounds.append(None)  # legacy: 1-D empty tensors concatenate with anything
            continue
        if len(shp) != nd:
            if not shp:
                raise ShapeError(
                    f"zero-dimensional tensor (at position {i}) cannot be concatenated"
                )
            raise ShapeError(
                f"Tensors must have same number of dimensions: got {nd} and {len(shp)} "
                f"(shapes {list(rshape)} and {list(shp)})"
            )
        for k in range(nd):
            if k != d and shp[k] != rshape[k]:
                raise ShapeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{rshape[k]} but got size {shp[k]} for tensor number {i} in the list "
                    f"(shapes {list(rshape)} and {list(shp)}); cat does not broadcast"
                )
        bounds.append((pos, pos + shp[d]))
        used.append(t)
        pos += shp[d]
    dtype = _result_type(ts)
    arrays, changed = _cast(used, dtype)
    out = dev.backend.xp.concatenate(arrays, axis=d)
    changed = changed or any(b is None and t.data.dtype != dtype for b, t in zip(bounds, ts))
    return record(CatBackward0, out, dev, tuple(ts), attrs=(d, tuple(bounds)), bcast=changed)


# -- stack ---------------------------------------------------------------------------------
def _stack_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    pre = (slice(None),) * n.attrs
    return [F.getitem(g, (*pre, i, Ellipsis)) if need else None for i, need in enumerate(n.needs)]


StackBackward0 = node_class("StackBackward0", _stack_rule, jvp=linear(lambda a, xs: stack(xs, a)))


def stack(tensors: Any, dim: Any = None, *, axis: Any = None) -> Tensor:
    """Join equally shaped tensors along a new dimension ``dim`` (0 by default; or ``axis``).

    Example::

        >>> import aengine as ae
        >>> ae.stack([ae.zeros(2), ae.ones(2)], dim=1).tolist()
        [[0.0, 1.0], [0.0, 1.0]]
    """
    if axis is not None:
        dim = dim_or_axis(dim, axis, "stack")
    dim = 0 if dim is None else operator.index(dim)
    ts = _tensor_list(tensors, "stack")
    shape = ts[0].data.shape
    dev = ts[0]._device
    for i, t in enumerate(ts):
        if t.data.shape != shape:
            raise ShapeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                f"and {list(t.data.shape)} at entry {i}"
            )
        if t._device is not dev:
            same_device(ts[0], t)
    nd = len(shape) + 1
    if not -nd <= dim < nd:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})"
        )
    d = dim % nd
    arrays, changed = _cast(ts, _result_type(ts))
    out = dev.backend.xp.stack(arrays, axis=d)
    return record(StackBackward0, out, dev, tuple(ts), attrs=d, bcast=changed)


# -- split / chunk / unbind -------------------------------------------------------------------
_MULTI: dict[tuple[str, int], type[OpNode]] = {}


def _multi_class(name: str, rule: Rule, k: int) -> type[OpNode]:
    cls = _MULTI.get((name, k))
    if cls is None:
        jvp = _split_jvp if rule is _split_rule else _unbind_jvp
        cls = _MULTI[name, k] = node_class(name, rule, num_outputs=k, jvp=jvp)
        # function-local: _saved_fields imports the op families, which import this one
        from ._saved_fields import give

        give(cls)  # made after install(): NOTE [Saved values by torch's names]
    return cls


def _grads_or_zeros(F: GradOps, g: Any, n: Any, shapes: Any) -> list[Any] | None:
    """The output gradients as a list, None entries as zeros (None if all are None)."""
    gs = [g] if n.num_outputs == 1 else g
    like = next((x for x in gs if x is not None), None)
    if like is None:
        return None
    return [x if x is not None else F.zeros(shp, like) for x, shp in zip(gs, shapes)]


def _split_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    d, sizes, shape = n.attrs
    shapes = [(*shape[:d], sz, *shape[d + 1 :]) for sz in sizes]
    parts = _grads_or_zeros(F, g, n, shapes)
    if parts is None:
        return (None,)
    return (parts[0] if len(parts) == 1 else F.cat(parts, d),)


def _unbind_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    d, shape = n.attrs
    parts = _grads_or_zeros(F, g, n, [(*shape[:d], *shape[d + 1 :])] * n.num_outputs)
    if parts is None:
        return (None,)
    return (F.cat([F.expand_dims(p, d) for p in parts], d),)


def _split_jvp(ts: Any, ins: Any, outs: Any, attrs: Any, s: Any) -> Any:
    d, sizes, _ = attrs
    pre = (slice(None),) * d
    starts = [0, *itertools.accumulate(sizes)]
    return [getitem(ts[0], (*pre, slice(p, p + n), Ellipsis)) for p, n in zip(starts, sizes)]


def _unbind_jvp(ts: Any, ins: Any, outs: Any, attrs: Any, s: Any) -> Any:
    d, shape = attrs
    pre = (slice(None),) * d
    return [getitem(ts[0], (*pre, i, Ellipsis)) for i in range(shape[d])]


def _views(x: Tensor, name: str, rule: Rule, idxs: list[Any], attrs: Any) -> tuple[Tensor, ...]:
    data = x.data
    cls = _multi_class(name, rule, len(idxs))
    outs = record_multi(cls, [data[i] for i in idxs], x._device, (x,), attrs=attrs)
    creation = "multi_output:" + name if _grad_enabled.get() else None
    for t, i in zip(outs, idxs):
        as_view(t, x, _getitem_view(i), creation)
    return tuple(outs)


def _slice_view(x: Tensor, idx: tuple[Any, ...]) -> Tensor:
    """``x[idx]`` for a basic index of slices: a view of its own (torch's SliceBackward0)."""
    return _basic(x, idx, SliceBackward0)


def _getitem_view(idx: Any) -> ViewFn:
    """The view function of ``x[idx]``."""
    return lambda F, v: F.getitem(v, idx)


def _split_sizes(x: Tensor, d: int, sizes: list[int], name: str) -> tuple[Tensor, ...]:
    pre = (slice(None),) * d
    idxs = []
    pos = 0
    for sz in sizes:
        idxs.append((*pre, slice(pos, pos + sz), Ellipsis))
        pos += sz
    return _views(x, name, _split_rule, idxs, (d, tuple(sizes), x.data.shape))


def _dim_of(x: Tensor, dim: int, what: str) -> int:
    if x.data.ndim == 0:
        raise ShapeError(f"{what} expects at least a 1-dimensional tensor")
    return _norm_dim(dim, x.data.ndim)


_SIZES = "an int or a list of ints"


def _int(v: Any, fn: str, what: str, kind: str = "an int") -> int:
    """An int argument (a Python or numpy integer, not a bool), with PyTorch's check."""
    if v.__class__ is int:
        return v
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{what}' must be {kind}, not {type(v).__name__}")
    return operator.index(v)


def split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into pieces of ``split_size`` (the last may be smaller) or of the given sizes.

    The pieces are views of ``x`` (see NOTE [Multi-output views]).

    Example::

        >>> import aengine as ae
        >>> [p.tolist() for p in ae.arange(5.0).split(2)]
        [[0.0, 1.0], [2.0, 3.0], [4.0]]
        >>> [p.shape for p in ae.zeros(5, 2).split([1, 4])]
        [(1, 2), (4, 2)]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "split")
    d = _dim_of(x, dim, "split")
    size = x.data.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_int(s, "split", "split_size_or_sections", _SIZES) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise ShapeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sizes}"
            )
        if not sizes:
            raise ShapeError("split_with_sizes expects at least one split size")
        return _split_sizes(x, d, sizes, "SplitWithSizesBackward0")
    s = _int(split_size_or_sections, "split", "split_size_or_sections", _SIZES)
    if s < 0:
        raise ShapeError(f"split expects split_size be non-negative, but got split_size={s}")
    if s == 0 and size != 0:
        raise ShapeError(
            f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
        )
    k = max(-(-size // s), 1) if s else 1
    sizes = [s] * (k - 1) + [size - s * (k - 1)]
    return _split_sizes(x, d, sizes, "SplitBackward0")


def chunk(x: Tensor, chunks: int, dim: Any = None, *, axis: Any = None) -> tuple[Tensor, ...]:
    """Split into ``chunks`` nearly equal views (fewer if the size does not allow).

    Along ``dim`` (0 by default; ``axis`` is an alias).

    As in PyTorch each piece has ``ceil(size / chunks)`` elements along
    ``dim`` and the last one what remains.

    Example::

        >>> import aengine as ae
        >>> [p.shape for p in ae.zeros(5).chunk(3)]
        [(2,), (2,), (1,)]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "chunk")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "chunk")
    if dim is None:
        dim = 0
    chunks = _int(chunks, "chunk", "chunks")
    if chunks <= 0:
        raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _dim_of(x, dim, "chunk")
    size = x.data.shape[d]
    if size == 0:
        return _split_sizes(x, d, [0] * chunks, "SplitWithSizesBackward0")
    return split(x, -(-size // chunks), d)


def unbind(x: Tensor, dim: Any = None, *, axis: Any = None) -> tuple[Tensor, ...]:
    """The slices along ``dim`` (0 by default; ``axis`` is an alias), without it (views).

    Example::

        >>> import aengine as ae
        >>> [r.tolist() for r in ae.arange(4.0).reshape(2, 2).unbind(1)]
        [[0.0, 2.0], [1.0, 3.0]]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "unbind")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "unbind")
    d = _dim_of(x, 0 if dim is None else dim, "unbind")
    n = x.data.shape[d]
    if n == 0:
        return ()
    pre = (slice(None),) * d
    idxs = [(*pre, i, Ellipsis) for i in range(n)]
    return _views(x, "UnbindBackward0", _unbind_rule, idxs, (d, x.data.shape))


# -- hstack / vstack / dstack / concat / concatenate / tensor_split ---------------------------
def _stack_list(tensors: Any, what: str) -> list[Tensor]:
    """The tensors of an ``*stack`` as a list; torch's RuntimeError when there are none."""
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise RuntimeError(f"{what} expects a non-empty TensorList")
    return _tensor_list(tensors, what)


def hstack(tensors: Any) -> Tensor:
    """Concatenate horizontally: along dimension 1, or 0 for 1-D tensors (0-d ones count as 1-D).

    Example::

        >>> import aengine as ae
        >>> ae.hstack([ae.zeros(2), ae.ones(1)]).tolist()
        [0.0, 0.0, 1.0]
    """
    ts = [atleast_1d(t) for t in _stack_list(tensors, "hstack")]
    return cat(ts, 0 if ts[0].data.ndim == 1 else 1)


def vstack(tensors: Any) -> Tensor:
    """Concatenate vertically: along dimension 0, 1-D tensors (and 0-d) as rows.

    Example::

        >>> import aengine as ae
        >>> ae.vstack([ae.zeros(2), ae.ones(2)]).tolist()
        [[0.0, 0.0], [1.0, 1.0]]
    """
    return cat([atleast_2d(t) for t in _stack_list(tensors, "vstack")], 0)


def dstack(tensors: Any) -> Tensor:
    """Concatenate in depth: along dimension 2, after ``atleast_3d`` of each tensor.

    Example::

        >>> import aengine as ae
        >>> ae.dstack([ae.zeros(2), ae.ones(2)]).shape
        (1, 2, 2)
    """
    return cat([atleast_3d(t) for t in _stack_list(tensors, "dstack")], 2)


def concat(tensors: Any, dim: Any = None, *, axis: Any = None) -> Tensor:
    """Concatenate tensors along dimension ``dim`` (``cat`` under another name).

    Example::

        >>> import aengine as ae
        >>> ae.concat([ae.zeros(1, 2), ae.ones(1, 2)], dim=1).shape
        (1, 4)
    """
    return cat(tensors, dim, axis=axis)


def concatenate(tensors: Any, axis: Any = None, *, dim: Any = None) -> Tensor:
    """Concatenate tensors along dimension ``axis`` (``cat`` under numpy's name; or ``dim``).

    Example::

        >>> import aengine as ae
        >>> ae.concatenate([ae.zeros(1, 2), ae.ones(1, 2)], axis=0).shape
        (2, 2)
    """
    return cat(tensors, dim, axis=axis)


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``n`` nearly equal views, or at the given indices, along ``dim``.

    An int ``n`` (or a 0-d integer tensor) gives ``n`` pieces, the first
    ``size % n`` one element longer; a list of indices (or a 1-D integer
    tensor) cuts before each index, as slices do (an index past the end
    gives empty pieces).  Each piece is a view of its own (a slice), so it
    may be changed in place, unlike the pieces of ``split``.

    Example::

        >>> import aengine as ae
        >>> [p.tolist() for p in ae.arange(5.0).tensor_split(3)]
        [[0.0, 1.0], [2.0, 3.0], [4.0]]
        >>> [p.tolist() for p in ae.arange(5.0).tensor_split([1, 3])]
        [[0.0], [1.0, 2.0], [3.0, 4.0]]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "tensor_split")
    nd = x.data.ndim
    if nd == 0:
        raise RuntimeError(
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    d = _norm_dim(dim, nd)
    ios = indices_or_sections
    sections: int | None = None
    indices: list[int] = []
    if isinstance(ios, Tensor):
        a = ios.data
        if a.dtype.kind not in "iu":
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to have an integer dtype "
                f"(long), but got {a.dtype}"
            )
        if a.ndim > 1:
            raise RuntimeError(
                "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                f"one-dimensional tensor, but got a tensor with {a.ndim} dims"
            )
        if a.ndim == 0:
            sections = int(a)
        else:
            indices = [int(i) for i in a.tolist()]
    elif isinstance(ios, (list, tuple)):
        indices = [_int(i, "tensor_split", "indices", "a tuple of ints") for i in ios]
    else:
        sections = _int(ios, "tensor_split", "indices_or_sections", "an int or a tuple of ints")
    size = x.data.shape[d]
    bounds: list[tuple[int | None, int | None]] = []
    if sections is not None:
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        q, r = divmod(size, sections)
        pos = 0
        for i in range(sections):
            step = q + (1 if i < r else 0)
            bounds.append((pos, pos + step))
            pos += step
    else:
        starts: list[int | None] = [None, *indices]
        ends: list[int | None] = [*indices, None]
        bounds = list(zip(starts, ends))
    pre = (slice(None),) * d
    return tuple(_slice_view(x, (*pre, slice(a, b), Ellipsis)) for a, b in bounds)


# -- the operator table (NOTE [The operator table]) ------------------------------------------


def _cat_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(1, 3), m.arr(4, 3)],))
    yield Sample(([m.arr(2, 3), m.arr(2, 1)], 1))
    yield Sample(([m.arr(2, 3, 2), m.arr(2, 3, 1)],), {"dim": -1}, note="negative dim")
    yield Sample(([m.arr(2, 3), m.arr(0)],), note="a 1-D empty tensor is skipped (legacy)")
    yield Sample(([m.arr(3)],), note="one tensor")


def _cat_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(([m.arr(2, 3), m.arr(2, 4)],), exc=RuntimeError,
                    match="Sizes of tensors must match",
                    note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase(([m.arr(2, 3), m.arr(3)],), exc=RuntimeError,
                    match="same number of dimensions",
                    note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase(([m.arr(2)], 1), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(2),), exc=TypeError, match="list or tuple of Tensors")


def _stack_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(2, 3), m.arr(2, 3)],))
    yield Sample(([m.arr(2, 3), m.arr(2, 3)], 2), note="new last dim")
    yield Sample(([m.arr(2, 3), m.arr(2, 3)],), {"dim": -2}, note="negative dim")
    yield Sample(([m.arr(), m.arr()],), note="0-d")


def _stack_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(([m.arr(2, 3), m.arr(3, 2)],), exc=RuntimeError,
                    match="expects each tensor to be equal size",
                    note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase(([m.arr(2)], 2), exc=IndexError, match="Dimension out of range")


def _split_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(5, 3), 2))
    yield Sample((m.arr(5, 3), [1, 4]), note="sizes")
    yield Sample((m.arr(2, 5), [2, 0, 3], 1), note="sizes with an empty piece, dim 1")
    yield Sample((m.arr(2, 5), 5, -1), note="one piece")


def _split_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(5, 3)
    yield ErrorCase((x, [1, 2]), exc=RuntimeError, match="sum exactly to 5",
                    note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, 2, 2), exc=IndexError, match="Dimension out of range")


def _chunk_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(5, 3), 3))
    yield Sample((m.arr(5, 3), 2, 1), note="along dim 1")
    yield Sample((m.arr(6, 2), 4), note="fewer chunks than asked")
    yield Sample((m.arr(2, 3), 2), {"dim": -1}, note="negative dim")


def _chunk_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(5), 0), exc=RuntimeError, match="greater than 0",
                    note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((m.arr(5), 2, 1), exc=IndexError, match="Dimension out of range")


def _unbind_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 2),))
    yield Sample((m.arr(3, 2, 2), 1))
    yield Sample((m.arr(3, 2), -1), note="negative dim")


def _unbind_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), 1), exc=IndexError, match="Dimension out of range")


def _hstack_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(2, 1)],))
    yield Sample(([m.arr(2), m.arr(3)],), note="1-D: along dim 0")
    yield Sample(([m.arr(), m.arr(2)],), note="a 0-d tensor")
    yield Sample(([m.arr(2, 1, 2), m.arr(2, 2, 2)],), note="3-D")


def _vstack_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(1, 3)],))
    yield Sample(([m.arr(3), m.arr(3)],), note="1-D as rows")
    yield Sample(([m.arr(), m.arr(1, 1)],), note="a 0-d tensor")


def _dstack_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(2, 3)],))
    yield Sample(([m.arr(3), m.arr(3)],), note="1-D")
    yield Sample(([m.arr(2, 3, 1), m.arr(2, 3, 2)],), note="3-D")


def _stack_list_errors(name: str) -> Any:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield ErrorCase(([],), match="expects a non-empty TensorList")
        other = m.arr(2, 4) if name == "vstack" else m.arr(3, 3)
        yield ErrorCase(([m.arr(2, 3), other],), exc=RuntimeError,
                        match="Sizes of tensors must match",
                        note="torch: RuntimeError (from cat)")  # fmt: skip

    return errors


def _concat_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(1, 3)],))
    yield Sample(([m.arr(2, 3), m.arr(2, 2)], 1))
    yield Sample(([m.arr(2, 3), m.arr(2, 2)],), {"dim": -1}, note="negative dim")


def _concatenate_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(([m.arr(2, 3), m.arr(1, 3)],))
    yield Sample(([m.arr(2, 3), m.arr(2, 2)], 1))
    yield Sample(([m.arr(2, 3), m.arr(2, 2)],), {"axis": -1}, note="axis=, negative")


def _tensor_split_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(7, 2), 3), note="sections")
    yield Sample((m.arr(2, 5), [1, 3], 1), note="indices")
    yield Sample((m.arr(6), [1, 10, 2]), note="an index past the end, decreasing")
    yield Sample((m.arr(2, 5), (-2,), -1), note="negative index and dim")
    yield Sample((m.arr(5), np.array([2, 4])), note="indices as a tensor")
    yield Sample((m.arr(5), np.array(2)), note="sections as a 0-d tensor")
    yield Sample((m.arr(2, 4), 6, 1), note="more sections than elements")


def _tensor_split_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(5)
    yield ErrorCase((x, 0), match="number of sections must be larger than 0")
    yield ErrorCase((m.arr(), 2), match="expected at least a 1-dimensional tensor")
    yield ErrorCase((x, np.array([[1]])), match="zero-dimensional or one-dimensional")
    yield ErrorCase((x, np.array([1.0])), match="integer dtype")
    yield ErrorCase((x, 2.0), exc=TypeError, match="must be an int or a tuple of ints")
    yield ErrorCase((x, 2, 1), exc=IndexError, match="Dimension out of range")


register(
    OpInfo("cat", cat, _cat_samples, dtypes=ALL, errors=_cat_errors),
    OpInfo("stack", stack, _stack_samples, dtypes=ALL, errors=_stack_errors),
    OpInfo("split", split, _split_samples, method=True, dtypes=ALL, errors=_split_errors),
    OpInfo("chunk", chunk, _chunk_samples, method=True, dtypes=ALL, errors=_chunk_errors),
    OpInfo("unbind", unbind, _unbind_samples, method=True, dtypes=ALL, errors=_unbind_errors),
    OpInfo("hstack", hstack, _hstack_samples, dtypes=ALL, errors=_stack_list_errors("hstack")),
    OpInfo("vstack", vstack, _vstack_samples, dtypes=ALL, errors=_stack_list_errors("vstack")),
    OpInfo("dstack", dstack, _dstack_samples, dtypes=ALL, errors=_stack_list_errors("dstack")),
    OpInfo("concat", concat, _concat_samples, dtypes=ALL, errors=_cat_errors),
    OpInfo("concatenate", concatenate, _concatenate_samples, dtypes=ALL, errors=_cat_errors),
    OpInfo("tensor_split", tensor_split, _tensor_split_samples, method=True, dtypes=ALL,
           errors=_tensor_split_errors),
)  # fmt: skip

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "cat": "custom",
        "stack": "custom",
        "concat": "custom",
        "concatenate": "custom",
        "split": "dim:dim=0",
        "chunk": "dim:dim=0",
        "unbind": "dim:dim=0",
    }
)
