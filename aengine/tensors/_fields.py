"""The fields of a Tensor, for the modules of this layer that the Tensor class imports.

See NOTE [Tensor fields] in _tensor.py.
"""

from __future__ import annotations

from typing import Any

from ..core import TensorBase
from ._tensor_ops import ViewFn

__all__ = ["TensorFields"]


class TensorFields(TensorBase):
    """A Tensor's data fields, without its methods (the Tensor class derives from it)."""

    # See NOTE [Hot and cold fields] in aengine/core/_graph.py: the fields every tensor
    # needs are slots, the others default at class level and live in the
    # instance __dict__ only once set.
    __slots__ = (
        "__weakref__",
        "_device",
        "_fn",
        "_rg",
        "_vc",
        "data",
        "output_nr",
    )

    # a Tensor or None (the Tensor class declares them as such)
    _grad: Any = None
    _base: Any = None
    _view_fn: ViewFn | None = None
    _acc: Any = None
    _hooks: dict[int, Any] | None = None
    _post_acc_hooks: dict[int, Any] | None = None
    _retains: bool = False
    _inference: bool = False
    _view_meta: Any = None
    _creation: str | None = None
    #: the tangent at the open dual level (NOTE [Forward-mode AD] in _dual.py)
    _fw: Any = None
    #: an in-place op's tangent, computed once the op wrote its result
    _fw_pending: Any = None
    #: a snapshot's mark: the value of a tensor before an in-place op
    _snap: bool = False
