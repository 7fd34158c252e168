"""ae.nn.functional pooling (max, avg, adaptive), padding and interpolation.

The kernels work on the trailing (spatial) dimensions whatever comes before
them, so unbatched inputs need nothing special.  Max pooling records the
flat position of each window's maximum: its gradient scatters there (and
that scatter's gradient gathers); average pooling is a sum over windows
whose gradient is the transposed sum (and the other way round); adaptive
average pooling is a product with an averaging matrix per dimension.  The
non-constant paddings and nearest interpolation pick elements by index
(their gradients add back at those indices), bilinear interpolation mixes
two picks per dimension.

# NOTE [Gradients that depend on the input with a zero derivative]
# PyTorch's backward of max and average pooling and of reflection and
# replication padding takes the input as an argument, so under
# create_graph its first derivative is "connected" to the input (with a zero
# second derivative) even where it does not depend on it: the result
# requires grad, and a gradient through it is zeros rather than None.
# ``tie`` reproduces that where PyTorch does it, only when a graph is
# being built (NOTE [Gradients tied to an input] in _core.py).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..tensors._tensor import Tensor
from ._conv import _Geom, int_tuple, pad_to
from ._core import TENSOR_OPS, GradOps, as_tensor_arg, node_class, record, tie
from ._cpu_kernels import where_zero
from ._index import gather, getitem, index_select
from ._shape import reshape as F_reshape
from ._table import ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "interpolate",
    "pad",
]


def _tensor(x: Any, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    raise TypeError(
        f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}; "
        "convert it with ae.tensor(...)"
    )


def _lowest(xp: Any, dtype: Any) -> Any:
    return -xp.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def _flat_positions(xp: Any, coords: list[Any], sizes: tuple[int, ...]) -> Any:
    """Flat positions in a plane of ``sizes`` from per-dimension coordinates (broadcast)."""
    flat: Any = 0
    for c, n in zip(coords, sizes):
        flat = flat * n + c
    return flat


def _grid(xp: Any, vecs: list[Any]) -> list[Any]:
    """1-D arrays as open grids: the i-th varies along axis i of len(vecs) axes."""
    nd = len(vecs)
    return [v.reshape((1,) * i + (-1,) + (1,) * (nd - 1 - i)) for i, v in enumerate(vecs)]


# -- max pooling ---------------------------------------------------------------------------------
def _scatter_rows(xp: Any, pos: Any, g: Any, m: int, pin: int) -> Any:
    """Zeros (m, pin) with each row of ``g`` added at that row's flat positions ``pos``.

    One ``bincount`` over global positions (a plain backward's scatter:
    much faster than ``add.at``); it sums in float64.
    """
    glob = pos + (xp.arange(m, dtype=xp.int64) * pin).reshape(-1, 1)
    out = xp.bincount(glob.reshape(-1), weights=g.reshape(-1), minlength=m * pin)
    return out.astype(g.dtype, copy=False).reshape(m, pin)


def _max_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (x,) = s
    pos, shape, tiles = n.attrs  # pos: (M, P_out) flat positions; shape: the input's
    xp = n.dev.backend.xp
    if g.__class__ is not Tensor and tiles is not None:
        return (_tile_grad(xp, tiles, g, shape),)
    if pos is None:
        pos = _tile_positions(xp, tiles, shape)
    m, pout = pos.shape
    pin = math.prod(shape) // m if m else 0
    if g.__class__ is not Tensor:
        return (_scatter_rows(xp, pos, g, m, pin).reshape(shape),)
    gx = F.scatter_add((m, pin), 1, pos, F.reshape(g, (m, pout)))
    return (tie(F.reshape(gx, shape), x),)


def _max_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # the tangent at each window's chosen position (the rule's positions, per row)
    pos, shape, tiles = attrs
    if pos is None:
        pos = _tile_positions(out._device.backend.xp, tiles, shape)
    m = pos.shape[0]
    rows = F_reshape(ts[0], (m, math.prod(shape) // m if m else 0))
    return F_reshape(gather(rows, 1, Tensor._make(pos, False, out._device)), out.data.shape)


MaxPool1DWithIndicesBackward0 = node_class("MaxPool1DWithIndicesBackward0", _max_rule, jvp=_max_jvp)
MaxPool2DWithIndicesBackward0 = node_class("MaxPool2DWithIndicesBackward0", _max_rule, jvp=_max_jvp)
AdaptiveMaxPool1DBackward0 = node_class("AdaptiveMaxPool1DBackward0", _max_rule, jvp=_max_jvp)
AdaptiveMaxPool2DBackward0 = node_class("AdaptiveMaxPool2DBackward0", _max_rule, jvp=_max_jvp)


def _max_record(
    cls: Any, x: Tensor, vals: Any, pos: Any, nd: int, return_indices: bool, tiles: Any = None
) -> Any:
    """The values as a Tensor recording ``cls`` (and the int64 indices where asked).

    ``tiles`` (``(local, kernel)`` of ``_tile_max``) stands for the positions
    ``pos`` (None then) of non-overlapping windows; they are made from it
    where needed.
    """
    xd = x.data
    if pos is None and return_indices:
        pos = _tile_positions(x._device.backend.xp, tiles, xd.shape)
    lead = xd.shape[: xd.ndim - nd]
    m = math.prod(lead)
    if pos is not None:
        pos = pos.reshape(m, -1) if m else pos.reshape(0, math.prod(vals.shape[xd.ndim - nd :]))
    out = record(cls, vals, x._device, (x,), (x,), attrs=(pos, xd.shape, tiles))
    if not return_indices:
        return out
    return out, Tensor._make(pos.reshape(vals.shape), False, x._device)


# NOTE [Max pooling over tiles]
# Windows that tile the input (stride == kernel, no padding or dilation, the
# input a whole number of windows: max_pool2d(x, 2) of even sizes) are views
# of the input reshaped to (..., out_1, k_1, out_2, k_2): each position of
# the window is a strided view of out's shape.  The forward keeps a running
# maximum over them and the window-local index of the winner (a small int
# array: the flat positions are made only for return_indices or a
# create_graph backward); the plain backward writes each position's view of
# the gradient as ``where(local == j, g, 0)`` (no scatter: every element is
# written once).  The same values and winners as ``_running_max``: a value
# replaces the best when greater or NaN.
def _tile_views(a: Any, kernel: tuple[int, ...]) -> list[Any]:
    """The views of ``a`` (..., out_1 * k_1, ...) at each position of its windows, row-major."""
    nd = len(kernel)
    lead = a.shape[: a.ndim - nd]
    outs = [n // k for n, k in zip(a.shape[a.ndim - nd :], kernel)]
    t = a.reshape(lead + tuple(v for o, k in zip(outs, kernel) for v in (o, k)))
    return [
        t[(Ellipsis, *(v for q in pos for v in (slice(None), q)))]
        for pos in itertools.product(*(range(k) for k in kernel))
    ]


def _tile_max(xp: Any, xd: Any, kernel: tuple[int, ...]) -> tuple[Any, Any]:
    """The maximum of each tile of ``xd`` and its index in the tile (NOTE [Max pooling over tiles])."""
    views = _tile_views(xd, kernel)
    best = views[0].copy()
    itype = xp.int8 if len(views) <= 127 else xp.int32
    local = xp.zeros(best.shape, itype)
    for j, v in enumerate(views[1:], 1):
        upd = v > best
        upd |= xp.isnan(v)
        xp.maximum(v, best, out=best)  # (the second, best, on ties: -0.0 stays first)
        # local = where(upd, j, local), branch-free (numpy's where mispredicts on random data)
        step = xp.subtract(j, local, dtype=itype)
        step *= upd
        local += step
    return best, local


def _tile_positions(xp: Any, tiles: Any, shape: tuple[int, ...]) -> Any:
    """The flat positions in each plane (as ``pos``) of the tiles' window-local winners."""
    local, kernel = tiles
    nd = len(kernel)
    size = shape[len(shape) - nd :]
    outs = local.shape[local.ndim - nd :]
    starts = [xp.arange(o, dtype=xp.int64) * k for o, k in zip(outs, kernel)]
    offsets = [xp.arange(k, dtype=xp.int64) for k in kernel]
    start = _flat_positions(xp, _grid(xp, starts), size)
    offset = _flat_positions(xp, _grid(xp, offsets), size).reshape(-1)
    return start + xp.take(offset, local)


