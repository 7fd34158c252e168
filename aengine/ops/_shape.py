"""Shape ops: reshape, view, flatten, permute, transpose, expand, squeeze... clone, to.

Ops that return views of their input share its data and version counter
(``as_view``), as PyTorch's view ops do.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._device import Device
from ..tensors._dtype import as_dtype
from ..tensors._tensor import Tensor
from ._core import ELEMENTWISE, GradOps, OpNode, ShapeError, as_view, node_class, record_one, wrap
from ._raw import sum_to_axes
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "reshape",
    "view",
    "flatten",
    "permute",
    "transpose",
    "expand",
    "broadcast_to",
    "sum_to",
    "squeeze",
    "unsqueeze",
    "clone",
    "contiguous",
    "to",
    "cpu",
    "astype",
    "dim_or_axis",
]


def _shape_arg(shape: tuple[Any, ...], what: str = "shape") -> tuple[int, ...]:
    """Ints given as ``f(2, 3)`` or ``f((2, 3))``; a clear TypeError for anything else."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        bad = next(s for s in shape if not hasattr(s, "__index__"))
        raise TypeError(
            f"argument '{what}' must be a tuple of ints, but found an element of type "
            f"{type(bad).__name__} ({bad!r})"
        ) from None


def dim_or_axis(dim: Any, axis: Any, name: str, required: bool = False) -> Any:
    """``dim``, or ``axis``, its alias (as PyTorch and numpy name it); not both.

    ``required``: one of them must be given (TypeError otherwise).
    """
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{name}(): got both 'dim' and its alias 'axis'; pass only one")
        return axis
    if required and dim is None:
        raise TypeError(f"{name}() missing required argument 'dim' (or its alias 'axis')")
    return dim


def _index_arg(v: Any, what: str) -> int:
    """An int argument given as an int or a numpy integer (not a bool)."""
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        raise TypeError(f"argument '{what}' must be an int, not {type(v).__name__} ({v!r})")
    return operator.index(v)


def _norm_dim(dim: int, ndim: int) -> int:
    if dim.__class__ is not int:
        dim = _index_arg(dim, "dim")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n if ndim else 0


# -- reshape / view -----------------------------------------------------------------------
def _reshape_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    return (F.reshape(g, n.attrs),)


def _reshape_jvp(ts: Any, ins: Any, out: Tensor, a: Any, s: Any) -> Any:
    return reshape(ts[0], out.data.shape)  # (a view of the tangent, as the result is)


ViewBackward0 = node_class("ViewBackward0", _reshape_rule, jvp=_reshape_jvp)
ReshapeAliasBackward0 = node_class("ReshapeAliasBackward0", _reshape_rule, jvp=_reshape_jvp)
UnsafeViewBackward0 = node_class("UnsafeViewBackward0", _reshape_rule, jvp=_reshape_jvp)
UnsqueezeBackward0 = node_class("UnsqueezeBackward0", _reshape_rule, jvp=_reshape_jvp)
# PyTorch's squeeze(), squeeze(dim) and squeeze(dims)
SqueezeBackward0 = node_class("SqueezeBackward0", _reshape_rule, jvp=_reshape_jvp)
SqueezeBackward1 = node_class("SqueezeBackward1", _reshape_rule, jvp=_reshape_jvp)
SqueezeBackward2 = node_class("SqueezeBackward2", _reshape_rule, jvp=_reshape_jvp)


