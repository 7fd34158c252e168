"""The gradient namespace ``F`` of rules: its Protocol, and the differentiable one.

# NOTE [Two gradient namespaces]
# A gradient rule is written once against a namespace ``F`` of array
# functions: the backend's raw namespace (``RawOps``, plain arrays) for a
# plain backward, and ``TensorOps`` (Tensors recording a graph) under
# create_graph, so that one formula serves every order of derivative.  Both
# implement the Protocol ``GradOps`` below, the type of ``F`` in every rule
# (``Rule`` in ops/_core.py) and view function (``ViewFn``), so that mypy
# checks each call a rule makes on ``F``.  The Protocol lives here, below the
# ops layer, because views (``_views.py``) call through ``F`` too.
#
# ``TENSOR_OPS`` is a holder, not the namespace itself: the tensors layer
# (views rebuilding themselves under create_graph, CopySlices) needs the
# differentiable namespace but may not import aengine.ops, which implements it
# on top of this layer.  So aengine.ops binds its ``TensorOps`` instance here
# once, at import (``bind_tensor_ops``), and ``TENSOR_OPS`` forwards to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, cast

from ._device import Device

__all__ = ["TENSOR_OPS", "GradOps", "ViewFn", "bind_tensor_ops"]


class GradOps(Protocol):
    """The functions rules call on ``F`` (NOTE [Two gradient namespaces]).

    Values (``x``, ``g``...) are backend arrays for ``RawOps`` and Tensors for
    ``TensorOps``, hence ``Any``; arithmetic and comparisons on them use
    Python operators.  Names, arities and the other parameters are checked.
    Functions of values alone take them positional-only: RawOps binds most of
    them to the backend's functions (numpy's ufuncs), which name them otherwise.
    """

    # elementwise functions of one value
    def exp(self, x: Any, /) -> Any: ...
    def log(self, x: Any, /) -> Any: ...
    def sqrt(self, x: Any, /) -> Any: ...
    def sin(self, x: Any, /) -> Any: ...
    def cos(self, x: Any, /) -> Any: ...
    def tanh(self, x: Any, /) -> Any: ...
    def sign(self, x: Any, /) -> Any: ...
    def abs(self, x: Any, /) -> Any: ...
    def log1p(self, x: Any, /) -> Any: ...
    def expm1(self, x: Any, /) -> Any: ...
    def sigmoid(self, x: Any, /) -> Any: ...

    # of two or three values
    def matmul(self, a: Any, b: Any, /) -> Any: ...
    def maximum(self, a: Any, b: Any, /) -> Any: ...
    def minimum(self, a: Any, b: Any, /) -> Any: ...
    def where(self, cond: Any, a: Any, b: Any, /) -> Any: ...

    # derivatives computed in one array (RawOps: in place where it may)
    def scale_(self, x: Any, c: float) -> Any:
        """``x * c``; RawOps computes it in place: only for an array the rule just made."""

    def tanh_grad(self, g: Any, y: Any) -> Any:
        """``g * (1 - y * y)``: tanh's derivative from its output ``y``."""

    def sigmoid_grad(self, g: Any, y: Any) -> Any:
        """``g * y * (1 - y)``: sigmoid's derivative from its output ``y``."""

    # creation
    def zeros_like(self, x: Any, /) -> Any: ...
    def ones_like(self, x: Any, /) -> Any: ...
    def zeros(self, shape: tuple[int, ...], like: Any) -> Any:
        """Zeros of ``shape`` with the dtype (and device) of ``like``."""

    # shapes, dtypes, devices
    def sum_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        """Sum a broadcast gradient back to ``shape``."""

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any: ...
    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any: ...
    def permute(self, x: Any, axes: tuple[int, ...]) -> Any: ...
    def swapaxes(self, x: Any, a: int, b: int) -> Any: ...
    def expand_dims(self, x: Any, axis: int) -> Any: ...
    def astype(self, x: Any, dtype: Any) -> Any: ...
    def to_device(self, x: Any, device: Device) -> Any: ...

    # reductions
    def sum(
        self, x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
    ) -> Any: ...
    def prod(self, x: Any, axis: int | None = None, keepdims: bool = False) -> Any: ...

    # indexing and joining
    def getitem(self, x: Any, idx: Any) -> Any: ...
    def index_add(self, shape: tuple[int, ...], idx: Any, g: Any, basic: bool) -> Any:
        """Zeros of ``shape`` with ``g`` added at ``idx`` (the gradient of ``x[idx]``)."""

    def gather(self, x: Any, dim: int, idx: Any) -> Any:
        """PyTorch's gather: ``idx`` may be smaller than ``x`` outside ``dim``."""

    def scatter_add(self, shape: tuple[int, ...], dim: int, idx: Any, g: Any) -> Any:
        """Zeros of ``shape`` with ``g`` added along ``dim`` at ``idx`` (gather's gradient)."""

    def take_flat(self, x: Any, pos: Any) -> Any:
        """The elements of ``x`` at flat positions ``pos`` (an integer array of the backend)."""

    def put_flat(self, x: Any, pos: Any, v: Any, accumulate: bool = False) -> Any:
        """A copy of ``x`` with ``v`` written (or added) at flat positions ``pos``."""

    def cat(self, xs: list[Any], axis: int) -> Any: ...

    # linear algebra (the rules of aengine/ops/_decomp.py and _linalg.py)
    def solve(self, a: Any, b: Any, /) -> Any:
        """``x`` with ``a @ x == b``: ``b`` a matrix or a batch (..., n, k); batch dims broadcast."""

    def einsum(self, equation: str, *operands: Any) -> Any:
        """torch's (numpy's) einsum of ``operands`` (no ``...``: letters only)."""

    def erf(self, x: Any, /) -> Any:
        """The error function, elementwise (gelu's rule)."""

    # elementwise functions of the elementwise family's rules (ops/_special.py, _binary.py)
    def sinh(self, x: Any, /) -> Any: ...
    def cosh(self, x: Any, /) -> Any: ...
    def digamma(self, x: Any, /) -> Any: ...
    def polygamma(self, n: int, x: Any, /) -> Any:
        """The ``n``-th derivative of digamma (``n`` a non-negative int)."""

    def div_rounded(self, a: Any, b: Any, mode: str) -> Any:
        """``a / b`` rounded as ``mode`` says ("trunc" or "floor"), as torch.div's rounding_mode."""


#: ``view_fn(F, x)``: rebuild a view from its base's value ``x`` (array or Tensor)
ViewFn: TypeAlias = Callable[[GradOps, Any], Any]


class _Forward:
    """``TENSOR_OPS``: reads each name from the namespace bound by aengine.ops.

    A name is looked up on the bound namespace once, then cached on this
    object, so that later reads are plain attribute reads.
    """

    def __getattr__(self, name: str) -> Any:  # only for names not cached yet
        ns = _bound
        if ns is None:
            raise AttributeError(
                f"the differentiable ops namespace has no '{name}' (is aengine.ops imported?)"
            )
        value = getattr(ns, name)
        self.__dict__[name] = value
        return value


_bound: GradOps | None = None

TENSOR_OPS: GradOps = cast(GradOps, _Forward())
"""The ``F`` of rules under create_graph (forwards to aengine.ops' ``TensorOps``)."""


def bind_tensor_ops(ns: GradOps) -> None:
    """Make ``TENSOR_OPS`` forward to ``ns`` (aengine.ops calls this once, at import)."""
    global _bound
    _bound = ns
    vars(TENSOR_OPS).clear()  # names cached from a namespace bound before
