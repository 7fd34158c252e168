"""In-place operations rewrite history: version counters, views and CopySlices.

# NOTE [In-place and history]
# An in-place op ``t.op_(other)`` mutates ``t.data`` and bumps the version
# counter ``t._vc`` that ``t`` shares with its base and every view of it, so
# saved tensors of earlier nodes fail their version check at backward.  When
# grad mode is on and ``t`` (or its base, for a view) or an operand requires
# grad, the op is recorded as its out-of-place node applied to the *old*
# value of ``t`` (``snapshot``): the node's first edge is ``t``'s previous
# gradient edge, and values its rule needs (e.g. old self for ``mul_`` when
# the other operand requires grad) are copied before the mutation, and only
# then.  ``commit_inplace`` then makes that node ``t``'s grad_fn (PyTorch's
# rebase_history); a retain_grad moves to the new node, tensor hooks stay
# with the old one (they belong to the old version).
#
# # NOTE [Views and CopySlices]
# For a view ``v`` (``_base`` b, ``_view_fn`` rebuilding v from b) the new
# history goes to the base: ``b._fn = CopySlices(old history of b, node)``.
# Its backward takes the gradient g of the new base, hands ``view_fn(g)`` to
# the op's rule, and returns g with the view region replaced by the rule's
# gradient for its self input (for the old base), plus the rule's gradients
# for the other inputs.  The view's own grad_fn is then stale: each view
# records in ``_view_meta`` the version at which its grad_fn was made, and
# ``refresh_view_grad_fn`` (called by ``Tensor.grad_fn`` when ``_view_meta``
# is not None) rebuilds it from the base through ``view_fn`` when the
# version moved.  That also updates views of the same base made before the
# in-place op.  ``_creation`` marks views that may not be modified in place
# (NOTE [Restricted views]).
#
# # NOTE [Restricted views]
# ``_creation`` is PyTorch's CreationMeta: None (DEFAULT) or a string.
# "no_grad" / "inference": made in no_grad / inference mode; "no_grad:fn" /
# "inference:fn": a view of such a view made with grad mode on while its base
# required grad (PyTorch gives it a grad_fn, so its errors name that node;
# here it has none and the name is rebuilt from the view function);
# "multi_output:<node>": an output of an op returning several views;
# "custom_function": an output of a custom Function (or an input it returned
# as is).  ``ops/_core.py::as_view`` propagates it as PyTorch's
# propagate_creation_meta; ``_view_error`` writes PyTorch's messages.
#
# # NOTE [Writing through expanded tensors]
# An expanded (broadcast) array is read-only in numpy: several elements share
# one memory location.  As PyTorch, writing to a region whose elements each
# have their own location is fine (``g = ones(1).expand(3); g[0] = 5`` writes
# the one element, so ``g`` reads [5, 5, 5]); an op whose written-to tensor
# has a dimension of stride 0 and size > 1 raises PyTorch's internal-overlap
# error, except fill_ / zero_ with a number (the same value everywhere) and
# advanced-index assignment (which warns, as PyTorch).  ``check_inplace``
# then gives the tensor a writeable alias of the same memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..core import AutogradError, Node, gradient_edge, own_vc
from ..core._graph import freed_error, new_tensor, set_history
from ..core._modes import _grad_enabled, _inference
from ..core._saved_hooks import PackedSaved
from . import _dual
from ._fields import TensorFields
from ._tensor_ops import TENSOR_OPS, ViewFn

T = TypeVar("T", bound=TensorFields)

__all__ = [
    "CopySlices",
    "check_inplace",
    "commit_inplace",
    "refresh_view_grad_fn",
    "set_before_inplace",
    "snapshot",
    "stale_view_requires_grad",
]

_ERR_LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
_ERR_LEAF_VIEW = (
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
)
_ERR_INFERENCE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
    "clone to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details."
)
_ERR_OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)
_ERR_READ_ONLY = (
    "the tensor's memory is read-only (it shares a read-only array); clone() the tensor "
    "before modifying it in place"
)
_CLARIFY = (
    " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the {block} block "
    "(if you don't want the inplace to be tracked) or both outside (if you want the inplace "
    "to be tracked)."
)
_MULTI_OUTPUT = (
    " This view is the output of a function that returns multiple views. Such functions do not "
    "allow the output views to be modified inplace. You should replace the inplace operation by "
    "an out-of-place one."
)
_IN_CUSTOM_FUNCTION = (
    " This view was created inside a custom Function (or because an input was returned as-is) "
    "and the autograd logic to handle view+inplace would override the custom backward "
    "associated with the custom Function, leading to incorrect gradients. This behavior is "
    "forbidden. You can fix this by cloning the output of the custom Function."
)
_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


def short_name(name: str) -> str:
    """A node's name as PyTorch's view errors print it: 'Unbind' for 'UnbindBackward0'."""
    return _BACKWARD_SUFFIX.sub("", name)


def _view_node_name(t: TensorFields, kind: str, creation: str) -> str | None:
    """The name of the node that PyTorch's view ``t`` has as grad_fn (None: it has none)."""
    if t._fn is not None:
        return short_name(t._fn.name())
    base = t._base
    if base is None or not base._rg:
        return None
    if kind == "multi_output":
        return short_name(creation.partition(":")[2])
    if creation.endswith(":fn") and t._view_fn is not None:
        # a view of a no_grad view: rebuilt with grad mode on, for the name of its last op
        token = _grad_enabled.set(True)
        try:
            fn = t._view_fn(TENSOR_OPS, base)._fn
        finally:
            _grad_enabled.reset(token)
        return None if fn is None else short_name(fn.name())
    return None


