"""Indexing: ``x[idx]``, select, narrow, index_select, gather, take_along_dim, masked_fill.

# NOTE [Basic and advanced indexing]
# As in PyTorch (and numpy), an index made of ints, slices, ``...`` and None
# is *basic*: the result is a view sharing data and version counter with its
# input (``as_view``), and its rule writes the gradient into zeros of the
# input's shape.  An index holding integer or bool arrays (Tensors, lists,
# arrays) is *advanced*: the result is a copy, and its rule accumulates the
# gradient with ``add.at`` so that repeated indices add up.  Ints mixed with
# arrays are applied first as a basic select, as PyTorch does, so that
# ``x[0, :, [0, 1]]`` has PyTorch's shape, not numpy's.  Both rules call
# ``F.index_add``, whose own rule is ``F.getitem``: every derivative order is
# covered by the pair.  Index arrays are saved for backward (version-checked
# and freed with the graph, like PyTorch's saved indices).  A nested list is
# one index array (``x[[[0, 1], [1, 2]]]`` picks a 2x2 block of rows), which
# PyTorch announces for 2.9 and numpy does today; PyTorch 2.8 and older read
# it as a tuple of indices.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._tensor import _NUMBERS, Tensor
from ._core import (
    ELEMENTWISE,
    TENSOR_OPS,
    GradOps,
    as_view,
    node_class,
    record,
    record_one,
    same_device,
)
from ._shape import _norm_dim, dim_or_axis
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "getitem",
    "select",
    "narrow",
    "index_select",
    "gather",
    "take_along_dim",
    "masked_fill",
    "ints_first",
    "drop_empty_ellipsis",
    "index_add_grad",
    "scatter_add_grad",
]

_ERR_INDEX_DTYPE = "tensors used as indices must be long, int, byte or bool tensors"


# -- rules ---------------------------------------------------------------------------------
def _basic_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    shape, idx = n.attrs
    return (F.index_add(shape, idx, g, True),)


def _fill(template: tuple[Any, ...], pos: tuple[int, ...], vals: Any) -> tuple[Any, ...]:
    """The index ``template`` with its array entries (at ``pos``) taken from ``vals``."""
    idx = list(template)
    for p, v in zip(pos, vals):
        idx[p] = v
    return tuple(idx)


def _advanced_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    shape, template, pos = n.attrs
    return (F.index_add(shape, _fill(template, pos, s), g, False),)


def _basic_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    return getitem(ts[0], attrs[1])  # (a view of the tangent, as the result is)


def _advanced_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    _, template, pos = attrs
    return getitem(ts[0], _fill(template, pos, s))


SelectBackward0 = node_class("SelectBackward0", _basic_rule, jvp=_basic_jvp)
SliceBackward0 = node_class("SliceBackward0", _basic_rule, jvp=_basic_jvp)
UnsqueezeBackward0 = node_class("UnsqueezeBackward0", _basic_rule, jvp=_basic_jvp)
AliasBackward0 = node_class("AliasBackward0", _basic_rule, jvp=_basic_jvp)
IndexBackward0 = node_class("IndexBackward0", _advanced_rule, jvp=_advanced_jvp)
IndexSelectBackward0 = node_class("IndexSelectBackward0", _advanced_rule, jvp=_advanced_jvp)


# -- parsing an index ------------------------------------------------------------------------
def _index_error(exc: IndexError, x: Tensor) -> IndexError:
    """numpy's indexing error, worded as PyTorch words it."""
    msg = str(exc)
    if msg.startswith("too many indices"):
        if x.data.ndim == 0:
            return IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python to convert a "
                "0-dim tensor to a number"
            )
        return IndexError(f"too many indices for tensor of dimension {x.data.ndim}")
    return IndexError(msg.replace("axis", "dimension").replace("array", "tensor"))


