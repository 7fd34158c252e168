"""``TensorOps``: the gradient namespace ``F`` of rules under create_graph.

Each method is one differentiable aengine op, so that a rule run on Tensors
records the graph of its own gradient (NOTE [Two gradient namespaces] in
aengine/tensors/_tensor_ops.py).  ``RawOps`` (``adapters/_raw.py``) implements the same
Protocol, ``GradOps``, on a backend's arrays.
"""

from __future__ import annotations

from typing import Any

from ..tensors import _creation
from ..tensors._device import Device
from ..tensors._tensor import Tensor
from . import (
    _arith,
    _index,
    _inplace_ops,
    _join,
    _linalg,
    _reduce,
    _shape,
    _special,
    _unary,
)

__all__ = ["TensorOps"]


class TensorOps:
    """``F`` over Tensors: every function records a node (differentiable to any order)."""

    def exp(self, x: Tensor) -> Tensor:
        return _unary.exp(x)

    def log(self, x: Tensor) -> Tensor:
        return _unary.log(x)

    def sqrt(self, x: Tensor) -> Tensor:
        return _unary.sqrt(x)

    def sin(self, x: Tensor) -> Tensor:
        return _unary.sin(x)

    def cos(self, x: Tensor) -> Tensor:
        return _unary.cos(x)

    def tanh(self, x: Tensor) -> Tensor:
        return _unary.tanh(x)

    def sign(self, x: Tensor) -> Tensor:
        return _unary.sign(x)

    def abs(self, x: Tensor) -> Tensor:
        return _unary.abs(x)

    def log1p(self, x: Tensor) -> Tensor:
        return _unary.log1p(x)

    def expm1(self, x: Tensor) -> Tensor:
        return _unary.expm1(x)

    def sigmoid(self, x: Tensor) -> Tensor:
        return _unary.sigmoid(x)

    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        return _linalg.matmul(a, b)

    def maximum(self, a: Any, b: Any) -> Tensor:
        return _arith.maximum(a, b)

    def minimum(self, a: Any, b: Any) -> Tensor:
        return _arith.minimum(a, b)

    def where(self, cond: Any, a: Any, b: Any) -> Tensor:
        out: Tensor = _arith.where(cond, a, b)
        return out

    def scale_(self, x: Tensor, c: float) -> Tensor:
        return x * c  # RawOps.scale_ works in place; a Tensor in a graph may not

    def tanh_grad(self, g: Tensor, y: Tensor) -> Tensor:
        return g * (1.0 - y * y)

    def sigmoid_grad(self, g: Tensor, y: Tensor) -> Tensor:
        return g * y * (1.0 - y)

    def zeros_like(self, x: Tensor) -> Tensor:
        return _creation.zeros_like(x)

    def ones_like(self, x: Tensor) -> Tensor:
        return _creation.ones_like(x)

    def zeros(self, shape: tuple[int, ...], like: Tensor) -> Tensor:
        return _creation.zeros(*shape, dtype=like.dtype, device=like.device)

    def sum_to(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        return _shape.sum_to(x, shape)

    def broadcast_to(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        return _shape.broadcast_to(x, shape)

    def reshape(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        return _shape.reshape(x, shape)

    def permute(self, x: Tensor, axes: tuple[int, ...]) -> Tensor:
        return _shape.permute(x, axes)

    def swapaxes(self, x: Tensor, a: int, b: int) -> Tensor:
        return _shape.transpose(x, a, b)

    def expand_dims(self, x: Tensor, axis: int) -> Tensor:
        return _shape.unsqueeze(x, axis)

    def astype(self, x: Tensor, dtype: Any) -> Tensor:
        return _shape.to(x, dtype=dtype)

    def to_device(self, x: Tensor, device: Device) -> Tensor:
        return _shape.to(x, device)

    def sum(
        self, x: Tensor, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
    ) -> Tensor:
        return _reduce.sum(x, axis, keepdims)

    def prod(self, x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _reduce.prod(x, axis, keepdims)

    def getitem(self, x: Tensor, idx: Any) -> Tensor:
        return _index.getitem(x, idx)

    def index_add(self, shape: tuple[int, ...], idx: Any, g: Tensor, basic: bool) -> Tensor:
        return _index.index_add_grad(shape, idx, g, basic)

    def gather(self, x: Tensor, dim: int, idx: Any) -> Tensor:
        return _index.gather(x, dim, idx)

    def scatter_add(self, shape: tuple[int, ...], dim: int, idx: Any, g: Tensor) -> Tensor:
        return _index.scatter_add_grad(shape, dim, idx, g)

    def take_flat(self, x: Tensor, pos: Any) -> Tensor:
        return _inplace_ops.take_flat(x, pos)

    def put_flat(self, x: Tensor, pos: Any, v: Any, accumulate: bool = False) -> Tensor:
        return _inplace_ops.put_flat(x, pos, v, accumulate)

    def cat(self, xs: list[Tensor], axis: int) -> Tensor:
        return _join.cat(xs, axis)

    def solve(self, a: Tensor, b: Any) -> Tensor:
        # here, not at the top: the import line there is one other families edit too
        from ._decomp import solve_matrix

        return solve_matrix(a, b)

    def einsum(self, equation: str, *operands: Any) -> Tensor:
        return _linalg.einsum(equation, *operands)

    def erf(self, x: Tensor) -> Tensor:
        return _special.erf(x)

    def sinh(self, x: Tensor) -> Tensor:
        return _special.sinh(x)

    def cosh(self, x: Tensor) -> Tensor:
        return _special.cosh(x)

    def digamma(self, x: Tensor) -> Tensor:
        return _special.digamma(x)

    def polygamma(self, n: int, x: Tensor) -> Tensor:
        return _special.polygamma(n, x)

    def div_rounded(self, a: Any, b: Any, mode: str) -> Tensor:
        return _arith.div(a, b, rounding_mode=mode)