def _view_error(t: TensorFields, indirect: bool) -> str:
    """PyTorch's message for modifying a view whose ``_creation`` forbids it.

    See NOTE [Restricted views] (the messages of PyTorch's handle_view_on_rebase).
    """
    creation = t._creation or ""
    kind = creation.partition(":")[0]
    modified = "its base or another view of its base has been" if indirect else "is being"
    name = _view_node_name(t, kind, creation)
    if kind in ("no_grad", "inference") or name is None:
        if name is not None:
            prefix = f"Output {t.output_nr} of {name} is a view of a view which was created in"
        else:
            prefix = "A view was created in"
        if kind == "inference":
            msg = f"{prefix} inference mode and {modified} modified inplace in normal mode."
        else:
            msg = f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    else:
        msg = f"Output {t.output_nr} of {name} is a view and {modified} modified inplace."
    if kind == "multi_output":
        return msg + _MULTI_OUTPUT
    if kind == "custom_function":
        return msg + _IN_CUSTOM_FUNCTION
    return msg + _CLARIFY.format(block="inference_mode" if kind == "inference" else "no_grad")


#: called with each tensor an in-place op is about to change, while an
#: ``allow_mutation_on_saved_tensors`` context is open (None otherwise: the
#: in-place path then pays one global read; see NOTE [Mutation of saved
#: tensors] in autograd/_mutation.py)
_before_inplace: Callable[[Any], None] | None = None


def set_before_inplace(fn: Callable[[Any], None] | None) -> None:
    """Have ``fn(t)`` called before each in-place change of a tensor ``t`` (None: nothing)."""
    global _before_inplace
    _before_inplace = fn


def check_inplace(t: TensorFields, *others: Any, overlap: bool = True) -> bool:
    """Raise if ``t`` may not be modified in place; return whether to record history.

    History is recorded when grad mode is on and ``t`` (or the base of the
    view ``t``) or one of ``others`` requires grad.  With ``overlap`` an
    expanded ``t`` (elements sharing memory) is an error, as PyTorch (NOTE
    [Writing through expanded tensors]).
    """
    if t._inference and not _inference.get():
        raise AutogradError(_ERR_INFERENCE)
    record = _records_history(t, others)
    if not record and _dual.LEVEL is not None:  # a tangent to update (NOTE [Forward-mode AD])
        record = _dual_inplace(t, others)
    data = t.data
    strides = getattr(data, "strides", None)
    if overlap and strides and 0 in strides and has_internal_overlap(data):
        raise AutogradError(_ERR_OVERLAP)
    flags = getattr(data, "flags", None)
    if flags is not None and not getattr(flags, "writeable", True):
        t.data = _writeable_alias(data)
    if _before_inplace is not None:
        _before_inplace(t)
    return record


