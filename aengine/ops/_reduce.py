"""Reductions: sum, mean, prod, amax/amin, max/min, var/std, logsumexp, softmax, norm.

Each op carries a rule (var and std one each, as PyTorch's VarBackward0 and
StdBackward0), and norm for p = 1 and +-inf reuses sum / amax / amin.  Module functions named like
builtins (``sum``, ``max``, ``min``) shadow them here: use ``builtins.max``.
"""

from __future__ import annotations

import builtins
import math
import operator
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import numpy as np

from ..core._errors import AutogradError
from ..tensors._creation import ones, tensor_input
from ..tensors._dtype import get_default_dtype
from ..tensors._tensor import Tensor
from . import _compare
from ._arith import maximum, minimum
from ._core import (
    ELEMENTWISE,
    TRANSCENDENTAL,
    GradOps,
    Reduction,
    node_class,
    record,
    record_one,
    weigh,
    wrap,
)
from ._cpu_kernels import SUM_MIN_SIZE, max_trailing, sum_trailing
from ._raw import RawOps
from ._shape import dim_or_axis
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register
from ._unary import abs, exp

__all__ = [
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "max",
    "min",
    "var",
    "std",
    "logsumexp",
    "softmax",
    "log_softmax",
    "vector_norm",
    "argmax",
    "argmin",
    "var_mean",
    "std_mean",
    "median",
    "kthvalue",
    "mode",
    "count_nonzero",
    "nansum",
    "nanmean",
    "aminmax",
    "MedianResult",
    "KthvalueResult",
    "ModeResult",
    "AminmaxResult",
    "MaxResult",
    "MinResult",
    "norm_dims",
    "expand_reduced",
]


def norm_dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """``dim`` (None, an int or a sequence) as a sorted tuple of axes; None for all."""
    if dim is None:
        return None
    one = isinstance(dim, (int, float, str)) or hasattr(dim, "__index__")
    dims = (dim,) if one else tuple(dim)
    n = builtins.max(ndim, 1)
    out = []
    for d in dims:
        if not isinstance(d, int):
            if not hasattr(d, "__index__"):
                raise TypeError(
                    f"argument 'dim' must be an int or a tuple of ints, got {type(d).__name__} "
                    f"({d!r})"
                )
            d = d.__index__()
        if not -n <= d < n:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})"
            )
        out.append(d % n if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"dim {dim} appears multiple times in the list of dims")
    if ndim == 0:
        return None
    return tuple(sorted(out))


def expand_reduced(F: GradOps, g: Any, shape: tuple[int, ...], dims: Any, keepdim: bool) -> Any:
    """Broadcast a reduced gradient back to ``shape`` (the input's shape)."""
    if dims is not None and not keepdim:
        kshape = tuple(1 if i in dims else s for i, s in enumerate(shape))
        g = F.reshape(g, kshape)
    # a full reduction's gradient is 0-d: it broadcasts to any shape as it is
    return F.broadcast_to(g, shape)


def _sum_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    shape, dims, keepdim = n.attrs
    return (expand_reduced(F, g, shape, dims, keepdim),)


# forward mode: the reduced dims of a node's attrs (NOTE [JVP rules] in _forward.py)
_DIMS = Reduction(lambda a: (a[1], a[2]))  # (shape, dims, keepdim, ...)
_DIM = Reduction(lambda a: ((a[1],) if a[0] else None, a[2]))  # (shape, dim, keepdim, index)
_ALL = Reduction(lambda a: (None, False))  # every element


# The sum of every element (dim None): attrs is the input's shape alone, one
# object less per node (a loss sums once per step, a wide graph per branch).
def _sum_all_jvp(ts: Any, ins: Any, out: Tensor, a: Any, s: Any) -> Any:
    return sum(ts[0]).reshape(out.data.shape)


def _sum_jvp(ts: Any, ins: Any, out: Tensor, a: Any, s: Any) -> Any:
    return sum(ts[0], a[1], a[2])


SumBackward0 = node_class(
    "SumBackward0", lambda F, g, s, n: (F.broadcast_to(g, n.attrs),), jvp=_sum_all_jvp
)
SumBackward1 = node_class("SumBackward1", _sum_rule, jvp=_sum_jvp)