def _as_int(v: Any) -> Any:
    """A slice bound as an int (or None); 0-d integer Tensors are accepted."""
    if v is None or v.__class__ is int:
        return v
    if isinstance(v, Tensor):
        if v.data.ndim == 0 and v.data.dtype.kind in "iu":
            return int(v.data)
        raise TypeError(f"slice indices must be integers or 0-d integer tensors, got {v!r}")
    return operator.index(v)


def _plain(v: Any) -> bool:
    return v is None or v.__class__ is int


def _check_slice(s: slice) -> slice:
    step = s.step
    if s.start.__class__ is not int and s.start is not None:
        s = slice(_as_int(s.start), s.stop, step)
    if s.stop.__class__ is not int and s.stop is not None:
        s = slice(s.start, _as_int(s.stop), step)
    if step is not None:
        if step.__class__ is not int:
            step = _as_int(step)
            s = slice(s.start, s.stop, step)
        if step <= 0:
            raise ValueError(
                f"step must be greater than zero (got {step}); as in PyTorch, slices "
                "have no negative steps: index with a reversed list of positions instead"
            )
    return s


def _array_index(a: Any, x: Tensor, from_tensor: bool) -> Any:
    """An index array checked for dtype; 0-d integer arrays become ints."""
    kind = a.dtype.kind
    if kind == "b":
        return a
    if kind in "iu":
        if from_tensor and a.dtype.itemsize == 1 and kind == "u":
            return a.astype(bool)  # PyTorch reads uint8 index tensors as masks
        if a.ndim == 0:
            return int(a)
        return a
    if a.size == 0 and kind == "f" and not from_tensor:
        return a.astype("int64")  # ``x[[]]``: an empty list reads as float64
    raise IndexError(f"{_ERR_INDEX_DTYPE}, got an index of dtype {a.dtype}")


def _component(it: Any, x: Tensor) -> Any:
    """One entry of an index made ready for the backend: int, slice, None, ..., or array."""
    if isinstance(it, Tensor):
        a = it.data
        if it._device is not x._device:
            a = x._device.backend.asarray(it._device.backend.to_numpy(a))
        return _array_index(a, x, True)
    if it.__class__ is bool:
        return it
    if isinstance(it, (list, tuple)):
        try:
            a = x._device.backend.asarray(it)
        except (TypeError, ValueError) as exc:
            raise IndexError(
                f"an index list must hold integers or bools (a rectangular nested list), got {it!r}"
            ) from exc
        if a.dtype.kind == "O":
            raise IndexError(
                f"an index list must hold integers or bools (a rectangular nested list), "
                f"got {it!r}; for several indices use a tuple: x[i, j], not x[[i, j]]"
            )
        return _array_index(a, x, False)
    if hasattr(it, "dtype") and hasattr(it, "shape"):
        return _array_index(x._device.backend.asarray(it), x, False)
    try:
        return operator.index(it)
    except TypeError:
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
            f"are valid indices (got {type(it).__name__})"
        ) from None


def _parse(
    x: Tensor, index: Any, srcs: dict[int, Tensor] | None = None
) -> tuple[tuple[Any, ...], Any, bool]:
    """``(idx, cls, has_int)``: the normalised index, its node class (None: advanced).

    ``srcs``, if given, receives the index Tensors by ``id`` of their array.
    """
    items = index if index.__class__ is tuple else (index,)
    single = len(items) == 1
    out: list[Any] = []
    cls: Any = AliasBackward0
    advanced = ellipsis = has_int = False
    for it in items:
        c = it.__class__
        if c is int:
            cls = SelectBackward0
            has_int = True
        elif c is slice:
            if it.step is not None or not (_plain(it.start) and _plain(it.stop)):
                it = _check_slice(it)
            if single or it.start is not None or it.stop is not None or it.step is not None:
                cls = SliceBackward0
        elif it is None:
            cls = UnsqueezeBackward0
        elif it is Ellipsis:
            ellipsis = True
        else:
            src = it
            it = _component(it, x)
            if srcs is not None and src.__class__ is Tensor and it is src.data:
                srcs[id(it)] = src  # saved as is, so that changing it in place is caught
            if it.__class__ is int:
                cls = SelectBackward0
                has_int = True
            else:
                advanced = True
        out.append(it)
    if advanced:
        return tuple(out), None, has_int
    if not ellipsis:
        out.append(Ellipsis)  # keeps numpy from returning a scalar instead of a 0-d view
    return tuple(out), cls, has_int