def has_internal_overlap(data: Any) -> bool:
    """Whether elements of ``data`` share memory: a dimension of stride 0 and size > 1.

    PyTorch's has_internal_overlap answers "yes" for that case only too (and
    never for an empty tensor, whose strides numpy may give as 0).
    """
    return data.size > 1 and any(st == 0 and n > 1 for st, n in zip(data.strides, data.shape))


class _Interface:
    """An ``__array_interface__`` holder keeping the array that owns the memory (``base``)."""

    def __init__(self, interface: dict[str, Any], base: Any) -> None:
        self.__array_interface__ = interface
        self.base = base


def _writeable_alias(data: Any) -> Any:
    """A writeable array over the memory of the read-only (broadcast) numpy array ``data``.

    Only where the array that owns the memory is writeable: numpy marks a
    broadcast result read-only, not its memory (NOTE [Writing through
    expanded tensors]).
    """
    owner = data
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if not owner.flags.writeable:
        raise AutogradError(_ERR_READ_ONLY)
    interface = dict(data.__array_interface__)
    interface["data"] = (interface["data"][0], False)
    return np.asarray(_Interface(interface, owner))


def _records_history(t: TensorFields, others: tuple[Any, ...]) -> bool:
    """The autograd part of ``check_inplace``: raises where PyTorch does."""
    if not _grad_enabled.get():
        return False
    base = t._base
    is_view = base is not None and t._view_meta is not None
    rg = t._rg or (is_view and base._rg)
    if not rg:
        for o in others:
            if isinstance(o, TensorFields) and o._rg:
                rg = True
                break
        if not rg:
            return False
    if is_view:
        assert base is not None
        if t._creation is not None:
            raise AutogradError(_view_error(t, False))
        if base._rg and base._fn is None:
            raise AutogradError(_ERR_LEAF_VIEW)
    elif t._rg and t._fn is None:
        raise AutogradError(_ERR_LEAF)
    return True


def snapshot(t: T, copy: bool) -> T:
    """A stand-in for the value of ``t`` before an in-place op, carrying its history.

    With ``copy`` the data is copied (the op's rule needs the old value);
    otherwise it is shared and must not be read by the rule.  The stand-in
    has a version counter of its own, so saving it never trips the check.
    """
    dual = _dual.LEVEL is not None
    # (inside a dual level the JVP rule runs after the write: it reads the old value)
    s = new_tensor(t.data.copy() if copy or dual else t.data, t._device)
    fn = t.grad_fn
    if fn is not None:
        set_history(s, fn, t.output_nr)
    if dual:
        s._snap = True  # its op's tangent waits for the write (NOTE [JVP rules])
        if t._fw is not None:
            s._fw = t._fw
    return s  # type: ignore[no-any-return]  # (new_tensor makes a Tensor, typed in the core as Any)


def commit_inplace(t: T, r: TensorFields | None) -> T:
    """Bump ``t``'s version; with a recorded result ``r``, make its node ``t``'s history.

    ``r`` is what ``record`` returned for the op on ``snapshot(t)``, with
    ``t.data`` as its output array.  Returns ``t``.
    """
    vc = own_vc(t)
    vc[0] += 1
    if r is not None and r._fw_pending is not None:
        pending, r._fw_pending = r._fw_pending, None
        _update_tangent(t, pending())
    if r is None or r._fn is None:
        return t
    node = r._fn
    if getattr(node, "saved", None) is not None:
        versions = list(node.versions)  # type: ignore[attr-defined]
        for i, s in enumerate(node.saved_values()):  # type: ignore[attr-defined]
            if not getattr(s, "is_output", False):
                continue
            # the output of an in-place op is t, now
            if s.__class__ is PackedSaved:  # (its value comes from the unpack hook)
                versions[i] = s.rebase_output(vc)
            else:
                s._vc = vc
                s.version = versions[i] = vc[0]
                s.data = t.data
        node.versions = tuple(versions)  # type: ignore[attr-defined]
    _rebase_history(t, node)
    return t