def _resolve_shape(shape: tuple[int, ...], numel: int, old: tuple[int, ...]) -> tuple[int, ...]:
    if shape.count(-1) > 1:
        raise ShapeError("only one dimension can be inferred (-1)")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise ShapeError(f"invalid shape dimension {s}")
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def reshape(x: Tensor, *shape: Any) -> Tensor:
    """A tensor with the same data in a new shape (a view when possible).

    Example::

        >>> import aengine as ae
        >>> ae.arange(6.0).reshape(2, -1).shape
        (2, 3)
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "reshape")
    shp = _resolve_shape(_shape_arg(shape), x.data.size, x.data.shape)
    out = x.data.reshape(shp)
    t = record_one(ViewBackward0, out, x._device, x, 1, x.data.shape)
    # numpy's reshape of a non-contiguous array copies (and the copy has a .base)
    if out.base is not None and x._device.backend.xp.may_share_memory(out, x.data):
        as_view(t, x, lambda F, v: F.reshape(v, shp))
    return t


def view(x: Tensor, *shape: Any) -> Tensor:
    """Like :func:`reshape`, but the result always shares the data (a view)."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "view")
    shp = _resolve_shape(_shape_arg(shape), x.data.size, x.data.shape)
    out = x.data.view()
    try:
        out.shape = shp
    except AttributeError as exc:
        raise ShapeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from exc
    except Exception:
        out = x.data.reshape(shp)
    t = record_one(ViewBackward0, out, x._device, x, 1, x.data.shape)
    return as_view(t, x, lambda F, v: F.reshape(v, shp))


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dimensions ``start_dim..end_dim`` into one."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "flatten")
    nd = x.data.ndim
    if nd == 0:
        return reshape(x, 1)
    s, e = _norm_dim(start_dim, nd), _norm_dim(end_dim, nd)
    if s > e:
        raise ShapeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shp = x.data.shape
    mid = 1
    for d in shp[s : e + 1]:
        mid *= d
    return reshape(x, (*shp[:s], mid, *shp[e + 1 :]))


def squeeze(x: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """Remove dimensions of size 1 (all of them, or those in ``dim``; ``axis`` is an alias)."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "squeeze")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "squeeze")
    shp = x.data.shape
    if dim is None:
        new = tuple(s for s in shp if s != 1)
        return _view_reshape(x, new, SqueezeBackward0)
    one = isinstance(dim, int) or hasattr(dim, "__index__")
    dims = (dim,) if one else tuple(dim)
    nd = {_norm_dim(d, len(shp)) for d in dims}
    new = tuple(s for i, s in enumerate(shp) if not (i in nd and s == 1))
    return _view_reshape(x, new, SqueezeBackward1 if one else SqueezeBackward2)


def unsqueeze(x: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """Insert a dimension of size 1 at ``dim`` (``axis`` is an alias)."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "unsqueeze")
    dim = dim_or_axis(dim, axis, "unsqueeze", required=True)
    if dim.__class__ is not int:
        dim = _index_arg(dim, "dim")
    nd = x.data.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})"
        )
    d = dim % nd
    shp = x.data.shape
    return _view_reshape(x, (*shp[:d], 1, *shp[d:]), UnsqueezeBackward0)


def _view_reshape(x: Tensor, shp: tuple[int, ...], cls: type[OpNode] = ViewBackward0) -> Tensor:
    out = x.data.reshape(shp)
    t = record_one(cls, out, x._device, x, 1, x.data.shape)
    return as_view(t, x, lambda F, v: F.reshape(v, shp))


# -- permute / transpose ----------------------------------------------------------------------
def _permute_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    return (F.permute(g, n.attrs),)


def _permute_jvp(ts: Any, ins: Any, out: Tensor, inv: Any, s: Any) -> Any:
    # the node keeps the inverse permutation (a transposition is its own)
    return permute(ts[0], *sorted(range(len(inv)), key=inv.__getitem__))


PermuteBackward0 = node_class("PermuteBackward0", _permute_rule, jvp=_permute_jvp)
TransposeBackward0 = node_class("TransposeBackward0", _permute_rule, jvp=_permute_jvp)