def _consumed(it: Any) -> int:
    """How many dimensions of the input an advanced index entry consumes."""
    if it.__class__ is bool:
        return 0
    if it.dtype.kind == "b":
        return int(it.ndim)
    return 1


# -- x[idx] --------------------------------------------------------------------------------
def getitem(x: Tensor, index: Any) -> Tensor:
    """``x[index]``: a view for basic indices, a copy for advanced ones.

    See NOTE [Basic and advanced indexing].

    Example::

        >>> import aengine as ae
        >>> x = ae.arange(6.0).reshape(2, 3)
        >>> x[1, 1:].tolist(), x[:, [0, 0]].tolist()
        ([4.0, 5.0], [[0.0, 0.0], [3.0, 3.0]])
    """
    c = index.__class__
    if c is int:
        return _basic(x, (index, Ellipsis), SelectBackward0)
    if c is slice and index.step is None and _plain(index.start) and _plain(index.stop):
        return _basic(x, (index, Ellipsis), SliceBackward0)
    srcs: dict[int, Tensor] = {}
    idx, cls, has_int = _parse(x, index, srcs)
    if cls is not None:
        return _basic(x, idx, cls)
    if has_int:
        first, idx = ints_first(idx)
        x = _basic(x, first, SelectBackward0)
    return _advanced(x, drop_empty_ellipsis(idx, x.data.ndim), IndexBackward0, srcs)