def sum(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
) -> Tensor:
    """Sum over ``dim`` (all dimensions when None; ``axis`` is an alias).

    Example::

        >>> import aengine as ae
        >>> ae.ones(2, 3).sum(dim=1).tolist()
        [3.0, 3.0]
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"sum(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "sum")
    data = x.data
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind in "bui":
        data = data.astype("int64")
    if dim is None:  # every element; keepdim's ones broadcast back as they are
        if data.size >= SUM_MIN_SIZE:  # (NOTE [A faster float sum over trailing dims])
            out = sum_trailing(data, tuple(range(data.ndim)), keepdim)
        else:
            out = data.sum(keepdims=True) if keepdim else data.sum()
        return record_one(SumBackward0, out, x._device, x, 1, x.data.shape)
    dims = norm_dims(dim, x.data.ndim)
    if data.size >= SUM_MIN_SIZE and dims is not None:
        out = sum_trailing(data, dims, keepdim)
    else:
        out = data.sum(axis=dims, keepdims=keepdim)
    return record_one(SumBackward1, out, x._device, x, 1, (x.data.shape, dims, keepdim))


def _mean_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    shape, dims, keepdim, count = n.attrs
    if not count:  # an empty input: an empty gradient (and no division by zero)
        return (expand_reduced(F, g, shape, dims, keepdim),)
    # divide the reduced gradient, then broadcast it: one full-size array, not two
    return (expand_reduced(F, g / count, shape, dims, keepdim),)


MeanBackward0 = node_class("MeanBackward0", _mean_rule, jvp=_DIMS)
MeanBackward1 = node_class("MeanBackward1", _mean_rule, jvp=_DIMS)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Mean over ``dim`` (all dimensions when None; ``axis`` is an alias); floating tensors only."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "mean")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "mean")
    if x.data.dtype.kind not in "fc":
        raise TypeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {x.data.dtype}; convert with .to(ae.float64)"
        )
    dims = norm_dims(dim, x.data.ndim)
    count = _count(x.data.shape, dims)
    if count:
        out = x.data.mean(axis=dims, keepdims=keepdim)
    else:  # the mean of nothing is NaN (as PyTorch), without numpy's warning
        out = x.data.sum(axis=dims, keepdims=keepdim) * x._device.backend.xp.nan
    cls = MeanBackward0 if dim is None else MeanBackward1
    if out.dtype != x.data.dtype:
        out = out.astype(x.data.dtype)
    return record_one(cls, out, x._device, x, 1, (x.data.shape, dims, keepdim, float(count)))


# -- helpers of the rules below ---------------------------------------------------------
def _count(shape: tuple[int, ...], dims: Any) -> int:
    """How many elements each slice reduced over ``dims`` (all when None) holds."""
    count = 1
    for i, s in enumerate(shape):
        if dims is None or i in dims:
            count *= s
    return count


def _arr(v: Any) -> Any:
    """The backend array of a saved value (an array, or a Tensor under create_graph)."""
    return v.data if v.__class__ is Tensor else v


def _kept_shape(shape: tuple[int, ...], dims: Any) -> tuple[int, ...]:
    """``shape`` with the reduced ``dims`` (all when None) as size 1."""
    return tuple(1 if dims is None or i in dims else s for i, s in enumerate(shape))


def _keep(F: GradOps, v: Any, shape: tuple[int, ...], dims: Any, keepdim: bool) -> Any:
    """A reduced value (array or Tensor) reshaped so that it broadcasts against ``shape``."""
    return v if keepdim else F.reshape(v, _kept_shape(shape, dims))


def _check_float(x: Tensor, name: str) -> None:
    if x.data.dtype.kind not in "fc":
        raise TypeError(
            f"{name}(): expected a floating point input, got {x.data.dtype}; "
            f"convert with .to(ae.float64)"
        )


def _check_nonempty(x: Tensor, dims: Any, name: str) -> None:
    """Reductions without identity (max, min...) refuse empty slices, as PyTorch."""
    if x.data.size:
        return
    if dims is None:
        raise AutogradError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )
    for d in dims:
        if x.data.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _one_dim(dim: Any, ndim: int, name: str) -> int:
    """A single ``dim`` argument (an int or a numpy integer), wrapped into [0, ndim)."""
    if dim.__class__ is not int:
        if isinstance(dim, (bool, np.bool_)) or not hasattr(dim, "__index__"):
            raise TypeError(f"{name}(): dim must be an int, got {type(dim).__name__}")
        dim = operator.index(dim)
    dims = norm_dims(dim, ndim)
    return 0 if dims is None else dims[0]


# -- prod ------------------------------------------------------------------------------------
# NOTE [prod with zeros]
# d prod(x) / d x_i is the product of the *other* elements.  Without zeros
# that is ``out / x`` (PyTorch's fast path, differentiable as it stands).
# With zeros it is the product of an exclusive prefix and an exclusive
# suffix product: on arrays (plain backward) from cumprod, O(n); under
# create_graph from a log-step scan (Hillis-Steele) of multiplications of
# shifted slices, O(n log n), every step a differentiable op, so all orders
# of derivative stay exact at zeros (PyTorch uses cumprod's own backward).
def _ones(like: Tensor, shape: tuple[int, ...]) -> Tensor:
    return ones(*shape, dtype=like.dtype, device=like.device)


def _moved(F: GradOps, c: Tensor, s: int, right: bool) -> Any:
    """``c`` moved ``s`` places along the last axis, padded with ones (what ``F`` makes)."""
    n = c.shape[-1]
    pad = _ones(c, (*c.shape[:-1], s))
    if right:  # element i takes c[..., i - s]
        return F.cat([pad, F.getitem(c, (..., slice(0, n - s)))], -1)
    return F.cat([F.getitem(c, (..., slice(s, n))), pad], -1)  # takes c[..., i + s]


def _scan(F: GradOps, x: Tensor, right: bool) -> Any:
    """Products of the elements before (``right``) or after each one, along the last axis."""
    c = _moved(F, x, 1, right)
    s = 1
    while s < x.shape[-1]:
        c = c * _moved(F, c, s, right)
        s *= 2
    return c


def _prod_others(F: GradOps, x: Any, axis: int) -> Any:
    """``P[..., i, ...] = prod_{j != i} x[..., j, ...]`` along ``axis``."""
    if x.__class__ is Tensor:
        xm = F.swapaxes(x, axis, -1)
        return F.swapaxes(_scan(F, xm, True) * _scan(F, xm, False), axis, -1)
    xp = cast(RawOps, F).xp  # on arrays, F is the backend's RawOps
    xm = xp.moveaxis(x, axis, -1)
    ones = xp.ones((*xm.shape[:-1], 1), dtype=xm.dtype)
    left = xp.cumprod(xp.concatenate([ones, xm[..., :-1]], -1), -1)
    rev = xp.flip(xm[..., 1:], -1)
    right = xp.flip(xp.cumprod(xp.concatenate([ones, rev], -1), -1), -1)
    return xp.moveaxis(left * right, -1, axis)


def _prod_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, out = s
    shape, dims, keepdim = n.attrs
    if not shape:
        return (g,)
    gk = _keep(F, g, shape, dims, keepdim)
    if not (_arr(x) == 0).any():
        return (gk * (_keep(F, out, shape, dims, keepdim) / x),)
    if dims is None:
        others = F.reshape(_prod_others(F, F.reshape(x, (-1,)), 0), shape)
    else:
        others = _prod_others(F, x, dims[0])
    return (gk * others,)


ProdBackward0 = node_class("ProdBackward0", _prod_rule, jvp=_DIMS)
ProdBackward1 = node_class("ProdBackward1", _prod_rule, jvp=_DIMS)


def prod(
    x: Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    axis: int | None = None,
) -> Tensor:
    """Product over one ``dim`` (all elements when None; ``axis`` is an alias).

    Exact gradients with zeros.

    See NOTE [prod with zeros].

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(dim=1).tolist()
        [2.0, 12.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "prod")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "prod")
    dims = None if dim is None else norm_dims(_one_dim(dim, x.data.ndim, "prod"), x.data.ndim)
    data = x.data
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind in "bui":
        data = data.astype("int64")
    out = data.prod(axis=dims, keepdims=keepdim)
    cls = ProdBackward0 if dim is None else ProdBackward1
    attrs = (x.data.shape, dims, keepdim)
    bcast = out.dtype != x.data.dtype
    return record(cls, out, x._device, (x,), (x,), attrs=attrs, save_output=True, bcast=bcast)


# -- amax / amin, max() / min() ---------------------------------------------------------------
# NOTE [Gradients of extremes and NaN]
# Both rules share the gradient evenly between the elements equal to the
# result, as PyTorch, and differ where the result is NaN (NaN equals nothing):
# - max() / min() of every element (PyTorch's evenly_distribute_backward)
#   count a NaN element as equal to a NaN result: max([1, nan, nan]) gives
#   [0, 1/2, 1/2];
# - amax / amin (PyTorch's scale_grad_by_count, ``mask * (g / count)``) find
#   no element equal to a NaN result: the count is 0 and the whole slice gets
#   NaN.  The division is by NaN instead of 0, which gives that NaN without
#   numpy's division warning.
def _extreme_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, out = s
    shape, dims, keepdim = n.attrs
    xa = _arr(x)
    mask = xa == _arr(out).reshape(_kept_shape(shape, dims))
    count = mask.sum(axis=dims, keepdims=True).astype(xa.dtype)
    if not count.all():  # a slice whose result is NaN
        count = n.dev.backend.xp.where(count == 0, math.nan, count)
    return (_keep(F, g, shape, dims, keepdim) / count * mask,)


def _extreme_all_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, out = s
    xa, oa = _arr(x), _arr(out)
    xp = n.dev.backend.xp
    mask = xp.isnan(xa) if xp.isnan(oa) else xa == oa
    count = mask.sum().astype(xa.dtype)  # at least 1: the result is an element
    return (F.where(mask, g / count, 0.0),)


AmaxBackward0 = node_class("AmaxBackward0", _extreme_rule, jvp=_DIMS)
AminBackward0 = node_class("AminBackward0", _extreme_rule, jvp=_DIMS)
MaxBackward1 = node_class("MaxBackward1", _extreme_all_rule, jvp=_ALL)
MinBackward1 = node_class("MinBackward1", _extreme_all_rule, jvp=_ALL)


def _extreme(cls: Any, x: Tensor, dim: Any, keepdim: bool, is_max: bool, name: str) -> Tensor:
    if dim.__class__ is tuple and not dim:
        dim = None
    dims = norm_dims(dim, x.data.ndim)
    _check_nonempty(x, dims, name)
    out = (
        x.data.max(axis=dims, keepdims=keepdim)
        if is_max
        else x.data.min(axis=dims, keepdims=keepdim)
    )
    attrs = (x.data.shape, dims, keepdim)
    return record(cls, out, x._device, (x,), (x,), attrs=attrs, save_output=True)


def amax(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Maximum over ``dim`` (an int, a tuple, or None for all; ``axis`` is an alias).

    Ties share the gradient.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 5.0], [7.0, 2.0]]).amax(dim=1).tolist()
        [5.0, 7.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "amax")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "amax")
    return _extreme(AmaxBackward0, x, dim, keepdim, True, "amax")


