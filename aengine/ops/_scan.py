"""Scans (cumsum, cumprod, logcumsumexp, cummax, cummin) and matrix norms.

Each scan is a primitive with its rule beside it.  The rules of cumsum and
logcumsumexp scan in the other direction: each of those ops takes a
``reverse`` flag internally (the public functions scan forwards), so a rule
calls the same op reversed and stays differentiable to any order.  A rule
gets arrays (plain backward) or Tensors (create_graph); ``_cumsum`` and
``_logcumsumexp`` below dispatch on which, so ``F`` needs no scan of its own.

``linalg.matrix_norm`` composes vector norms, amax / amin and (for 'nuc' and
+-2) the singular values of a private SVD primitive, ``_svd``, whose rule is
PyTorch's svd_backward.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._tensor import Tensor
from ._core import TENSOR_OPS, GradOps, node_class, record, record_multi, record_one, wrap
from ._cpu_kernels import SCAN_MIN_SIZE, cumsum_last
from ._forward import ForwardUnsupported
from ._index import gather
from ._reduce import _check_float, _one_dim, amax, amin, norm_dims, sum, vector_norm
from ._shape import permute, unsqueeze
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register
from ._unary import exp

__all__ = [
    "norm",
    "cumsum",
    "cumprod",
    "logcumsumexp",
    "cummax",
    "cummin",
    "CummaxResult",
    "CumminResult",
    "matrix_norm",
]


def _flip(xp: Any, a: Any, d: int, reverse: bool) -> Any:
    return xp.flip(a, d) if reverse else a


# -- cumsum ------------------------------------------------------------------------------------
def _cumsum_arr(xp: Any, a: Any, d: int, reverse: bool) -> Any:
    if a.ndim == 0:
        return a.copy()
    if d == a.ndim - 1 and a.size >= SCAN_MIN_SIZE:  # (NOTE [A blocked cumsum])
        out = cumsum_last(a, reverse)
        if out is not None:
            return out
    return _flip(xp, xp.cumsum(_flip(xp, a, d, reverse), axis=d), d, reverse)


def _cumsum(F: GradOps, v: Any, d: int, reverse: bool, dev: Any) -> Any:
    """cumsum of a value of the rule (array or Tensor) along ``d``, maybe reversed."""
    if v.__class__ is Tensor:
        return _cumsum_op(v, d, reverse)
    return _cumsum_arr(dev.backend.xp, v, d, reverse)


def _cumsum_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    d, reverse = n.attrs
    return (_cumsum(F, g, d, not reverse, n.dev),)


CumsumBackward0 = node_class(
    "CumsumBackward0",
    _cumsum_rule,
    jvp=lambda ts, ins, out, a, s: _cumsum_op(ts[0], a[0], a[1]),
)


def _cumsum_op(x: Tensor, d: int, reverse: bool, dtype: Any = None) -> Tensor:
    data = x.data
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind in "bui":
        data = data.astype("int64")
    out = _cumsum_arr(x._device.backend.xp, data, d, reverse)
    bcast = out.dtype != x.data.dtype
    return record(CumsumBackward0, out, x._device, (x,), attrs=(d, reverse), bcast=bcast)


def cumsum(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative sum along ``dim``; its gradient is the reversed cumulative sum.

    Integer and bool tensors sum in int64, as PyTorch.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 2.0, 3.0]).cumsum(0).tolist()
        [1.0, 3.0, 6.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "cumsum")
    return _cumsum_op(x, _one_dim(dim, x.data.ndim, "cumsum"), False, dtype)


# -- cumprod -----------------------------------------------------------------------------------
# NOTE [cumprod with zeros]
# d/dx_k of sum_j g_j y_j, y = cumprod(x), is E_k * S_k: E_k = prod_{i<k} x_i
# (the output shifted by one, 1 first) and S_k = sum_{j>=k} g_j prod_{k<i<=j} x_i.
# Without zeros that is PyTorch's fast form revcumsum(g * y) / x.  With zeros
# S is the linear recurrence S_k = g_k + x_{k+1} S_{k+1}, computed by a
# log-step scan (Hillis-Steele) of products and sums of shifted copies: no
# division, every step an op of F, so the gradient is exact at zeros and
# differentiable to any order (PyTorch's O(n^2) loop gives the same numbers).
def _shifted(F: GradOps, c: Any, s: int, fill_one: bool, right: bool) -> Any:
    """``c`` moved ``s`` places along its last axis, padded with ones or zeros."""
    n = c.shape[-1]
    edge = F.getitem(c, (..., slice(0, s)))
    pad = F.ones_like(edge) if fill_one else F.zeros_like(edge)
    if right:  # element i takes c[..., i - s]
        return F.cat([pad, F.getitem(c, (..., slice(0, n - s)))], -1)
    return F.cat([F.getitem(c, (..., slice(s, n))), pad], -1)  # takes c[..., i + s]


def _cumprod_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, out = s
    (d,) = n.attrs
    xa = x.data if x.__class__ is Tensor else x
    if xa.ndim == 0 or xa.shape[d] <= 1:
        return (g,)
    if not (xa == 0).any():
        return (_cumsum(F, g * out, d, True, n.dev) / x,)
    xm, gm, om = F.swapaxes(x, d, -1), F.swapaxes(g, d, -1), F.swapaxes(out, d, -1)
    size = xm.shape[-1]
    acc, a = gm, _shifted(F, xm, 1, False, False)  # S_k and the product x_{k+1..k+span}
    span = 1
    while span < size:
        acc = acc + a * _shifted(F, acc, span, False, False)
        a = a * _shifted(F, a, span, False, False)
        span *= 2
    return (F.swapaxes(_shifted(F, om, 1, True, True) * acc, d, -1),)


def _cumprod_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # out * cumsum(t / x): where x has no zeros (torch's formula there as well)
    x, t = ins[0], ts[0]
    if x.data.ndim == 0:
        return t
    if (x.data == 0).any():
        raise ForwardUnsupported(
            "forward AD of cumprod through an input with zeros is not implemented; use "
            "reverse mode (ae.grad) for it"
        )
    return out * _cumsum_op(t / x, attrs[0], False)


CumprodBackward0 = node_class("CumprodBackward0", _cumprod_rule, jvp=_cumprod_jvp)


def cumprod(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative product along ``dim``, with exact gradients also where inputs are zero.

    See NOTE [cumprod with zeros].

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 2.0, 3.0]).cumprod(0).tolist()
        [1.0, 2.0, 6.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "cumprod")
    d = _one_dim(dim, x.data.ndim, "cumprod")
    data = x.data
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind in "bui":
        data = data.astype("int64")
    out = data.copy() if data.ndim == 0 else x._device.backend.xp.cumprod(data, axis=d)
    bcast = out.dtype != x.data.dtype
    return record(CumprodBackward0, out, x._device, (x,), (x,), (d,), save_output=True, bcast=bcast)


# -- logcumsumexp ------------------------------------------------------------------------------
def _lcse_arr(xp: Any, a: Any, d: int, reverse: bool) -> Any:
    if a.ndim == 0:
        return a.copy()
    return _flip(xp, xp.logaddexp.accumulate(_flip(xp, a, d, reverse), axis=d), d, reverse)


def _logcumsumexp(v: Any, d: int, reverse: bool, dev: Any) -> Any:
    if v.__class__ is Tensor:
        return _logcumsumexp_op(v, d, reverse)
    return _lcse_arr(dev.backend.xp, v, d, reverse)


def _logcumsumexp_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # PyTorch's logcumsumexp_backward: the positive and negative parts of g in
    # the log domain, so that nothing overflows.  The parts of g that are not
    # there stand at the lowest float, and the derivatives of this formula
    # (higher orders) subtract such values: they overflow to inf silently, as
    # PyTorch's, and give the same (finite) gradients.
    x, out = s
    d, reverse = n.attrs
    ga = g.data if g.__class__ is Tensor else g
    if ga.ndim == 0 or ga.size == 0:
        return (g,)
    lowest = float(np.finfo(ga.dtype).min)
    with np.errstate(over="ignore", invalid="ignore"):
        log_abs = F.log(F.where(ga != 0, F.abs(g), 1.0))
        pos = F.where(ga > 0, log_abs, lowest)
        neg = F.where(ga < 0, log_abs, lowest)
        up = F.exp(_logcumsumexp(pos - out, d, not reverse, n.dev) + x)
        down = F.exp(_logcumsumexp(neg - out, d, not reverse, n.dev) + x)
        return (up - down,)


def _logcumsumexp_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # sum_{j<=k} exp(x_j - out_k) t_j, with the positive and negative parts of t in
    # log space (as the rule): nothing under- or overflows
    x, t = ins[0], ts[0]
    d, reverse = attrs
    if x.data.ndim == 0 or x.data.size == 0:
        return t
    F = TENSOR_OPS
    ta = t.data
    log_abs = F.log(F.where(ta != 0, F.abs(t), 1.0))
    parts = []
    for mask in (ta > 0, ta < 0):
        logs = x + F.where(mask, log_abs, -math.inf)
        parts.append(exp(_logcumsumexp_op(logs, d, reverse) - out))
    return parts[0] - parts[1]


LogcumsumexpBackward0 = node_class(
    "LogcumsumexpBackward0", _logcumsumexp_rule, jvp=_logcumsumexp_jvp
)


def _logcumsumexp_op(x: Tensor, d: int, reverse: bool) -> Tensor:
    out = _lcse_arr(x._device.backend.xp, x.data, d, reverse)
    return record(LogcumsumexpBackward0, out, x._device, (x,), (x,), (d, reverse), save_output=True)


def logcumsumexp(x: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(x), dim))``, computed without overflow; floating tensors only.

    Example::

        >>> import aengine as ae
        >>> [round(v, 4) for v in ae.tensor([0.0, 0.0]).logcumsumexp(0).tolist()]
        [0.0, 0.6931]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "logcumsumexp")
    d = _one_dim(dim, x.data.ndim, "logcumsumexp")
    if x.data.dtype.kind != "f":
        raise RuntimeError(
            f"logcumsumexp(): not implemented for {x.data.dtype} tensors; "
            "convert with .to(ae.float64)"
        )
    return _logcumsumexp_op(x, d, False)


# -- cummax / cummin ---------------------------------------------------------------------------
class CummaxResult(NamedTuple):
    """``(values, indices)`` of ``cummax`` (as ``torch.return_types.cummax``)."""

    values: Tensor
    indices: Tensor


class CumminResult(NamedTuple):
    """``(values, indices)`` of ``cummin`` (as ``torch.return_types.cummin``)."""

    values: Tensor
    indices: Tensor


def _cum_extreme_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # each output takes its value from one input (at ``indices``): the gradient adds up there
    shape, d, idx = n.attrs
    if not shape:
        return (g,)
    return (F.scatter_add(shape, d, idx, g),)


def _cum_extreme_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    shape, d, idx = attrs
    return gather(ts[0], d, Tensor._make(idx, False, out._device)) if shape else ts[0]


CummaxBackward0 = node_class("CummaxBackward0", _cum_extreme_rule, jvp=_cum_extreme_jvp)
CumminBackward0 = node_class("CumminBackward0", _cum_extreme_rule, jvp=_cum_extreme_jvp)


def _cum_extreme(x: Tensor, dim: int, is_max: bool) -> Any:
    name = "cummax" if is_max else "cummin"
    if x.__class__ is not Tensor:
        x = tensor_input(x, name)
    d = _one_dim(dim, x.data.ndim, name)
    xp = x._device.backend.xp
    a = x.data
    if a.ndim == 0:
        vals, idx = a.copy(), xp.zeros((), dtype="int64")
    else:
        vals = (xp.maximum if is_max else xp.minimum).accumulate(a, axis=d)
        hit = a == vals  # a new extreme, or a tie with it: the later index wins, as PyTorch
        if a.dtype.kind == "f":
            hit |= xp.isnan(a)
        pos = xp.arange(a.shape[d]).reshape([-1 if i == d else 1 for i in range(a.ndim)])
        idx = xp.maximum.accumulate(xp.where(hit, pos, 0), axis=d).astype("int64")
    cls = CummaxBackward0 if is_max else CumminBackward0
    values = record_one(cls, vals, x._device, x, 1, (a.shape, d, idx))
    result = CummaxResult if is_max else CumminResult
    return result(values, wrap(idx.copy(), x._device))


def cummax(x: Tensor, dim: int) -> CummaxResult:
    """Running maximum along ``dim``: ``(values, indices)``; the gradient goes to ``indices``.

    Among equal values the later index is taken, and a NaN stays, as PyTorch.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([1.0, 3.0, 2.0]).cummax(0)
        >>> v.tolist(), i.tolist()
        ([1.0, 3.0, 3.0], [0, 1, 1])
    """
    return _cum_extreme(x, dim, True)  # type: ignore[no-any-return]


def cummin(x: Tensor, dim: int) -> CumminResult:
    """Running minimum along ``dim``: ``(values, indices)``; the gradient goes to ``indices``.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([3.0, 1.0, 2.0]).cummin(0)
        >>> v.tolist(), i.tolist()
        ([3.0, 1.0, 1.0], [0, 1, 1])
    """
    return _cum_extreme(x, dim, False)  # type: ignore[no-any-return]


# -- the SVD behind the nuclear and spectral norms ------------------------------------------------
def _svd_backward(F: GradOps, gU: Any, gS: Any, gVh: Any, U: Any, S: Any, Vh: Any, eye: Any) -> Any:
    """PyTorch's svd_backward (real inputs, the reduced SVD)."""
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:  # the singular values alone: U diag(gS) Vh
        if m >= n:
            return F.matmul(U, F.expand_dims(gS, -1) * Vh)
        return F.matmul(U * F.expand_dims(gS, -2), Vh)
    Sr, Sc = F.expand_dims(S, -2), F.expand_dims(S, -1)  # S as a row, as a column
    S2 = S * S
    E = F.expand_dims(S2, -2) - F.expand_dims(S2, -1) + eye  # 1 on the diagonal
    Uh, V = F.swapaxes(U, -1, -2), F.swapaxes(Vh, -1, -2)
    ret: Any = None
    if gU is not None:
        UhgU = F.matmul(Uh, gU)
        ret = (UhgU - F.swapaxes(UhgU, -1, -2)) * Sr
    if gVh is not None:
        VhgV = F.matmul(Vh, F.swapaxes(gVh, -1, -2))
        term = Sc * (VhgV - F.swapaxes(VhgV, -1, -2))
        ret = term if ret is None else ret + term
    gA = ret / E
    if gS is not None:
        gA = gA + F.expand_dims(gS, -1) * eye
    if m > n and gU is not None:
        gA = F.matmul(U, gA)
        gUSinv = gU / Sr
        gA = gA + gUSinv - F.matmul(U, F.matmul(Uh, gUSinv))
        return F.matmul(gA, Vh)
    if m < n and gVh is not None:
        gA = F.matmul(gA, Vh)
        SinvgVh = gVh / Sc
        gA = gA + SinvgVh - F.matmul(F.matmul(SinvgVh, V), Vh)
        return F.matmul(U, gA)
    return F.matmul(U, F.matmul(gA, Vh))


