"""Shape ops beyond _shape.py and _join.py (flip, roll, tril, diag, repeat...).

# NOTE [Views and copies by flat positions]
# Several ops here move elements without arithmetic: a view that strides
# through its input (``diagonal``, ``unfold``) or a copy that permutes or
# places them (``flip``, ``roll``, ``diag_embed``).  Each is described by
# *positions*: an integer array, shaped like the result, of the flat
# (C-order) positions in the input that the result's elements come from
# (or, for ``diag_embed``, go to).  They are the op itself applied to
# ``arange(numel).reshape(shape)``, so they cost one pass and are computed
# only when needed (``_Positions``: a backward, an in-place change through
# a view), then kept.  Rules use ``F.take_flat`` / ``F.put_flat``, whose
# own rules are each other: every order of derivative follows, with no new
# function in ``F``.  A view's ``view_fn`` is ``F.take_flat(v, positions)``:
# a copy, which CopySlices handles through positions too (NOTE [Views and
# CopySlices] in aengine/tensors/_views.py).
#
# Views here (sharing data and version counter with the input, as torch's):
# unflatten, swapaxes, swapdims, movedim, t, diagonal, unfold, and the
# results of broadcast_tensors, meshgrid and atleast_*d (which may be the
# input itself, as in torch).  Copies: repeat, tile, repeat_interleave, flip,
# fliplr, flipud, roll, rot90, diag, diag_embed, tril, triu.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..tensors._creation import tensor_input, zeros_like
from ..tensors._tensor import Tensor
from ._core import ELEMENTWISE, GradOps, as_view, node_class, record_one, wrap
from ._index import index_select
from ._inplace_ops import put_flat, take_flat
from ._shape import (
    _expand,
    _norm_dim,
    _shape_arg,
    clone,
    permute,
    reshape,
    transpose,
    unsqueeze,
)
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "unflatten",
    "swapaxes",
    "swapdims",
    "movedim",
    "t",
    "repeat",
    "tile",
    "repeat_interleave",
    "flip",
    "fliplr",
    "flipud",
    "roll",
    "rot90",
    "diagonal",
    "diag",
    "diag_embed",
    "tril",
    "triu",
    "unfold",
    "broadcast_tensors",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "meshgrid",
]


def _input(x: Any, name: str) -> Tensor:
    return x if x.__class__ is Tensor else tensor_input(x, name)


def _ints(v: Any, fn: str, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints as a tuple (TypeError naming ``what`` otherwise)."""
    if isinstance(v, (list, tuple)):
        return _shape_arg((tuple(v),), what)
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        raise TypeError(
            f"{fn}(): argument '{what}' must be an int or a tuple of ints, not {type(v).__name__}"
        )
    return (operator.index(v),)


def _int(v: Any, fn: str, what: str) -> int:
    if v.__class__ is int:
        return v
    if isinstance(v, (bool, np.bool_)) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}(): argument '{what}' must be an int, not {type(v).__name__}")
    return operator.index(v)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class _Positions:
    """The flat positions of an op (NOTE [Views and copies by flat positions]), made once.

    ``fn(idx)`` applies the op to ``idx``, the input's flat positions as an
    array of its shape, on the backend ``xp``.
    """

    __slots__ = ("fn", "pos", "shape", "xp")

    def __init__(self, xp: Any, shape: tuple[int, ...], fn: Callable[[Any], Any]) -> None:
        self.xp = xp
        self.shape = shape
        self.fn = fn
        self.pos: Any = None

    def get(self) -> Any:
        pos = self.pos
        if pos is None:
            xp = self.xp
            idx = xp.arange(_numel(self.shape), dtype=xp.int64).reshape(self.shape)
            pos = self.pos = xp.asarray(self.fn(idx))
        return pos


def _take_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    """The gradient of a permutation of the elements: ``g`` at the inverse positions."""
    return (F.take_flat(g, n.attrs.get()),)


def _view_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    """The gradient of a view by positions: ``g`` added into zeros at its positions."""
    p, accumulate = n.attrs
    return (F.put_flat(F.zeros(p.shape, g), p.get(), g, accumulate),)


def _take_jvp(ts: Any, ins: Any, out: Tensor, p: Any, s: Any) -> Any:
    # the rule takes the gradient at the result positions of the input's elements:
    # the tangent puts the input's tangent there
    return put_flat(zeros_like(out), p.get(), ts[0])


def _view_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # the input's tangent at the view's positions (a copy, not a view of the tangent)
    return take_flat(ts[0], attrs[0].get())


def _position_view(
    x: Tensor, out: Any, cls: Any, fwd: Callable[[Any], Any], overlap: bool
) -> Tensor:
    """``out = fwd(x.data)`` as a view of ``x`` whose positions are ``fwd`` of ``x``'s."""
    p = _Positions(x._device.backend.xp, x.data.shape, fwd)
    t = record_one(cls, out, x._device, x, 1, (p, overlap))

    def view_fn(F: GradOps, v: Any, _p: _Positions = p) -> Any:
        return F.take_flat(v, _p.get())

    return as_view(t, x, view_fn)