def amin(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """Minimum over ``dim`` (an int, a tuple, or None for all; ``axis`` is an alias).

    Ties share the gradient.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 5.0], [7.0, 2.0]]).amin(dim=0).tolist()
        [1.0, 2.0]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "amin")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "amin")
    return _extreme(AminBackward0, x, dim, keepdim, False, "amin")


# -- max(dim) / min(dim): values and indices ----------------------------------------------
class MaxResult(NamedTuple):
    """``(values, indices)`` of ``max(x, dim)`` (as ``torch.return_types.max``)."""

    values: Tensor
    indices: Tensor


class MinResult(NamedTuple):
    """``(values, indices)`` of ``min(x, dim)`` (as ``torch.return_types.min``)."""

    values: Tensor
    indices: Tensor


def _select_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # The gradient goes to the selected element only (PyTorch's
    # value_selecting_reduction_backward); a one-hot mask keeps it differentiable.
    shape, dim, keepdim, idx = n.attrs
    if not shape:
        return (g,)
    kshape = [1] * len(shape)
    kshape[dim] = shape[dim]
    onehot = n.dev.backend.xp.arange(shape[dim]).reshape(kshape) == idx
    return (F.where(onehot, _keep(F, g, shape, (dim,), keepdim), 0.0),)


MaxBackward0 = node_class("MaxBackward0", _select_rule, jvp=_DIM)
MinBackward0 = node_class("MinBackward0", _select_rule, jvp=_DIM)


def _select(x: Tensor, dim: int, keepdim: bool, is_max: bool) -> Any:
    name = "max" if is_max else "min"
    d = _one_dim(dim, x.data.ndim, name)
    xp = x._device.backend.xp
    data = x.data
    shape = data.shape
    if not shape:
        idx = kidx = xp.zeros((), dtype="int64")
        vals = data.copy()
    else:
        _check_nonempty(x, (d,), name)
        kidx = (xp.argmax if is_max else xp.argmin)(data, axis=d, keepdims=True)
        vals = xp.take_along_axis(data, kidx, axis=d)
        idx = kidx
        if not keepdim:
            vals, idx = vals.squeeze(d), kidx.squeeze(d)
    cls = MaxBackward0 if is_max else MinBackward0
    values = record_one(cls, vals, x._device, x, 1, (shape, d, keepdim, kidx))
    indices = wrap(idx.astype("int64", copy=True), x._device)  # not the saved array
    return (MaxResult if is_max else MinResult)(values, indices)


def max(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
    """``max(x)``: the largest element (0-d); ``max(x, dim)``: ``(values, indices)``.

    Without ``dim`` ties share the gradient; with ``dim`` the gradient goes to
    the element at ``indices`` (int64, the first maximum), as PyTorch.
    ``max(x, other)`` with a tensor ``other`` is ``maximum(x, other)``.
    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([[1.0, 5.0], [7.0, 2.0]]).max(dim=1)
        >>> v.tolist(), i.tolist()
        ([5.0, 7.0], [1, 0])
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "max")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "max")
    if dim is None:
        return _extreme(MaxBackward1, x, None, False, True, "max")
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    return _select(x, dim, keepdim, True)


def min(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
    """``min(x)``: the smallest element (0-d); ``min(x, dim)``: ``(values, indices)``.

    The mirror image of :func:`max`.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([3.0, 1.0, 2.0]).min().item()
        1.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "min")
    if axis is not None:
        dim = dim_or_axis(dim, axis, "min")
    if dim is None:
        return _extreme(MinBackward1, x, None, False, False, "min")
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    return _select(x, dim, keepdim, False)


# -- var / std -----------------------------------------------------------------------------------
def _var_grad(F: GradOps, g: Any, x: Any, attrs: Any) -> Any:
    """PyTorch's var_backward: ``(2 / dof) * g * (x - mean(x))``, g broadcast back."""
    shape, dims, keepdim, count, dof = attrs
    if dims is not None and not keepdim:
        g = F.reshape(g, tuple(1 if i in dims else s for i, s in enumerate(shape)))
    # the mean over an empty slice is never read: an empty x has an empty gradient
    centered = x - F.sum(x, axis=dims, keepdims=True) / (count or 1)
    # the scale goes on the reduced gradient: one full-size product, not two
    return (g * (2.0 / dof if dof else math.inf) * centered,)


def _var_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (x,) = s
    return _var_grad(F, g, x, n.attrs)


def _std_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # PyTorch's std_backward: var's gradient of g / (2 std), 0 where std is 0
    # (sqrt's slope is infinite there); the zeros are masked only where they are
    x, out = s
    zero = _arr(out) == 0
    if zero.any():
        g = F.where(zero, 0.0, g / F.where(zero, 1.0, out * 2.0))
    else:
        g = g / (out * 2.0)
    return _var_grad(F, g, x, n.attrs)


VarBackward0 = node_class("VarBackward0", _var_rule, jvp=_DIMS)
StdBackward0 = node_class("StdBackward0", _std_rule, jvp=_DIMS)


def _correction(name: str, unbiased: Any, correction: Any) -> float:
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): pass either unbiased= or correction=, not both")
    if unbiased is not None:
        return 1.0 if unbiased else 0.0
    return 1.0 if correction is None else float(correction)


def var(
    x: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
    axis: Any = None,
) -> Tensor:
    """Variance over ``dim`` with Bessel's ``correction`` (1 by default; ``unbiased=False`` is 0).

    ``axis`` is an alias of ``dim``.

    Its rule is written in the ``F`` namespace, so derivatives of every order
    follow.  Fewer elements than ``correction`` + 1 warn and give inf/nan, as PyTorch.

    Example::

        >>> import aengine as ae
        >>> round(ae.tensor([1.0, 2.0, 3.0, 4.0]).var().item(), 4)
        1.6667
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "var")
    return _var(x, dim, unbiased, keepdim, correction, "var", axis)


def _var(
    x: Tensor,
    dim: Any,
    unbiased: Any,
    keepdim: bool,
    correction: Any,
    name: str,
    axis: Any = None,
) -> Tensor:
    if axis is not None:
        dim = dim_or_axis(dim, axis, name)
    if isinstance(dim, bool):  # var(x, True): PyTorch's var(input, unbiased) overload
        dim, unbiased = None, dim
    _check_float(x, name)
    c = _correction(name, unbiased, correction)
    dims = norm_dims(dim, x.data.ndim)
    count = _count(x.data.shape, dims)
    dof = builtins.max(count - c, 0.0)
    if dof == 0:
        warnings.warn(
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than "
            "the reduction factor (input numel divided by output numel).",
            UserWarning,
            stacklevel=3,
        )
    data = x.data
    if count:
        centered = data - data.mean(axis=dims, keepdims=True)
    else:  # an empty slice: no mean (nor numpy's warning); the result is NaN all the same
        centered = data
    out = (centered * centered).sum(axis=dims, keepdims=keepdim) / dof
    if name == "std":
        out = x._device.backend.xp.sqrt(out)
    cls = StdBackward0 if name == "std" else VarBackward0
    attrs = (x.data.shape, dims, keepdim, count, dof)
    return record(cls, out, x._device, (x,), (x,), attrs=attrs, save_output=name == "std")


def std(
    x: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
    axis: Any = None,
) -> Tensor:
    """Standard deviation: ``sqrt(var(...))``, with gradient 0 where it is 0 (as PyTorch).

    ``axis`` is an alias of ``dim``.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, 3.0]).std(unbiased=False).item()
        1.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "std")
    return _var(x, dim, unbiased, keepdim, correction, "std", axis)