def permute(x: Tensor, *dims: Any) -> Tensor:
    """Reorder the dimensions (a view)."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "permute")
    axes = _shape_arg(dims, "dims")
    nd = x.data.ndim
    if len(axes) != nd:
        raise ShapeError(f"permute: number of dims ({len(axes)}) does not match ndim ({nd})")
    axes = tuple(_norm_dim(a, nd) for a in axes)
    if sorted(axes) != list(range(nd)):
        raise ShapeError(f"permute: dims {axes} are not a permutation of {tuple(range(nd))}")
    inv = tuple(sorted(range(nd), key=axes.__getitem__))
    out = x.data.transpose(axes)
    t = record_one(PermuteBackward0, out, x._device, x, 1, inv)
    return as_view(t, x, lambda F, v: F.permute(v, axes))


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (a view)."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "transpose")
    nd = x.data.ndim
    if nd == 0:
        return _view_reshape(x, ())
    d0, d1 = _norm_dim(dim0, nd), _norm_dim(dim1, nd)
    axes = list(range(nd))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    perm = tuple(axes)
    out = x.data.transpose(axes)
    t = record_one(TransposeBackward0, out, x._device, x, 1, perm)
    return as_view(t, x, lambda F, v: F.permute(v, perm))


# -- expand / broadcast_to / sum_to -------------------------------------------------------------
def _expand_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    return (F.sum_to(g, n.attrs),)


ExpandBackward0 = node_class(
    "ExpandBackward0", _expand_rule, jvp=lambda ts, ins, out, a, s: expand(ts[0], out.data.shape)
)


def expand(x: Tensor, *sizes: Any) -> Tensor:
    """Broadcast to a larger shape without copying (-1 keeps a size); a view."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "expand")
    return _expand(x, _shape_arg(sizes, "size"))


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    """Broadcast ``x`` to ``shape`` (a read-only view); as ``expand``, -1 keeps a size."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "broadcast_to")
    try:
        sizes = tuple(shape)
    except TypeError:
        raise TypeError(
            f"broadcast_to(): argument 'size' must be a tuple of ints, not {type(shape).__name__}"
        ) from None
    return _expand(x, _shape_arg(sizes, "size"))


def _expand(x: Tensor, sizes: tuple[int, ...]) -> Tensor:
    """``x`` broadcast to ``sizes`` (-1 keeps a size), with PyTorch's errors."""
    old = x.data.shape
    if len(sizes) < len(old):
        raise ShapeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to "
            f"the number of dimensions in the tensor ({len(old)})"
        )
    shp = sizes
    if -1 in shp:
        lead = len(shp) - len(old)
        shp = tuple((old[i - lead] if s == -1 and i >= lead else s) for i, s in enumerate(shp))
    try:
        out = x._device.backend.xp.broadcast_to(x.data, shp)
    except ValueError:  # numpy's "operands could not be broadcast": say which size, as PyTorch
        raise ShapeError(_expand_error(old, sizes)) from None
    t = record_one(ExpandBackward0, out, x._device, x, 1, old)
    return as_view(t, x, lambda F, v: F.broadcast_to(v, shp))


def _expand_error(old: tuple[int, ...], sizes: tuple[int, ...]) -> str:
    """PyTorch's message for sizes that ``old`` cannot be expanded to."""
    lead = len(sizes) - len(old)
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                return (
                    f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                    f"non-existing dimension {i}"
                )
        elif old[i - lead] != 1 and s not in (-1, old[i - lead]):
            return (
                f"The expanded size of the tensor ({s}) must match the existing size "
                f"({old[i - lead]}) at non-singleton dimension {i}.  Target sizes: "
                f"{list(sizes)}.  Tensor sizes: {list(old)}"
            )
    return (
        f"expand: cannot expand a tensor of size {list(old)} to {list(sizes)}: sizes must be "
        "non-negative (-1 keeps a size)"
    )


SumToBackward0 = node_class(
    "SumToBackward0",
    lambda F, g, s, n: (F.broadcast_to(g, n.attrs),),
    jvp=lambda ts, ins, out, a, s: sum_to(ts[0], out.data.shape),
)


