"""The differentiable operators, grouped by family, and the Tensor methods."""

from __future__ import annotations

from ..tensors._creation import ones_like, zeros_like
from ..tensors._tensor import Tensor
from ..tensors._tensor_ops import bind_tensor_ops
from . import _forward as _forward
from ._arith import add, clamp, div, maximum, minimum, mul, neg, pow, rdiv, rpow, rsub, sub, where
from ._compare import eq, ge, gt, le, logical_and, logical_not, logical_or, lt, ne
from ._core import TENSOR_OPS as TENSOR_OPS
from ._index import (
    gather,
    getitem,
    index_select,
    masked_fill,
    narrow,
    select,
    take_along_dim,
)
from ._join import cat, chunk, split, stack, unbind
from ._linalg import dot, matmul, mm
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
    prod,
    softmax,
    std,
    sum,
    var,
)
from ._scan import norm
from ._shape import (
    astype,
    broadcast_to,
    clone,
    contiguous,
    cpu,
    dim_or_axis,
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
from ._tensor_ops import TensorOps
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
    "cat", "stack", "split", "chunk", "unbind", "mm", "dot", "cpu", "dim_or_axis",
]  # fmt: skip


# The differentiable namespace (the ``F`` of rules under create_graph), bound
# into the tensors layer, which may not import this one (NOTE [Two gradient
# namespaces] in aengine/tensors/_tensor_ops.py).
bind_tensor_ops(TensorOps())

# the families that register into the operator table (NOTE [The operator table])
from . import (  # noqa: E402,F401
    _activation,
    _binary,
    _conv,
    _decomp,
    _loss,
    _methods,
    _norm,
    _pool,
    _reshape,
    _scan,
    _scatter,
    _special,
)
from ._table import bind_methods  # noqa: E402

bind_methods(Tensor)  # the table's methods not set by hand in _methods

# torch's ``_saved_<name>`` attributes of the nodes of every family imported above
from ._saved_fields import install as _install_saved_fields  # noqa: E402

_install_saved_fields()