# -- logsumexp, softmax, log_softmax ---------------------------------------------------------------
# NOTE [Stable exponentials]
# Forward passes subtract the (finite) maximum of each slice before exp, so
# nothing overflows.  The rules use only saved outputs and F ops, so the
# gradient is itself differentiable: d logsumexp = g * exp(x - out),
# d softmax = out * (g - sum(g * out)), d log_softmax = g - exp(out) * sum(g).
def _shift(xp: Any, a: Any, dims: Any) -> Any:
    """The max over ``dims`` (kept), 0 where infinite or when the slice is empty."""
    if a.size == 0:
        return xp.zeros(_kept_shape(a.shape, dims), dtype=a.dtype)
    m = max_trailing(a, dims)  # (short rows: NOTE in ops/_cpu_kernels.py)
    return xp.where(xp.isfinite(m), m, 0).astype(a.dtype, copy=False)


def _logsumexp_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, out = s
    shape, dims, keepdim = n.attrs
    return (_keep(F, g, shape, dims, keepdim) * F.exp(x - _keep(F, out, shape, dims, keepdim)),)


LogsumexpBackward0 = node_class("LogsumexpBackward0", _logsumexp_rule, jvp=_DIMS)


def logsumexp(x: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
    """``log(sum(exp(x), dim))`` computed without overflow (see NOTE [Stable exponentials]).

    ``dim`` (or its alias ``axis``) is required: an int or a tuple of ints.

    Example::

        >>> import aengine as ae
        >>> round(ae.tensor([1000.0, 1000.0]).logsumexp(0).item(), 2)
        1000.69
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "logsumexp")
    dim = dim_or_axis(dim, axis, "logsumexp", required=True)
    if x.data.dtype.kind in "biu":  # as PyTorch: integers give the default dtype
        x = x.to(dtype=get_default_dtype())
    dims = norm_dims(dim, x.data.ndim)
    xp = x._device.backend.xp
    a = x.data
    m = _shift(xp, a, dims)
    total = xp.exp(a - m).sum(axis=dims, keepdims=True)
    empty = total == 0  # empty (or all -inf) slices: -inf, without numpy's log(0) warning
    out = xp.log(xp.where(empty, 1, total)) + m
    if empty.any():
        out = xp.where(empty, -xp.inf, out)
    if not keepdim:
        out = out.reshape(_reduced(a.shape, dims))
    attrs = (a.shape, dims, keepdim)
    return record(
        LogsumexpBackward0,
        out.astype(a.dtype, copy=False),
        x._device,
        (x,),
        (x,),
        attrs,
        save_output=True,
    )


def _reduced(shape: tuple[int, ...], dims: Any) -> tuple[int, ...]:
    return () if dims is None else tuple(s for i, s in enumerate(shape) if i not in dims)


def _softmax_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (out,) = s
    if out.__class__ is Tensor or out.ndim == 0:
        return (out * (g - F.sum(g * out, n.attrs, True)),)
    # on arrays: the same, in place on the one temporary owned here
    t = g * out
    n.dev.backend.xp.subtract(g, sum_trailing(t, n.attrs, True), out=t)
    t *= out
    return (t,)


def _log_softmax_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (out,) = s
    if out.__class__ is Tensor or out.ndim == 0:
        return (g - F.exp(out) * F.sum(g, n.attrs, True),)
    # on arrays: the same, in place on the one temporary owned here
    xp = n.dev.backend.xp
    t = xp.exp(out)
    t *= sum_trailing(g, n.attrs, True)
    return (xp.subtract(g, t, out=t),)


# softmax's Jacobian is symmetric: its rule is its JVP (NOTE [JVP rules])
SoftmaxBackward0 = node_class("SoftmaxBackward0", _softmax_rule, jvp=ELEMENTWISE)
LogSoftmaxBackward0 = node_class(
    "LogSoftmaxBackward0",
    _log_softmax_rule,
    jvp=lambda ts, ins, out, a, s: ts[0] - sum(exp(out) * ts[0], a, True),
)


def _softmax_input(x: Tensor, dim: Any, dtype: Any, name: str) -> tuple[Tensor, Any]:
    if dtype is not None:
        x = x.to(dtype=dtype)
    _check_float(x, name)
    dims = norm_dims(_one_dim(dim, x.data.ndim, name), x.data.ndim)
    return x, dims


def softmax(x: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x), dim)``, stable for large inputs (NOTE [Stable exponentials]).

    ``dim`` (or its alias ``axis``) is required.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([0.0, 0.0]).softmax(0).tolist()
        [0.5, 0.5]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "softmax")
    x, dims = _softmax_input(x, dim_or_axis(dim, axis, "softmax", True), dtype, "softmax")
    xp = x._device.backend.xp
    e = x.data - _shift(xp, x.data, dims)
    if e.ndim:  # (an array: ours, exp and the division in place)
        xp.exp(e, out=e)
        e /= sum_trailing(e, dims, True)
        out = e
    else:
        e = xp.exp(e)
        out = e / e.sum(axis=dims, keepdims=True)
    return record_one(SoftmaxBackward0, out, x._device, x, 1, dims, save_output=True)


def log_softmax(x: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor:
    """``x - logsumexp(x, dim)``, stable for large inputs (NOTE [Stable exponentials]).

    ``dim`` (or its alias ``axis``) is required.

    Example::

        >>> import aengine as ae
        >>> [round(v, 4) for v in ae.tensor([0.0, 0.0]).log_softmax(0).tolist()]
        [-0.6931, -0.6931]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "log_softmax")
    dim = dim_or_axis(dim, axis, "log_softmax", True)
    x, dims = _softmax_input(x, dim, dtype, "log_softmax")
    xp = x._device.backend.xp
    z = x.data - _shift(xp, x.data, dims)
    lse = xp.log(sum_trailing(xp.exp(z), dims, True))
    if z.ndim:  # (an array: ours)
        z -= lse
        out = z
    else:
        out = z - lse
    t = record_one(LogSoftmaxBackward0, out, x._device, x, 1, dims, save_output=True)
    return weigh(t, TRANSCENDENTAL)  # (its rule takes exp of the result)


# -- norm ------------------------------------------------------------------------------------------
def _norm_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # PyTorch's linalg_vector_norm_backward for finite p != 0: gradient 0 where the norm is 0.
    x, out = s
    shape, dims, keepdim, p = n.attrs
    nk = _keep(F, out, shape, dims, keepdim)
    gk = _keep(F, g, shape, dims, keepdim)
    if p < 1:  # sgn(x) |x|^(p-1) (0 where x is 0) * g * norm^(1-p)
        zero_x = _arr(x) == 0
        ax = F.abs(x)
        powed = (
            F.where(zero_x, 0.0, F.where(zero_x, 1.0, ax) ** (p - 1))
            if zero_x.any()
            else (ax ** (p - 1))
        )
        return (F.sign(x) * powed * (gk * nk ** (1 - p)),)
    zero = _arr(nk) == 0
    scale = gk / F.where(zero, 1.0, nk if p == 2 else nk ** (p - 1))
    scale = F.where(zero, 0.0, scale)
    if p == 2:
        return (x * scale,)
    if p < 2:
        return (F.sign(x) * F.abs(x) ** (p - 1) * scale,)
    return (x * F.abs(x) ** (p - 2) * scale,)


LinalgVectorNormBackward0 = node_class("LinalgVectorNormBackward0", _norm_rule, jvp=_DIMS)


LinalgVectorNormBackward1 = node_class(
    "LinalgVectorNormBackward0", lambda F, g, s, n: (None,), jvp=lambda *_: None
)