def _svd_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (a,) = s if s.__class__ is tuple or s.__class__ is list else (s,)
    if a.__class__ is Tensor:  # create_graph: singular vectors that are functions of A
        U, S, Vh = _svd(a)
        eye = wrap(n.attrs[3], a._device)
    else:
        U, S, Vh, eye = n.attrs
    gU, gS, gVh = g
    return (_svd_backward(F, gU, gS, gVh, U, S, Vh, eye),)


SvdBackward0 = node_class("LinalgSvdBackward0", _svd_rule, num_outputs=3)


def _svd(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The reduced SVD ``(U, S, Vh)`` of the last two dims, differentiable to any order."""
    xp = a._device.backend.xp
    U, S, Vh = xp.linalg.svd(a.data, full_matrices=False)
    eye = xp.eye(S.shape[-1], dtype=a.data.dtype)
    outs = record_multi(SvdBackward0, [U, S, Vh], a._device, (a,), (a,), (U, S, Vh, eye))
    return outs[0], outs[1], outs[2]


# -- linalg.matrix_norm ------------------------------------------------------------------------
def _matrix_dims(A: Tensor, dim: Any) -> tuple[int, int]:
    ndim = A.data.ndim
    if ndim < 2:
        raise RuntimeError(
            f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got {ndim}; "
            "use linalg.vector_norm for vectors"
        )
    try:
        d0, d1 = dim
    except (TypeError, ValueError):
        raise RuntimeError(
            f"linalg.matrix_norm: dim must be a 2-tuple of ints, got {dim!r}"
        ) from None
    dims = norm_dims((d0,), ndim), norm_dims((d1,), ndim)
    assert dims[0] is not None and dims[1] is not None
    a, b = dims[0][0], dims[1][0]
    if a == b:
        raise RuntimeError(
            f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1}); pass two distinct dims"
        )
    return a, b


def matrix_norm(
    A: Tensor,
    ord: Any = "fro",
    dim: tuple[int, int] = (-2, -1),
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """Matrix norm over the two dims ``dim``: ord 'fro', 'nuc', 1, -1, inf, -inf, 2 or -2.

    'nuc' (the sum of the singular values) and +-2 (the largest / smallest
    one) go through an SVD, differentiable where the singular values are
    distinct; 1 / inf are the largest column / row sums of ``|A|``.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.matrix_norm(ae.tensor([[3.0, 0.0], [0.0, 4.0]]), 1).item()
        4.0
    """
    if A.__class__ is not Tensor:
        A = tensor_input(A, "linalg.matrix_norm", "A")
    if A.data.dtype.kind != "f":
        raise RuntimeError(
            f"linalg.matrix_norm: Expected a floating point or complex tensor as input. "
            f"Got {A.data.dtype}; convert with .to(ae.float64)"
        )
    if dtype is not None:
        A = A.to(dtype=dtype)
    d0, d1 = _matrix_dims(A, dim)
    if isinstance(ord, str):
        if ord == "fro":
            return vector_norm(A, 2, (d0, d1), keepdim)
        if ord != "nuc":
            raise RuntimeError(
                f"linalg.matrix_norm: Order {ord} not supported; use 'fro', 'nuc', "
                "1, -1, inf, -inf, 2 or -2"
            )
    elif ord not in (1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError(
            f"linalg.matrix_norm: Order {ord} not supported; use 'fro', 'nuc', "
            "1, -1, inf, -inf, 2 or -2"
        )
    if ord in ("nuc", 2, -2):
        rest = [i for i in range(A.data.ndim) if i not in (d0, d1)]
        S = _svd(permute(A, (*rest, d0, d1)))[1]
        out = sum(S, -1) if ord == "nuc" else (amax if ord == 2 else amin)(S, -1)
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    rows, cols = (d1, d0) if abs(ord) == math.inf else (d0, d1)
    if not keepdim and rows < cols:
        cols -= 1
    sums = vector_norm(A, 1, rows, keepdim)
    return (amax if ord > 0 else amin)(sums, cols, keepdim)


def norm(
    x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None
) -> Tensor:
    """The vector ``p``-norm over ``dim`` (all elements when None), or a matrix norm ('nuc').

    As ``torch.norm``: a number ``p`` (2, 1, inf, -inf, 0 or any other) is
    :func:`vector_norm`'s ``ord``; 'fro' is the 2-norm over at most two dims;
    'nuc' is :func:`matrix_norm`'s.  The gradient is 0 at a zero vector (as
    PyTorch), not NaN.  At the zero vector the second derivative of the
    2-norm is 0 too, where PyTorch's gives NaN.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([3.0, 4.0]).norm().item()
        5.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "norm")
    _check_float(x, "norm")
    if isinstance(p, str):
        one = dim is None or isinstance(dim, int) or hasattr(dim, "__index__")
        if p == "fro" and (one or len(dim) <= 2):
            return vector_norm(x, 2, dim, keepdim, dtype=dtype)
        dims: Any = tuple(range(x.data.ndim)) if dim is None else dim
        return matrix_norm(x, p, dims, keepdim, dtype=dtype)
    return vector_norm(x, 2 if p is None else p, dim, keepdim, dtype=dtype)


