"""ae.nn.functional convolutions (conv1d/2d, conv_transpose1d/2d), unfold and fold.

# NOTE [Convolutions as one trilinear form]
# A convolution ``y = conv(z, w)`` (input ``z``, weight ``w``, output ``y``)
# is the bilinear map behind one trilinear form ``T(z, w, y) = <conv(z, w), y>``.
# Its three "slots" give three linear kernels, each the gradient of the others:
#
# - FORWARD  ``(z, w) -> y``: im2col of ``z`` (a strided view copied once),
#   then one matrix product with ``w`` (per group);
# - INPUT    ``(y, w) -> z``: the transposed convolution; for stride 1 a
#   convolution of ``y`` with the flipped kernel (im2col again), otherwise a
#   product with ``w``'s transpose then col2im (a loop over the k*k kernel
#   positions, each adding a strided slice);
# - WEIGHT   ``(z, y) -> w``: im2col of ``z`` times ``y``, summed over the batch.
#
# ``conv_transpose`` is the INPUT kernel, ``conv`` the FORWARD one.  Each is
# one primitive op (``_conv_prim``) whose rule calls the other two (through
# ``_conv_any``, which records a node when given Tensors, under
# create_graph, and runs the kernel on raw arrays otherwise), so that
# derivatives of every order are convolutions again (a type test rather than
# helpers on ``F``: the kernels stay beside their ops, and the backends'
# ``RawOps`` may import nothing of aengine).  The geometry of the
# form (``_Geom``: sizes of ``z`` and ``y``, kernel, stride, dilation, the
# padding before ``z``, groups) is the same for all three.  unfold (im2col)
# and fold (col2im) are one pair of the same kind: each is the other's
# gradient (``_unfold_prim``).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..tensors._tensor import Tensor
from ._core import GradOps, OpNode, as_tensor_arg, node_class, record, same_device
from ._shape import squeeze, unsqueeze
from ._table import ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "unfold",
    "fold",
]


# -- geometry --------------------------------------------------------------------------------
class _Geom(NamedTuple):
    """The geometry of a convolution ``y = conv(z, w)`` (NOTE [Convolutions as one trilinear form]).

    Sizes are of the spatial dimensions: ``in_size`` of ``z``, ``out_size``
    of ``y``; ``pad_lo`` the zeros before ``z`` in each dimension (the
    padding after it follows from ``out_size``: whatever the last window
    needs, or a crop).
    """

    in_size: tuple[int, ...]
    out_size: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pad_lo: tuple[int, ...]
    groups: int

    @property
    def span(self) -> tuple[int, ...]:
        """The padded extent each spatial dimension's windows cover."""
        return tuple(
            (o - 1) * s + d * (k - 1) + 1
            for o, s, d, k in zip(self.out_size, self.stride, self.dilation, self.kernel)
        )


def out_size(n: int, k: int, s: int, d: int, lo: int, hi: int) -> int:
    """The number of windows of a dilated kernel along a padded dimension (may be <= 0)."""
    return (n + lo + hi - d * (k - 1) - 1) // s + 1


# -- kernels (on backend arrays) ---------------------------------------------------------------
def pad_to(xp: Any, x: Any, lo: Sequence[int], extent: Sequence[int], value: Any = 0) -> Any:
    """``x`` with its trailing dims placed at offsets ``lo`` in arrays of ``extent``.

    Positions outside ``x`` hold ``value``; parts of ``x`` outside the extent
    (a negative ``lo``, or a short extent) are cropped.  A plain crop is a view.
    """
    nd = len(lo)
    sizes = x.shape[x.ndim - nd :]
    dst: list[slice] = []
    src: list[slice] = []
    for lo_i, e, n in zip(lo, extent, sizes):
        a, b = max(lo_i, 0), min(e, lo_i + n)
        b = max(a, b)
        dst.append(slice(a, b))
        src.append(slice(a - lo_i, b - lo_i))
    if all(d.start == 0 and d.stop == e for d, e in zip(dst, extent)):
        return x[(Ellipsis, *src)]  # nothing to fill: a crop (or x itself)
    out = (xp.zeros if value == 0 else xp.empty)(x.shape[: x.ndim - nd] + tuple(extent), x.dtype)
    if value != 0:
        out[...] = value
    if all(d.stop > d.start for d in dst):
        out[(Ellipsis, *dst)] = x[(Ellipsis, *src)]
    return out


def windows(xp: Any, x: Any, geom: _Geom) -> Any:
    """The (read-only) view ``(..., *kernel, *out_size)`` of the windows of ``x``, padded with 0."""
    xpad = pad_to(xp, x, geom.pad_lo, geom.span)
    nd = len(geom.kernel)
    st = xpad.strides
    lead, sp = st[: xpad.ndim - nd], st[xpad.ndim - nd :]
    shape = xpad.shape[: xpad.ndim - nd] + geom.kernel + geom.out_size
    strides = (
        lead
        + tuple(a * d for a, d in zip(sp, geom.dilation))
        + tuple(a * s for a, s in zip(sp, geom.stride))
    )
    return xp.lib.stride_tricks.as_strided(xpad, shape, strides)  # (CuPy: no writeable=)


def im2col(xp: Any, x: Any, geom: _Geom) -> Any:
    """``(N, C, *in) -> (N, C * prod(kernel), prod(out))``: every window as a column."""
    n, c = x.shape[0], x.shape[1]
    cols = xp.ascontiguousarray(windows(xp, x, geom))
    return cols.reshape(n, c * math.prod(geom.kernel), math.prod(geom.out_size))