def sum_to(x: Tensor, shape: Any) -> Tensor:
    """Sum ``x`` over broadcast dimensions so that it has ``shape``."""
    shp = tuple(int(s) for s in shape)
    if x.data.shape == shp:
        return x
    axes = sum_to_axes(x.data.shape, shp)
    out = x.data.sum(axis=axes, keepdims=True) if axes else x.data
    out = out.reshape(shp)
    return record_one(SumToBackward0, out, x._device, x, 1, x.data.shape)


# -- clone / to ----------------------------------------------------------------------------------
CloneBackward0 = node_class("CloneBackward0", lambda F, g, s, n: (g,), jvp=ELEMENTWISE)


def clone(x: Tensor) -> Tensor:
    """A copy of ``x`` with its own data; gradients flow through it."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "clone")
    return record_one(CloneBackward0, x.data.copy(), x._device, x)


def contiguous(x: Tensor) -> Tensor:
    """``x`` itself if its data is C-contiguous, else a contiguous copy."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "contiguous")
    if x.data.flags.c_contiguous:
        return x
    return clone(x)


ToCopyBackward0 = node_class(
    "ToCopyBackward0",
    lambda F, g, s, n: (
        F.to_device(F.astype(g, n.attrs[1]) if g.dtype != n.attrs[1] else g, n.attrs[0]),
    ),
    jvp=lambda ts, ins, out, a, s: to(ts[0], out._device, dtype=out.data.dtype),
)


def to(x: Tensor, device: Any = None, dtype: Any = None, *, copy: bool = False) -> Tensor:
    """Move to another device and/or convert the dtype; differentiable.

    ``x.to("sim:0")``, ``x.to(dtype=ae.float32)``, ``x.to(ae.float32)``.
    """
    if device is not None and not isinstance(device, (str, Device)):
        device, dtype = None, device
    dst = x._device if device is None else Device(device)
    dt = as_dtype(dtype) or x.data.dtype
    if dst is x._device and dt == x.data.dtype and not copy:
        return x
    src = x._device
    data = x.data
    if dst is not src:
        data = dst.backend.from_numpy(src.backend.to_numpy(data))
        if dst.backend is src.backend and data is x.data:
            data = data.copy()
    if data.dtype != dt:
        data = data.astype(dt)
    elif data is x.data:
        data = data.copy()
    if dt.kind not in "fc":
        return wrap(data, dst)
    t = record_one(ToCopyBackward0, data, dst, x, 1, (src, x.data.dtype))
    return t


def cpu(x: Tensor) -> Tensor:
    """A copy on the cpu (``x.to("cpu")``): differentiable, and ``x`` itself when already there.

    Example::

        >>> import aengine as ae
        >>> c = ae.ones(2, device="sim:0").cpu()
        >>> c.device, c.cpu() is c
        (device(type='cpu'), True)
    """
    return to(x, "cpu")


def astype(x: Tensor, dtype: Any) -> Tensor:
    """``x.to(dtype=dtype)``."""
    return to(x, dtype=dtype)


# -- the Tensor methods *_as (attached in _methods.py, not module functions) ---------------------
def view_as(x: Tensor, other: Tensor) -> Tensor:
    """``x.view(other.shape)``."""
    if other.__class__ is not Tensor:
        other = tensor_input(other, "view_as", "other")
    return view(x, other.data.shape)


def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    """``x.reshape(other.shape)``."""
    if other.__class__ is not Tensor:
        other = tensor_input(other, "reshape_as", "other")
    return reshape(x, other.data.shape)


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """``x.expand(other.shape)``."""
    if other.__class__ is not Tensor:
        other = tensor_input(other, "expand_as", "other")
    return expand(x, other.data.shape)


def type_as(x: Tensor, other: Tensor) -> Tensor:
    """``x.to(dtype=other.dtype)``."""
    if other.__class__ is not Tensor:
        other = tensor_input(other, "type_as", "other")
    return to(x, dtype=other.data.dtype)