def drop_empty_ellipsis(idx: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    """``idx`` without a ``...`` that stands for no dimension (advanced indices only).

    PyTorch expands ``...`` to full slices, so one that covers no dimension
    does not separate the advanced indices around it; numpy would move their
    dimensions to the front.
    """
    used = 0
    where = -1
    for i, it in enumerate(idx):
        if it is Ellipsis:
            where = i
        elif it.__class__ is slice:
            used += 1
        elif it is not None:
            used += _consumed(it)
    if where < 0 or used < ndim:
        return idx
    return idx[:where] + idx[where + 1 :]


_ALL = slice(None)


def ints_first(idx: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Split an advanced index holding ints into a basic select and the rest.

    PyTorch applies the ints first (see NOTE [Basic and advanced indexing]);
    ``x[idx]`` is ``x[first][rest]``.
    """
    first: list[Any] = []
    rest: list[Any] = []
    for it in idx:
        c = it.__class__
        if c is int:
            first.append(it)
        elif c is slice:
            first.append(it)
            rest.append(_ALL)  # already applied by ``first``
        elif it is Ellipsis:
            first.append(it)
            rest.append(it)
        elif it is None:
            rest.append(it)
        else:
            first.extend((slice(None),) * _consumed(it))
            rest.append(it)
    if Ellipsis not in first:
        first.append(Ellipsis)
    return tuple(first), tuple(rest)


def _basic(x: Tensor, idx: tuple[Any, ...], cls: Any) -> Tensor:
    try:
        out = x.data[idx]
    except IndexError as exc:
        raise _index_error(exc, x) from None
    t = record_one(cls, out, x._device, x, 1, (x.data.shape, idx))
    return as_view(t, x, lambda F, v: F.getitem(v, idx))


def _saved_index(a: Any, srcs: dict[int, Tensor] | None, dev: Any) -> Tensor:
    """The user's index Tensor holding ``a`` if there is one, else ``a`` wrapped."""
    t = srcs.get(id(a)) if srcs else None
    return t if t is not None else Tensor._make(a, False, dev)


def _advanced(
    x: Tensor, idx: tuple[Any, ...], cls: Any, srcs: dict[int, Tensor] | None = None
) -> Tensor:
    try:
        out = x.data[idx]
    except IndexError as exc:
        raise _index_error(exc, x) from None
    if not x._rg and x._fw is None:
        return record_one(cls, out, x._device, x)
    pos = tuple(i for i, it in enumerate(idx) if hasattr(it, "dtype"))
    template = tuple(None if i in pos else it for i, it in enumerate(idx))
    dev = x._device
    saved = tuple(_saved_index(idx[i], srcs, dev) for i in pos)
    return record(cls, out, dev, (x,), saved, attrs=(x.data.shape, template, pos))


# -- select / narrow / index_select ------------------------------------------------------------
def _required(value: Any, name: str, what: str) -> None:
    if value is None:
        raise TypeError(f"{name}() missing required argument '{what}'")


def select(x: Tensor, dim: Any = None, index: Any = None, *, axis: Any = None) -> Tensor:
    """The slice at ``index`` along ``dim`` (``axis`` is an alias), without that dimension.

    The result is a view.

    Example::

        >>> import aengine as ae
        >>> ae.arange(6.0).reshape(2, 3).select(1, -1).tolist()
        [2.0, 5.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "select")
    dim = dim_or_axis(dim, axis, "select", required=True)
    _required(index, "select", "index")
    shape = x.data.shape
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _norm_dim(dim, x.data.ndim)
    if index.__class__ is not int:
        try:
            if isinstance(index, bool):
                raise TypeError
            index = _as_int(index)
        except TypeError:
            raise TypeError(
                f"select(): argument 'index' must be an int, not {type(index).__name__}"
            ) from None
    size = shape[d]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(shape)} "
            f"at dimension {dim}"
        )
    return _basic(x, (slice(None),) * d + (index, Ellipsis), SelectBackward0)


def narrow(
    x: Tensor, dim: Any = None, start: Any = None, length: Any = None, *, axis: Any = None
) -> Tensor:
    """Elements ``start .. start+length`` along ``dim`` (a view); ``start`` may be negative.

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.arange(5.0).narrow(0, 1, 3).tolist()
        [1.0, 2.0, 3.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "narrow")
    dim = dim_or_axis(dim, axis, "narrow", required=True)
    _required(start, "narrow", "start")
    _required(length, "narrow", "length")
    if x.data.ndim == 0:
        raise IndexError("narrow() cannot be applied to a 0-dim tensor.")
    d = _norm_dim(dim, x.data.ndim)
    size = x.data.shape[d]
    start, length = _as_int(start), operator.index(length)
    if length < 0:
        raise RuntimeError(f"narrow(): length must be non-negative, got {length}")
    if not -size <= start <= size:
        raise IndexError(
            f"start out of range (expected to be in range of [{-size}, {size}], but got {start})"
        )
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    idx = (slice(None),) * d + (slice(start, start + length), Ellipsis)
    return _basic(x, idx, SliceBackward0)


def _index_tensor(
    index: Any, x: Tensor, what: str, exc: type[Exception] = RuntimeError
) -> tuple[Tensor, Any]:
    """``index`` as (Tensor, array) of an integer dtype, on ``x``'s device (else ``exc``)."""
    t = index if isinstance(index, Tensor) else Tensor._make(x._device.backend.asarray(index))
    if t._device is not x._device:
        same_device(x, t)
    a = t.data
    if a.dtype.kind not in "iu":
        raise exc(f"{what}(): Expected dtype int64 for index, got {a.dtype}")
    return t, a


def _check_range(
    a: Any,
    size: int,
    dim: int,
    what: str,
    negative: bool = False,
    exc: type[Exception] = IndexError,
) -> None:
    """Every index of ``a`` in [0, size) (or [-size, size) when ``negative``), else ``exc``."""
    if a.size == 0:
        return
    lo, hi = int(a.min()), int(a.max())
    bad = hi if hi >= size else lo if lo < (-size if negative else 0) else None
    if bad is not None:
        raise exc(f"{what}(): index {bad} is out of bounds for dimension {dim} with size {size}")


def index_select(x: Tensor, dim: Any = None, index: Any = None, *, axis: Any = None) -> Tensor:
    """The entries at ``index`` (a 1-D integer tensor) along ``dim``; a copy.

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.arange(4.0).index_select(0, ae.tensor([3, 0, 3])).tolist()
        [3.0, 0.0, 3.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "index_select")
    dim = dim_or_axis(dim, axis, "index_select", required=True)
    _required(index, "index_select", "index")
    it, a = _index_tensor(index, x, "index_select")
    if a.ndim > 1:
        raise IndexError(
            f"index_select(): Index is supposed to be a vector, got shape {tuple(a.shape)}"
        )
    if a.ndim == 0:
        a = a.reshape(1)
        it = Tensor._make(a, False, x._device)
    d = _norm_dim(dim, x.data.ndim)
    if x.data.ndim == 0:  # as PyTorch: one index, a 0-d result
        if a.size != 1:
            raise RuntimeError(
                f"index_select(): Index to scalar can have only 1 value, got {a.size} value(s)"
            )
        _check_range(a, 1, dim, "index_select")
        return _advanced(x.reshape(1), (a,), IndexSelectBackward0).reshape(())
    _check_range(a, x.data.shape[d], d, "index_select")
    idx = (slice(None),) * d + (a,)
    out = x.data[idx]
    if not x._rg and x._fw is None:
        return record_one(IndexSelectBackward0, out, x._device, x)
    template = (slice(None),) * d + (None,)
    return record(
        IndexSelectBackward0, out, x._device, (x,), (it,), attrs=(x.data.shape, template, (d,))
    )


# -- gather / take_along_dim ---------------------------------------------------------------------
def _gather_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    shape, dim = n.attrs
    return (F.scatter_add(shape, dim, s[0], g),)


GatherBackward0 = node_class(
    "GatherBackward0",
    _gather_rule,
    jvp=lambda ts, ins, out, a, s: gather(ts[0], a[1], s[0]),
)


def _check_gather(x: Tensor, d: int, a: Any) -> None:
    xs, ish = x.data.shape, a.shape
    if len(ish) != len(xs):
        raise RuntimeError(
            "Index tensor must have the same number of dimensions as input tensor "
            f"(index shape {list(ish)}, input shape {list(xs)})"
        )
    for i, (si, sx) in enumerate(zip(ish, xs)):
        if i != d and si > sx:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index {list(ish)} to be "
                f"smaller than self {list(xs)} apart from dimension {d}"
            )
    _check_range(a, xs[d], d, "gather", exc=RuntimeError)


def gather(x: Tensor, dim: Any = None, index: Any = None, *, axis: Any = None) -> Tensor:
    """``out[i][j] = x[index[i][j]][j]`` for dim 0 (and so on): PyTorch's gather.

    ``index`` has ``x``'s number of dimensions and is no larger than ``x``
    outside ``dim``; the result has ``index``'s shape.  ``axis`` is an alias
    of ``dim``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> x.gather(1, ae.tensor([[0, 0], [1, 0]])).tolist()
        [[1.0, 1.0], [4.0, 3.0]]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "gather")
    dim = dim_or_axis(dim, axis, "gather", required=True)
    _required(index, "gather", "index")
    it, a = _index_tensor(index, x, "gather")
    if x.data.ndim == 0:
        return gather(x.reshape(1), 0, it.reshape(1) if a.ndim == 0 else it).reshape(a.shape)
    d = _norm_dim(dim, x.data.ndim)
    _check_gather(x, d, a)
    out = x._device.backend.raw.gather(x.data, d, a)
    return record(GatherBackward0, out, x._device, (x,), (it,), attrs=(x.data.shape, d))


def take_along_dim(
    x: Tensor, indices: Any, dim: int | None = None, *, axis: int | None = None
) -> Tensor:
    """Pick values along ``dim`` at ``indices``, broadcasting the other dimensions.

    With ``dim=None`` both are flattened first (PyTorch's ``take_along_dim``);
    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[10.0, 30.0, 20.0]])
        >>> x.take_along_dim(ae.tensor([[1]]), 1).tolist()
        [[30.0]]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "take_along_dim")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "take_along_dim")
    it, a = _index_tensor(indices, x, "take_along_dim")
    if dim is None:
        return gather(x.reshape(-1), 0, it.reshape(-1))
    if a.ndim != x.data.ndim:
        raise RuntimeError(
            "take_along_dim(): input and indices should have the same number of dimensions, "
            f"but got {x.data.ndim} dimensions for input, and {a.ndim} dimensions for indices"
        )
    d = _norm_dim(dim, x.data.ndim)
    xp = x._device.backend.xp
    xs, ish = list(x.data.shape), list(a.shape)
    xs[d] = ish[d] = 1
    common = xp.broadcast_shapes(tuple(xs), tuple(ish))
    xshape = (*common[:d], x.data.shape[d], *common[d + 1 :])
    ishape = (*common[:d], a.shape[d], *common[d + 1 :])
    if xshape != x.data.shape:
        x = x.broadcast_to(xshape)
    if ishape != a.shape:
        it = Tensor._make(xp.broadcast_to(a, ishape), False, x._device)
    return gather(x, d, it)


# -- masked_fill ---------------------------------------------------------------------------------
def _masked_fill_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    mask = s[0]
    gx = F.where(mask, 0.0, g) if n.needs[0] else None
    return (gx,)


def _masked_fill_t_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    mask = s[0]
    need = n.needs
    gx = F.where(mask, 0.0, g) if need[0] else None
    gv = F.sum(F.where(mask, g, 0.0)) if need[1] else None
    return (gx, gv)


MaskedFillBackward0 = node_class("MaskedFillBackward0", _masked_fill_rule, jvp=ELEMENTWISE)


def _masked_fill_t_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    tx, tv = ts  # the value's tangent where the mask is set, the input's elsewhere
    return TENSOR_OPS.where(s[0], tv if tv is not None else 0.0, tx if tx is not None else 0.0)


MaskedFillBackward1 = node_class("MaskedFillBackward1", _masked_fill_t_rule, jvp=_masked_fill_t_jvp)


def masked_fill(x: Tensor, mask: Any, value: Any) -> Tensor:
    """``x`` with ``value`` where the bool ``mask`` holds (out of place, broadcasting).

    ``value`` is a number or a 0-d tensor (which then gets a gradient too);
    the gradient of ``x`` is zero where the mask holds.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0, 3.0])
        >>> x.masked_fill(x > 1.5, 0.0).tolist()
        [1.0, 0.0, 0.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "masked_fill")
    mt = mask if isinstance(mask, Tensor) else Tensor._make(x._device.backend.asarray(mask))
    if mt._device is not x._device:
        same_device(x, mt)
    m = mt.data
    if m.dtype.kind != "b":
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {m.dtype}"
        )
    xp = x._device.backend.xp
    dtype = x.data.dtype
    if isinstance(value, Tensor):
        if value.data.ndim != 0:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.data.ndim} dimension(s)."
            )
        same_device(x, value)
        out = xp.where(m, value.data.astype(dtype), x.data)
        return record(MaskedFillBackward1, out, x._device, (x, value), (mt,), bcast=True)
    if not isinstance(value, _NUMBERS):
        raise TypeError(
            f"masked_fill(): argument 'value' must be a number or a 0-d tensor, not "
            f"{type(value).__name__}"
        )
    out = xp.where(m, xp.asarray(value).astype(dtype), x.data)
    return record(MaskedFillBackward0, out, x._device, (x,), (mt,), bcast=True)