# -- unflatten / swapaxes / movedim / t: views by reshape and permute ----------------------
def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Split dimension ``dim`` into the dimensions ``sizes`` (one of them may be -1); a view.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 6).unflatten(1, (3, -1)).shape
        (2, 3, 2)
    """
    x = _input(input, "unflatten")
    if not isinstance(sizes, (list, tuple)):
        raise TypeError(
            f"unflatten(): argument 'sizes' must be a tuple of ints, not {type(sizes).__name__}"
        )
    shape = x.data.shape
    if not shape:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = _norm_dim(dim, len(shape))
    sz = _shape_arg((tuple(sizes),), "sizes")
    if not sz:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sz.count(-1) > 1:
        raise RuntimeError(
            f"unflatten: only one dimension can be inferred (-1), got sizes {list(sz)}"
        )
    n = shape[d]
    known = _numel(tuple(s for s in sz if s != -1))
    if -1 in sz:
        if known == 0 or n % known:
            raise RuntimeError(
                f"unflatten: Provided sizes {list(sz)} don't multiply up to the size of dim "
                f"{dim} ({n}) in the input tensor"
            )
        sz = tuple(n // known if s == -1 else s for s in sz)
    elif known != n:
        raise RuntimeError(
            f"unflatten: Provided sizes {list(sz)} don't multiply up to the size of dim {dim} "
            f"({n}) in the input tensor"
        )
    return reshape(x, (*shape[:d], *sz, *shape[d + 1 :]))


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """Swap two dimensions (a view); ``transpose`` under numpy's name.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3, 4).swapaxes(0, 2).shape
        (4, 3, 2)
    """
    return transpose(_input(input, "swapaxes"), axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (a view); ``transpose`` under another name.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3).swapdims(0, 1).shape
        (3, 2)
    """
    return transpose(_input(input, "swapdims"), dim0, dim1)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """Move the dimension(s) ``source`` to the position(s) ``destination`` (a view).

    The other dimensions keep their order.

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3, 4).movedim(0, -1).shape
        (3, 4, 2)
        >>> ae.zeros(2, 3, 4).movedim((0, 1), (2, 0)).shape
        (3, 4, 2)
    """
    x = _input(input, "movedim")
    src = _ints(source, "movedim", "source")
    dst = _ints(destination, "movedim", "destination")
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)"
        )
    nd = x.data.ndim
    s = [_norm_dim(d, nd) for d in src]
    e = [_norm_dim(d, nd) for d in dst]
    if len(set(s)) != len(s):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(src)})")
    if len(set(e)) != len(e):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(dst)})")
    if nd == 0:
        return permute(x, ())
    perm = [-1] * nd
    for a, b in zip(s, e):
        perm[b] = a
    rest = iter(i for i in range(nd) if i not in s)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return permute(x, tuple(perm))


def t(input: Tensor) -> Tensor:
    """The transpose of a matrix (a view); a 0-d or 1-D tensor as it is (a view too).

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3).t().shape
        (3, 2)
    """
    x = _input(input, "t")
    nd = x.data.ndim
    if nd > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {nd}D")
    return transpose(x, 0, 1 if nd == 2 else 0)


# -- repeat / tile / repeat_interleave ------------------------------------------------------
def _repeat_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    padded, reps, shape = n.attrs
    if reps:
        g = F.reshape(g, tuple(v for r, k in zip(reps, padded) for v in (r, k)))
        g = F.sum(g, tuple(range(0, 2 * len(reps), 2)))
    return (F.reshape(g, shape),)


RepeatBackward0 = node_class(
    "RepeatBackward0",
    _repeat_rule,
    jvp=lambda ts, ins, out, a, s: repeat(ts[0], *a[1]) if a[1] else clone(ts[0]),
)


def repeat(input: Tensor, *repeats: Any) -> Tensor:
    """The tensor repeated ``repeats[i]`` times along each dimension (a copy).

    ``repeats`` may have more entries than the tensor has dimensions: new
    leading dimensions are added.  As torch's ``Tensor.repeat`` (numpy's
    ``tile``); ``ae.repeat`` is its function form.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 2.0]).repeat(2, 2).tolist()
        [[1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 1.0, 2.0]]
    """
    x = _input(input, "repeat")
    reps = _shape_arg(repeats, "repeats")
    shape = x.data.shape
    if len(reps) < len(shape):
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            f"of tensor (repeats {list(reps)} for a tensor of shape {list(shape)})"
        )
    padded = (1,) * (len(reps) - len(shape)) + shape
    out_shape = [r * k for r, k in zip(reps, padded)]
    for r in reps:
        if r < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {r}: {out_shape}")
    xp = x._device.backend.xp
    out = xp.tile(x.data.reshape(padded), reps) if reps else x.data.copy()
    return record_one(RepeatBackward0, out, x._device, x, 1, (padded, reps, shape))


def tile(input: Tensor, dims: Any) -> Tensor:
    """The tensor repeated ``dims[i]`` times along each dimension (a copy).

    Where ``dims`` has fewer entries than the tensor has dimensions, it is
    padded with ones at the front (unlike ``repeat``).

    Example::

        >>> import aengine as ae
        >>> ae.zeros(2, 3).tile((2,)).shape
        (2, 6)
    """
    x = _input(input, "tile")
    if not isinstance(dims, (list, tuple)):
        raise TypeError(
            f"tile(): argument 'dims' must be a tuple of ints, not {type(dims).__name__}"
        )
    reps = _shape_arg((tuple(dims),), "dims")
    nd = x.data.ndim
    if len(reps) < nd:
        reps = (1,) * (nd - len(reps)) + reps
    return repeat(x, reps)