def vector_norm(
    x: Tensor,
    ord: Any = 2,
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """Vector ``ord``-norm over ``dim`` (an int, a tuple, or None for all elements).

    ``ord``: 2, 1, inf, -inf, 0 (the count of nonzero elements, gradient 0)
    or any other number p: ``sum(|x|^p)^(1/p)``.  The gradient is 0 where the
    norm is 0 (as PyTorch); ``dtype`` casts the input first.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.vector_norm(ae.tensor([3.0, -4.0])).item()
        5.0
        >>> ae.linalg.vector_norm(ae.tensor([3.0, -4.0]), ord=1).item()
        7.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "linalg.vector_norm")
    if x.data.dtype.kind not in "fc":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {x.data.dtype}; convert with .to(ae.float64)"
        )
    if dtype is not None:
        x = x.to(dtype=dtype)
    if isinstance(ord, (str, bool)) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"linalg.vector_norm(): argument 'ord' must be a number, not {type(ord).__name__}; "
            "use linalg.matrix_norm for 'fro' and 'nuc'"
        )
    p = float(ord)
    dims = norm_dims(dim, x.data.ndim)
    if p in (math.inf, -math.inf):
        if x.data.size == 0 and (dims is None or 0 in [x.data.shape[d] for d in dims]):
            raise AutogradError(
                f"linalg.vector_norm: cannot compute the {ord} norm of an empty slice (no "
                "identity); reduce over non-empty dims only"
            )
        return (amax if p > 0 else amin)(abs(x), dims, keepdim)
    if p == 1:
        return sum(abs(x), dims, keepdim)
    a = x.data
    if p == 0:
        out = (a != 0).sum(axis=dims, keepdims=keepdim).astype(a.dtype)
        return record_one(LinalgVectorNormBackward1, out, x._device, x)
    xp = x._device.backend.xp
    if p == 2:
        out = xp.sqrt((a * a).sum(axis=dims, keepdims=keepdim))
    else:
        with np.errstate(divide="ignore"):
            out = (xp.abs(a) ** p).sum(axis=dims, keepdims=keepdim) ** (1.0 / p)
    attrs = (a.shape, dims, keepdim, p)
    return record(LinalgVectorNormBackward0, out, x._device, (x,), (x,), attrs, save_output=True)


# -- argmax / argmin ----------------------------------------------------------------------------
def _arg_extreme(x: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Tensor:
    name = "argmax" if is_max else "argmin"
    if x.__class__ is not Tensor:
        x = tensor_input(x, name)
    xp = x._device.backend.xp
    data = x.data
    fn = xp.argmax if is_max else xp.argmin
    if dim is None:
        if data.size == 0:
            raise IndexError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        out = fn(data.reshape(-1))
        if keepdim:
            out = xp.reshape(out, (1,) * data.ndim)
        return wrap(xp.asarray(out).astype("int64"), x._device)
    d = _one_dim(dim, data.ndim, name)
    if not data.ndim:
        return wrap(xp.zeros((), dtype="int64"), x._device)
    _check_nonempty(x, (d,), name)
    return wrap(fn(data, axis=d, keepdims=keepdim).astype("int64"), x._device)


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the largest element (of the flattened tensor, or along ``dim``); int64.

    The first one among ties; a NaN counts as the largest, as PyTorch.  No gradient.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[1.0, 5.0], [7.0, 2.0]]).argmax(dim=1).tolist()
        [1, 0]
    """
    return _arg_extreme(x, dim, keepdim, True)


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the smallest element (of the flattened tensor, or along ``dim``); int64.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([3.0, 1.0, 2.0]).argmin().item()
        1
    """
    return _arg_extreme(x, dim, keepdim, False)


# -- var_mean / std_mean ------------------------------------------------------------------------
def var_mean(
    x: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``(var(x, dim, ...), mean(x, dim))`` in one call, as ``torch.var_mean``.

    Example::

        >>> import aengine as ae
        >>> v, m = ae.var_mean(ae.tensor([1.0, 2.0, 3.0]))
        >>> v.item(), m.item()
        (1.0, 2.0)
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "var_mean")
    if isinstance(dim, bool):  # var_mean(x, True): the (input, unbiased) overload
        dim, unbiased = None, dim
    v = _var(x, dim, unbiased, keepdim, correction, "var_mean")
    return v, mean(x, dim, keepdim)


def std_mean(
    x: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``(std(x, dim, ...), mean(x, dim))`` in one call, as ``torch.std_mean``.

    Example::

        >>> import aengine as ae
        >>> s, m = ae.std_mean(ae.tensor([1.0, 3.0]), unbiased=False)
        >>> s.item(), m.item()
        (1.0, 2.0)
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "std_mean")
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    s = _var(x, dim, unbiased, keepdim, correction, "std")
    return s, mean(x, dim, keepdim)


# -- median, kthvalue, mode: values and indices --------------------------------------------------
class MedianResult(NamedTuple):
    """``(values, indices)`` of ``median(x, dim)`` (as ``torch.return_types.median``)."""

    values: Tensor
    indices: Tensor


class KthvalueResult(NamedTuple):
    """``(values, indices)`` of ``kthvalue(x, k, dim)`` (as ``torch.return_types.kthvalue``)."""

    values: Tensor
    indices: Tensor


class ModeResult(NamedTuple):
    """``(values, indices)`` of ``mode(x, dim)`` (as ``torch.return_types.mode``)."""

    values: Tensor
    indices: Tensor


class AminmaxResult(NamedTuple):
    """``(min, max)`` of ``aminmax(x)`` (as ``torch.return_types.aminmax``)."""

    min: Tensor
    max: Tensor


MedianBackward0 = node_class("MedianBackward0", _extreme_all_rule, jvp=_ALL)
MedianBackward1 = node_class("MedianBackward1", _select_rule, jvp=_DIM)
KthvalueBackward0 = node_class("KthvalueBackward0", _select_rule, jvp=_DIM)
ModeBackward0 = node_class("ModeBackward0", _select_rule, jvp=_DIM)


def _selected(cls: Any, x: Tensor, d: int, keepdim: bool, kidx: Any, result: Any) -> Any:
    """``result(values, indices)`` of the elements at ``kidx`` (kept dims) along ``d``."""
    xp = x._device.backend.xp
    data = x.data
    shape = data.shape
    if not shape:
        vals, idx = data.copy(), xp.zeros((), dtype="int64")
        kidx = idx
    else:
        vals = xp.take_along_axis(data, kidx, axis=d)
        idx = kidx
        if not keepdim:
            vals, idx = vals.squeeze(d), kidx.squeeze(d)
    values = record_one(cls, vals, x._device, x, 1, (shape, d, keepdim, kidx))
    return result(values, wrap(idx.astype("int64", copy=True), x._device))


def _kth_index(xp: Any, data: Any, d: int, k: int) -> Any:
    """The (kept-dim) index of the ``k``-th smallest (0-based) along ``d``: NaN sorts last."""
    order = xp.argsort(data, axis=d, kind="stable")
    return xp.take(order, xp.asarray([k]), axis=d)


def median(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The median (the lower one of an even count): of all elements, or ``(values, indices)`` by ``dim``.

    Without ``dim`` the result is 0-d and ties share the gradient; with
    ``dim`` the gradient goes to the element at ``indices``.  A NaN in a
    slice makes its median NaN (at the first NaN), as PyTorch.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([3.0, 1.0, 4.0, 2.0]).median().item()
        2.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "median")
    xp = x._device.backend.xp
    data = x.data
    if dim is None:
        if keepdim:
            raise TypeError("median(): keepdim=True needs a dim; pass dim= as well")
        flat = data.reshape(-1)
        if flat.size == 0:
            out = xp.asarray(xp.nan, dtype=data.dtype)
        elif data.dtype.kind == "f" and xp.isnan(flat).any():
            out = xp.asarray(xp.nan, dtype=data.dtype)
        else:
            out = xp.sort(flat)[(flat.size - 1) // 2]
        return record(MedianBackward0, out, x._device, (x,), (x,), save_output=True)
    d = _one_dim(dim, data.ndim, "median")
    if not data.ndim:
        return _selected(MedianBackward1, x, d, keepdim, None, MedianResult)
    _check_nonempty_select(x, d, "median")
    n = data.shape[d]
    kidx = _kth_index(xp, data, d, (n - 1) // 2) if n else _empty_index(xp, data, d)
    if data.dtype.kind == "f" and n:
        nan = xp.isnan(data)
        has = nan.any(axis=d, keepdims=True)
        if has.any():  # the first NaN of the slice
            kidx = xp.where(has, xp.argmax(nan, axis=d, keepdims=True), kidx)
    return _selected(MedianBackward1, x, d, keepdim, kidx, MedianResult)


def _empty_index(xp: Any, data: Any, d: int) -> Any:
    shape = list(data.shape)
    shape[d] = 1
    return xp.zeros(shape, dtype="int64")


def _check_nonempty_select(x: Tensor, d: int, name: str) -> None:
    """A slice along ``d`` of size 0 while the result has elements: IndexError, as PyTorch."""
    shape = x.data.shape
    if (
        shape[d] == 0
        and x.data.size == 0
        and builtins.any(s for i, s in enumerate(shape) if i != d)
    ):
        raise IndexError(
            f"{name}(): Expected reduction dim {d} to have non-zero size; "
            "reduce over a non-empty dim"
        )


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> KthvalueResult:
    """The ``k``-th smallest element (1-based) along ``dim``: ``(values, indices)``.

    The gradient goes to the element at ``indices``; NaN counts as the largest.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([3.0, 1.0, 2.0]).kthvalue(2)
        >>> v.item(), i.item()
        (2.0, 2)
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "kthvalue")
    if isinstance(k, (bool, np.bool_)) or not hasattr(k, "__index__"):
        raise TypeError(f"kthvalue(): argument 'k' must be an int, not {type(k).__name__}")
    k = operator.index(k)
    data = x.data
    d = _one_dim(dim, data.ndim, "kthvalue")
    n = data.shape[d] if data.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(
            f"kthvalue(): selected number k out of range for dimension {d} "
            f"(k={k}, size {n}); pick 1 <= k <= {n}"
        )
    if not data.ndim:
        return cast(
            KthvalueResult, _selected(KthvalueBackward0, x, d, keepdim, None, KthvalueResult)
        )
    kidx = _kth_index(x._device.backend.xp, data, d, k - 1)
    return cast(KthvalueResult, _selected(KthvalueBackward0, x, d, keepdim, kidx, KthvalueResult))