#: torch's legacy type names of the dtypes (``Tensor.type()``)
_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
    "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
    "uint8": "ByteTensor", "bool": "BoolTensor", "complex64": "ComplexFloatTensor",
    "complex128": "ComplexDoubleTensor",
}  # fmt: skip


def type_(x: Tensor, dtype: Any = None) -> Any:
    """``x.type()``: the type's name ('aengine.FloatTensor'); ``x.type(dtype)``: ``x.to(dtype)``.

    Example::

        >>> import aengine as ae
        >>> ae.ones(2).type(), ae.ones(2).type(ae.float64).dtype.name
        ('aengine.FloatTensor', 'float64')
    """
    if dtype is None:
        return "aengine." + _TYPE_NAMES.get(x.data.dtype.name, "Tensor")
    return to(x, dtype=dtype)


def cuda(x: Tensor, device: Any = None) -> Tensor:
    """``x`` on a GPU: ``cuda:0`` by default, or the index or device given; differentiable.

    Example::

        >>> import aengine as ae
        >>> ae.ones(2).cuda  # doctest: +ELLIPSIS
        <bound method cuda of ...>
    """
    if device is None:
        target = "cuda:0"
    elif isinstance(device, int):
        target = f"cuda:{device}"
    else:
        target = str(device)
        if not target.startswith("cuda"):
            raise ValueError(f"Invalid device, must be cuda device, got {target}")
    return to(x, target)


# -- the operator table (NOTE [The operator table]) ------------------------------------------


def _reshape_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), (6, 4)))
    yield Sample((m.arr(2, 3, 4), (-1,)), note="-1 infers a size")
    yield Sample((m.arr(2, 3, 4), 4, -1, 2), note="sizes as separate arguments")
    yield Sample((m.arr(), (1, 1)), note="0-d")
    yield Sample((m.arr(0, 3), (3, 0, 1)), note="empty")


def _reshape_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, (4, 2)), exc=RuntimeError, match="invalid for input of size 6", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, (-1, -1)), exc=RuntimeError, match="only one dimension can be inferred", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, (2.0, 3)), exc=TypeError, match="must be a tuple of ints")


def _flatten_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4),))
    yield Sample((m.arr(2, 3, 4, 2),), {"start_dim": 1, "end_dim": -2})
    yield Sample((m.arr(2, 3, 4), -2), note="negative start_dim")
    yield Sample((m.arr(),), note="0-d -> (1,)")
    yield Sample((m.arr(2, 0, 3), 1), note="empty")


def _flatten_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3, 4)
    yield ErrorCase((x, 2, 1), exc=RuntimeError, match="start_dim cannot come after end_dim", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, 3), exc=IndexError, match="Dimension out of range")


def _permute_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), (2, 0, 1)))
    yield Sample((m.arr(2, 3, 4), 1, -1, 0), note="dims as separate arguments, negative")
    yield Sample((m.arr(), ()), note="0-d")
    yield Sample((m.arr(0, 3), (1, 0)), note="empty")


def _permute_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3, 4)
    yield ErrorCase((x, (0, 1)), exc=RuntimeError, match="does not match ndim", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, (0, 1, 1)), exc=RuntimeError, match="not a permutation", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, (0, 1, 3)), exc=IndexError, match="Dimension out of range")


def _transpose_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), 0, 2))
    yield Sample((m.arr(2, 3, 4), -1, 1), note="negative dims")
    yield Sample((m.arr(3), 0, -1), note="1-d")
    yield Sample((m.arr(), 0, -1), note="0-d")


def _transpose_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), 0, 2), exc=IndexError, match="Dimension out of range")


def _expand_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 1), (2, 3, 4)))
    yield Sample((m.arr(3, 1), 2, -1, 5), note="sizes as arguments, -1 keeps a size")
    yield Sample((m.arr(), (2, 3)), note="0-d")
    yield Sample((m.arr(1, 3), (0, 3)), note="to empty")


