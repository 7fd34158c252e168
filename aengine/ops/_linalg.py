"""Matrix products: matmul (PyTorch's 1-d, batched and broadcasting rules), mm, dot.

As in PyTorch, both operands must have the same dtype: a matrix product
never promotes (a float32 weight times a float64 input raises instead of
silently computing in float64).  Elementwise ops do promote.
"""

from __future__ import annotations

from typing import Any

from ..tensors._tensor import Tensor
from ._core import GradOps, as_tensor_arg, node_class, record, same_device

__all__ = ["matmul", "mm", "dot"]


def _same_dtype(a: Tensor, b: Tensor) -> None:
    """PyTorch's matrix products take one dtype: no promotion (RuntimeError as PyTorch)."""
    da, db = a.data.dtype, b.data.dtype
    if da == db:
        return
    if a.data.ndim == 1 and b.data.ndim == 1:
        raise RuntimeError(
            f"dot : expected both vectors to have same dtype, but found {da} and {db}; "
            f"convert one first, e.g. b.to(ae.{da})"
        )
    raise RuntimeError(
        f"expected m1 and m2 to have the same dtype, but got: {da} != {db}; convert one "
        f"first, e.g. b.to(ae.{da})"
    )


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


#: a product's backward costs about this many elementwise operations per
#: multiply-add of its forward (two products of the same size, against the
#: cheapest transcendental kernels): NOTE [Kernel offload policy]
_MACS_PER_ELEMENT = 16


def _product(cls: Any, out: Any, dev: Any, a: Tensor, b: Tensor, k: int) -> Tensor:
    """Record a matrix product whose inner dimension is ``k``.

    Its node's ``numel``, the measure of its kernel's cost from which the
    runtime decides to run it off the event loop, counts the product's
    work: the result's size times ``k`` over ``_MACS_PER_ELEMENT``, not the
    result's size alone (a 64x512 result of a 512-deep product costs as
    much as an elementwise kernel of a million elements).
    """
    t = record(cls, out, dev, (a, b), (a, b))
    node = t._fn
    if node is not None and k > _MACS_PER_ELEMENT:
        node.numel = t.data.size * k // _MACS_PER_ELEMENT
    return t


MmBackward0 = node_class("MmBackward0", _matmul_rule)
MvBackward0 = node_class("MvBackward0", _matmul_rule)
DotBackward0 = node_class("DotBackward0", _matmul_rule)


def matmul(a: Any, other: Any) -> Tensor:
    """Matrix product ``a @ other`` (1-d, 2-d, batched and broadcast as PyTorch).

    Both operands must have the same dtype: as in PyTorch a float32 matrix
    times a float64 one raises (convert one with ``.to(dtype)``).

    Example::

        >>> import aengine as ae
        >>> (ae.ones(2, 3) @ ae.ones(3)).tolist()
        [3.0, 3.0]
    """
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a, other if isinstance(other, Tensor) else None)
    if not isinstance(other, Tensor):
        other = as_tensor_arg(other, a)
    na, nb = a.data.ndim, other.data.ndim
    if na == 0 or nb == 0:
        raise ValueError(
            f"both arguments to matmul need to be at least 1D, but they are "
            f"{na}D and {nb}D; use * for scalars"
        )
    dev = same_device(a, other)
    ka = a.data.shape[-1]
    kb = other.data.shape[-2] if nb > 1 else other.data.shape[0]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {tuple(a.data.shape)} and {tuple(other.data.shape)} cannot be "
            f"multiplied ({ka} != {kb})"
        )
    if a.data.dtype != other.data.dtype:
        _same_dtype(a, other)
    if na == 2:
        cls = MmBackward0 if nb == 2 else MvBackward0 if nb == 1 else MmBackward0
    else:
        cls = DotBackward0 if na == 1 and nb == 1 else MmBackward0
    return _product(cls, a.data @ other.data, dev, a, other, ka)


def _tensor_arg(x: Any, name: str, what: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{name}(): argument '{what}' must be Tensor, not {type(x).__name__}; "
            "convert it with ae.tensor(...)"
        )


def mm(a: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices (2-D tensors only, same dtype), as ``torch.mm``.

    Example::

        >>> import aengine as ae
        >>> ae.mm(ae.ones(2, 3), ae.ones(3, 4)).shape
        (2, 4)
    """
    _tensor_arg(a, "mm", "input")
    _tensor_arg(mat2, "mm", "mat2")
    if a.data.ndim != 2:
        raise ValueError(f"self must be a matrix, got a {a.data.ndim}-D tensor; use ae.matmul")
    if mat2.data.ndim != 2:
        raise ValueError(f"mat2 must be a matrix, got a {mat2.data.ndim}-D tensor; use ae.matmul")
    (n, k), (kb, m) = a.data.shape, mat2.data.shape
    if k != kb:
        raise ValueError(f"mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {kb}x{m})")
    dev = same_device(a, mat2)
    if a.data.dtype != mat2.data.dtype:
        _same_dtype(a, mat2)
    return _product(MmBackward0, a.data @ mat2.data, dev, a, mat2, k)


def dot(a: Tensor, tensor: Tensor) -> Tensor:
    """The dot product of two 1-D tensors of one dtype (a 0-d tensor), as ``torch.dot``.

    Example::

        >>> import aengine as ae
        >>> ae.dot(ae.tensor([1.0, 2.0]), ae.tensor([3.0, 4.0])).item()
        11.0
    """
    _tensor_arg(a, "dot", "input")
    _tensor_arg(tensor, "dot", "tensor")
    na, nb = a.data.ndim, tensor.data.ndim
    if na != 1 or nb != 1:
        raise ValueError(
            f"1D tensors expected, but got {na}D and {nb}D tensors; use ae.matmul for others"
        )
    if a.data.dtype != tensor.data.dtype:
        _same_dtype(a, tensor)
    sa, sb = a.data.shape[0], tensor.data.shape[0]
    if sa != sb:
        raise ValueError(
            f"inconsistent tensor size, expected tensor [{sa}] and src [{sb}] to have the same "
            f"number of elements, but got {sa} and {sb} elements respectively"
        )
    dev = same_device(a, tensor)
    return _product(DotBackward0, a.data @ tensor.data, dev, a, tensor, sa)