def _mode_index(xp: Any, data: Any, d: int) -> Any:
    """The (kept-dim) index of each slice's mode: the smallest most frequent value, last seen."""
    a = xp.moveaxis(data, d, -1)
    n = a.shape[-1]
    s = xp.sort(a, axis=-1)
    pos = xp.arange(n)
    change = s[..., 1:] != s[..., :-1]
    ones = xp.ones((*s.shape[:-1], 1), dtype=bool)
    start = xp.maximum.accumulate(xp.where(xp.concatenate([ones, change], -1), pos, 0), axis=-1)
    is_end = xp.concatenate([change, ones], -1)
    end = xp.flip(xp.minimum.accumulate(xp.flip(xp.where(is_end, pos, n), -1), axis=-1), -1)
    best = xp.argmax(end - start, axis=-1)[..., None]  # first: the smallest value
    value = xp.take_along_axis(s, best, axis=-1)
    last = xp.where(a == value, pos, -1).max(axis=-1, keepdims=True)
    return xp.moveaxis(last, -1, d)


def mode(x: Tensor, dim: int = -1, keepdim: bool = False) -> ModeResult:
    """The most frequent value along ``dim`` (the smallest among equally frequent ones).

    ``(values, indices)``, the index of its last occurrence, as PyTorch;
    the gradient goes to the element at ``indices``.

    Example::

        >>> import aengine as ae
        >>> v, i = ae.tensor([2.0, 1.0, 2.0, 3.0]).mode()
        >>> v.item(), i.item()
        (2.0, 2)
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "mode")
    data = x.data
    d = _one_dim(dim, data.ndim, "mode")
    if not data.ndim:
        return cast(ModeResult, _selected(ModeBackward0, x, d, keepdim, None, ModeResult))
    _check_nonempty_select(x, d, "mode")
    xp = x._device.backend.xp
    kidx = _mode_index(xp, data, d) if data.shape[d] else _empty_index(xp, data, d)
    return cast(ModeResult, _selected(ModeBackward0, x, d, keepdim, kidx, ModeResult))


# -- count_nonzero, nansum, nanmean, aminmax ---------------------------------------------------
def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    """How many elements are nonzero (over ``dim``, an int or a tuple; all when None); int64.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([[0.0, 1.0], [2.0, 3.0]]).count_nonzero(dim=1).tolist()
        [1, 2]
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "count_nonzero")
    dims = norm_dims(dim, x.data.ndim)
    out = (x.data != 0).sum(axis=dims)
    return wrap(x._device.backend.xp.asarray(out).astype("int64"), x._device)


def _nan_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # PyTorch's nansum_backward (and nanmean's through its division): the gradient
    # times "not NaN", a product, so that a NaN or inf gradient stays NaN there
    shape, dims, keepdim, scale, keep = n.attrs
    if scale is not None:
        g = g * (scale if g.__class__ is not Tensor else wrap(scale, g._device))
    gx = expand_reduced(F, g, shape, dims, keepdim)
    return (gx * (keep if gx.__class__ is not Tensor else wrap(keep, gx._device)),)


NansumBackward0 = node_class("NansumBackward0", _nan_rule, jvp=_DIMS)
NanmeanBackward0 = node_class("NanmeanBackward0", _nan_rule, jvp=_DIMS)


def _nan_reduce(x: Tensor, dim: Any, keepdim: bool, dtype: Any, name: str) -> Tensor:
    xp = x._device.backend.xp
    data = x.data
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind in "bui":
        data = data.astype("int64")
    dims = norm_dims(dim, data.ndim)
    nan = xp.isnan(data) if data.dtype.kind == "f" else xp.zeros(data.shape, dtype=bool)
    keep = (~nan).astype(data.dtype)
    total = xp.where(nan, 0, data).sum(axis=dims, keepdims=keepdim)
    scale = None
    if name == "nanmean":
        count = (~nan).sum(axis=dims, keepdims=keepdim)
        empty = count == 0
        safe = xp.where(empty, 1, count).astype(data.dtype)
        total = xp.where(empty, xp.nan, total / safe).astype(data.dtype)
        scale = xp.where(empty, xp.nan, 1 / safe).astype(data.dtype)
    cls = NanmeanBackward0 if name == "nanmean" else NansumBackward0
    attrs = (data.shape, dims, keepdim, scale, keep)
    bcast = total.dtype != x.data.dtype
    return record(cls, total, x._device, (x,), attrs=attrs, bcast=bcast)


def nansum(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Sum over ``dim`` treating NaN as zero (its gradient there is zero).

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, float("nan"), 2.0]).nansum().item()
        3.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "nansum")
    return _nan_reduce(x, dim, keepdim, dtype, "nansum")


