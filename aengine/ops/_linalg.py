"""Matrix multiplication with PyTorch's 1-d, batched and broadcasting rules."""

from __future__ import annotations

from typing import Any

from ..tensors._dtype import result_dtype
from ..tensors._tensor import Tensor
from ._core import GradOps, as_tensor_arg, node_class, record, same_device

__all__ = ["matmul"]


def _matmul_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    need = n.needs
    ga = gb = None
    if a.ndim == 1 and b.ndim == 1:  # dot product: g is 0-d
        return (g * b if need[0] else None, g * a if need[1] else None)
    if a.ndim == 1:  # (k) @ (..., k, m) -> (..., m)
        if need[0]:
            ga = F.matmul(F.expand_dims(g, -2), F.swapaxes(b, -1, -2))  # (..., 1, k)
            ga = F.sum_to(F.reshape(ga, (*ga.shape[:-2], ga.shape[-1])), a.shape)
        if need[1]:
            gb = F.expand_dims(a, -1) * F.expand_dims(g, -2)  # (..., k, m)
            gb = F.sum_to(gb, b.shape)
        return (ga, gb)
    if b.ndim == 1:  # (..., n, k) @ (k) -> (..., n)
        if need[0]:
            ga = F.expand_dims(g, -1) * b  # (..., n, k)
            ga = F.sum_to(ga, a.shape)
        if need[1]:
            gb = F.matmul(F.swapaxes(a, -1, -2), F.expand_dims(g, -1))  # (..., k, 1)
            gb = F.sum_to(F.reshape(gb, gb.shape[:-1]), b.shape)
        return (ga, gb)
    if need[0]:
        ga = F.sum_to(F.matmul(g, F.swapaxes(b, -1, -2)), a.shape)
    if need[1]:
        gb = F.sum_to(F.matmul(F.swapaxes(a, -1, -2), g), b.shape)
    return (ga, gb)


MmBackward0 = node_class("MmBackward0", _matmul_rule)


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product ``a @ b`` (1-d, 2-d, batched and broadcast as PyTorch).

    Example::

        >>> import aengine as ae
        >>> (ae.ones(2, 3) @ ae.ones(3)).tolist()
        [3.0, 3.0]
    """
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a, b if isinstance(b, Tensor) else None)
    if not isinstance(b, Tensor):
        b = as_tensor_arg(b, a)
    if a.data.ndim == 0 or b.data.ndim == 0:
        raise ValueError(
            f"both arguments to matmul need to be at least 1D, but they are "
            f"{a.data.ndim}D and {b.data.ndim}D; use * for scalars"
        )
    dev = same_device(a, b)
    ka = a.data.shape[-1]
    kb = b.data.shape[-2] if b.data.ndim > 1 else b.data.shape[0]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {tuple(a.data.shape)} and {tuple(b.data.shape)} cannot be "
            f"multiplied ({ka} != {kb})"
        )
    out = a.data @ b.data
    if a.data.dtype != b.data.dtype:
        rd = result_dtype(a, b)
        if out.dtype != rd:
            out = out.astype(rd)
    return record(MmBackward0, out, dev, (a, b), (a, b), bcast=a.data.dtype != b.data.dtype)