def repeat_interleave(
    input: Tensor, repeats: Any = None, dim: Any = None, *, output_size: Any = None
) -> Tensor:
    """Repeat each element (each slice along ``dim``) ``repeats`` times, next to itself.

    ``repeats`` is an int or an integer tensor with one count per slice
    (or one for all).  Without ``dim`` the input is flattened first.  With
    no ``repeats``, ``input`` holds the counts and the result repeats their
    positions: ``repeat_interleave(tensor([1, 2]))`` is ``[0, 1, 1]``.
    ``output_size``, when given, must be the result's length along ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 2.0]).repeat_interleave(2).tolist()
        [1.0, 1.0, 2.0, 2.0]
        >>> ae.tensor([[1.0, 2.0]]).repeat_interleave(ae.tensor([1, 2]), dim=1).tolist()
        [[1.0, 2.0, 2.0]]
    """
    x = _input(input, "repeat_interleave")
    backend = x._device.backend
    if repeats is None:  # the counts alone: their positions, repeated
        counts = _repeat_counts(x, None)
        pos = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        return wrap(backend.from_numpy(pos), x._device)
    if dim is None:
        x = reshape(x, (-1,))
        d = 0
    else:
        if x.data.ndim == 0:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})"
            )
        d = _norm_dim(dim, x.data.ndim)
    n = x.data.shape[d]
    reps: Any
    if isinstance(repeats, Tensor):
        reps = _repeat_counts(repeats, n)
        if reps.size == 1:
            reps = int(reps.reshape(-1)[0])
    else:
        reps = _int(repeats, "repeat_interleave", "repeats")
        if reps < 0:
            raise RuntimeError(f"repeat_interleave: repeats must be non-negative, got {reps}")
    # the positions on the host (CuPy's repeat takes no array of counts), then moved
    idx = np.repeat(np.arange(n, dtype=np.int64), reps)
    if output_size is not None:
        size = _int(output_size, "repeat_interleave", "output_size")
        if size != idx.size:
            raise RuntimeError(
                f"repeat_interleave: Invalid output_size, expected {idx.size} but got {size}"
            )
    return index_select(x, d, wrap(backend.from_numpy(idx), x._device))


def _repeat_counts(r: Tensor, n: int | None) -> Any:
    """The counts of ``repeat_interleave`` as a numpy integer array (checked as torch)."""
    a = r._device.backend.to_numpy(r.data)
    if a.dtype.kind not in "iu":
        raise RuntimeError(
            f"repeat_interleave: repeats must be an integer tensor, got dtype {a.dtype}"
        )
    if a.ndim > 1 or (n is None and a.ndim != 1):
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if a.size and bool((a < 0).any()):
        raise RuntimeError("repeat_interleave: repeats can not be negative")
    if n is not None and a.size not in (1, n):
        raise RuntimeError(
            "repeats must have the same size as input along dim, but got repeats.size(0) = "
            f"{a.size} and input.size(dim) = {n}"
        )
    return a


# -- flip / roll / rot90: copies that permute the elements --------------------------------
FlipBackward0 = node_class("FlipBackward0", _take_rule, jvp=_take_jvp)
RollBackward0 = node_class("RollBackward0", _take_rule, jvp=_take_jvp)


def _dims(dims: Any, nd: int, fn: str) -> tuple[int, ...]:
    ds = tuple(_norm_dim(d, nd) for d in _ints(dims, fn, "dims"))
    for i, d in enumerate(ds):
        if d in ds[:i]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return ds


def flip(input: Tensor, dims: Any) -> Tensor:
    """Reverse the order of the elements along each dimension in ``dims`` (a copy).

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 2.0], [3.0, 4.0]]).flip((1,)).tolist()
        [[2.0, 1.0], [4.0, 3.0]]
    """
    x = _input(input, "flip")
    ds = _dims(dims, x.data.ndim, "flip")
    xp = x._device.backend.xp
    out = xp.flip(x.data, ds).copy()

    def fwd(a: Any) -> Any:  # a flip is its own inverse
        return xp.flip(a, ds)

    return record_one(FlipBackward0, out, x._device, x, 1, _Positions(xp, out.shape, fwd))


def fliplr(input: Tensor) -> Tensor:
    """Reverse the order of the columns (dimension 1; at least 2-D); a copy.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 2.0]]).fliplr().tolist()
        [[2.0, 1.0]]
    """
    x = _input(input, "fliplr")
    if x.data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(x, (1,))