def _dual_inplace(t: TensorFields, others: tuple[Any, ...]) -> bool:
    """Whether an in-place op on ``t`` changes a tangent (so it is recorded for one)."""
    if t._fw is not None or (t._base is not None and t._base._fw is not None):
        return True
    for o in others:
        if isinstance(o, TensorFields) and o._fw is not None:
            return True
    return False


def _update_tangent(t: TensorFields, new: Any) -> None:
    """After an in-place op: ``t``'s tangent becomes ``new`` (None: zeros).

    As PyTorch, the tangent is updated in place where ``t`` has one (a
    view's tangent is a view of its base's, so the base's tangent sees
    the change); a view without one gets the view of its base's tangent
    (zeros where the base had none) first.
    """
    if new is None and t._fw is None:
        return
    token = _dual.computing.set(True)
    try:
        tangent = t._fw
        if tangent is None:
            base = t._base
            if base is not None and t._view_fn is not None:
                if base._fw is None:
                    _dual.set_tangent(base, TENSOR_OPS.zeros_like(base))
                tangent = t._view_fn(TENSOR_OPS, base._fw)
                _dual.set_tangent(t, tangent)
            elif new is not None:  # (a copy: ``new`` may be another tensor's tangent)
                _dual.set_tangent(t, new.clone())
                return
        if new is None:
            tangent.data[...] = 0
        else:
            tangent.data[...] = new.data
        own_vc(tangent)[0] += 1
    finally:
        _dual.computing.reset(token)


def _rebase_history(t: TensorFields, node: Node) -> None:
    base = t._base
    if base is not None and t._view_meta is not None:
        assert t._view_fn is not None  # every view has one (``as_view``)
        cs = CopySlices(base, t._view_fn, node)
        old, old_nr = base._fn, base.output_nr
        set_history(base, cs, 0)
        if base._retains:
            _move_retains(base, old, old_nr, cs)
        t._rg = True  # its grad_fn is rebuilt from the base on next access
        return
    old, old_nr = t._fn, t.output_nr
    set_history(t, node, 0)
    if t._retains:
        _move_retains(t, old, old_nr, node)


def _move_retains(t: TensorFields, old: Node | None, old_nr: int, new: Node) -> None:
    """retain_grad follows the tensor to its new grad_fn (PyTorch's update_tensor_hooks)."""
    if old is not None:
        old._forget_output(old_nr)
    new._retain_output(t.output_nr, t)


def refresh_view_grad_fn(t: TensorFields) -> None:
    """Rebuild the grad_fn of view ``t`` from its base if the version moved since.

    Called by ``Tensor.grad_fn`` for views (``_view_meta`` holds the version
    at which the view's grad_fn was made).  See NOTE [Views and CopySlices].
    """
    vc = t._vc[0]
    if t._view_meta == vc:
        return
    base = t._base
    if base is None or (t._fn is None and not base._rg):
        return
    if t._creation is not None:
        raise AutogradError(_view_error(t, True))
    assert t._view_fn is not None  # every view has one (``as_view``)
    token = _grad_enabled.set(True)
    try:
        fresh = t._view_fn(TENSOR_OPS, base)
    finally:
        _grad_enabled.reset(token)
    old, old_nr = t._fn, t.output_nr
    set_history(t, fresh._fn, fresh.output_nr, fresh._rg)
    t._view_meta = vc
    if t._retains and t._fn is not None:
        _move_retains(t, old, old_nr, t._fn)