# -- the operator table (NOTE [The operator table]) -----------------------------------------------
def _scan_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), 1))
    yield Sample((m.arr(3, 4), 0))
    yield Sample((m.arr(2, 3, 4), -1))
    yield Sample((m.arr(), 0), note="0-d")
    yield Sample((m.arr(0, 3), 1), note="empty")


def _cumprod_samples(m: Maker) -> Iterator[Sample]:
    x = m.away(3, 5, low=-1.5, high=1.5)
    yield Sample((x, 1))
    yield Sample((m.away(2, 3, 4, low=-1.5, high=1.5), 0))
    if m.floating:
        z = x.copy()
        z[0, 2] = 0.0  # one zero
        z[1, 1] = z[1, 3] = 0.0  # two zeros
        z[2, 0] = z[2, 1] = 0.0  # zeros first, side by side
        yield Sample((z, 1), note="zeros")
        yield Sample((z.T.copy(), 0), note="zeros, along dim 0")
        yield Sample((np.zeros((2, 3), dtype=m.dtype), 1), note="all zeros")
    yield Sample((m.arr(), 0), note="0-d")
    yield Sample((m.arr(0, 3), 1), note="empty")


def _lcse_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    yield Sample((x, 1))
    yield Sample((m.arr(2, 3, 4), 0))
    yield Sample((x * 200, 1), note="large magnitudes: no overflow")
    yield Sample((m.arr(), 0), note="0-d")
    yield Sample((m.arr(0, 3), 1), note="empty")