def _tile_grad(xp: Any, tiles: Any, g: Any, shape: tuple[int, ...]) -> Any:
    """The plain backward over tiles: ``g`` at each window's winner, 0 elsewhere."""
    local, kernel = tiles
    gx = xp.empty(shape, g.dtype)
    for j, view in enumerate(_tile_views(gx, kernel)):
        mask = local == j
        r = where_zero(mask, g)  # (NOTE [A branch-free masked gradient])
        view[...] = r if r is not None else xp.where(mask, g, 0)
    return gx


def _running_max(xp: Any, shape: tuple[int, ...], dtype: Any, first: Any, picks: Any) -> Any:
    """The maximum and its flat position over ``picks`` (value, position, valid) in order.

    As PyTorch's kernels: a value replaces the best when greater or NaN (so
    the last NaN wins); ``first`` is the position kept when none does (a
    window of -inf).
    """
    best = xp.full(shape, _lowest(xp, dtype), dtype=dtype)
    arg = xp.broadcast_to(xp.asarray(first, dtype=xp.int64), shape).copy()
    floating = np.dtype(dtype).kind == "f"
    for v, where_, valid in picks:
        upd = (v > best) | xp.isnan(v) if floating else v > best
        if valid is not None:
            upd &= valid
        best = xp.where(upd, v, best)
        arg = xp.where(upd, where_, arg)
    return best, arg