# -- the F forms used by rules under create_graph ---------------------------------------------------
def _raw_index(idx: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(it.data if isinstance(it, Tensor) else it for it in idx)


def _index_add_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    return (F.getitem(g, n.attrs),)


IndexAddBackward0 = node_class(
    "IndexAddBackward0",
    _index_add_rule,
    jvp=lambda ts, ins, out, a, s: index_add_grad(out.data.shape, a, ts[0], _is_basic(a)),
)


def _is_basic(idx: tuple[Any, ...]) -> bool:
    """Whether ``idx`` is a basic index (no arrays): what ``index_add_grad`` calls ``basic``."""
    return not any(hasattr(it, "dtype") for it in idx)


def index_add_grad(shape: tuple[int, ...], idx: Any, g: Tensor, basic: bool) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at ``idx`` (``F.index_add`` of rules).

    The gradient of ``x[idx]``; repeated advanced indices accumulate.
    """
    idx = _raw_index(idx)
    out = g._device.backend.raw.index_add(shape, idx, g.data, basic)
    return record(IndexAddBackward0, out, g._device, (g,), attrs=idx)


def _scatter_add_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    dim, idx = n.attrs
    return (F.gather(g, dim, idx),)


ScatterAddBackward0 = node_class(
    "ScatterAddBackward0",
    _scatter_add_rule,
    jvp=lambda ts, ins, out, a, s: scatter_add_grad(out.data.shape, a[0], a[1], ts[0]),
)


def scatter_add_grad(shape: tuple[int, ...], dim: int, idx: Any, g: Tensor) -> Tensor:
    """Zeros of ``shape`` with ``g`` added along ``dim`` at ``idx`` (``F.scatter_add``).

    The gradient of :func:`gather`.
    """
    if isinstance(idx, Tensor):
        idx = idx.data
    out = g._device.backend.raw.scatter_add(shape, dim, idx, g.data)
    return record(ScatterAddBackward0, out, g._device, (g,), attrs=(dim, idx))


# -- the operator table (NOTE [The operator table]) --------------------------------------------
def _select_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, 1))
    yield Sample((m.arr(3, 4), -1, -2), note="negative dim and index")
    yield Sample((m.arr(2, 3, 4), 1, 0))
    yield Sample((m.arr(3),), {"dim": 0, "index": 2}, note="1-d: a 0-d result")


def _select_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 0, 5), exc=IndexError, match="out of range")
    yield ErrorCase((m.arr(), 0, 0), exc=IndexError, match="0-dim")
    yield ErrorCase((m.arr(3, 4), 2, 0), exc=IndexError, match="Dimension out of range")


def _narrow_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(4, 3), 0, 1, 2))
    yield Sample((m.arr(4, 3), -1, -3, 2), note="negative dim and start")
    yield Sample((m.arr(4, 3), 1, 1, 0), note="empty")
    yield Sample((m.arr(4, 3),), {"dim": 0, "start": 0, "length": 4})


def _narrow_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 0, 2, 2), match="exceeds dimension size")
    yield ErrorCase((m.arr(3, 4), 0, 4, 0), exc=IndexError, match="start out of range")
    yield ErrorCase((m.arr(3, 4), 2, 0, 1), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(3, 4), 0, 0, -1), match="length must be non-negative")


def _index_select_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 0, m.idx(5, high=3)), note="repeated indices")
    yield Sample((m.arr(3, 4), -1, m.idx(2, high=4)))
    yield Sample((m.arr(3, 4), 1, np.array(2, dtype=np.int64)), note="0-d index")
    yield Sample((m.arr(3, 4), 0, m.idx(0, high=3)), note="no index")
    yield Sample((m.arr(), 0, np.zeros(1, dtype=np.int64)), note="0-d input")


def _index_select_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, 0, np.array([[1]])), exc=IndexError, match="supposed to be a vector")
    yield ErrorCase((x, 0, np.array([3])), exc=IndexError, match="out of bounds")
    yield ErrorCase((x, 0, np.array([-1])), exc=IndexError, match="out of bounds")
    yield ErrorCase((x, 0, np.array([1.0])), match="Expected dtype int64 for index")
    yield ErrorCase((x, 2, np.array([0])), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(), 0, np.array([0, 0])), match="Index to scalar can have only 1 value")


def _gather_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 1, m.idx(3, 5, high=4)), note="repeated indices")
    yield Sample((m.arr(3, 4), 0, m.idx(2, 3, high=3)), note="index smaller than input")
    yield Sample((m.arr(2, 3, 4), -2, m.idx(2, 2, 4, high=3)), note="negative dim")
    yield Sample((m.arr(), 0, np.zeros((), dtype=np.int64)), note="0-d")
    yield Sample((m.arr(3, 4), 1, m.idx(3, 0, high=4)), note="empty index")


def _gather_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, 1, np.array([[4]])), match="out of bounds")
    yield ErrorCase((x, 1, np.array([[-1]])), match="out of bounds")
    yield ErrorCase((x, 1, np.array([1])), match="same number of dimensions")
    yield ErrorCase((x, 1, np.ones((4, 1), dtype=np.int64)), match="Size does not match")
    yield ErrorCase((x, 1, np.array([[1.0]])), match="Expected dtype int64 for index")
    yield ErrorCase((x, 2, np.array([[1]])), exc=IndexError, match="Dimension out of range")


def _take_along_dim_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.idx(3, 2, high=4), 1))
    yield Sample((m.arr(3, 4), m.idx(5, high=12)), note="dim=None: flattened")
    yield Sample((m.arr(3, 4), m.idx(1, 2, high=4)), {"dim": -1}, note="broadcast indices")
    yield Sample((m.arr(3, 1), m.idx(3, 5, high=1), 1), note="broadcast input")


def _take_along_dim_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, np.array([1]), 1), match="same number of dimensions")
    yield ErrorCase((x, np.array([[1.0]]), 1), match="int64")


def _masked_fill_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.mask(3, 4), 0.5))
    yield Sample((m.arr(3, 4), m.mask(4), -1.0), note="broadcast mask")
    yield Sample((m.arr(3, 4), m.mask(3, 1), m.arr()), note="0-d tensor value")
    yield Sample((m.arr(), np.array(True), 2.0), note="0-d")
    yield Sample((m.arr(4), m.mask(2, 4), 3.0), note="mask larger than input")


def _masked_fill_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 4)
    yield ErrorCase((x, np.array([1, 0, 1, 0]), 0.0), match="only supports boolean masks")
    yield ErrorCase((x, m.mask(3, 4), m.arr(2)), match="0-dimensional value tensor")


register(
    OpInfo("select", select, _select_samples, method=True, dtypes=ALL, errors=_select_errors),
    OpInfo("narrow", narrow, _narrow_samples, method=True, dtypes=ALL, errors=_narrow_errors),
    OpInfo(
        "index_select",
        index_select,
        _index_select_samples,
        method=True,
        dtypes=ALL,
        errors=_index_select_errors,
    ),
    OpInfo("gather", gather, _gather_samples, method=True, dtypes=ALL, errors=_gather_errors),
    OpInfo(
        "take_along_dim",
        take_along_dim,
        _take_along_dim_samples,
        method=True,
        dtypes=ALL,
        errors=_take_along_dim_errors,
    ),
    OpInfo(
        "masked_fill",
        masked_fill,
        _masked_fill_samples,
        method=True,
        dtypes=ALL,
        errors=_masked_fill_errors,
    ),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "select": "dim:dim=0",
        "narrow": "dim:dim=0",
        "index_select": "dim:dim=0",
        "gather": "custom",
        "masked_fill": "pointwise",
        "take_along_dim": "custom",
    }
)