def _cum_extreme_samples(m: Maker) -> Iterator[Sample]:
    x = m.distinct(3, 5) if m.floating else m.arr(3, 5, low=-3, high=3)
    yield Sample((x, 1))
    yield Sample((x, 0))
    yield Sample((m.distinct(2, 3, 4) if m.floating else m.arr(2, 3, 4), -1))
    if m.floating:
        y = x.copy()
        y[1, 2] = np.nan
        yield Sample((y, 1), note="a NaN stays")
    # (no empty sample: torch's cummax_backward returns the empty input itself, which
    # requires grad, so its "first derivative" records a graph that aengine's does not)
    yield Sample((m.arr(), 0), note="0-d")


def _dim_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")


def _lcse_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from _dim_errors(m)
    yield ErrorCase((m.idx(3, high=3), 0), exc=RuntimeError, match="not implemented for")


def _mnorm_samples(m: Maker) -> Iterator[Sample]:
    a = m.arr(3, 4)
    yield Sample((a,))
    for ord in ("nuc", 2, -2):  # 1, -1, +-inf: NOTE [ZeroTensor second derivatives]
        yield Sample((a, ord))
    yield Sample((m.arr(4, 3), "nuc"), note="a tall matrix")
    yield Sample((m.arr(4, 3), -2))
    yield Sample((m.arr(2, 3, 4), 2), note="a batch")
    yield Sample((m.arr(3, 2, 4), "nuc", (0, 2), True), note="other dims, keepdim")
    yield Sample((m.arr(2, 3, 4), "fro", (-1, -2)))


