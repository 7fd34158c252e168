"""The differentiable operators, grouped by family, and the Tensor methods."""

from __future__ import annotations

from ..tensors._creation import ones_like, zeros, zeros_like
from ._arith import add, clamp, div, maximum, minimum, mul, neg, pow, rdiv, rpow, rsub, sub, where
from ._compare import eq, ge, gt, le, logical_and, logical_not, logical_or, lt, ne
from ._core import TENSOR_OPS
from ._index import (
    gather,
    getitem,
    index_add_grad,
    index_select,
    masked_fill,
    narrow,
    scatter_add_grad,
    select,
    take_along_dim,
)
from ._inplace_ops import put_flat, take_flat
from ._join import cat, chunk, split, stack, unbind
from ._linalg import matmul
from ._reduce import (
    MaxResult,
    MinResult,
    amax,
    amin,
    log_softmax,
    logsumexp,
    max,
    mean,
    min,
    norm,
    prod,
    softmax,
    std,
    sum,
    var,
)
from ._shape import (
    astype,
    broadcast_to,
    clone,
    contiguous,
    expand,
    flatten,
    permute,
    reshape,
    squeeze,
    sum_to,
    to,
    transpose,
    unsqueeze,
    view,
)
from ._unary import abs, cos, exp, expm1, log, log1p, relu, sigmoid, sign, sin, sqrt, square, tanh

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "rsub", "rdiv", "rpow", "maximum", "minimum",
    "where", "clamp", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_not", "matmul", "sum", "mean", "reshape", "view", "flatten", "permute",
    "transpose", "expand", "broadcast_to", "sum_to", "squeeze", "unsqueeze", "clone",
    "contiguous", "to", "astype", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid",
    "relu", "square", "log1p", "expm1", "abs", "sign", "ones_like", "zeros_like",
    "prod", "amax", "amin", "max", "min", "var", "std", "logsumexp", "softmax",
    "log_softmax", "norm", "MaxResult", "MinResult",
    "getitem", "select", "narrow", "index_select", "gather", "take_along_dim", "masked_fill",
    "cat", "stack", "split", "chunk", "unbind",
]  # fmt: skip


def _fill_tensor_ops() -> None:
    """Give TENSOR_OPS (the ``F`` of create_graph rules) the names of ``_raw.RawOps``."""
    F = TENSOR_OPS
    for name in ("exp", "log", "sqrt", "sin", "cos", "tanh", "sign", "abs", "log1p", "expm1",
                 "sigmoid", "matmul", "maximum", "minimum", "where", "zeros_like", "ones_like",
                 "sum_to", "broadcast_to", "reshape", "permute"):  # fmt: skip
        setattr(F, name, globals()[name])
    F.astype = lambda x, dtype: to(x, dtype=dtype)
    F.sum = lambda x, axis=None, keepdims=False: sum(x, axis, keepdims)
    F.prod = lambda x, axis=None, keepdims=False: prod(x, axis, keepdims)
    F.scale_ = lambda x, c: x * c  # raw: in place (RawOps.scale_)
    F.tanh_grad = lambda g, y: g * (1.0 - y * y)  # raw: one array (RawOps.tanh_grad)
    F.sigmoid_grad = lambda g, y: g * y * (1.0 - y)
    F.swapaxes = transpose
    F.expand_dims = unsqueeze
    F.zeros = _zeros
    F.to_device = lambda x, device: to(x, device)
    F.getitem = getitem
    F.index_add = index_add_grad
    F.gather = gather
    F.scatter_add = scatter_add_grad
    F.cat = cat
    F.put_flat = put_flat
    F.take_flat = take_flat


def _zeros(shape: tuple[int, ...], like: object) -> object:
    return zeros(*shape, dtype=like.dtype, device=like.device)  # type: ignore[attr-defined]


_fill_tensor_ops()

from . import _methods  # noqa: E402,F401  (attaches the Tensor methods)