def flipud(input: Tensor) -> Tensor:
    """Reverse the order of the rows (dimension 0; at least 1-D); a copy.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 2.0]).flipud().tolist()
        [2.0, 1.0]
    """
    x = _input(input, "flipud")
    if x.data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(x, (0,))


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Shift the elements circularly by ``shifts`` along ``dims`` (a copy).

    Without ``dims`` the tensor is rolled as if flattened (one shift).

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 2.0, 3.0]).roll(1).tolist()
        [3.0, 1.0, 2.0]
        >>> ae.arange(4.0).reshape(2, 2).roll((1, 1), (0, 1)).tolist()
        [[3.0, 2.0], [1.0, 0.0]]
    """
    x = _input(input, "roll")
    sh = _ints(shifts, "roll", "shifts")
    ds = () if dims is None else _ints(dims, "roll", "dims")
    xp = x._device.backend.xp
    if not ds:
        if len(sh) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(sh)}, dims:0")
        s = sh[0]
        out = xp.roll(x.data, s)

        def fwd(a: Any) -> Any:  # the inverse: rolled back
            return xp.roll(a, -s)

    else:
        if len(sh) != len(ds):
            raise RuntimeError(
                f"shifts and dimensions must align. shifts: {len(sh)}, dims:{len(ds)}"
            )
        axes = tuple(_norm_dim(d, x.data.ndim) for d in ds)
        out = xp.roll(x.data, sh, axes)
        back = tuple(-s for s in sh)

        def fwd(a: Any) -> Any:
            return xp.roll(a, back, axes)

    return record_one(RollBackward0, out, x._device, x, 1, _Positions(xp, out.shape, fwd))


def rot90(input: Tensor, k: int = 1, dims: Any = (0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first toward the second.

    A copy (``flip`` then ``transpose``, as torch).

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 2.0], [3.0, 4.0]]).rot90().tolist()
        [[2.0, 4.0], [1.0, 3.0]]
    """
    x = _input(input, "rot90")
    ds = _ints(dims, "rot90", "dims")
    k = _int(k, "rot90", "k")
    if len(ds) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(ds)}")
    nd = x.data.ndim
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = _norm_dim(ds[0], nd), _norm_dim(ds[1], nd)
    if d0 == d1:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {ds[0]} and dim1 = {ds[1]}"
        )
    k %= 4
    if k == 1:
        return transpose(flip(x, (d1,)), d0, d1)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return transpose(flip(x, (d0,)), d0, d1)
    return clone(x)


# -- diagonal / diag_embed / diag / tril / triu -----------------------------------------------
DiagonalBackward0 = node_class("DiagonalBackward0", _view_rule, jvp=_view_jvp)
DiagEmbedBackward0 = node_class("DiagEmbedBackward0", _take_rule, jvp=_take_jvp)