def _mnorm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), exc=RuntimeError, match="at least 2 dimensions")
    yield ErrorCase((m.arr(3, 4), 3), exc=RuntimeError, match="not supported")
    yield ErrorCase((m.arr(3, 4), "abc"), exc=RuntimeError, match="not supported")
    yield ErrorCase((m.arr(3, 4), 1, (1, 1)), exc=RuntimeError, match="dims must be different")
    yield ErrorCase((m.arr(3, 4), 1, (0, 2)), exc=IndexError, match="Dimension out of range")


def _norm_samples(m: Maker) -> Iterator[Sample]:
    x = m.away(3, 4)
    yield Sample((x,))
    yield Sample((x, 3, 1, True))
    yield Sample((x, 0.5, 0))
    yield Sample((x, 0))
    yield Sample((x, "fro", (0, 1)))
    yield Sample((x, "nuc"), note="a matrix norm")


def _norm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2, 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(3), "nuc"), exc=RuntimeError, match="at least 2 dimensions")


register(
    OpInfo("cumsum", cumsum, _scan_samples, method=True, dtypes=ALL, errors=_dim_errors),
    OpInfo("cumprod", cumprod, _cumprod_samples, method=True, dtypes=ALL, errors=_dim_errors),
    OpInfo("logcumsumexp", logcumsumexp, _lcse_samples, method=True, errors=_lcse_errors),
    OpInfo("cummax", cummax, _cum_extreme_samples, method=True, dtypes=ALL, errors=_dim_errors),
    OpInfo("cummin", cummin, _cum_extreme_samples, method=True, dtypes=ALL, errors=_dim_errors),
    OpInfo(
        "linalg.matrix_norm",
        matrix_norm,
        _mnorm_samples,
        errors=_mnorm_errors,
        tol={"float32": (1e-3, 1e-4)},
        notes="'nuc' and +-2 differentiate an SVD: exact where the singular values are distinct.",
    ),
    OpInfo(
        "norm",
        norm,
        _norm_samples,
        method=True,
        errors=_norm_errors,
        notes="An integer input is a TypeError (torch: RuntimeError); at the zero vector the "
        "2-norm's second derivative is 0 (torch: NaN).",
    ),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "cumsum": "dim:dim",
        "cumprod": "dim:dim",
        "logcumsumexp": "dim:dim",
        "cummax": "dim:dim",
        "cummin": "dim:dim",
        "norm": "dim:dim",
        "linalg.matrix_norm": "dim:dim",
    }
)