# NOTE [Columns in chunks of the batch]
# A convolution's columns (im2col) are ``prod(kernel)`` times its input: kept
# whole they would be most of a small network's memory (1.2 MB of columns for
# a 65 KB input in bench/models.py's CNN).  The kernels build them for a few
# images of the batch at a time, into one buffer per call that every chunk
# reuses, of about the larger of the kernel's input and output (at least
# ``_CHUNK_MIN`` and at most ``_CHUNK_MAX`` bytes; one image at the least),
# so the columns hold little more than the arrays the convolution reads and
# writes anyway.  The forward's columns are not kept for the weight's
# gradient (torch saves the input too): the backward builds them again,
# chunk by chunk.  No buffer outlives its call, so nothing is held between
# training steps; and a buffer of at most ``_CHUNK_MAX`` stays below the
# largest size glibc's allocator learns to keep after a free (its dynamic
# mmap threshold), so a large convolution's buffers come from memory the
# process already has instead of fresh pages.
_CHUNK_MIN = 1 << 16
_CHUNK_MAX = 1 << 24


def _chunk_rows(n: int, per_image: int, budget: int) -> int:
    """How many of ``n`` images a chunk takes, ``per_image`` bytes each, within ``budget``."""
    budget = min(max(budget, _CHUNK_MIN), _CHUNK_MAX)
    return max(1, min(n, budget // max(per_image, 1)))


def _column_chunks(xp: Any, x: Any, geom: _Geom, rows: int) -> Iterator[tuple[int, int, Any]]:
    """``(i, j, cols)``: the columns ``(j - i, C * prod(kernel), prod(out))`` of ``x[i:j]``.

    ``rows`` images at a time, every chunk in the same buffer (valid until
    the next is made: NOTE [Columns in chunks of the batch]).  An input that
    is its own columns (a 1x1 kernel, stride 1, no padding) comes whole, as
    a view.
    """
    n, c = x.shape[0], x.shape[1]
    shape = (c * math.prod(geom.kernel), math.prod(geom.out_size))
    u = _small_unfold(x, geom)
    v = None if u is not None else windows(xp, x, geom)
    if v is not None and v.flags.c_contiguous:
        yield 0, n, v.reshape(n, *shape)
        return
    buf = None
    for i in range(0, n, rows):
        j = min(n, i + rows)
        if buf is None:
            buf = xp.empty((j - i, *shape), dtype=x.dtype)
        cols = buf[: j - i]
        if u is not None:
            np.matmul(x[i:j].reshape((j - i) * c, -1), u, out=cols.reshape((j - i) * c, -1))
        else:
            assert v is not None
            xp.copyto(cols.reshape(v[i:j].shape), v[i:j])
        yield i, j, cols


# NOTE [Columns of small images by a product]
# im2col copies a strided view whose innermost runs are one output row: on
# small images (4x4) numpy's copy moves a few elements per inner loop (0.4 ms
# for the columns of 64 x 16 channels of 4x4).  There the columns are one
# product instead: the input's rows (N * C, prod(in)) times the 0/1 matrix
# ``U`` (prod(in), prod(kernel) * prod(out)) whose column (k, p) has a 1 at
# the input position window p reads at kernel offset k (none in the
# padding): im2col of the identity.  Each column sums one input times 1 and
# zeros, so the values are exact (a -0.0 may come out +0.0); an inf or a nan
# would spread through the zeros (0 * inf), so only finite inputs take it.
# Float32/64 numpy inputs of at most ``_SMALL_IN`` positions whose ``U``
# has at most ``_U_MAX`` elements (cached per geometry and dtype).
_SMALL_IN = 36
_U_MAX = 1 << 18
_UNFOLD: dict[tuple[_Geom, Any], Any] = {}


def _unfold_matrix(geom: _Geom, dtype: Any) -> Any:
    """``U`` of NOTE [Columns of small images by a product], (prod(in), prod(kernel)*prod(out))."""
    key = (geom, dtype)
    u = _UNFOLD.get(key)
    if u is None:
        n_in = math.prod(geom.in_size)
        eye = np.eye(n_in, dtype=dtype).reshape((n_in, 1, *geom.in_size))
        u = np.ascontiguousarray(windows(np, eye, geom)).reshape(n_in, -1)
        if len(_UNFOLD) > 64:
            _UNFOLD.clear()
        _UNFOLD[key] = u
    return u


def _small_unfold(x: Any, geom: _Geom) -> Any:
    """``U`` where ``x``'s columns come by a product (NOTE [Columns of small images ...]), or None."""
    n_in = math.prod(geom.in_size)
    if (
        x.__class__ is not np.ndarray
        or n_in > _SMALL_IN
        or math.prod(geom.kernel) == 1
        or x.dtype.type not in (np.float32, np.float64)
        or n_in * math.prod(geom.kernel) * math.prod(geom.out_size) > _U_MAX
        or not np.isfinite(x).all()
    ):
        return None
    return _unfold_matrix(geom, x.dtype)


def col2im(xp: Any, cols: Any, geom: _Geom) -> Any:
    """``(N, C * prod(kernel), prod(out)) -> (N, C, *in)``: columns added back at their windows."""
    n = cols.shape[0]
    c = cols.shape[1] // math.prod(geom.kernel)
    cv = cols.reshape((n, c, *geom.kernel, *geom.out_size))
    ext = tuple(max(sp, lo + i) for sp, lo, i in zip(geom.span, geom.pad_lo, geom.in_size))
    buf = xp.zeros((n, c, *ext), dtype=cols.dtype)
    for pos in itertools.product(*(range(k) for k in geom.kernel)):
        sl = tuple(
            slice(p * d, p * d + (o - 1) * s + 1, s)
            for p, d, o, s in zip(pos, geom.dilation, geom.out_size, geom.stride)
        )
        buf[(Ellipsis, *sl)] += cv[(slice(None), slice(None), *pos)]
    crop = tuple(slice(lo, lo + i) for lo, i in zip(geom.pad_lo, geom.in_size))
    if all(s.start == 0 and s.stop == e for s, e in zip(crop, ext)):
        return buf
    return xp.ascontiguousarray(buf[(Ellipsis, *crop)])


def _k_forward(xp: Any, z: Any, w: Any, geom: _Geom) -> Any:
    """The convolution ``y`` of ``z`` (N, C, *in) with ``w`` (O, C / groups, *kernel)."""
    n, o, g = z.shape[0], w.shape[0], geom.groups
    npos = math.prod(geom.out_size)
    kp = z.shape[1] * math.prod(geom.kernel)
    out_bytes = n * o * npos * z.itemsize
    rows = _chunk_rows(n, kp * npos * z.itemsize, max(z.nbytes, out_bytes))
    if rows >= n:  # one chunk: the product makes the output
        for _, _, cols in _column_chunks(xp, z, geom, rows):
            return _forward_cols(xp, cols, w, geom)
    y = xp.empty((n, o, npos), dtype=xp.result_type(z.dtype, w.dtype))
    w2 = w.reshape(o, -1) if g == 1 else w.reshape(g, o // g, -1)
    for i, j, cols in _column_chunks(xp, z, geom, rows):
        if g == 1:
            xp.matmul(w2, cols, out=y[i:j])
        else:
            out = y[i:j].reshape(j - i, g, o // g, npos)
            xp.matmul(w2, cols.reshape(j - i, g, -1, npos), out=out)
    return y.reshape((n, o, *geom.out_size))


def _forward_cols(xp: Any, cols: Any, w: Any, geom: _Geom) -> Any:
    """The convolution from ``z``'s columns (``im2col``): one product per group."""
    n, npos = cols.shape[0], cols.shape[2]
    o, g = w.shape[0], geom.groups
    if g == 1:
        y = xp.matmul(w.reshape(o, -1), cols)
    else:
        y = xp.matmul(w.reshape(g, o // g, -1), cols.reshape(n, g, -1, npos))
    return y.reshape((n, o, *geom.out_size))


def _flipped(w: Any, groups: int) -> Any:
    """The weight (O, C/g, *k) of a convolution as that of its transpose: (C, O/g, *k), flipped."""
    o, cg = w.shape[0], w.shape[1]
    k = w.shape[2:]
    wt = (
        w.reshape((groups, o // groups, cg, *k))
        .swapaxes(1, 2)
        .reshape((groups * cg, o // groups, *k))
    )
    return wt[(Ellipsis, *(slice(None, None, -1) for _ in k))]


def _k_input(xp: Any, y: Any, w: Any, geom: _Geom) -> Any:
    """The transposed convolution: ``z`` (N, C, *in) from ``y`` (N, O, *out) and ``w``."""
    n, o = y.shape[0], w.shape[0]
    g, cg = geom.groups, w.shape[1]
    if all(s == 1 for s in geom.stride):
        # a convolution of y with the flipped kernel, padded by d * (k - 1) - pad_lo
        flipped = _Geom(
            geom.out_size,
            geom.in_size,
            geom.kernel,
            geom.stride,
            geom.dilation,
            tuple(d * (k - 1) - lo for d, k, lo in zip(geom.dilation, geom.kernel, geom.pad_lo)),
            g,
        )
        return _k_forward(xp, y, _flipped(w, g), flipped)
    npos = math.prod(geom.out_size)
    kp = g * cg * math.prod(geom.kernel)
    in_bytes = n * g * cg * math.prod(geom.in_size) * y.itemsize
    rows = _chunk_rows(n, kp * npos * y.itemsize, max(y.nbytes, in_bytes))
    yy = y.reshape(n, o, npos)
    wt = w.reshape(o, -1).T if g == 1 else w.reshape(g, o // g, -1).swapaxes(1, 2)
    z = None
    for i in range(0, n, rows):  # NOTE [Columns in chunks of the batch]
        j = min(n, i + rows)
        if g == 1:
            cols = xp.matmul(wt, yy[i:j])
        else:
            cols = xp.matmul(wt, yy[i:j].reshape(j - i, g, o // g, npos)).reshape(j - i, kp, npos)
        part = col2im(xp, cols, geom)
        if rows >= n:
            return part
        if z is None:
            z = xp.empty((n, *part.shape[1:]), dtype=part.dtype)
        z[i:j] = part
    if z is None:  # an empty batch
        return xp.zeros((0, g * cg, *geom.in_size), dtype=xp.result_type(y.dtype, w.dtype))
    return z


def _k_weight(xp: Any, z: Any, y: Any, geom: _Geom) -> Any:
    """The gradient of the weight: ``w`` (O, C/g, *kernel) from ``z`` and ``y``, summed over the batch."""
    n, c, o, g = z.shape[0], z.shape[1], y.shape[1], geom.groups
    npos = math.prod(geom.out_size)
    kp = c * math.prod(geom.kernel)
    # per image: its columns and the product (C K, O / g) per group summed afterwards
    per_image = kp * (npos + o // g) * max(z.itemsize, y.itemsize)
    rows = _chunk_rows(n, per_image, max(z.nbytes, y.nbytes))
    yy = y.reshape(n, o, npos)
    gw = None
    for i, j, cols in _column_chunks(xp, z, geom, rows):
        part = _weight_cols(xp, cols, yy[i:j], geom)
        if gw is None:
            gw = part
        else:
            gw += part
    if gw is None:  # an empty batch
        shape = (kp, o) if g == 1 else (g, kp // g, o // g)
        gw = xp.zeros(shape, dtype=xp.result_type(z.dtype, y.dtype))
    gw = gw.T if g == 1 else gw.swapaxes(1, 2)
    return xp.ascontiguousarray(gw).reshape((o, c // g, *geom.kernel))


def _weight_cols(xp: Any, cols: Any, yy: Any, geom: _Geom) -> Any:
    """The weight's gradient from ``z``'s columns and ``yy`` (N, O, prod(out)), summed over
    the batch, transposed: (C K, O), or (g, C K / g, O / g) with groups."""
    n, npos = cols.shape[0], cols.shape[2]
    o, g = yy.shape[1], geom.groups
    # columns times y's transpose, (C K, O) per batch entry: faster in BLAS than y
    # times the columns' transpose (the long dimension is the inner one)
    if g == 1:
        return xp.matmul(cols, yy.swapaxes(1, 2)).sum(axis=0)
    return xp.matmul(
        cols.reshape(n, g, -1, npos), yy.reshape(n, g, o // g, npos).swapaxes(2, 3)
    ).sum(axis=0)


FORWARD, INPUT, WEIGHT = "forward", "input", "weight"
_KERNELS = {FORWARD: _k_forward, INPUT: _k_input, WEIGHT: _k_weight}


# -- the primitive -----------------------------------------------------------------------------
def _conv_any(kind: str, a: Any, b: Any, geom: _Geom, n: OpNode) -> Any:
    """One kernel of the form: a recorded op on Tensors (create_graph), else on raw arrays."""
    if a.__class__ is Tensor or b.__class__ is Tensor:
        return _conv_prim(kind, as_tensor_arg(a, b), as_tensor_arg(b, a), None, geom)
    return _KERNELS[kind](n.dev.backend.xp, a, b, geom)


def _conv_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    kind, geom = n.attrs
    a, b = s
    need = n.needs
    ga = gb = None
    if kind == FORWARD:  # a = z, b = w: y
        if need[0]:
            ga = _conv_any(INPUT, g, b, geom, n)
        if need[1]:
            gb = _conv_any(WEIGHT, a, g, geom, n)
    elif kind == INPUT:  # a = y, b = w: z
        if need[0]:
            ga = _conv_any(FORWARD, g, b, geom, n)
        if need[1]:
            gb = _conv_any(WEIGHT, g, a, geom, n)
    else:  # a = z, b = y: w
        if need[0]:
            ga = _conv_any(INPUT, b, g, geom, n)
        if need[1]:
            gb = _conv_any(FORWARD, a, g, geom, n)
    if len(need) == 2:
        return (ga, gb)
    nd = len(geom.kernel)
    gbias = F.sum(g, (0, *range(2, 2 + nd))) if need[2] else None
    return (ga, gb, gbias)


def _conv_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # bilinear in (a, b), and the bias added: NOTE [JVP rules] in _forward.py
    kind, geom = attrs
    a, b = ins[0], ins[1]
    total = None
    if ts[0] is not None:
        total = _conv_prim(kind, ts[0], b, None, geom)
    if ts[1] is not None:
        r = _conv_prim(kind, a, ts[1], None, geom)
        total = r if total is None else total + r
    if len(ts) == 3 and ts[2] is not None:
        r = ts[2].reshape((1, -1) + (1,) * len(geom.kernel))
        total = r if total is None else total + r
    return total


ConvolutionBackward0 = node_class("ConvolutionBackward0", _conv_rule, jvp=_conv_jvp)
ConvolutionBackwardBackward0 = node_class("ConvolutionBackwardBackward0", _conv_rule, jvp=_conv_jvp)
_CLASSES = {FORWARD: ConvolutionBackward0, INPUT: ConvolutionBackward0}

#: a convolution's backward costs about this many elementwise operations per
#: multiply-add of its product (as matmul's: NOTE [Kernel offload policy])
_MACS_PER_ELEMENT = 16


def _conv_prim(kind: str, a: Tensor, b: Tensor, bias: Tensor | None, geom: _Geom) -> Tensor:
    """Run one kernel of the form on Tensors and record its node (NOTE [Convolutions as ...]).

    The node saves the two operands, not the forward's columns (NOTE
    [Columns in chunks of the batch]).
    """
    dev = same_device(a, b)
    out = _KERNELS[kind](dev.backend.xp, a.data, b.data, geom)
    if bias is not None:
        out += bias.data.reshape((1, -1) + (1,) * len(geom.kernel))
    cls = _CLASSES.get(kind, ConvolutionBackwardBackward0)
    inputs = (a, b) if bias is None else (a, b, bias)
    t = record(cls, out, dev, inputs, (a, b), attrs=(kind, geom))
    node = t._fn
    if node is not None:
        depth = math.prod(geom.kernel) * (a.data.shape[1] if kind == FORWARD else 1)
        node.numel = max(out.size, out.size * depth // _MACS_PER_ELEMENT)
    return t


# -- arguments -----------------------------------------------------------------------------------
def int_tuple(v: Any, nd: int, name: str, what: str) -> tuple[int, ...]:
    """An int or a sequence of 1 or ``nd`` ints as ``nd`` ints (TypeError / RuntimeError otherwise)."""
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, bool) or not (hasattr(v, "__index__") or isinstance(v, (tuple, list))):
        raise TypeError(
            f"{name}(): argument '{what}' must be an int or a tuple of {nd} ints, "
            f"not {type(v).__name__} ({v!r})"
        )
    if hasattr(v, "__index__"):
        return (operator.index(v),) * nd
    vals = list(v)
    if len(vals) == 1:
        vals = vals * nd
    if len(vals) != nd:
        raise RuntimeError(
            f"{name}(): expected {what} to be a single integer value or a list of {nd} values to "
            f"match the convolution dimensions, but got {what}={list(v)}"
        )
    try:
        return tuple(operator.index(e) for e in vals)
    except TypeError:
        raise TypeError(
            f"{name}(): argument '{what}' must be a tuple of ints, got {list(v)!r}"
        ) from None


def _input_tensor(x: Any, name: str, what: str = "input") -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(
        f"{name}(): argument '{what}' must be Tensor, not {type(x).__name__}; "
        "convert it with ae.tensor(...)"
    )


def _batched(x: Tensor, nd: int, name: str) -> tuple[Tensor, bool]:
    """``x`` with a batch dimension (added to an unbatched input), and whether it was added."""
    r = x.data.ndim
    if r == nd + 2:
        return x, False
    if r == nd + 1:
        return unsqueeze(x, 0), True
    raise RuntimeError(
        f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got input of "
        f"size: {list(x.data.shape)}"
    )


def _check_conv_args(
    name: str, x: Tensor, w: Tensor, bias: Tensor | None, groups: Any, transposed: bool
) -> int:
    """Check ranks, channels, groups, dtypes and the bias; return ``groups`` as an int."""
    if w.data.ndim != x.data.ndim:
        raise RuntimeError(
            f"{name}: expected weight to be {x.data.ndim}-D (out_channels, in_channels / groups, "
            f"*kernel_size) for an input of size {list(x.data.shape)}, but got weight of size "
            f"{list(w.data.shape)}"
        )
    if isinstance(groups, bool) or not hasattr(groups, "__index__"):
        raise TypeError(f"{name}(): argument 'groups' must be int, not {type(groups).__name__}")
    g = operator.index(groups)
    if g <= 0:
        raise RuntimeError(f"{name}: non-positive groups is not supported (groups={g})")
    wshape = list(w.data.shape)
    if wshape[0] % g:
        raise RuntimeError(
            f"Given groups={g}, expected weight to be divisible by {g} at dimension 0, but got "
            f"weight of size {wshape} instead; make the weight's first dimension a multiple of "
            "groups"
        )
    cin = x.data.shape[1]
    want = wshape[0] if transposed else wshape[1] * g
    if cin != want:
        kind = "transposed=1, " if transposed else ""
        raise RuntimeError(
            f"Given {kind}groups={g}, weight of size {wshape}, expected input"
            f"{list(x.data.shape)} to have {want} channels, but got {cin} channels instead; "
            "give an input and a weight (and groups) that match"
        )
    if any(k <= 0 for k in wshape[2:]):
        raise RuntimeError(f"{name}: the weight's kernel sizes must be positive, got {wshape}")
    if x.data.dtype != w.data.dtype:
        raise RuntimeError(
            f"{name}: expected input and weight to have the same dtype, but got input "
            f"{x.data.dtype} and weight {w.data.dtype}; convert one with .to(dtype)"
        )
    if bias is not None:
        cout = wshape[1] * g if transposed else wshape[0]
        if bias.data.ndim != 1 or bias.data.shape[0] != cout:
            raise RuntimeError(
                f"Given weight of size {wshape}, expected bias to be 1-dimensional with {cout} "
                f"elements, but got bias of size {list(bias.data.shape)} instead"
            )
        if bias.data.dtype != x.data.dtype:
            raise RuntimeError(
                f"{name}: expected input and bias to have the same dtype, but got input "
                f"{x.data.dtype} and bias {bias.data.dtype}; convert one with .to(dtype)"
            )
    return g


def _positive(vals: tuple[int, ...], name: str, what: str) -> None:
    if any(v <= 0 for v in vals):
        raise RuntimeError(
            f"{name}: non-positive {what} is not supported (got {what}={list(vals)})"
        )


def _operands(
    name: str, nd: int, x: Any, w: Any, bias: Any, stride: Any, dilation: Any, groups: Any,
    transposed: bool,
) -> tuple[Tensor, Tensor | None, Tensor, bool, int, tuple[int, ...], tuple[int, ...]]:  # fmt: skip
    """A convolution's checked operands: weight, bias, the input batched (and whether that
    added the batch dim), groups, stride and dilation."""
    x = _input_tensor(x, name)
    w = _input_tensor(w, name, "weight")
    if bias is not None:
        bias = _input_tensor(bias, name, "bias")
    xb, added = _batched(x, nd, name)
    g = _check_conv_args(name, xb, w, bias, groups, transposed)
    s = int_tuple(stride, nd, name, "stride")
    d = int_tuple(dilation, nd, name, "dilation")
    _positive(s, name, "stride")
    _positive(d, name, "dilation")
    return w, bias, xb, added, g, s, d


def _conv(
    name: str,
    nd: int,
    x: Any,
    w: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: Any,
) -> Tensor:
    w, bias, xb, added, g, s, d = _operands(name, nd, x, w, bias, stride, dilation, groups, False)
    k = tuple(w.data.shape[2:])
    size = tuple(xb.data.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * nd
        elif padding == "same":
            if any(v != 1 for v in s):
                raise RuntimeError(
                    f"{name}: padding='same' is not supported for strided convolutions; pass "
                    "explicit padding or stride=1"
                )
            total = tuple(di * (ki - 1) for di, ki in zip(d, k))
            lo = tuple(t // 2 for t in total)
            hi = tuple(t - t // 2 for t in total)
        else:
            raise RuntimeError(
                f"{name}: Invalid padding string: {padding!r}; use 'valid', 'same' or ints"
            )
    else:
        lo = hi = int_tuple(padding, nd, name, "padding")
        if any(p < 0 for p in lo):
            raise RuntimeError(
                f"{name}: negative padding is not supported (got padding={list(lo)})"
            )
    padded = tuple(n + a + b for n, a, b in zip(size, lo, hi))
    eff = tuple(di * (ki - 1) + 1 for di, ki in zip(d, k))
    if any(p < e for p, e in zip(padded, eff)):
        dims = " x ".join(map(str, padded))
        ks = " x ".join(map(str, eff))
        raise RuntimeError(
            f"{name}: Calculated padded input size per channel: ({dims}). Kernel size: ({ks}). "
            "Kernel size can't be greater than actual input size; pad the input or use a "
            "smaller kernel"
        )
    outs = tuple(
        out_size(n, ki, si, di, a, b) for n, ki, si, di, a, b in zip(size, k, s, d, lo, hi)
    )
    geom = _Geom(size, outs, k, s, d, lo, g)
    out = _conv_prim(FORWARD, xb, w, bias, geom)
    return squeeze(out, 0) if added else out


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution (cross-correlation) of ``input`` (N, C, L) with ``weight`` (O, C/groups, k).

    ``padding`` is an int, a 1-tuple, ``'valid'`` or ``'same'``; an unbatched
    (C, L) input gives an unbatched result.  Differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.conv1d(ae.ones(1, 1, 4), ae.ones(1, 1, 2)).tolist()
        [[[2.0, 2.0, 2.0]]]
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) with ``weight`` (O, C/groups, kH, kW).

    ``stride``, ``padding`` and ``dilation`` are ints or pairs; ``padding``
    may be ``'valid'`` or ``'same'`` (stride 1).  An unbatched (C, H, W) input
    gives an unbatched result.  One im2col and one matrix product per call;
    differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.conv2d(ae.ones(1, 1, 3, 3), ae.ones(1, 1, 2, 2)).tolist()
        [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(
    name: str,
    nd: int,
    x: Any,
    w: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: Any,
    dilation: Any,
) -> Tensor:
    w, bias, xb, added, g, s, d = _operands(name, nd, x, w, bias, stride, dilation, groups, True)
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be an int or a tuple of ints, not str")
    p = int_tuple(padding, nd, name, "padding")
    op = int_tuple(output_padding, nd, name, "output_padding")
    if any(v < 0 for v in p):
        raise RuntimeError(f"{name}: negative padding is not supported (got padding={list(p)})")
    if any(v < 0 or (v >= si and v >= di) for v, si, di in zip(op, s, d)):
        raise RuntimeError(
            f"{name}: output padding must be smaller than either stride or dilation, but got "
            f"output_padding={list(op)}, stride={list(s)}, dilation={list(d)}"
        )
    k = tuple(w.data.shape[2:])
    ysize = tuple(xb.data.shape[2:])
    zsize = tuple(
        (n - 1) * si - 2 * pi + di * (ki - 1) + opi + 1
        for n, si, pi, di, ki, opi in zip(ysize, s, p, d, k, op)
    )
    if any(z <= 0 for z in zsize):
        raise RuntimeError(
            f"{name}: the output size {list(zsize)} is too small (input size {list(ysize)}, "
            f"padding {list(p)}); use less padding"
        )
    geom = _Geom(zsize, ysize, k, s, d, p, g)
    out = _conv_prim(INPUT, xb, w, bias, geom)
    return squeeze(out, 0) if added else out


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """1-D transposed convolution of ``input`` (N, C, L) with ``weight`` (C, O/groups, k).

    The gradient of conv1d with respect to its input; differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.conv_transpose1d(ae.ones(1, 1, 2), ae.ones(1, 1, 2)).tolist()
        [[[1.0, 2.0, 1.0]]]
    """
    return _conv_transpose(
        "conv_transpose1d",
        1,
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """2-D transposed convolution of ``input`` (N, C, H, W) with ``weight`` (C, O/groups, kH, kW).

    The gradient of conv2d with respect to its input ("deconvolution");
    differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.conv_transpose2d(ae.ones(1, 1, 1, 1), ae.ones(1, 1, 2, 2)).shape
        (1, 1, 2, 2)
    """
    return _conv_transpose(
        "conv_transpose2d",
        2,
        input,
        weight,
        bias,
        stride,
        padding,
        output_padding,
        groups,
        dilation,
    )


# -- unfold / fold -----------------------------------------------------------------------------
UNFOLD, FOLD = "unfold", "fold"


def _unfold_any(kind: str, x: Any, geom: _Geom, n: OpNode) -> Any:
    if x.__class__ is Tensor:
        return _unfold_prim(kind, x, geom)
    xp = n.dev.backend.xp
    return im2col(xp, x, geom) if kind == UNFOLD else col2im(xp, x, geom)


def _unfold_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    kind, geom = n.attrs
    return (_unfold_any(FOLD if kind == UNFOLD else UNFOLD, g, geom, n),)


Im2ColBackward0 = node_class(
    "Im2ColBackward0", _unfold_rule, jvp=lambda ts, ins, out, a, s: _unfold_prim(a[0], ts[0], a[1])
)
Col2ImBackward0 = node_class(
    "Col2ImBackward0", _unfold_rule, jvp=lambda ts, ins, out, a, s: _unfold_prim(a[0], ts[0], a[1])
)


def _unfold_prim(kind: str, x: Tensor, geom: _Geom) -> Tensor:
    xp = x._device.backend.xp
    if kind == UNFOLD:
        out, cls = im2col(xp, x.data, geom), Im2ColBackward0
    else:
        out, cls = col2im(xp, x.data, geom), Col2ImBackward0
    return record(cls, out, x._device, (x,), attrs=(kind, geom))


def _sliding_args(
    name: str, kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[tuple[int, ...], ...]:
    k = int_tuple(kernel_size, 2, name, "kernel_size")
    d = int_tuple(dilation, 2, name, "dilation")
    p = int_tuple(padding, 2, name, "padding")
    s = int_tuple(stride, 2, name, "stride")
    _positive(k, name, "kernel_size")
    _positive(d, name, "dilation")
    _positive(s, name, "stride")
    if any(v < 0 for v in p):
        raise RuntimeError(f"{name}: negative padding is not supported (got padding={list(p)})")
    return k, d, p, s


def unfold(
    input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """Extract sliding blocks (im2col): (N, C, H, W) -> (N, C * kH * kW, L).

    ``L`` is the number of blocks; an unbatched (C, H, W) input gives (C * kH * kW, L).
    The gradient is :func:`fold`; differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.unfold(ae.ones(1, 2, 3, 3), 2).shape
        (1, 8, 4)
    """
    x = _input_tensor(input, "unfold")
    if x.data.ndim not in (3, 4):
        raise RuntimeError(
            f"unfold: Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch size "
            f"and non-zero dimensions, but got: {list(x.data.shape)}"
        )
    k, d, p, s = _sliding_args("unfold", kernel_size, dilation, padding, stride)
    added = x.data.ndim == 3
    xb = unsqueeze(x, 0) if added else x
    size = tuple(xb.data.shape[2:])
    outs = tuple(out_size(n, ki, si, di, pi, pi) for n, ki, si, di, pi in zip(size, k, s, d, p))
    if any(o < 1 for o in outs):
        raise RuntimeError(
            f"unfold: Given input with spatial size {size}, kernel_size={k}, dilation={d}, "
            f"padding={p}, calculated shape of the array of sliding blocks as {outs}, but its "
            "components must be at least one; use a smaller kernel or more padding"
        )
    out = _unfold_prim(UNFOLD, xb, _Geom(size, outs, k, s, d, p, 1))
    return squeeze(out, 0) if added else out


def fold(
    input: Tensor,
    output_size: Any,
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """Combine sliding blocks into a tensor (col2im), summing overlaps: (N, C * kH * kW, L) -> (N, C, H, W).

    The gradient of :func:`unfold` (and the other way round); an unbatched
    (C * kH * kW, L) input gives (C, H, W).  Differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.fold(ae.ones(1, 4, 4), (3, 3), 2).tolist()[0][0]
        [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    x = _input_tensor(input, "fold")
    if x.data.ndim not in (2, 3):
        raise RuntimeError(
            f"fold: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size "
            f"and non-zero dimensions for input, but got: {list(x.data.shape)}"
        )
    size = int_tuple(output_size, 2, "fold", "output_size")
    k, d, p, s = _sliding_args("fold", kernel_size, dilation, padding, stride)
    added = x.data.ndim == 2
    xb = unsqueeze(x, 0) if added else x
    kk = math.prod(k)
    if xb.data.shape[1] % kk:
        raise RuntimeError(
            f"fold: Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={xb.data.shape[1]} and kernel_size={k}"
        )
    outs = tuple(out_size(n, ki, si, di, pi, pi) for n, ki, si, di, pi in zip(size, k, s, d, p))
    if any(o < 1 for o in outs) or math.prod(outs) != xb.data.shape[2]:
        raise RuntimeError(
            f"fold: Given output_size={size}, kernel_size={k}, dilation={d}, padding={p}, "
            f"stride={s}, expected size of input's dimension 2 to match the calculated number of "
            f"sliding blocks {' * '.join(map(str, outs))} = {math.prod(outs)}, but got "
            f"input.size(2)={xb.data.shape[2]}"
        )
    out = _unfold_prim(FOLD, xb, _Geom(size, outs, k, s, d, p, 1))
    return squeeze(out, 0) if added else out


# -- the operator table ------------------------------------------------------------------------
def _conv2d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 5, 6), m.arr(4, 3, 3, 3), m.arr(4)))
    yield Sample((m.arr(2, 3, 5, 6), m.arr(4, 3, 3, 2)), {"stride": 2, "padding": 1}, note="stride")
    yield Sample(
        (m.arr(2, 4, 5, 6), m.arr(4, 2, 3, 2), m.arr(4)),
        {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2},
        note="groups, dilation, per-dim stride and padding",
    )
    yield Sample((m.arr(2, 3, 5, 6), m.arr(2, 3, 4, 3)), {"padding": "same", "dilation": 2})
    yield Sample((m.arr(2, 3, 5, 6), m.arr(2, 3, 2, 3)), {"padding": "valid"})
    yield Sample((m.arr(3, 5, 6), m.arr(2, 3, 2, 2), m.arr(2)), {"padding": 3}, note="unbatched")
    yield Sample(
        (m.arr(2, 6, 4, 5), m.arr(6, 1, 3, 3)), {"padding": 1, "groups": 6}, note="depthwise"
    )


def _conv1d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 7), m.arr(4, 3, 3), m.arr(4)))
    yield Sample((m.arr(2, 3, 7), m.arr(4, 3, 3)), {"stride": 2, "padding": 1})
    yield Sample((m.arr(2, 4, 7), m.arr(6, 2, 2), m.arr(6)), {"groups": 2, "dilation": 2})
    yield Sample((m.arr(2, 3, 7), m.arr(2, 3, 3)), {"padding": "same", "dilation": 2})
    yield Sample((m.arr(3, 7), m.arr(2, 3, 3)), note="unbatched")


def _conv_t2d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4, 5), m.arr(3, 4, 3, 3), m.arr(4)))
    yield Sample(
        (m.arr(2, 3, 4, 5), m.arr(3, 2, 3, 2), m.arr(2)),
        {"stride": 2, "padding": 1, "output_padding": 1},
    )
    yield Sample(
        (m.arr(2, 4, 3, 4), m.arr(4, 1, 3, 2)),
        {
            "stride": (2, 3),
            "padding": (1, 0),
            "output_padding": (0, 2),
            "groups": 2,
            "dilation": (1, 2),
        },
        note="groups, dilation, output_padding per dim",
    )
    yield Sample((m.arr(2, 4, 4, 3), m.arr(4, 1, 3, 3)), {"padding": 3, "dilation": 2, "groups": 2})
    yield Sample((m.arr(3, 4, 5), m.arr(3, 2, 2, 2)), {"stride": 2}, note="unbatched")


def _conv_t1d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 5), m.arr(3, 2, 3), m.arr(2)))
    yield Sample((m.arr(2, 3, 5), m.arr(3, 2, 3)), {"stride": 3, "padding": 1, "output_padding": 2})
    yield Sample((m.arr(2, 4, 5), m.arr(4, 1, 2)), {"groups": 2, "dilation": 3, "stride": 2})


def _conv2d_errors(m: Maker) -> Iterator[ErrorCase]:
    w = m.arr(4, 3, 3, 3)
    yield ErrorCase((m.arr(3, 5), w), match="Expected 3D")
    yield ErrorCase((m.arr(2, 5, 5, 6), w), match="to have 3 channels")
    yield ErrorCase((m.arr(2, 3, 5, 6), m.arr(4, 1, 3, 3)), {"groups": 2}, match="channels")
    yield ErrorCase((m.arr(2, 4, 5, 6), m.arr(3, 2, 3, 3)), {"groups": 2}, match="divisible by 2")
    yield ErrorCase((m.arr(2, 3, 5, 6), w), {"padding": "full"}, match="Invalid padding string")
    yield ErrorCase((m.arr(2, 3, 5, 6), w), {"padding": "same", "stride": 2}, match="same")
    yield ErrorCase((m.arr(2, 3, 2, 2), w), match="Kernel size can't be greater")
    yield ErrorCase((m.arr(2, 3, 5, 6), w), {"stride": 0}, match="stride")
    yield ErrorCase((m.arr(2, 3, 5, 6), w, m.arr(3)), match="bias")


def _conv1d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 5, 6), m.arr(4, 3, 3)), match="Expected 2D")
    yield ErrorCase((m.arr(2, 3, 2), m.arr(4, 3, 3)), match="Kernel size")
    yield ErrorCase((m.arr(2, 3, 5), m.arr(6, 3, 3)), {"groups": 3}, match="channels")


def _conv_t_errors(m: Maker) -> Iterator[ErrorCase]:
    w = m.arr(3, 4, 3, 3)
    yield ErrorCase((m.arr(3, 5), w), match="Expected 3D")
    yield ErrorCase((m.arr(2, 4, 5, 6), w), match="to have 3 channels")
    yield ErrorCase((m.arr(2, 3, 5, 6), m.arr(3, 2, 3, 3)), {"groups": 2}, match="divisible by 2")
    yield ErrorCase(
        (m.arr(2, 3, 5, 6), w), {"stride": 2, "output_padding": 2}, match="output padding"
    )
    yield ErrorCase(
        (m.arr(2, 3, 5, 6), w),
        {"padding": "same"},
        exc=TypeError,
        match="padding",
    )


def _unfold_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 5, 6), (2, 3)), {"dilation": (1, 2), "padding": 1, "stride": (2, 1)})
    yield Sample((m.arr(2, 3, 4, 5), 2))
    yield Sample((m.arr(3, 4, 5), 3), {"padding": 1, "stride": 2}, note="unbatched")


def _fold_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(
        (m.arr(2, 12, 18), (5, 6), 2), {"dilation": (1, 2), "padding": 1, "stride": (2, 1)}
    )
    yield Sample((m.arr(2, 8, 12), (4, 5), 2), note="overlapping blocks")
    yield Sample((m.arr(27, 6), (4, 5), 3), {"padding": 1, "stride": 2}, note="unbatched")


def _unfold_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(1, 2, 3, 4, 5), 2), match="Expected 3D or 4D")
    yield ErrorCase((m.arr(2, 3, 5, 6), 7), match="sliding blocks")


def _fold_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(1, 2, 3, 4), (3, 3), 2), match="Expected 2D or 3D")
    yield ErrorCase((m.arr(2, 5, 9), (4, 4), 2), match="divisible by the product")
    yield ErrorCase((m.arr(2, 8, 5), (4, 4), 2), match="number of\\s+sliding blocks")


_CONV_TOL = {"float32": (1e-4, 1e-4)}

register(
    OpInfo(
        "nn.functional.conv1d",
        conv1d,
        _conv1d_samples,
        errors=_conv1d_errors,
        tol=_CONV_TOL,
    ),
    OpInfo(
        "nn.functional.conv2d",
        conv2d,
        _conv2d_samples,
        errors=_conv2d_errors,
        tol=_CONV_TOL,
    ),
    OpInfo(
        "nn.functional.conv_transpose1d",
        conv_transpose1d,
        _conv_t1d_samples,
        tol=_CONV_TOL,
    ),
    OpInfo(
        "nn.functional.conv_transpose2d",
        conv_transpose2d,
        _conv_t2d_samples,
        errors=_conv_t_errors,
        tol=_CONV_TOL,
    ),
    OpInfo("nn.functional.unfold", unfold, _unfold_samples, errors=_unfold_errors),
    OpInfo("nn.functional.fold", fold, _fold_samples, errors=_fold_errors),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "nn.functional.conv2d": "custom",
        "nn.functional.conv1d": "leading:2",
        "nn.functional.conv_transpose1d": "leading:2",
        "nn.functional.conv_transpose2d": "leading:3",
        "nn.functional.unfold": "leading:3",
        "nn.functional.fold": "leading:2",
    }
)