def _two_dims(dim1: Any, dim2: Any, nd: int) -> tuple[int, int]:
    a, b = _norm_dim(dim1, nd), _norm_dim(dim2, nd)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return a, b


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the matrices in dimensions ``dim1``, ``dim2`` (a view); last in the result.

    ``offset`` > 0 picks a diagonal above the main one, < 0 below.

    Example::

        >>> import aengine as ae
        >>> ae.arange(9.0).reshape(3, 3).diagonal().tolist()
        [0.0, 4.0, 8.0]
        >>> ae.arange(9.0).reshape(3, 3).diagonal(1).tolist()
        [1.0, 5.0]
    """
    x = _input(input, "diagonal")
    off = _int(offset, "diagonal", "offset")
    a, b = _two_dims(dim1, dim2, x.data.ndim)
    xp = x._device.backend.xp

    def fwd(v: Any) -> Any:
        return xp.diagonal(v, off, a, b)

    return _position_view(x, fwd(x.data), DiagonalBackward0, fwd, False)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices in dimensions ``dim1``, ``dim2`` with the last dimension of ``input`` as diagonal.

    Zeros elsewhere; ``offset`` as in ``diagonal`` (of which this is the
    inverse).  A new tensor.

    Example::

        >>> import aengine as ae
        >>> ae.diag_embed(ae.tensor([1.0, 2.0])).tolist()
        [[1.0, 0.0], [0.0, 2.0]]
    """
    x = _input(input, "diag_embed")
    off = _int(offset, "diag_embed", "offset")
    shape = x.data.shape
    nd = len(shape) + 1
    a, b = _two_dims(dim1, dim2, nd)
    if not shape:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got -1)")
    m = shape[-1] + abs(off)
    rest = iter(shape[:-1])
    out_shape = tuple(m if i in (a, b) else next(rest) for i in range(nd))
    xp = x._device.backend.xp
    p = _Positions(xp, out_shape, lambda v: xp.diagonal(v, off, a, b))
    out = xp.zeros(out_shape, dtype=x.data.dtype)
    out.reshape(-1)[p.get()] = x.data
    return record_one(DiagEmbedBackward0, out, x._device, x, 1, p)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D tensor as a diagonal matrix, or the diagonal of a matrix as a 1-D tensor (a copy).

    ``diagonal`` > 0 is above the main diagonal, < 0 below.

    Example::

        >>> import aengine as ae
        >>> ae.diag(ae.tensor([1.0, 2.0])).tolist()
        [[1.0, 0.0], [0.0, 2.0]]
        >>> ae.diag(ae.arange(4.0).reshape(2, 2)).tolist()
        [0.0, 3.0]
    """
    x = _input(input, "diag")
    k = _int(diagonal, "diag", "diagonal")
    nd = x.data.ndim
    if nd == 1:
        return diag_embed(x, k, 0, 1)
    if nd == 2:
        return clone(_diagonal(x, k))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")


_diagonal = diagonal
TrilBackward0 = node_class(
    "TrilBackward0", lambda F, g, s, n: (F.where(n.attrs, g, 0.0),), jvp=ELEMENTWISE
)
TriuBackward0 = node_class(
    "TriuBackward0", lambda F, g, s, n: (F.where(n.attrs, g, 0.0),), jvp=ELEMENTWISE
)


def _triangle(x: Tensor, k: Any, lower: bool) -> Tensor:
    name = "tril" if lower else "triu"
    k = _int(k, name, "diagonal")
    a = x.data
    if a.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    xp = x._device.backend.xp
    r, c = a.shape[-2:]
    mask = xp.tri(r, c, k, dtype=bool) if lower else ~xp.tri(r, c, k - 1, dtype=bool)
    out = xp.where(mask, a, xp.zeros((), dtype=a.dtype))
    return record_one(TrilBackward0 if lower else TriuBackward0, out, x._device, x, 1, mask)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the matrices in the last two dimensions; zeros above (a copy).

    ``diagonal`` moves the border: > 0 keeps diagonals above the main one.

    Example::

        >>> import aengine as ae
        >>> ae.ones(2, 2).tril().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
    """
    return _triangle(_input(input, "tril"), diagonal, True)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the matrices in the last two dimensions; zeros below (a copy).

    ``diagonal`` moves the border: > 0 drops the main diagonal and more.

    Example::

        >>> import aengine as ae
        >>> ae.ones(2, 2).triu().tolist()
        [[1.0, 1.0], [0.0, 1.0]]
    """
    return _triangle(_input(input, "triu"), diagonal, False)


# -- unfold ------------------------------------------------------------------------------------
UnfoldBackward0 = node_class("UnfoldBackward0", _view_rule, jvp=_view_jvp)


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """The windows of ``size`` elements, ``step`` apart, along ``dimension`` (a view).

    The windows replace ``dimension`` (one entry each); their elements are a
    new last dimension.  torch has it as the method ``Tensor.unfold`` only;
    ``ae.unfold`` is its function form (not ``nn.functional.unfold``).

    Example::

        >>> import aengine as ae
        >>> ae.arange(5.0).unfold(0, 2, 2).tolist()
        [[0.0, 1.0], [2.0, 3.0]]
    """
    x = _input(input, "unfold")
    size = _int(size, "unfold", "size")
    step = _int(step, "unfold", "step")
    shape = x.data.shape
    nd = len(shape)
    d = _norm_dim(dimension, nd)
    n = shape[d] if nd else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    xp = x._device.backend.xp
    windows = (n - size) // step + 1
    new_shape = (*shape[:d], windows, *shape[d + 1 :], size)

    def fwd(v: Any) -> Any:
        if not nd:
            return v.reshape(1)[:size]
        st = v.strides
        strides = (*st[:d], st[d] * step, *st[d + 1 :], st[d])
        return xp.lib.stride_tricks.as_strided(v, new_shape, strides)

    return _position_view(x, fwd(x.data), UnfoldBackward0, fwd, True)


# -- broadcast_tensors / atleast_*d / meshgrid ---------------------------------------------------
def _tensors(tensors: tuple[Any, ...], fn: str) -> list[Tensor]:
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"{fn}(): expected Tensors, but argument {i} is {type(t).__name__}; "
                "convert it with ae.tensor(...)"
            )
    return list(tensors)


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape all of ``shapes`` broadcast to, with torch's error."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, k in enumerate(s, start=nd - len(s)):
            if k != out[i]:
                if out[i] != 1 and k != 1:
                    raise RuntimeError(
                        f"The size of tensor a ({out[i]}) must match the size of tensor b ({k}) "
                        f"at non-singleton dimension {i}"
                    )
                if out[i] == 1:
                    out[i] = k
    return tuple(out)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape (views).

    Example::

        >>> import aengine as ae
        >>> a, b = ae.broadcast_tensors(ae.zeros(3, 1), ae.zeros(2))
        >>> a.shape, b.shape
        ((3, 2), (3, 2))
    """
    ts = _tensors(tensors, "broadcast_tensors")
    shape = _broadcast_shape([t.data.shape for t in ts])
    return tuple(_expand(t, shape) for t in ts)


