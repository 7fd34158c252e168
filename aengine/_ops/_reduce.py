"""Reductions: sum, mean (primitives here); the rest of the family builds on them."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._core import node_class, record

__all__ = ["sum", "mean", "norm_dims", "expand_reduced"]


def norm_dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """``dim`` (None, an int or a sequence) as a sorted tuple of axes; None for all."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    n = max(ndim, 1)
    out = []
    for d in dims:
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


def expand_reduced(F: Any, g: Any, shape: tuple[int, ...], dims: Any, keepdim: bool) -> Any:
    """Broadcast a reduced gradient back to ``shape`` (the input's shape)."""
    if dims is not None and not keepdim:
        kshape = tuple(1 if i in dims else s for i, s in enumerate(shape))
        g = F.reshape(g, kshape)
    elif dims is None and not keepdim:
        g = F.reshape(g, (1,) * len(shape))
    return F.broadcast_to(g, shape)


def _sum_rule(F: Any, g: Any, s: Any, n: Any) -> Any:
    shape, dims, keepdim = n.attrs
    return (expand_reduced(F, g, shape, dims, keepdim),)


SumBackward0 = node_class("SumBackward0", _sum_rule)
SumBackward1 = node_class("SumBackward1", _sum_rule)


def sum(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Sum over ``dim`` (all dimensions when None).

    Example::

        >>> import aengine as ae
        >>> ae.ones(2, 3).sum(dim=1).tolist()
        [3.0, 3.0]
    """
    dims = norm_dims(dim, x.data.ndim)
    data = x.data
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind in "bui":
        data = data.astype("int64")
    out = data.sum(axis=dims, keepdims=keepdim)
    cls = SumBackward0 if dim is None else SumBackward1
    return record(cls, out, x._device, (x,), attrs=(x.data.shape, dims, keepdim))


def _mean_rule(F: Any, g: Any, s: Any, n: Any) -> Any:
    shape, dims, keepdim, count = n.attrs
    return (expand_reduced(F, g, shape, dims, keepdim) / count,)


MeanBackward0 = node_class("MeanBackward0", _mean_rule)
MeanBackward1 = node_class("MeanBackward1", _mean_rule)


def mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (all dimensions when None); floating tensors only."""
    if x.data.dtype.kind not in "fc":
        raise TypeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {x.data.dtype}; convert with .to(ae.float64)"
        )
    dims = norm_dims(dim, x.data.ndim)
    out = x.data.mean(axis=dims, keepdims=keepdim)
    count = x.data.size if dims is None else 1
    if dims is not None:
        for d in dims:
            count *= x.data.shape[d]
    cls = MeanBackward0 if dim is None else MeanBackward1
    if out.dtype != x.data.dtype:
        out = out.astype(x.data.dtype)
    return record(cls, out, x._device, (x,), attrs=(x.data.shape, dims, keepdim, float(count)))
