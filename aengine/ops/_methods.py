"""Attach the operators to Tensor as methods and Python operators."""

from __future__ import annotations

from typing import Any

from ..tensors import _random
from ..tensors._tensor import Tensor
from . import _arith, _compare, _index, _inplace_ops, _linalg, _shape, _unary


def _reflected(fn: Any, name: str) -> Any:
    def m(self: Tensor, other: Any) -> Any:
        return fn(other, self)

    m.__name__ = m.__qualname__ = name
    return m


_T: Any = Tensor
# Functions are assigned directly (no wrapper frame): ``self`` becomes their
# first argument.  Their signatures for type checkers are declared in
# _tensor.py under TYPE_CHECKING.
_T.__add__ = _T.__radd__ = _arith.add
_T.__sub__ = _arith.sub
_T.__rsub__ = _arith.rsub
_T.__mul__ = _T.__rmul__ = _arith.mul
_T.__truediv__ = _arith.div
_T.__rtruediv__ = _arith.rdiv
_T.__pow__ = _arith.pow
_T.__rpow__ = _arith.rpow
_T.__neg__ = _arith.neg
_T.__matmul__ = _linalg.matmul
_T.__rmatmul__ = _reflected(_linalg.matmul, "__rmatmul__")
_T.__abs__ = _unary.abs
for _name, _op in _compare.OPERATORS.items():  # ==, <, &...: NotImplemented for a str (as torch)
    setattr(_T, _name, _op)
_T.__invert__ = _compare.logical_not

# the operators' methods come from the operator table (bind_methods, NOTE [The operator
# table]); these are the Tensor methods that are no operators of torch's namespace
_T.to = _shape.to
_T.cpu = _shape.cpu
_T.__getitem__ = _index.getitem
_T.__setitem__ = _inplace_ops.setitem
for _fn in (
    _inplace_ops.add_, _inplace_ops.sub_, _inplace_ops.mul_, _inplace_ops.div_,
    _inplace_ops.zero_, _inplace_ops.fill_, _inplace_ops.copy_, _inplace_ops.clamp_,
    _inplace_ops.relu_,
):  # fmt: skip
    setattr(_T, _fn.__name__, _fn)
# ``a += b`` mutates ``a`` in place, as in PyTorch
_T.__iadd__ = _inplace_ops.add_
_T.__isub__ = _inplace_ops.sub_
_T.__imul__ = _inplace_ops.mul_
_T.__itruediv__ = _inplace_ops.div_
_T.T = property(
    lambda self: _shape.permute(self, tuple(reversed(range(self.ndim)))),
    doc="The tensor with its dimensions reversed (a view).",
)


def _mT(self: Tensor) -> Tensor:
    if self.data.ndim < 2:  # PyTorch's text (it warns and returns a 0-d tensor itself)
        raise ValueError(
            "tensor.mT is only supported on matrices or batches of matrices. "
            f"Got {self.data.ndim}-D tensor."
        )
    return _shape.transpose(self, -2, -1)


_T.mT = property(_mT, doc="Transpose of the last two dims (a view; needs at least 2 dims).")
_T.view_as = _shape.view_as
_T.reshape_as = _shape.reshape_as
_T.expand_as = _shape.expand_as
_T.float = lambda self: _shape.to(self, dtype="float32")
_T.double = lambda self: _shape.to(self, dtype="float64")
_T.half = lambda self: _shape.to(self, dtype="float16")
_T.long = lambda self: _shape.to(self, dtype="int64")
_T.int = lambda self: _shape.to(self, dtype="int32")
_T.bool = lambda self: _shape.to(self, dtype="bool")
_T.type = _shape.type_
_T.cuda = _shape.cuda
_T.bernoulli = _random.bernoulli
_T.multinomial = _random.multinomial
_T.type_as = _shape.type_as