def stale_view_requires_grad(t: TensorFields) -> bool:
    """For ``record``: whether a view that does not require grad now does.

    A view made while its base did not require grad goes stale when an
    in-place op gives the base a history; this refreshes it (PyTorch's
    ``requires_grad`` of a view consults its refreshed grad_fn likewise).
    """
    vc = t._vc[0]
    if t._view_meta == vc:
        return False
    base = t._base
    if base is None or not base._rg:
        t._view_meta = vc  # nothing to rebuild; look again after the next change
        return False
    refresh_view_grad_fn(t)
    return t._rg


class CopySlices(Node):
    """History of a base after an in-place op on one of its views.

    Wraps the op's node ``fn``: its inputs are the old base and ``fn``'s
    other inputs.  See NOTE [Views and CopySlices].
    """

    __slots__ = ("base_shape", "dev", "fn", "out_devs", "overlap", "pos", "view_fn")

    def __init__(self, base: TensorFields, view_fn: ViewFn, fn: Node) -> None:
        first = gradient_edge(base) if base._rg else None
        super().__init__((first, *fn.next_edges[1:]))
        self.fn: Node | None = fn
        self.view_fn = view_fn
        self._anomaly = fn._anomaly  # the forward trace of the in-place op
        self.base_shape = tuple(base.data.shape)
        self.dev = base._device
        self.out_devs = base._device
        self.pos: Any = None
        self.overlap: bool | None = None

    def _positions(self, raw: Any) -> Any:
        """Flat positions in the base of the view's elements (view-shaped ints)."""
        if self.pos is None:
            xp = raw.xp
            n = 1
            for s in self.base_shape:
                n *= s
            idx = xp.arange(n).reshape(self.base_shape)
            self.pos = xp.asarray(self.view_fn(raw, idx))
        return self.pos

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        fn = self.fn
        if fn is None:
            raise freed_error()
        g = grads[0]
        if g is None:
            return (None,) * len(self)
        raw = self.dev._backend.raw
        if create_graph:
            F = TENSOR_OPS
            gv = self.view_fn(F, g)
            res = fn.apply([gv], True)
            out0 = None
            if self[0] is not None:
                r0 = res[0]
                if r0 is not None:
                    self._check_overlap(raw)
                out0 = F.put_flat(g, self._positions(raw), 0.0 if r0 is None else r0)
            return (out0, *res[1:])
        xp = raw.xp
        result = xp.array(g, order="C", copy=True)
        gs = self.view_fn(raw, result)
        # (an expanded view of the gradient is read-only: written through positions)
        direct = (
            isinstance(gs, xp.ndarray)
            and xp.may_share_memory(gs, result)
            and getattr(gs.flags, "writeable", True)
        )
        if direct:
            res = fn.apply([gs.copy()], False)
        else:  # view_fn copied (cannot write through it): use flat positions
            pos = self._positions(raw)
            res = fn.apply([result.reshape(-1)[pos]], False)
        out0 = None
        if self[0] is not None:
            r0 = res[0]
            if r0 is not None and not direct:
                self._check_overlap(raw)
            val = 0 if r0 is None else r0
            if direct:
                gs[...] = val
            else:
                result.reshape(-1)[pos] = val
            out0 = result
        return (out0, *res[1:])

    def _check_overlap(self, raw: Any) -> None:
        """PyTorch's overlap error when the op's gradient is written into an expanded region.

        The view's elements sharing base elements (repeated positions) is the
        case (NOTE [Writing through expanded tensors]).
        """
        if self.overlap is None:
            pos = self._positions(raw)
            self.overlap = raw.xp.unique(pos).size != pos.size
        if self.overlap:
            raise AutogradError(_ERR_OVERLAP)

    def release_variables(self) -> None:
        # As PyTorch: drop the op's node (its saved values go with it), rather than
        # release them: a custom Function's saved dirty output may still lead to it
        self.fn = None