def _expand_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3, 1)
    yield ErrorCase((x, (4, 4)), exc=RuntimeError, match="must match the existing size", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((x, (4,)), exc=RuntimeError, match="number of sizes provided", note="torch: RuntimeError")  # fmt: skip


def _broadcast_to_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 1), (2, 3, 4)))
    yield Sample((m.arr(3, 1), (-1, 2)), note="-1 keeps a size")
    yield Sample((m.arr(), (2,)), note="0-d")


def _broadcast_to_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 2), (3, 3)), exc=RuntimeError, match="must match the existing size", note="torch: RuntimeError")  # fmt: skip
    yield ErrorCase((m.arr(3), 3), exc=TypeError, match="must be a tuple of ints")


def _squeeze_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(1, 3, 1, 2),))
    yield Sample((m.arr(1, 3, 1, 2), 2))
    yield Sample((m.arr(1, 3, 1, 2), -4), note="negative dim")
    yield Sample((m.arr(1, 3, 1, 2), 1), note="a dim of size > 1 stays")
    yield Sample((m.arr(1, 3, 1, 2), (0, 2)), note="a tuple of dims")
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(1, 0),), note="empty")


def _squeeze_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(1, 3), 2), exc=IndexError, match="Dimension out of range")


def _unsqueeze_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), 0))
    yield Sample((m.arr(2, 3), 2), note="at the end")
    yield Sample((m.arr(2, 3), -2), note="negative dim")
    yield Sample((m.arr(), 0), note="0-d")


def _unsqueeze_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), 3), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(2, 3), 1.0), exc=TypeError, match="must be an int")


def _clone_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 2),), note="empty")


def _contiguous_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(),), note="0-d")


register(
    OpInfo("reshape", reshape, _reshape_samples, method=True, torch=lambda t: t.Tensor.reshape,
           dtypes=ALL,
           errors=_reshape_errors,
           notes="ae.reshape also takes the sizes as separate arguments (as the method)."),
    OpInfo("view", view, _reshape_samples, method=True, torch=lambda t: t.Tensor.view,
           dtypes=ALL, errors=_reshape_errors),
    OpInfo("flatten", flatten, _flatten_samples, method=True, dtypes=ALL,
           errors=_flatten_errors),
    OpInfo("permute", permute, _permute_samples, method=True, torch=lambda t: t.Tensor.permute,
           dtypes=ALL,
           errors=_permute_errors,
           notes="ae.permute also takes the dims as separate arguments (as the method)."),
    OpInfo("transpose", transpose, _transpose_samples, method=True, dtypes=ALL,
           errors=_transpose_errors),
    OpInfo("expand", expand, _expand_samples, method=True, torch=lambda t: t.Tensor.expand,
           dtypes=ALL, errors=_expand_errors),
    OpInfo("broadcast_to", broadcast_to, _broadcast_to_samples, method=True, dtypes=ALL,
           errors=_broadcast_to_errors),
    OpInfo("squeeze", squeeze, _squeeze_samples, method=True, dtypes=ALL,
           errors=_squeeze_errors),
    OpInfo("unsqueeze", unsqueeze, _unsqueeze_samples, method=True, dtypes=ALL,
           errors=_unsqueeze_errors),
    OpInfo("clone", clone, _clone_samples, method=True, dtypes=ALL),
    OpInfo("contiguous", contiguous, _contiguous_samples, method=True,
           torch=lambda t: t.Tensor.contiguous, dtypes=ALL),
)  # fmt: skip

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "reshape": "custom",
        "view": "custom",
        "flatten": "dim:start_dim=0,end_dim=-1",
        "permute": "custom",
        "transpose": "dim:dim0,dim1",
        "expand": "custom",
        "broadcast_to": "custom",
        "squeeze": "custom",
        "unsqueeze": "newdim:dim",
        "clone": "pointwise",
        "contiguous": "pointwise",
    }
)
