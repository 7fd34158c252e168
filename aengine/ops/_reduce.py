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
from typing import Any, NamedTuple, cast

import numpy as np

from ..core._errors import AutogradError
from ..tensors._creation import ones, tensor_input
from ..tensors._tensor import Tensor
from ._arith import maximum, minimum
from ._core import TRANSCENDENTAL, GradOps, node_class, record, record_one, weigh, wrap
from ._raw import RawOps
from ._shape import dim_or_axis
from ._unary import abs

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
    "norm",
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


# The sum of every element (dim None): attrs is the input's shape alone, one
# object less per node (a loss sums once per step, a wide graph per branch).
SumBackward0 = node_class("SumBackward0", lambda F, g, s, n: (F.broadcast_to(g, n.attrs),))
SumBackward1 = node_class("SumBackward1", _sum_rule)


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
        out = data.sum(keepdims=True) if keepdim else data.sum()
        return record_one(SumBackward0, out, x._device, x, 1, x.data.shape)
    dims = norm_dims(dim, x.data.ndim)
    out = data.sum(axis=dims, keepdims=keepdim)
    return record_one(SumBackward1, out, x._device, x, 1, (x.data.shape, dims, keepdim))


def _mean_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    shape, dims, keepdim, count = n.attrs
    if not count:  # an empty input: an empty gradient (and no division by zero)
        return (expand_reduced(F, g, shape, dims, keepdim),)
    # divide the reduced gradient, then broadcast it: one full-size array, not two
    return (expand_reduced(F, g / count, shape, dims, keepdim),)


MeanBackward0 = node_class("MeanBackward0", _mean_rule)
MeanBackward1 = node_class("MeanBackward1", _mean_rule)


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


ProdBackward0 = node_class("ProdBackward0", _prod_rule)
ProdBackward1 = node_class("ProdBackward1", _prod_rule)


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


AmaxBackward0 = node_class("AmaxBackward0", _extreme_rule)
AminBackward0 = node_class("AminBackward0", _extreme_rule)
MaxBackward1 = node_class("MaxBackward1", _extreme_all_rule)
MinBackward1 = node_class("MinBackward1", _extreme_all_rule)


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


MaxBackward0 = node_class("MaxBackward0", _select_rule)
MinBackward0 = node_class("MinBackward0", _select_rule)


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


VarBackward0 = node_class("VarBackward0", _var_rule)
StdBackward0 = node_class("StdBackward0", _std_rule)


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
    m = a.max(axis=dims, keepdims=True)
    return xp.where(xp.isfinite(m), m, 0).astype(a.dtype, copy=False)


def _logsumexp_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, out = s
    shape, dims, keepdim = n.attrs
    return (_keep(F, g, shape, dims, keepdim) * F.exp(x - _keep(F, out, shape, dims, keepdim)),)


LogsumexpBackward0 = node_class("LogsumexpBackward0", _logsumexp_rule)


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
    _check_float(x, "logsumexp")
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
        LogsumexpBackward0, out.astype(a.dtype, copy=False), x._device, (x,), (x,), attrs,
        save_output=True,
    )  # fmt: skip


def _reduced(shape: tuple[int, ...], dims: Any) -> tuple[int, ...]:
    return () if dims is None else tuple(s for i, s in enumerate(shape) if i not in dims)


def _softmax_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (out,) = s
    return (out * (g - F.sum(g * out, n.attrs, True)),)


def _log_softmax_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (out,) = s
    return (g - F.exp(out) * F.sum(g, n.attrs, True),)


SoftmaxBackward0 = node_class("SoftmaxBackward0", _softmax_rule)
LogSoftmaxBackward0 = node_class("LogSoftmaxBackward0", _log_softmax_rule)


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
    e = xp.exp(x.data - _shift(xp, x.data, dims))
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
    out = z - xp.log(xp.exp(z).sum(axis=dims, keepdims=True))
    t = record_one(LogSoftmaxBackward0, out, x._device, x, 1, dims, save_output=True)
    return weigh(t, TRANSCENDENTAL)  # (its rule takes exp of the result)


# -- norm ------------------------------------------------------------------------------------------
def _norm_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # PyTorch's linalg_vector_norm_backward for finite p > 0: gradient 0 where the norm is 0.
    x, out = s
    shape, dims, keepdim, p = n.attrs
    nk = _keep(F, out, shape, dims, keepdim)
    zero = _arr(nk) == 0
    scale = _keep(F, g, shape, dims, keepdim) / F.where(zero, 1.0, nk if p == 2 else nk ** (p - 1))
    scale = F.where(zero, 0.0, scale)
    if p == 2:
        return (x * scale,)
    if p < 2:
        return (F.sign(x) * F.abs(x) ** (p - 1) * scale,)
    return (x * F.abs(x) ** (p - 2) * scale,)


LinalgVectorNormBackward0 = node_class("LinalgVectorNormBackward0", _norm_rule)


def norm(x: Tensor, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Vector ``p``-norm over ``dim`` (all elements when None).

    ``p`` is 2 (or 'fro'), 1, inf, -inf or a number >= 1; the gradient is 0
    at a zero vector (as PyTorch), not NaN.  At the zero vector the second
    derivative of the 2-norm is 0 too, where PyTorch's gives NaN.

    Example::

        >>> import aengine as ae
        >>> ae.tensor([3.0, 4.0]).norm().item()
        5.0
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "norm")
    _check_float(x, "norm")
    if p == "fro":
        p = 2
    if isinstance(p, str) or not isinstance(p, (int, float)) or p != p or p == 0:
        raise ValueError(f"norm(): p must be 'fro', inf, -inf or a number >= 1, got {p!r}")
    if p in (math.inf, -math.inf):
        dims = norm_dims(dim, x.data.ndim)
        if x.data.size == 0 and (dims is None or 0 in [x.data.shape[d] for d in dims]):
            raise AutogradError(
                f"norm(): cannot compute the {p} norm of an empty slice (no identity); "
                "reduce over non-empty dims only"
            )
        return (amax if p > 0 else amin)(abs(x), dim, keepdim)
    if p == 1:
        return sum(abs(x), dim, keepdim)
    if p < 1:
        raise ValueError(f"norm(): p must be 'fro', inf, -inf or a number >= 1, got {p!r}")
    dims = norm_dims(dim, x.data.ndim)
    a = x.data
    if p == 2:
        out = x._device.backend.xp.sqrt((a * a).sum(axis=dims, keepdims=keepdim))
    else:
        out = (x._device.backend.xp.abs(a) ** p).sum(axis=dims, keepdims=keepdim) ** (1.0 / p)
    attrs = (a.shape, dims, keepdim, p)
    return record(LinalgVectorNormBackward0, out, x._device, (x,), (x,), attrs, save_output=True)