def nanmean(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Mean over ``dim`` of the elements that are not NaN; floating tensors only.

    A slice of NaNs alone gives NaN (and a NaN gradient), as PyTorch.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([1.0, float("nan"), 3.0]).nanmean().item()
        2.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "nanmean")
    if x.data.dtype.kind not in "fc":
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got "
            f"{x.data.dtype}; convert with .to(ae.float64)"
        )
    return _nan_reduce(x, dim, keepdim, dtype, "nanmean")


def aminmax(x: Tensor, *, dim: int | None = None, keepdim: bool = False) -> AminmaxResult:
    """``(min, max)``: ``amin`` and ``amax`` over one ``dim`` (all elements when None).

    Ties share the gradient, as amin / amax.

    Example::

        >>> import aengine as ae
        >>> lo, hi = ae.tensor([[1.0, 5.0], [7.0, 2.0]]).aminmax(dim=1)
        >>> lo.tolist(), hi.tolist()
        ([1.0, 2.0], [5.0, 7.0])
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "aminmax")
    if dim is not None:
        dim = _one_dim(dim, x.data.ndim, "aminmax")
    empty = x.data.size == 0 and (dim is None or not x.data.ndim or x.data.shape[dim] == 0)
    if empty:
        raise RuntimeError(
            "aminmax(): cannot compute aminmax over an empty dimension as the operation has "
            "no identity; reduce over a non-empty dim"
        )
    return AminmaxResult(amin(x, dim, keepdim), amax(x, dim, keepdim))


# -- the operator table (NOTE [The operator table]) -----------------------------------------------
def _distinct(m: Maker, *shape: int) -> np.ndarray:
    """Values without ties in the dtype under test (integers too: a permutation)."""
    if m.floating:
        return m.distinct(*shape)
    n = int(np.prod(shape)) if shape else 1
    return (m.rng.permutation(n) - n // 2).reshape(shape).astype(m.dtype)


def _with(a: np.ndarray, value: float, *where: tuple[int, ...]) -> np.ndarray:
    """A copy of ``a`` with ``value`` at the positions ``where``."""
    a = a.copy()
    for w in where:
        a[w] = value
    return a


def _out_of_range(fn_args: Any = ()) -> Any:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield ErrorCase((m.arr(3, 4), 2, *fn_args), exc=IndexError, match="Dimension out of range")

    return errors


def _sum_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x,), {"dim": -1, "keepdim": True})
    yield Sample((m.arr(2, 3, 4),), {"dim": (0, 2)}, note="a tuple of dims")
    yield Sample((m.arr(2, 3),), {"dim": None, "keepdim": True})
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 3), 1), note="empty")


def _mean_samples(m: Maker) -> Iterator[Sample]:
    yield from _sum_samples(m)


def _prod_samples(m: Maker) -> Iterator[Sample]:
    x = m.away(3, 4, low=0.5, high=1.5)
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x,), {"dim": 0, "keepdim": True})
    if m.floating:
        yield Sample((_with(x, 0.0, (1, 2)), 1), note="one zero")
        yield Sample((_with(x, 0.0, (0, 1), (0, 3)), 1), note="two zeros in a row")
        yield Sample((_with(x, 0.0, (2, 0)),), note="a zero, every element")
    yield Sample((m.arr(),), note="0-d")


def _extreme_samples(m: Maker) -> Iterator[Sample]:
    x = _distinct(m, 3, 4)
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x,), {"dim": -2, "keepdim": True})
    yield Sample((_distinct(m, 2, 3, 4),), {"dim": (0, 2)}, note="a tuple of dims")
    yield Sample((_distinct(m),), note="0-d")


def _max_samples(m: Maker) -> Iterator[Sample]:
    x = _distinct(m, 3, 4)
    yield Sample((x,), note="every element: 0-d")
    yield Sample((x, 1), note="(values, indices)")
    yield Sample((x,), {"dim": 0, "keepdim": True})
    yield Sample((_distinct(m, 2, 3, 4), -1))
    yield Sample((x, _distinct(m, 4)), note="binary, broadcasting")
    yield Sample((_distinct(m), 0), note="0-d by dim")


def _extreme_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(0, 3),), exc=RuntimeError, match="Expected reduction dim")


def _var_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x,), {"dim": 0, "keepdim": True})
    yield Sample((x,), {"dim": 1, "unbiased": False})
    yield Sample((x,), {"dim": (0, 1), "correction": 0})
    yield Sample((m.arr(2, 3, 4),), {"dim": -1, "correction": 2})


def _var_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase(
        (m.arr(3, 4),),
        {"dim": 0, "unbiased": True, "correction": 1},
        exc=TypeError,
        match="either unbiased= or correction=",
        torch_same=False,
        note="torch's argument parser refuses the mix too, as a RuntimeError",
    )
    yield ErrorCase(
        (m.idx(3, high=3),),
        exc=TypeError,
        match="floating point",
        torch_same=False,
        note="torch raises RuntimeError for integer inputs",
    )


def _softmax_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    yield Sample((x, 1))
    yield Sample((x, 0))
    yield Sample((m.arr(2, 3, 4), -1))
    yield Sample((m.arr(), 0), note="0-d")


def _softmax_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(3, 4),), exc=TypeError, match="dim")


def _logsumexp_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    yield Sample((x, 1))
    yield Sample((x, (0, 1)))
    yield Sample((x, -1, True))
    if m.floating:
        yield Sample((x * 300, 1), note="large: no overflow")
    yield Sample((m.arr(), 0), note="0-d")


# NOTE [ZeroTensor second derivatives]
# torch's second derivative through sgn (the 1- and inf-norms) is a ZeroTensor,
# which the table's harness cannot turn into numpy: those orders are checked in
# tests/ops/test_reduce_table.py (tests.oracle.check_op) instead of here.
def _vnorm_samples(m: Maker) -> Iterator[Sample]:
    x = m.away(3, 4)
    yield Sample((x,))
    yield Sample((x, 0), note="the count of nonzero elements")
    yield Sample((x, 3, (0, 1)))
    yield Sample((x, 0.5, 1))
    yield Sample((x, -1.5, -1))
    yield Sample((x,), {"ord": 2, "dim": 1, "keepdim": True})
    yield Sample((m.arr(0, 3), 2, 1), note="empty")
    yield Sample((m.arr(),), note="0-d")


def _vnorm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2, 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.idx(3, high=3),), exc=RuntimeError, match="floating point")
    yield ErrorCase((m.arr(0, 3), math.inf), exc=RuntimeError, match="empty")
    yield ErrorCase((m.arr(3), "fro"), exc=TypeError, match="ord")


def _logical_samples(m: Maker) -> Iterator[Sample]:
    b = m.mask(3, 4)
    yield Sample((b,))
    yield Sample((b, 1))
    yield Sample((b, 0, True))
    yield Sample((m.arr(3, 4),), note="numbers")
    yield Sample((m.mask(2, 3, 4), (0, 2)), note="a tuple of dims")
    yield Sample((m.mask(0, 3),), note="empty")


def _arg_samples(m: Maker) -> Iterator[Sample]:
    x = _distinct(m, 3, 4)
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x, 0, True))
    yield Sample((x,), {"keepdim": True})
    yield Sample((_distinct(m, 2, 3, 4), -1))
    if m.floating:
        yield Sample((_with(x, math.nan, (1, 2)), 1), note="NaN counts as the largest")
    yield Sample((_distinct(m),), note="0-d")


def _arg_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(0, 3),), exc=IndexError, match="Expected reduction dim")


def _var_mean_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x, 1, False, True), note="(input, dim, unbiased, keepdim)")
    yield Sample((x,), {"dim": (0, 1), "correction": 0})
    yield Sample((x,), {"dim": 0, "keepdim": True, "correction": 2})


def _median_samples(m: Maker) -> Iterator[Sample]:
    x = _distinct(m, 3, 4)
    yield Sample((x,), note="every element: the lower median of 12")
    yield Sample((_distinct(m, 3, 5),))
    yield Sample((x, 1), note="an even count: the lower median")
    yield Sample((_distinct(m, 3, 5), 1, True))
    yield Sample((_distinct(m, 2, 3, 4), 0))
    yield Sample((_distinct(m),), note="0-d")
    yield Sample((_distinct(m), 0), note="0-d by dim")
    if m.floating:
        yield Sample((_with(x, math.nan, (0, 1), (0, 3)), 1), note="NaN: the first NaN")
        yield Sample((_with(x, math.nan, (2, 2)),), note="NaN, every element")


def _median_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 2), exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(3, 0), 1), exc=IndexError, match="non-zero size")
    yield ErrorCase((m.arr(3, 4),), {"keepdim": True}, exc=TypeError, match="needs a dim")


def _kth_samples(m: Maker) -> Iterator[Sample]:
    x = _distinct(m, 3, 4)
    yield Sample((x, 2))
    yield Sample((x, 1, 0))
    yield Sample((x, 4), {"dim": 1, "keepdim": True})
    yield Sample((_distinct(m, 2, 3, 4), 3, -2))
    yield Sample((_distinct(m), 1), note="0-d")
    if m.floating:
        yield Sample((_with(x, math.nan, (1, 1)), 4, 1), note="NaN sorts last")


def _kth_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), 5), exc=RuntimeError, match="out of range")
    yield ErrorCase((m.arr(3, 4), 0), exc=RuntimeError, match="out of range")
    yield ErrorCase((m.arr(3, 4), 1, 2), exc=IndexError, match="Dimension out of range")


def _mode_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_distinct(m, 3, 4),), note="no repeats: the smallest value")
    r = np.array([[1, 2, 2, 1, 3], [3, 3, 1, 1, 0], [5, 4, 4, 5, 5]]).astype(m.dtype)
    yield Sample((r,), note="repeats: the smallest most frequent value, its last index")
    yield Sample((r, 0))
    yield Sample((r.T.copy(), 0, True))
    yield Sample((_distinct(m),), note="0-d")


def _count_samples(m: Maker) -> Iterator[Sample]:
    x = _with(m.arr(3, 4), 0, (0, 1), (2, 2), (2, 3))
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x,), {"dim": (0, 1)})
    yield Sample((m.arr(),), note="0-d")


def _nansum_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    if m.floating:
        x = _with(x, math.nan, (0, 1), (2, 2), (2, 3))
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x, 0, True))
    yield Sample((x,), {"dim": (0, 1)})
    yield Sample((m.arr(),), note="0-d")


def _nanmean_samples(m: Maker) -> Iterator[Sample]:
    x = _with(m.arr(3, 4), math.nan, (0, 1), (2, 2), (2, 3))
    yield Sample((x,))
    yield Sample((x, 1))
    yield Sample((x, 0, True))
    yield Sample((_with(x, math.nan, (1, 0), (1, 1), (1, 2), (1, 3)), 1), note="an all-NaN row")


def _aminmax_samples(m: Maker) -> Iterator[Sample]:
    x = _distinct(m, 3, 4)
    yield Sample((x,))
    yield Sample((x,), {"dim": 1})
    yield Sample((x,), {"dim": 0, "keepdim": True})
    yield Sample((x,), {"keepdim": True})
    yield Sample((_distinct(m),), note="0-d")


def _aminmax_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4),), {"dim": 2}, exc=IndexError, match="Dimension out of range")
    yield ErrorCase((m.arr(0, 3),), exc=RuntimeError, match="empty")


register(
    OpInfo("sum", sum, _sum_samples, method=True, dtypes=ALL, errors=_out_of_range()),
    OpInfo("mean", mean, _mean_samples, method=True, errors=_out_of_range()),
    OpInfo("prod", prod, _prod_samples, method=True, dtypes=ALL, errors=_out_of_range()),
    OpInfo("amax", amax, _extreme_samples, method=True, dtypes=ALL, errors=_extreme_errors),
    OpInfo("amin", amin, _extreme_samples, method=True, dtypes=ALL, errors=_extreme_errors),
    OpInfo("max", max, _max_samples, method=True, dtypes=ALL, errors=_extreme_errors),
    OpInfo("min", min, _max_samples, method=True, dtypes=ALL, errors=_extreme_errors),
    OpInfo("var", var, _var_samples, method=True, errors=_var_errors),
    OpInfo("std", std, _var_samples, method=True, errors=_var_errors),
    OpInfo(
        "logsumexp",
        logsumexp,
        _logsumexp_samples,
        method=True,
        dtypes=ALL,
        errors=_out_of_range(),
    ),
    OpInfo("softmax", softmax, _softmax_samples, method=True, errors=_softmax_errors),
    OpInfo("log_softmax", log_softmax, _softmax_samples, method=True, errors=_softmax_errors),
    OpInfo(
        "linalg.vector_norm",
        vector_norm,
        _vnorm_samples,
        errors=_vnorm_errors,
        notes="At the zero vector the 2-norm's second derivative is 0 (torch: NaN).",
    ),
    OpInfo(
        "any",
        _compare.any,
        _logical_samples,
        method=True,
        dtypes=ALL,
        grad=False,
        errors=_out_of_range(),
    ),
    OpInfo(
        "all",
        _compare.all,
        _logical_samples,
        method=True,
        dtypes=ALL,
        grad=False,
        errors=_out_of_range(),
    ),
    OpInfo("argmax", argmax, _arg_samples, method=True, dtypes=ALL, grad=False, errors=_arg_errors),
    OpInfo("argmin", argmin, _arg_samples, method=True, dtypes=ALL, grad=False, errors=_arg_errors),
    OpInfo("var_mean", var_mean, _var_mean_samples, errors=_out_of_range()),
    OpInfo("std_mean", std_mean, _var_mean_samples, errors=_out_of_range()),
    OpInfo("median", median, _median_samples, method=True, dtypes=ALL, errors=_median_errors),
    OpInfo("kthvalue", kthvalue, _kth_samples, method=True, dtypes=ALL, errors=_kth_errors),
    OpInfo(
        "mode",
        mode,
        _mode_samples,
        method=True,
        dtypes=ALL,
        errors=_out_of_range(),
        notes="Which index a tie of the mode's occurrences gives: the last one, as PyTorch on CPU.",
    ),
    OpInfo(
        "count_nonzero",
        count_nonzero,
        _count_samples,
        method=True,
        dtypes=ALL,
        grad=False,
        errors=_out_of_range(),
    ),
    OpInfo("nansum", nansum, _nansum_samples, method=True, dtypes=ALL, errors=_out_of_range()),
    OpInfo("nanmean", nanmean, _nanmean_samples, method=True, errors=_out_of_range()),
    OpInfo("aminmax", aminmax, _aminmax_samples, method=True, dtypes=ALL, errors=_aminmax_errors),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "sum": "dim:dim",
        "mean": "dim:dim",
        "prod": "dim:dim",
        "amax": "dim:dim",
        "amin": "dim:dim",
        "var": "dim:dim",
        "std": "dim:dim",
        "logsumexp": "dim:dim",
        "linalg.vector_norm": "dim:dim",
        "argmax": "dim:dim",
        "argmin": "dim:dim",
        "var_mean": "dim:dim",
        "std_mean": "dim:dim",
        "count_nonzero": "dim:dim",
        "nansum": "dim:dim",
        "nanmean": "dim:dim",
        "softmax": "dim:dim=0",
        "log_softmax": "dim:dim=0",
        "max": "custom",
        "min": "custom",
        "kthvalue": "dim:dim",
        "mode": "dim:dim",
    }
)