def _pool_geom(
    name: str,
    nd: int,
    x: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
) -> _Geom:
    k = int_tuple(kernel_size, nd, name, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else None
    s = s or int_tuple(stride, nd, name, "stride")
    p = int_tuple(padding, nd, name, "padding")
    d = int_tuple(dilation, nd, name, "dilation")
    for vals, what in ((k, "kernel_size"), (s, "stride"), (d, "dilation")):
        if any(v <= 0 for v in vals):
            raise RuntimeError(
                f"{name}: {what} should be greater than zero, but got {what}={list(vals)}"
            )
    for pi, ki, di in zip(p, k, d):
        if pi < 0 or pi > ((ki - 1) * di + 1) // 2:
            raise RuntimeError(
                f"{name}: pad should be at most half of effective kernel size, but got pad={pi}, "
                f"kernel_size={ki} and dilation={di}; use less padding"
            )
    size = tuple(x.data.shape[x.data.ndim - nd :])
    outs = tuple(
        _pool_out(n, ki, pi, si, di, bool(ceil_mode)) for n, ki, pi, si, di in zip(size, k, p, s, d)
    )
    if any(o < 1 for o in outs):
        lead = x.data.shape[x.data.ndim - nd - 1] if x.data.ndim > nd else 1
        raise RuntimeError(
            f"{name}: Given input size: ({'x'.join(map(str, (lead, *size)))}). Calculated output "
            f"size: ({'x'.join(map(str, (lead, *outs)))}). Output size is too small; use a "
            "smaller kernel or more padding"
        )
    return _Geom(size, outs, k, s, d, p, 1)


def _pool_out(n: int, k: int, p: int, s: int, d: int, ceil: bool) -> int:
    """PyTorch's pooling_output_shape."""
    o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= n + p:
        o -= 1
    return o


def _check_rank(x: Tensor, nd: int, name: str) -> None:
    r = x.data.ndim
    if r not in (nd + 1, nd + 2) or any(v == 0 for v in x.data.shape[r - nd - 1 :]):
        raise RuntimeError(
            f"{name}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with optional 0 dim batch "
            f"size for input, but got: {list(x.data.shape)}"
        )


def _max_pool(
    name: str,
    nd: int,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    return_indices: bool,
) -> Any:
    x = _tensor(input, name)
    _check_rank(x, nd, name)
    geom = _pool_geom(name, nd, x, kernel_size, stride, padding, dilation, ceil_mode)
    xp = x._device.backend.xp
    xd = x.data
    cls = MaxPool1DWithIndicesBackward0 if nd == 1 else MaxPool2DWithIndicesBackward0
    if (
        geom.stride == geom.kernel
        and not any(geom.pad_lo)
        and all(d == 1 for d in geom.dilation)
        and all(o * k == n for o, k, n in zip(geom.out_size, geom.kernel, geom.in_size))
        and xd.dtype.kind == "f"
    ):  # windows that tile the input (NOTE [Max pooling over tiles])
        vals, local = _tile_max(xp, xd, geom.kernel)
        return _max_record(cls, x, vals, None, nd, return_indices, (local, geom.kernel))
    xpad = pad_to(xp, xd, geom.pad_lo, geom.span, _lowest(xp, xd.dtype))
    lead = xd.shape[: xd.ndim - nd]
    base = [
        xp.arange(o, dtype=xp.int64) * s - p
        for o, s, p in zip(geom.out_size, geom.stride, geom.pad_lo)
    ]
    # the first position inside the input of each window (PyTorch's start of the scan)
    first = [
        b + (-b).clip(0) // d * d + ((-b).clip(0) % d > 0) * d for b, d in zip(base, geom.dilation)
    ]
    first_flat = _flat_positions(xp, _grid(xp, first), geom.in_size)

    def picks() -> Iterator[tuple[Any, Any, None]]:
        for pos in itertools.product(*(range(k) for k in geom.kernel)):
            sl = tuple(
                slice(q * d, q * d + (o - 1) * s + 1, s)
                for q, d, o, s in zip(pos, geom.dilation, geom.out_size, geom.stride)
            )
            coords = [b + q * d for b, q, d in zip(base, pos, geom.dilation)]
            yield xpad[(Ellipsis, *sl)], _flat_positions(xp, _grid(xp, coords), geom.in_size), None

    vals, arg = _running_max(xp, lead + geom.out_size, xd.dtype, first_flat, picks())
    return _max_record(cls, x, vals, arg, nd, return_indices)


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """1-D max pooling over (N, C, L) or (C, L); with ``return_indices`` also the argmax positions.

    ``stride`` defaults to ``kernel_size``; padding counts as -inf.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.max_pool1d(ae.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    return _max_pool(
        "max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """2-D max pooling over (N, C, H, W) or (C, H, W); with ``return_indices`` also the argmax positions.

    ``stride`` defaults to ``kernel_size``; the indices are flat positions in
    each (H, W) plane, as PyTorch's.  Its gradient scatters to the argmax,
    whose gradient gathers: differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> x = ae.arange(16.0).reshape(1, 1, 4, 4)
        >>> ae.nn.functional.max_pool2d(x, 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool(
        "max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices
    )


# -- average pooling ----------------------------------------------------------------------------
def _winsum(xp: Any, x: Any, geom: _Geom) -> Any:
    """The sum of each window (kernel, stride, padding with zeros) over the trailing dims."""
    xpad = pad_to(xp, x, geom.pad_lo, geom.span)
    acc = None
    for pos in itertools.product(*(range(k) for k in geom.kernel)):
        sl = tuple(
            slice(q, q + (o - 1) * s + 1, s) for q, o, s in zip(pos, geom.out_size, geom.stride)
        )
        v = xpad[(Ellipsis, *sl)]
        if acc is None:
            acc = v.copy()
        else:
            acc += v
    return acc


def _winsum_t(xp: Any, g: Any, geom: _Geom) -> Any:
    """The transpose of ``_winsum``: each window's value added back over the window."""
    nd = len(geom.kernel)
    lead = g.shape[: g.ndim - nd]
    ext = tuple(max(sp, lo + n) for sp, lo, n in zip(geom.span, geom.pad_lo, geom.in_size))
    buf = xp.zeros(lead + ext, dtype=g.dtype)
    for pos in itertools.product(*(range(k) for k in geom.kernel)):
        sl = tuple(
            slice(q, q + (o - 1) * s + 1, s) for q, o, s in zip(pos, geom.out_size, geom.stride)
        )
        buf[(Ellipsis, *sl)] += g
    crop = tuple(slice(lo, lo + n) for lo, n in zip(geom.pad_lo, geom.in_size))
    return xp.ascontiguousarray(buf[(Ellipsis, *crop)])


AVG, AVG_T = "avg", "avg_t"


def _avg_any(kind: str, x: Any, geom: _Geom, div: Any, n: Any) -> Any:
    if x.__class__ is Tensor:
        return _avg_prim(kind, x, geom, div)
    xp = n.dev.backend.xp
    return _winsum(xp, x, geom) / div if kind == AVG else _winsum_t(xp, x / div, geom)


def _avg_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    kind, geom, div = n.attrs
    if kind == AVG:
        (x,) = s
        return (tie(_avg_any(AVG_T, g, geom, div, n), x),)
    return (_avg_any(AVG, g, geom, div, n),)


def _avg_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    kind, geom, div = attrs  # linear: the same kernel on the tangent
    return _avg_prim(kind, ts[0], geom, div)


AvgPool2DBackward0 = node_class("AvgPool2DBackward0", _avg_rule, jvp=_avg_jvp)
AvgPool2DBackwardBackward0 = node_class("AvgPool2DBackwardBackward0", _avg_rule, jvp=_avg_jvp)


def _avg_prim(kind: str, x: Tensor, geom: _Geom, div: Any) -> Tensor:
    xp = x._device.backend.xp
    if kind == AVG:
        out = _winsum(xp, x.data, geom) / div
        return record(AvgPool2DBackward0, out, x._device, (x,), (x,), attrs=(kind, geom, div))
    out = _winsum_t(xp, x.data / div, geom)
    return record(AvgPool2DBackwardBackward0, out, x._device, (x,), attrs=(kind, geom, div))


def _divisors(
    xp: Any, geom: _Geom, count_include_pad: bool, divisor_override: Any, dtype: Any
) -> Any:
    """The divisor of each window (PyTorch's avg_pool: clipped to the padded or the real input)."""
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not hasattr(divisor_override, "__index__"):
            raise TypeError(
                f"avg_pool2d(): argument 'divisor_override' must be int, not "
                f"{type(divisor_override).__name__}"
            )
        if operator.index(divisor_override) == 0:
            raise RuntimeError("avg_pool2d: divisor must be not zero; pass None for the default")
        return np.dtype(dtype).type(operator.index(divisor_override))
    counts = []
    for n, o, k, s, p in zip(geom.in_size, geom.out_size, geom.kernel, geom.stride, geom.pad_lo):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if count_include_pad:
            cnt = end - start
        else:
            cnt = np.minimum(end, n) - np.maximum(start, 0)
        counts.append(cnt)
    div = counts[0].astype(dtype)
    for c in counts[1:]:
        div = np.multiply.outer(div, c.astype(dtype))
    return xp.asarray(div)


def _avg_pool(
    name: str,
    nd: int,
    input: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> Tensor:
    x = _tensor(input, name)
    _check_rank(x, nd, name)
    geom = _pool_geom(name, nd, x, kernel_size, stride, padding, 1, ceil_mode)
    xp = x._device.backend.xp
    dtype = x.data.dtype if x.data.dtype.kind == "f" else np.dtype("float64")
    div = _divisors(xp, geom, bool(count_include_pad), divisor_override, dtype)
    return _avg_prim(AVG, x, geom, div)


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """1-D average pooling over (N, C, L) or (C, L).

    ``count_include_pad``: padded zeros count in the divisor.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.avg_pool1d(ae.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[2.0, 1.0]]]
    """
    return _avg_pool(
        "avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None
    )


def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """2-D average pooling over (N, C, H, W) or (C, H, W).

    ``count_include_pad``: padded zeros count in the divisor;
    ``divisor_override``: divide every window by this instead.  Its
    gradient is the transposed window sum: differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.avg_pool2d(ae.ones(1, 1, 4, 4), 2).tolist()
        [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    return _avg_pool(
        "avg_pool2d",
        2,
        input,
        kernel_size,
        stride,
        padding,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


# -- adaptive pooling ---------------------------------------------------------------------------
def _adaptive_sizes(name: str, nd: int, x: Tensor, output_size: Any) -> tuple[int, ...]:
    r = x.data.ndim
    if r not in (nd + 1, nd + 2):
        raise RuntimeError(
            f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got {list(x.data.shape)}"
        )
    size = tuple(x.data.shape[r - nd :])
    if isinstance(output_size, (list, tuple)):
        vals = list(output_size)
        if len(vals) == 1:
            vals = vals * nd
        if len(vals) != nd:
            raise RuntimeError(f"{name}(): output_size must be {nd} ints, got {output_size!r}")
        outs = tuple(
            n if v is None else int_tuple(v, 1, name, "output_size")[0] for v, n in zip(vals, size)
        )
    else:
        outs = int_tuple(output_size, nd, name, "output_size")
    if any(o < 0 for o in outs):
        raise RuntimeError(
            f"{name}(): elements of output_size must be non-negative, got {list(outs)}"
        )
    if any(n == 0 for n in size):
        raise RuntimeError(
            f"{name}(): the spatial sizes of the input must be positive, got {list(size)}"
        )
    return outs


def _bounds(n: int, o: int) -> tuple[Any, Any]:
    """The windows of adaptive pooling: [floor(i * n / o), ceil((i + 1) * n / o))."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def _avg_matrix(xp: Any, n: int, o: int, dtype: Any) -> Any:
    start, end = _bounds(n, o)
    a = np.zeros((o, n), dtype=dtype)
    for i, (s, e) in enumerate(zip(start, end)):
        a[i, s:e] = 1.0 / (e - s)
    return xp.asarray(a)


def _apply_mats(F: Any, x: Any, mats: tuple[Any, ...], transpose: bool) -> Any:
    """Multiply each trailing dim of ``x`` by its matrix (``F``: a matmul and the arrays' .T)."""
    nd = len(mats)
    for i, a in enumerate(mats):
        if nd - i == 1:  # the last dim: x @ a.T (or x @ a)
            x = F.matmul(x, a if transpose else a.T)
        else:  # the one before it: a @ x (or a.T @ x)
            x = F.matmul(a.T if transpose else a, x)
    return x


def _adaptive_avg_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (x,) = s
    return (tie(_apply_mats(F, g, n.attrs, True), x),)


def _adaptive_avg_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    return _apply_mats(TENSOR_OPS, ts[0], attrs, False)  # linear: the same products


AdaptiveAvgPool1DBackward0 = node_class(
    "AdaptiveAvgPool1DBackward0", _adaptive_avg_rule, jvp=_adaptive_avg_jvp
)
AdaptiveAvgPool2DBackward0 = node_class(
    "AdaptiveAvgPool2DBackward0", _adaptive_avg_rule, jvp=_adaptive_avg_jvp
)


def _adaptive_avg(name: str, nd: int, input: Any, output_size: Any) -> Tensor:
    x = _tensor(input, name)
    outs = _adaptive_sizes(name, nd, x, output_size)
    xp = x._device.backend.xp
    xd = x.data
    if xd.dtype.kind != "f":
        raise RuntimeError(f"{name}(): expected a floating point input, got {xd.dtype}")
    size = xd.shape[xd.ndim - nd :]
    mats = tuple(_avg_matrix(xp, n, o, xd.dtype) for n, o in zip(size, outs))
    out = _apply_mats(xp, xd, mats, False)
    cls = AdaptiveAvgPool1DBackward0 if nd == 1 else AdaptiveAvgPool2DBackward0
    return record(cls, xp.ascontiguousarray(out), x._device, (x,), (x,), attrs=mats)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """1-D adaptive average pooling of (N, C, L) or (C, L) to ``output_size`` positions.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.adaptive_avg_pool1d(ae.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[2.0, 1.0]]]
    """
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """2-D adaptive average pooling of (N, C, H, W) or (C, H, W) to ``output_size`` (an int or a pair; None keeps a size).

    Window ``i`` covers ``[floor(i * H / out), ceil((i + 1) * H / out))``, as PyTorch's.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.adaptive_avg_pool2d(ae.ones(1, 1, 5, 7), (2, 3)).shape
        (1, 1, 2, 3)
    """
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def _adaptive_max(name: str, nd: int, input: Any, output_size: Any, return_indices: bool) -> Any:
    x = _tensor(input, name)
    outs = _adaptive_sizes(name, nd, x, output_size)
    xp = x._device.backend.xp
    xd = x.data
    size = tuple(xd.shape[xd.ndim - nd :])
    # one dimension at a time, the last first: the maximum of each window is the
    # maximum over its rows of the maxima along the rows, and the scan order (the
    # last NaN, else the first maximum, of the window in row-major order) holds
    vals, arg = xd, None
    stride = 1
    for i in reversed(range(nd)):
        axis = xd.ndim - nd + i
        start, end = _bounds(size[i], outs[i])
        kmax = int((end - start).max()) if outs[i] else 0
        shape = (*vals.shape[:axis], outs[i], *vals.shape[axis + 1 :])
        tail = (1,) * (nd - 1 - i)

        def picks(
            vals: Any = vals,
            arg: Any = arg,
            axis: int = axis,
            stride: int = stride,
            start: Any = start,
            end: Any = end,
            kmax: int = kmax,
            tail: tuple[int, ...] = tail,
        ) -> Iterator[tuple[Any, Any, Any]]:
            for q in range(kmax):
                rows = xp.asarray(np.minimum(start + q, end - 1))
                pos = rows.reshape((-1, *tail)) * stride
                if arg is not None:
                    pos = pos + xp.take(arg, rows, axis=axis)
                valid = xp.asarray((start + q < end).reshape((-1, *tail)))
                yield xp.take(vals, rows, axis=axis), pos, valid

        first = xp.asarray(start).reshape((-1, *tail)) * stride
        if arg is not None:
            first = first + xp.take(arg, xp.asarray(start), axis=axis)
        vals, arg = _running_max(xp, shape, xd.dtype, first, picks())
        stride *= size[i]
    cls = AdaptiveMaxPool1DBackward0 if nd == 1 else AdaptiveMaxPool2DBackward0
    return _max_record(cls, x, vals, arg, nd, return_indices)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """1-D adaptive max pooling of (N, C, L) or (C, L); with ``return_indices`` also the argmax positions.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.adaptive_max_pool1d(ae.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
        [[[3.0, 2.0]]]
    """
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """2-D adaptive max pooling of (N, C, H, W) or (C, H, W); with ``return_indices`` also the argmax positions.

    Example::

        >>> import aengine as ae
        >>> x = ae.arange(16.0).reshape(1, 1, 4, 4)
        >>> ae.nn.functional.adaptive_max_pool2d(x, 1).tolist()
        [[[[15.0]]]]
    """
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


# -- padding ------------------------------------------------------------------------------------
def _const_pad_any(x: Any, lo: tuple[int, ...], hi: tuple[int, ...], value: Any, n: Any) -> Any:
    if x.__class__ is Tensor:
        return _const_pad(x, lo, hi, value)
    size = x.shape[x.ndim - len(lo) :]
    ext = tuple(s + a + b for s, a, b in zip(size, lo, hi))
    return pad_to(n.dev.backend.xp, x, lo, ext, value)


def _const_pad_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    lo, hi = n.attrs
    return (_const_pad_any(g, tuple(-v for v in lo), tuple(-v for v in hi), 0, n),)


ConstantPadNdBackward0 = node_class(
    "ConstantPadNdBackward0",
    _const_pad_rule,
    jvp=lambda ts, ins, out, a, s: _const_pad(ts[0], a[0], a[1], 0),
)


def _const_pad(x: Tensor, lo: tuple[int, ...], hi: tuple[int, ...], value: Any) -> Tensor:
    xd = x.data
    size = xd.shape[xd.ndim - len(lo) :]
    ext = tuple(s + a + b for s, a, b in zip(size, lo, hi))
    out = pad_to(x._device.backend.xp, xd, lo, ext, value)
    if out.base is not None or out is xd:  # a crop is a view: the result is a copy
        out = out.copy()
    return record(ConstantPadNdBackward0, out, x._device, (x,), attrs=(lo, hi))


def _fold_axis(xp: Any, g: Any, v: Any, n: int, axis: int) -> Any:
    """The transpose of ``take(x, v, axis)``: ``out[i] = sum of g[j] where v[j] == i``.

    The longest run of consecutive sources is one slab copy; the other
    positions (the padding: a few) are added one by one.
    """
    steps = np.flatnonzero(np.diff(v) != 1)  # the ends of the runs of consecutive sources
    bounds = np.concatenate(([0], steps + 1, [len(v)]))
    k = int(np.argmax(np.diff(bounds)))
    j0, j1 = int(bounds[k]), int(bounds[k + 1])
    shape = (*g.shape[:axis], n, *g.shape[axis + 1 :])
    out = xp.zeros(shape, dtype=g.dtype)
    lead = (slice(None),) * axis
    out[(*lead, slice(int(v[j0]), int(v[j0]) + j1 - j0))] = g[(*lead, slice(j0, j1))]
    for j in (*range(j0), *range(j1, len(v))):
        out[(*lead, int(v[j]))] += g[(*lead, j)]
    return out


def _index_pad_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    idx, vecs, shape, link = n.attrs
    if g.__class__ is not Tensor:  # a plain backward: one fold per padded dimension
        xp = n.dev.backend.xp
        r, nd = len(shape), len(vecs)
        for i in reversed(range(nd)):
            g = _fold_axis(xp, g, vecs[i], shape[r - nd + i], r - nd + i)
        return (g,)
    gx = F.index_add(shape, idx, g, False)
    return (tie(gx, s[0]) if link else gx,)


def _index_pad_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    return getitem(ts[0], attrs[0])  # the input's tangent at the padded positions


ReflectionPadBackward0 = node_class("ReflectionPad2DBackward0", _index_pad_rule, jvp=_index_pad_jvp)
ReplicationPadBackward0 = node_class(
    "ReplicationPad2DBackward0", _index_pad_rule, jvp=_index_pad_jvp
)
CircularPadBackward0 = node_class("CircularPadBackward0", _index_pad_rule, jvp=_index_pad_jvp)


def _pad_index(mode: str, n: int, lo: int, hi: int) -> Any:
    j = np.arange(n + lo + hi)
    if mode == "circular":  # negative pads crop first; the rest wraps around what is left
        a, b = max(-lo, 0), n - max(-hi, 0)
        return a + (j - max(lo, 0)) % (b - a)
    src = j - lo
    if mode == "reflect":
        src = np.abs(src)
        return np.where(src >= n, 2 * (n - 1) - src, src)
    return np.clip(src, 0, n - 1)  # replicate


def pad(
    input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> Tensor:
    """Pad (or, with negative amounts, crop) the last dimensions of ``input``, as ``torch.nn.functional.pad``.

    ``pad`` lists (before, after) amounts starting from the LAST dimension:
    ``(left, right)`` pads the last one, ``(left, right, top, bottom)`` the
    last two.  ``mode``: ``'constant'`` (with ``value``, default 0),
    ``'reflect'``, ``'replicate'`` or ``'circular'`` (these pad the last 1-3
    dimensions of a 2-D to 5-D input).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.pad(ae.tensor([[1.0, 2.0]]), (1, 2), value=9.0).tolist()
        [[9.0, 1.0, 2.0, 9.0, 9.0]]
    """
    x = _tensor(input, "pad")
    amounts = [operator.index(v) for v in pad]
    if len(amounts) % 2:
        raise RuntimeError(f"pad: Padding length must be divisible by 2, got {len(amounts)} values")
    npairs = len(amounts) // 2
    r = x.data.ndim
    if npairs > r:
        raise RuntimeError(
            f"pad: Padding length should be less than or equal to two times the input dimension "
            f"but got padding length {len(amounts)} and input of dimension {r}"
        )
    # torch's order: the last dim first; ours: the padded dims in order
    lo = tuple(amounts[2 * i] for i in reversed(range(npairs)))
    hi = tuple(amounts[2 * i + 1] for i in reversed(range(npairs)))
    size = x.data.shape[r - npairs :]
    if mode == "constant":
        for n, a, b in zip(size, lo, hi):
            if n + a + b < 0:
                raise RuntimeError(
                    f"pad: the padding {list(amounts)} crops more than the input {list(x.data.shape)} "
                    "holds (narrow(): length must be non-negative)"
                )
        return _const_pad(x, lo, hi, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(
            f"pad: Unrecognised padding mode {mode}; use 'constant', 'reflect', 'replicate' or "
            "'circular'"
        )
    if value is not None and value != 0:
        raise RuntimeError(f'pad: Padding mode "{mode}" doesn\'t take in value argument')
    if not 1 <= npairs <= 3 or r not in (npairs + 1, npairs + 2):
        raise NotImplementedError(
            f"pad: Padding size {len(amounts)} is not supported for {r}D input tensor; mode "
            f"{mode!r} pads the last 1 to 3 dimensions of a 2D to 5D input (a batch and a "
            "channel dimension first)"
        )
    for d, (n, a, b) in enumerate(zip(size, lo, hi)):
        if n == 0:
            raise RuntimeError(
                f"pad: mode {mode!r} needs non-empty padded dimensions, got {list(x.data.shape)}"
            )
        if mode == "reflect" and (a >= n or b >= n):
            raise RuntimeError(
                f"pad: Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({a}, {b}) at dimension {r - npairs + d} of input "
                f"{list(x.data.shape)}"
            )
        if mode == "circular" and (a > n or b > n):
            raise RuntimeError(
                "pad: Padding value causes wrapping around more than once; pad by at most the "
                "dimension's size"
            )
        if n + a + b < 0 or (mode == "circular" and n - max(-a, 0) - max(-b, 0) <= 0 < n + a + b):
            raise RuntimeError(f"pad: the padding {list(amounts)} crops the whole input")
    xp = x._device.backend.xp
    vecs = [_pad_index(mode, n, a, b) for n, a, b in zip(size, lo, hi)]
    out = x.data
    for i, v in enumerate(vecs):  # one take per dimension: slabs, not a gather per element
        out = xp.take(out, xp.asarray(v), axis=r - npairs + i)
    idx = (slice(None),) * (r - npairs) + tuple(_grid(xp, [xp.asarray(v) for v in vecs]))
    cls = {
        "reflect": ReflectionPadBackward0,
        "replicate": ReplicationPadBackward0,
        "circular": CircularPadBackward0,
    }[mode]
    attrs = (idx, vecs, x.data.shape, mode != "circular")
    return record(cls, out, x._device, (x,), (x,), attrs=attrs)


# -- interpolation ------------------------------------------------------------------------------
def _nearest_index(n: int, o: int, scale: float | None, exact: bool) -> Any:
    """PyTorch's source index of each output position (float32 arithmetic, as its kernels)."""
    if o == n and not exact:
        return np.arange(o)
    sc = (
        np.float32(1.0 / scale)
        if scale is not None and scale > 0
        else np.float32(n) / np.float32(o)
    )
    dst = np.arange(o, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * sc) if exact else np.floor(dst * sc)
    return np.minimum(src.astype(np.int64), n - 1)


def _linear_weights(
    n: int, o: int, scale: float | None, align_corners: bool, dtype: Any
) -> tuple[Any, Any, Any, Any]:
    """The two source indices and weights of each output position (PyTorch's linear modes)."""
    ft: Any = np.float32 if np.dtype(dtype) == np.float32 else np.float64  # (opmath)
    dst: Any = np.arange(o, dtype=ft)
    if align_corners:
        sc = ft(n - 1) / ft(o - 1) if o > 1 else ft(0)
        src = dst * sc
    else:
        sc = ft(1.0 / scale) if scale is not None and scale > 0 else ft(n) / ft(o)
        src = np.maximum((dst + ft(0.5)) * sc - ft(0.5), ft(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    lam = np.clip(src - i0, 0, 1).astype(dtype)
    i1 = i0 + (i0 < n - 1)
    return i0, i1, (1 - lam).astype(dtype), lam


_INTERP_MODES = "nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact"


def _interp_sizes(
    spatial: tuple[int, ...], size: Any, scale_factor: Any, mode: str,
    recompute_scale_factor: bool | None,
) -> tuple[tuple[int, ...], list[float | None]]:  # fmt: skip
    """interpolate's output sizes, and the scales its kernels use (None: from the sizes)."""
    nd = len(spatial)
    scales: list[float | None] = [None] * nd
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(
                "interpolate: recompute_scale_factor is not meaningful with an explicit size."
            )
        if isinstance(size, (list, tuple)):
            if len(size) != nd:
                raise ValueError(
                    f"interpolate: Input and output must have the same number of spatial "
                    f"dimensions, but got input with spatial dimensions of {list(spatial)} and "
                    f"output size of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                    "format and output size in (o1, o2, ...,oK) format."
                )
            outs = tuple(operator.index(v) for v in size)
        else:
            outs = (operator.index(size),) * nd
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != nd:
                raise ValueError(
                    f"interpolate: Input and scale_factor must have the same number of spatial "
                    f"dimensions, but got input with spatial dimensions of {list(spatial)} and "
                    f"scale_factor of shape {scale_factor}."
                )
            sf = [float(v) for v in scale_factor]
        else:
            sf = [float(scale_factor)] * nd
        outs = tuple(math.floor(n * f) for n, f in zip(spatial, sf))
        if not (recompute_scale_factor or mode == "area"):
            scales = list(sf)
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    return outs, scales


def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dimensions of ``input`` (N, C, *spatial) to ``size`` or by ``scale_factor``.

    Modes: ``'nearest'``, ``'nearest-exact'`` (any number of spatial dims),
    ``'linear'`` (3-D input), ``'bilinear'`` (4-D input; ``align_corners``),
    ``'area'`` (adaptive average pooling).  Source positions are computed as
    PyTorch's kernels do; differentiable to any order.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[[1.0, 2.0]]])
        >>> ae.nn.functional.interpolate(x, scale_factor=2).tolist()
        [[[1.0, 1.0, 2.0, 2.0]]]
        >>> ae.nn.functional.interpolate(x, size=3, mode="linear", align_corners=True).tolist()
        [[[1.0, 1.5, 2.0]]]
    """
    x = _tensor(input, "interpolate")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "interpolate: align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    nd = x.data.ndim - 2
    if nd < 1:
        raise NotImplementedError(
            f"interpolate: Input Error: Only 3D, 4D and 5D input Tensors supported (got "
            f"{x.data.ndim}D) for the modes: {_INTERP_MODES} (got {mode}); give an input of "
            "shape (N, C, *spatial)"
        )
    spatial = tuple(x.data.shape[2:])
    outs, scales = _interp_sizes(spatial, size, scale_factor, mode, recompute_scale_factor)
    if antialias:
        raise NotImplementedError(
            "interpolate: antialias=True is not supported by aengine; resize without it"
        )
    if any(o <= 0 for o in outs) or any(n <= 0 for n in spatial):
        raise RuntimeError(
            f"interpolate: input and output sizes should be greater than 0, but got input "
            f"{list(spatial)} and output {list(outs)}"
        )
    if mode in ("nearest", "nearest-exact"):
        out = x
        for i, (n, o, sc) in enumerate(zip(spatial, outs, scales)):
            if o != n or mode == "nearest-exact":
                ix = as_tensor_arg(_nearest_index(n, o, sc, mode != "nearest"), x)
                out = index_select(out, 2 + i, ix)
        return out if out is not x else index_select(x, 2, as_tensor_arg(np.arange(spatial[0]), x))
    if mode == "area":
        fn = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d}.get(nd)
        if fn is None:
            raise NotImplementedError("interpolate: mode 'area' takes a 3D or 4D input in aengine")
        return fn(x, outs)
    if mode in ("linear", "bilinear"):
        want = 3 if mode == "linear" else 4
        if x.data.ndim != want:
            raise NotImplementedError(
                f"interpolate: Got {x.data.ndim}D input, but {mode} mode needs {want}D input"
            )
        if x.data.dtype.kind != "f":
            raise RuntimeError(
                f"interpolate: mode {mode!r} needs a floating input, got {x.data.dtype}"
            )
        return _linear(x, spatial, outs, scales, bool(align_corners))
    if mode in ("bicubic", "trilinear"):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported by aengine")
    raise NotImplementedError(
        f"interpolate: Input Error: Only 3D, 4D and 5D input Tensors supported (got "
        f"{x.data.ndim}D) for the modes: {_INTERP_MODES} (got {mode})"
    )


def _linear(
    x: Tensor,
    spatial: tuple[int, ...],
    outs: tuple[int, ...],
    scales: list[float | None],
    align_corners: bool,
) -> Tensor:
    """(Bi)linear interpolation: two picks per dimension, weighted (the last dim first)."""
    xp = x._device.backend.xp
    nd = len(spatial)
    out = x
    for i in reversed(range(nd)):
        i0, i1, w0, w1 = _linear_weights(
            spatial[i], outs[i], scales[i], align_corners, x.data.dtype
        )
        shape = (-1,) + (1,) * (nd - 1 - i)
        a = index_select(out, 2 + i, as_tensor_arg(i0, x))
        b = index_select(out, 2 + i, as_tensor_arg(i1, x))
        out = a * xp.asarray(w0.reshape(shape)) + b * xp.asarray(w1.reshape(shape))
    return out


# -- the operator table ------------------------------------------------------------------------
def _max_pool2d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.distinct(2, 3, 5, 6), 2))
    yield Sample((m.distinct(2, 3, 5, 6), 3), {"stride": 2, "padding": 1, "return_indices": True})
    yield Sample((m.distinct(2, 2, 6, 7), 2), {"dilation": 2, "stride": 1})
    yield Sample((m.distinct(2, 2, 5, 6), 2), {"ceil_mode": True, "padding": 1, "stride": 2})
    yield Sample((m.distinct(2, 5, 6), (2, 3)), {"stride": (1, 2)}, note="unbatched, per-dim")
    yield Sample(
        (m.distinct(2, 2, 7, 5), (3, 2)), {"stride": 2, "ceil_mode": True, "return_indices": True}
    )


def _max_pool1d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.distinct(2, 3, 7), 2))
    yield Sample((m.distinct(2, 3, 7), 3), {"stride": 2, "padding": 1, "return_indices": True})
    yield Sample((m.distinct(2, 3, 8), 2), {"dilation": 3, "ceil_mode": True})
    yield Sample((m.distinct(3, 7), 3), {"stride": 1}, note="unbatched")


def _max_pool2d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(5, 6), 2), match="3D or 4D")
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), {"padding": 2}, match="at most half")
    yield ErrorCase((m.arr(2, 3, 5, 6), 7), match="Output size is too small")
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), {"stride": 0}, match="stride")
    yield ErrorCase((m.arr(2, 3, 5, 6), (2, 2, 2)), match="kernel_size")


def _max_pool1d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), match="2D or 3D")
    yield ErrorCase((m.arr(2, 3, 5), 6), match="Output size is too small")


def _avg_pool2d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 5, 6), 2))
    yield Sample((m.arr(2, 3, 5, 6), 3), {"stride": 2, "padding": 1, "count_include_pad": False})
    yield Sample((m.arr(2, 3, 5, 6), 3), {"stride": 2, "padding": 1})
    yield Sample((m.arr(2, 2, 5, 6), 2), {"ceil_mode": True, "padding": 1, "stride": 2})
    yield Sample(
        (m.arr(2, 2, 7, 5), (3, 2)),
        {"stride": 2, "ceil_mode": True, "count_include_pad": False, "padding": (1, 0)},
    )
    yield Sample((m.arr(2, 3, 5, 6), 2), {"divisor_override": 3})
    yield Sample((m.arr(3, 5, 6), (2, 3)), {"stride": (1, 2)}, note="unbatched, per-dim")


def _avg_pool1d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 7), 2))
    yield Sample((m.arr(2, 3, 7), 3), {"stride": 2, "padding": 1, "count_include_pad": False})
    yield Sample((m.arr(2, 3, 8), 3), {"stride": 2, "padding": 1, "ceil_mode": True})
    yield Sample((m.arr(3, 7), 3), {"stride": 1}, note="unbatched")


def _avg_pool2d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), {"padding": 2}, match="at most half")
    yield ErrorCase((m.arr(2, 3, 5, 6), 7), match="Output size is too small")
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), {"divisor_override": 0}, match="divisor")
    yield ErrorCase(
        (m.arr(2, 3, 4, 5, 6), 2),
        match="3D or 4D",
    )


def _avg_pool1d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), match="2D or 3D")


def _adaptive_avg2d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 5, 7), (2, 3)))
    yield Sample((m.arr(2, 3, 5, 7), (3, None)), note="None keeps a size")
    yield Sample((m.arr(2, 3, 5, 7), 4))
    yield Sample((m.arr(2, 3, 5, 7), 1), note="global")
    yield Sample((m.arr(3, 4, 6), (6, 4)), note="unbatched, upsampling")


def _adaptive_avg1d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 7), 3))
    yield Sample((m.arr(2, 3, 7), 1))
    yield Sample((m.arr(3, 5), 7), note="unbatched, upsampling")


def _adaptive_max2d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.distinct(2, 3, 5, 7), (2, 3)))
    yield Sample((m.distinct(2, 3, 5, 7), (3, None)), {"return_indices": True})
    yield Sample((m.distinct(2, 3, 5, 7), 1), {"return_indices": True})
    yield Sample((m.distinct(3, 4, 6), (6, 4)), note="unbatched, upsampling")


def _adaptive_max1d_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.distinct(2, 3, 7), 3))
    yield Sample((m.distinct(2, 3, 7), 4), {"return_indices": True})
    yield Sample((m.distinct(3, 5), 7), note="unbatched, upsampling")


def _adaptive2d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(5, 6), 2), match="3D or 4D")
    yield ErrorCase((m.arr(2, 3, 5, 6), (2, 3, 4)), match="output_size")
    yield ErrorCase((m.arr(2, 3, 5, 6), -1), match="non-negative")


def _adaptive1d_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 5, 6), 2), match="2D or 3D")


def _interp_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4, 5),), {"size": (7, 3)}, note="nearest, size")
    yield Sample((m.arr(2, 3, 4, 5),), {"scale_factor": 2}, note="nearest, scale")
    yield Sample((m.arr(2, 3, 5),), {"scale_factor": 1.7}, note="nearest 1-D, fractional scale")
    yield Sample((m.arr(2, 3, 4, 5),), {"size": (7, 3), "mode": "bilinear"})
    yield Sample((m.arr(2, 3, 4, 5),), {"size": (7, 8), "mode": "bilinear", "align_corners": True})
    yield Sample((m.arr(2, 3, 4, 5),), {"scale_factor": (1.5, 0.6), "mode": "bilinear"})
    yield Sample(
        (m.arr(2, 3, 4, 5),),
        {"scale_factor": 2.5, "mode": "bilinear", "recompute_scale_factor": True},
    )
    yield Sample((m.arr(2, 3, 5),), {"size": 8, "mode": "linear", "align_corners": False})
    yield Sample((m.arr(2, 3, 6, 5),), {"size": (4, 7), "mode": "nearest-exact"})
    yield Sample((m.arr(2, 3, 6, 5),), {"size": (4, 2), "mode": "area"})


def _interp_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3, 4, 5)
    yield ErrorCase((x,), {"size": 3, "mode": "cubic"}, exc=NotImplementedError, match="modes")
    yield ErrorCase((x,), {"size": 3, "scale_factor": 2}, exc=ValueError, match="only one")
    yield ErrorCase((x,), exc=ValueError, match="either size or scale_factor")
    yield ErrorCase((x,), {"size": (3, 3, 3)}, exc=ValueError, match="same number")
    yield ErrorCase((x,), {"size": 3, "align_corners": True}, exc=ValueError, match="align_corners")
    yield ErrorCase(
        (m.arr(2, 3, 5),), {"size": 3, "mode": "bilinear"}, exc=NotImplementedError, match="4D"
    )
    yield ErrorCase((m.arr(5, 6),), {"size": 3}, exc=NotImplementedError, match="3D, 4D and 5D")


def _pad_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), (1, 2)), note="constant, the last dim")
    yield Sample((m.arr(2, 3, 4), (1, 0, 2, 1)), {"value": 1.5}, note="the last two dims, value")
    yield Sample((m.arr(2, 3, 4, 5), (-1, 2, 0, -2)), note="negative: crops")
    yield Sample((m.arr(2, 3, 4), (1, 1, 0, 1, 1, 0)), note="three dims")
    yield Sample((m.arr(2, 3, 4, 5), (1, 2, 3, 1)), {"mode": "reflect"})
    yield Sample((m.arr(2, 3, 5), (2, 4)), {"mode": "reflect"})
    yield Sample((m.arr(2, 3, 5), (-1, 3)), {"mode": "reflect"}, note="reflect and crop")
    yield Sample((m.arr(2, 3, 4, 5), (1, 2, 3, 1)), {"mode": "replicate"})
    yield Sample((m.arr(1, 2, 3, 4, 2), (1, 2, 0, 1, 2, 1)), {"mode": "replicate"}, note="3 dims")
    yield Sample((m.arr(2, 3, 4, 5), (1, 2, 3, 1)), {"mode": "circular"})
    yield Sample((m.arr(2, 3, 5), (-1, 2)), {"mode": "circular"}, note="circular and crop")
    yield Sample((m.arr(3, 4, 5), (2, 1)), {"mode": "replicate"}, note="unbatched")


def _pad_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(2, 3, 4, 5)
    yield ErrorCase((x, (1, 1)), {"mode": "wrap"}, exc=NotImplementedError, match="Unrecognised")
    yield ErrorCase((x, (1, 1, 1)), match="divisible by 2")
    yield ErrorCase((x, (1,) * 10), match="less than or equal to two times")
    yield ErrorCase((x, (5, 5)), {"mode": "reflect"}, exc=NotImplementedError, match="Padding size")
    yield ErrorCase((x, (5, 5, 0, 0)), {"mode": "reflect"}, match="less than the corresponding")
    yield ErrorCase((x, (6, 0, 0, 0)), {"mode": "circular"}, match="wrapping around")
    yield ErrorCase((x, (1, 1, 1, 1)), {"mode": "reflect", "value": 2.0}, match="value")
    yield ErrorCase((m.arr(5), (1, 1)), {"mode": "replicate"}, exc=NotImplementedError, match="1D")


_F32 = {"float32": (1e-4, 1e-5)}

register(
    OpInfo(
        "nn.functional.max_pool1d",
        max_pool1d,
        _max_pool1d_samples,
        errors=_max_pool1d_errors,
    ),
    OpInfo(
        "nn.functional.max_pool2d",
        max_pool2d,
        _max_pool2d_samples,
        errors=_max_pool2d_errors,
    ),
    OpInfo(
        "nn.functional.avg_pool1d",
        avg_pool1d,
        _avg_pool1d_samples,
        errors=_avg_pool1d_errors,
    ),
    OpInfo(
        "nn.functional.avg_pool2d",
        avg_pool2d,
        _avg_pool2d_samples,
        errors=_avg_pool2d_errors,
    ),
    OpInfo(
        "nn.functional.adaptive_avg_pool1d",
        adaptive_avg_pool1d,
        _adaptive_avg1d_samples,
        errors=_adaptive1d_errors,
        notes="a product with an averaging matrix per dimension: an inf or NaN spreads along its row",
    ),
    OpInfo(
        "nn.functional.adaptive_avg_pool2d",
        adaptive_avg_pool2d,
        _adaptive_avg2d_samples,
        errors=_adaptive2d_errors,
        notes="a product with an averaging matrix per dimension: an inf or NaN spreads along its row",
    ),
    OpInfo(
        "nn.functional.adaptive_max_pool1d",
        adaptive_max_pool1d,
        _adaptive_max1d_samples,
        errors=_adaptive1d_errors,
    ),
    OpInfo(
        "nn.functional.adaptive_max_pool2d",
        adaptive_max_pool2d,
        _adaptive_max2d_samples,
        errors=_adaptive2d_errors,
    ),
    OpInfo(
        "nn.functional.interpolate",
        interpolate,
        _interp_samples,
        errors=_interp_errors,
        notes="modes nearest, nearest-exact, linear, bilinear, area; no bicubic, trilinear or antialias",
    ),
    OpInfo("nn.functional.pad", pad, _pad_samples, errors=_pad_errors),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "nn.functional.max_pool1d": "leading:2",
        "nn.functional.max_pool2d": "leading:3",
        "nn.functional.avg_pool1d": "leading:2",
        "nn.functional.avg_pool2d": "leading:3",
        "nn.functional.adaptive_avg_pool1d": "leading:2",
        "nn.functional.adaptive_avg_pool2d": "leading:3",
        "nn.functional.adaptive_max_pool1d": "leading:2",
        "nn.functional.adaptive_max_pool2d": "leading:3",
        "nn.functional.pad": "leading:-1",
    }
)