def _atleast(tensors: tuple[Any, ...], fn: str, make: Callable[[Tensor], Tensor]) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(make(t) for t in _tensors(tuple(tensors[0]), fn))
    ts = _tensors(tensors, fn)
    if len(ts) == 1:
        return make(ts[0])
    return tuple(make(t) for t in ts)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one dimension (a 0-d one becomes shape (1,)); views.

    One tensor gives a tensor; several (or a list) give a tuple.

    Example::

        >>> import aengine as ae
        >>> ae.atleast_1d(ae.tensor(1.0)).shape
        (1,)
    """
    return _atleast(tensors, "atleast_1d", lambda t: reshape(t, (1,)) if t.data.ndim == 0 else t)


def _2d(t: Tensor) -> Tensor:
    nd = t.data.ndim
    return reshape(t, (1, 1)) if nd == 0 else unsqueeze(t, 0) if nd == 1 else t


def _3d(t: Tensor) -> Tensor:
    shape = t.data.shape
    if len(shape) == 0:
        return reshape(t, (1, 1, 1))
    if len(shape) == 1:
        return reshape(t, (1, shape[0], 1))
    if len(shape) == 2:
        return unsqueeze(t, 2)
    return t


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least two dimensions (shape (n,) becomes (1, n)); views.

    One tensor gives a tensor; several (or a list) give a tuple.

    Example::

        >>> import aengine as ae
        >>> ae.atleast_2d(ae.zeros(3)).shape
        (1, 3)
    """
    return _atleast(tensors, "atleast_2d", _2d)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least three dimensions ((n,) -> (1, n, 1), (m, n) -> (m, n, 1)); views.

    One tensor gives a tensor; several (or a list) give a tuple.

    Example::

        >>> import aengine as ae
        >>> ae.atleast_3d(ae.zeros(2, 3)).shape
        (2, 3, 1)
    """
    return _atleast(tensors, "atleast_3d", _3d)


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D tensors: result ``i`` varies along dimension ``i`` (views).

    ``indexing="ij"`` (matrix indexing, the default) or ``"xy"`` (Cartesian:
    the first two dimensions swapped).  Without ``indexing`` torch warns;
    so does this.  The tensors may also come as one list.

    Example::

        >>> import aengine as ae
        >>> gx, gy = ae.meshgrid(ae.tensor([1.0, 2.0]), ae.tensor([3.0, 4.0, 5.0]), indexing="ij")
        >>> gx.shape, gy[0].tolist()
        ((2, 3), [3.0, 4.0, 5.0])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts = _tensors(tensors, "meshgrid")
    if indexing is None:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
            UserWarning,
            stacklevel=2,
        )
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(
            f'meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    if not ts:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in ts:
        if t.data.ndim > 1:
            raise RuntimeError(
                f"meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                f"shape {list(t.data.shape)}"
            )
        if t.data.dtype != ts[0].data.dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.data.size for t in ts)
    nd = len(ts)
    outs = [
        _expand(reshape(t, tuple(-1 if j == i else 1 for j in range(nd))), shape)
        for i, t in enumerate(ts)
    ]
    if swap:
        outs[0], outs[1] = outs[1], outs[0]
    return tuple(outs)


# -- the operator table (NOTE [The operator table]) ------------------------------------------
def _unflatten_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 6), 1, (3, 2)))
    yield Sample((m.arr(2, 6), -1, (2, -1)), note="negative dim, -1 infers a size")
    yield Sample((m.arr(6), 0, [1, 6, 1]), note="sizes as a list")
    yield Sample((m.arr(2, 0), 1, (0, 5)), note="empty")


def _unflatten_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 6)
    yield ErrorCase((x, 1, (4, 2)), match="don't multiply up to the size of dim 1")
    yield ErrorCase((x, 1, (5, -1)), match="don't multiply up to the size of dim 1")
    yield ErrorCase((x, 1, ()), match="sizes must be non-empty")
    yield ErrorCase((x, 1, 6), exc=TypeError, match="must be a tuple of ints")
    yield ErrorCase((x, 2, (2, 3)), exc=IndexError, match="Dimension out of range")


def _swap_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), 0, 2))
    yield Sample((m.arr(2, 3, 4), -1, 1), note="negative dims")
    yield Sample((m.arr(3), 0, 0), note="1-D")


def _swap_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), 0, 2), exc=IndexError, match="Dimension out of range")


def _movedim_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), 0, -1))
    yield Sample((m.arr(2, 3, 4), (0, 1), (2, 0)), note="several dims")
    yield Sample((m.arr(2, 3, 4, 2), [3, -3], [0, 1]), note="lists, negative dims")
    yield Sample((m.arr(), 0, 0), note="0-d")


def _movedim_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3, 4)
    yield ErrorCase((x, (0,), (1, 0)), match="should contain the same number of dims")
    yield ErrorCase((x, (0, 0), (1, 2)), match="repeated dim in `source`")
    yield ErrorCase((x, (0, 1), (2, -1)), match="repeated dim in `destination`")
    yield ErrorCase((x, 3, 0), exc=IndexError, match="Dimension out of range")


def _t_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(3),), note="1-D: as it is")
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 3),), note="empty")


def _t_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 4),), match="expects a tensor with <= 2 dimensions")


def _repeat_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), (2, 1)))
    yield Sample((m.arr(2, 3), 2, 1, 3), note="repeats as arguments, a new leading dim")
    yield Sample((m.arr(3), (0, 2)), note="zero repeats: empty")
    yield Sample((m.arr(), (2, 3)), note="0-d")


def _repeat_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, (2,)), match="can not be smaller than number of dimensions")
    yield ErrorCase((x, (-1, 2)), match="negative dimension")


def _tile_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), (2,)))
    yield Sample((m.arr(2, 3), (2, 1, 2)), note="more dims than the tensor")
    yield Sample((m.arr(), (3,)), note="0-d")


def _tile_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), (2, -1)), match="negative dimension")
    yield ErrorCase((m.arr(2, 3), 2), exc=TypeError, match="must be a tuple of ints")


def _repeat_interleave_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), 2), note="int repeats, flattened")
    yield Sample((m.arr(2, 3), 2, 0))
    yield Sample((m.arr(2, 3), np.array([1, 0, 2]), -1), note="a count per slice")
    yield Sample((m.arr(2, 3), np.array([3]), 0), {"output_size": 6}, note="one count for all")
    yield Sample((m.arr(), 3), note="0-d")
    yield Sample((np.array([1, 2, 0]),), note="the counts alone: their positions")


def _repeat_interleave_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, -1), match="must be non-negative")
    yield ErrorCase((x, np.array([1, -1, 2]), 1), match="can not be negative")
    yield ErrorCase((x, np.array([1, 2]), 1), match="must have the same size as input")
    yield ErrorCase((x, 2, 1), {"output_size": 5}, match="Invalid output_size")
    yield ErrorCase((x, np.array([1.0, 2.0, 0.0]), 1), match="must be an integer tensor",
                    note="torch: NotImplementedError (a RuntimeError)")  # fmt: skip


def _flip_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), (0, 2)))
    yield Sample((m.arr(2, 3), [-1]), note="a list, negative dim")
    yield Sample((m.arr(2, 3), ()), note="no dims: a copy")
    yield Sample((m.arr(), ()), note="0-d")
    yield Sample((m.arr(0, 3), (0, 1)), note="empty")


def _flip_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, (0, -2)), match="appears multiple times")
    yield ErrorCase((x, (2,)), exc=IndexError, match="Dimension out of range")


def _fliplr_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(2, 3, 2),), note="3-D")


def _flipud_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(3),), note="1-D")


def _roll_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), 1), note="flattened")
    yield Sample((m.arr(2, 3), -4), note="flattened, negative shift")
    yield Sample((m.arr(2, 3), (1, 2), (0, 1)))
    yield Sample((m.arr(2, 3, 4), 5, -1), note="a shift longer than the dim")
    yield Sample((m.arr(2, 3), (1, 1), (1, 1)), note="one dim twice")
    yield Sample((m.arr(), 1), note="0-d")


def _roll_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, (1, 2)), match="shifts and dimensions must align")
    yield ErrorCase((x, (1, 2), (0,)), match="shifts and dimensions must align")
    yield ErrorCase((x, 1, 2), exc=IndexError, match="Dimension out of range")


def _rot90_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(2, 3), 2))
    yield Sample((m.arr(2, 3, 4), -1, (2, 0)), note="k < 0, other dims")
    yield Sample((m.arr(2, 3), 3, [1, 0]))
    yield Sample((m.arr(2, 3), 4), note="a full turn: a copy")


def _rot90_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, 1, (0,)), match="total rotation dims == 2")
    yield ErrorCase((m.arr(3), 1), match="total dims >= 2")
    yield ErrorCase((x, 1, (1, 1)), match="rotation dims to be different")
    yield ErrorCase((x, 1, (0, -2)), match="rotation dims to be different")
    yield ErrorCase((x, 1, (0, 2)), exc=IndexError, match="Dimension out of range")


def _diagonal_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(3, 4), 1), note="above")
    yield Sample((m.arr(3, 4), -2), note="below")
    yield Sample((m.arr(2, 3, 4), 0, 0, 2), note="batched, dims 0 and 2")
    yield Sample((m.arr(2, 3, 4), 1, -1, 0), note="dims reversed")
    yield Sample((m.arr(3, 4), 5), note="offset past the matrix: empty")


def _diagonal_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 0, 1, -1), match="cannot be identical")
    yield ErrorCase((m.arr(3),), exc=IndexError, match="Dimension out of range")


def _diag_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3),))
    yield Sample((m.arr(3), 1), note="1-D, above")
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(3, 4), -1), note="2-D, below")


def _diag_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 2, 2),), match="Supports 1D or 2D tensors")


def _diag_embed_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3),))
    yield Sample((m.arr(2, 3), 1), note="batched, above")
    yield Sample((m.arr(2, 3), -1, 0, 2), note="dims 0 and 2")
    yield Sample((m.arr(2, 3), 0, -1, 1), note="dims reversed")


def _diag_embed_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), 0, 0, -2), match="cannot be identical")
    yield ErrorCase((m.arr(2, 3), 0, 0, 3), exc=IndexError, match="Dimension out of range")


def _triangle_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(3, 4), 1))
    yield Sample((m.arr(2, 3, 4), -1), note="batched")
    yield Sample((m.arr(4, 3), 5), note="past the matrix")


def _tril_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), match="tril: input tensor must have at least 2 dimensions")


def _triu_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), match="triu: input tensor must have at least 2 dimensions")


def _unfold_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(5, 3), 0, 2, 1), note="overlapping windows")
    yield Sample((m.arr(2, 7), 1, 3, 2))
    yield Sample((m.arr(2, 7), -1, 2, 3), note="gaps between windows")
    yield Sample((m.arr(2, 4), 1, 4, 1), note="one window")
    yield Sample((m.arr(), 0, 1, 1), note="0-d")


def _unfold_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3)
    yield ErrorCase((x, 1, 4, 1), match="maximum size for tensor at dimension 1 is 3")
    yield ErrorCase((x, 1, 2, 0), match="must be > 0")
    yield ErrorCase((x, 2, 1, 1), exc=IndexError, match="Dimension out of range")


def _broadcast_tensors_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 1), m.arr(2)))
    yield Sample((m.arr(2, 3), m.arr(), m.arr(1, 3)), note="with a 0-d tensor")
    yield Sample((m.arr(2, 2),), note="one tensor")


def _broadcast_tensors_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2), m.arr(3)), match="must match the size of tensor b")


def _atleast_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(),))
    yield Sample((m.arr(3),))
    yield Sample((m.arr(2, 3),))
    yield Sample((m.arr(2, 3, 2),))
    yield Sample((m.arr(), m.arr(3)), note="several: a tuple")
    yield Sample(([m.arr(2, 3), m.arr()],), note="a list: a tuple")


def _meshgrid_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2), m.arr(3)), {"indexing": "ij"})
    yield Sample((m.arr(2), m.arr(3), m.arr(4)), {"indexing": "xy"})
    yield Sample((m.arr(), m.arr(3)), {"indexing": "xy"}, note="a 0-d tensor")
    yield Sample((m.arr(3),), {"indexing": "ij"}, note="one tensor")


def _meshgrid_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2), m.arr(3)), {"indexing": "ji"}, match="indexing must be one of")
    yield ErrorCase((m.arr(2, 2), m.arr(3)), {"indexing": "ij"}, match="Expected 0D or 1D")


register(
    OpInfo("unflatten", unflatten, _unflatten_samples, method=True, dtypes=ALL,
           errors=_unflatten_errors),
    OpInfo("swapaxes", swapaxes, _swap_samples, method=True, dtypes=ALL, errors=_swap_errors),
    OpInfo("swapdims", swapdims, _swap_samples, method=True, dtypes=ALL, errors=_swap_errors),
    OpInfo("movedim", movedim, _movedim_samples, method=True, dtypes=ALL,
           errors=_movedim_errors),
    OpInfo("t", t, _t_samples, method=True, dtypes=ALL, errors=_t_errors),
    OpInfo("repeat", repeat, _repeat_samples, method=True, torch=lambda t: t.Tensor.repeat,
           dtypes=ALL, errors=_repeat_errors,
           notes="torch has the method only; ae.repeat is its function form."),
    OpInfo("tile", tile, _tile_samples, method=True, dtypes=ALL, errors=_tile_errors),
    OpInfo("repeat_interleave", repeat_interleave, _repeat_interleave_samples, method=True,
           dtypes=ALL, errors=_repeat_interleave_errors),
    OpInfo("flip", flip, _flip_samples, method=True, dtypes=ALL, errors=_flip_errors,
           notes="dims may also be one int (torch: a tuple)."),
    OpInfo("fliplr", fliplr, _fliplr_samples, method=True, dtypes=ALL,
           errors=lambda m: [ErrorCase((m.arr(3),), match="Input must be >= 2-d")]),
    OpInfo("flipud", flipud, _flipud_samples, method=True, dtypes=ALL,
           errors=lambda m: [ErrorCase((m.arr(),), match="Input must be >= 1-d")]),
    OpInfo("roll", roll, _roll_samples, method=True, dtypes=ALL, errors=_roll_errors),
    OpInfo("rot90", rot90, _rot90_samples, method=True, dtypes=ALL, errors=_rot90_errors),
    OpInfo("diagonal", diagonal, _diagonal_samples, method=True, dtypes=ALL,
           errors=_diagonal_errors),
    OpInfo("diag", diag, _diag_samples, method=True, dtypes=ALL, errors=_diag_errors),
    OpInfo("diag_embed", diag_embed, _diag_embed_samples, method=True, dtypes=ALL,
           errors=_diag_embed_errors),
    OpInfo("tril", tril, _triangle_samples, method=True, dtypes=ALL, errors=_tril_errors),
    OpInfo("triu", triu, _triangle_samples, method=True, dtypes=ALL, errors=_triu_errors),
    OpInfo("unfold", unfold, _unfold_samples, method=True, torch=lambda t: t.Tensor.unfold,
           dtypes=ALL, errors=_unfold_errors,
           notes="torch has the method only (Tensor.unfold); ae.unfold is its function form, "
           "not nn.functional.unfold. In-place changes through overlapping windows "
           "differ from torch (numpy writes each location once; their backward raises "
           "the overlap error)."),
    OpInfo("broadcast_tensors", broadcast_tensors, _broadcast_tensors_samples, dtypes=ALL,
           errors=_broadcast_tensors_errors),
    OpInfo("atleast_1d", atleast_1d, _atleast_samples, dtypes=ALL),
    OpInfo("atleast_2d", atleast_2d, _atleast_samples, dtypes=ALL),
    OpInfo("atleast_3d", atleast_3d, _atleast_samples, dtypes=ALL),
    OpInfo("meshgrid", meshgrid, _meshgrid_samples, dtypes=ALL, errors=_meshgrid_errors),
)  # fmt: skip

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "unflatten": "dim:dim",
        "swapaxes": "dim:axis0,axis1",
        "swapdims": "dim:dim0,dim1",
        "movedim": "dim:source,destination",
        "t": "custom",
        "flip": "dim:dims",
        "tril": "leading:-1",
        "triu": "leading:-1",
        "diagonal": "dim:dim1=0,dim2=1",
    }
)
