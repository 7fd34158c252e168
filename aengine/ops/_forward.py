"""Forward-mode AD through the ops: the recorders' dual path and the JVP rules' call.

# NOTE [JVP rules]
# An op's node class carries, beside its backward ``rule``, its forward-mode
# rule ``jvp`` (``node_class(..., jvp=...)``):
# - ``jvp(ts, ins, out, attrs, saved) -> tangent``: ``ts`` the inputs'
#   tangents (None where an input has none: a zero tangent), ``ins`` the
#   inputs as the recorder got them, ``out`` the result (a Tensor; a list of
#   them for an op of several outputs, which returns one tangent per
#   output), ``attrs`` and ``saved`` (a list) what the node keeps.  Written with differentiable aengine ops on Tensors, so a
#   tangent is itself recorded for reverse mode (reverse-over-forward gives
#   Hessian-vector products).  None: a zero tangent.
# - ``"elementwise"``: the op's Jacobian in each input is diagonal (after
#   broadcasting; or symmetric: softmax), so the backward rule applied to a
#   tangent in place of the gradient is the JVP: the rule runs once per
#   input that has a tangent, on the values it saved (hot binary ops, mul
#   and div, have their own rule: one product instead of two).
# - ``Reduction(dims_of)``: each input element reaches one result element
#   (sum, prod, amax, var, norms, max(dim), median): the rule's gradient for
#   a gradient of ones weighs the tangent, summed over the reduced dims.
# - None: no rule; forward AD through the op raises NotImplementedError
#   naming it, as PyTorch.
# Rules run with ``computing`` set (tensors/_dual.py): their own ops record
# for reverse mode but compute no tangents of their own.
#
# An in-place op records its node on a snapshot of the old value before it
# writes (NOTE [In-place and history]); its result's tangent needs the new
# value, so the recorder leaves it pending on the result and
# ``commit_inplace`` computes it once the op wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..core._modes import _grad_enabled
from ..tensors import _dual
from ..tensors._creation import zeros_like
from ..tensors._tensor import Tensor
from ..tensors._tensor_ops import TENSOR_OPS
from . import _core
from ._core import ELEMENTWISE, OpNode, Reduction, record, record_multi, record_one

__all__ = [
    "ELEMENTWISE",
    "ForwardUnsupported",
    "has_jvp",
    "jvp_of",
    "linear",
    "multilinear",
    "unsupported",
]

_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


def _mirror(open_: bool) -> None:
    _core._DUAL_ON = open_


class _RuleNode:
    """What a backward rule reads of its node, for a rule run as a JVP."""

    __slots__ = ("attrs", "dev", "meta", "needs", "num_outputs")

    def __init__(self, attrs: Any, needs: tuple[bool, ...], dev: Any) -> None:
        self.attrs = attrs
        self.needs = needs
        self.dev = dev
        self.meta = None
        self.num_outputs = 1


def linear(fn: Callable[[Any, list[Any]], Any]) -> Callable[..., Any]:
    """The ``jvp`` of an op linear in all its tensor inputs together (cat, stack).

    ``fn(attrs, xs)`` reruns the op on ``xs``; the tangent is the op of the
    inputs' tangents (zeros for an input without one).
    """

    def jvp(ts: Any, ins: Any, out: Any, attrs: Any, saved: Any) -> Any:
        xs = [t if t is not None else TENSOR_OPS.zeros_like(x) for t, x in zip(ts, ins)]
        return fn(attrs, xs)

    return jvp


def multilinear(fn: Callable[[Any, list[Any]], Any]) -> Callable[..., Any]:
    """The ``jvp`` of an op linear in each tensor input (products: matmul, einsum, conv).

    ``fn(attrs, xs)`` reruns the op on ``xs``; the tangent is the sum, over
    the inputs with a tangent, of the op with that input replaced by it.
    """

    def jvp(ts: Any, ins: Any, out: Any, attrs: Any, saved: Any) -> Any:
        total = None
        for i, t in enumerate(ts):
            if t is None:
                continue
            xs = list(ins)
            xs[i] = t
            r = fn(attrs, xs)
            total = r if total is None else total + r
        return total

    return jvp


def has_jvp(cls: type[OpNode]) -> bool:
    """Whether the op of node class ``cls`` has a forward-mode rule."""
    return cls.jvp is not None


class ForwardUnsupported(NotImplementedError):
    """Forward AD through an op that has no JVP rule (a NotImplementedError, as torch's)."""


def unsupported(name: str) -> NotImplementedError:
    """PyTorch's error for forward AD through an op without a JVP rule (named as torch's op)."""
    op = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", _BACKWARD_SUFFIX.sub("", name) or name).lower()
    return ForwardUnsupported(
        f"Trying to use forward AD with {op} that does not support it because it has not "
        "been implemented yet. Differentiate it in reverse mode (ae.grad); "
        "ae.functional.jvp falls back to the double-backward trick for it"
    )


def _elementwise(
    cls: type[OpNode], ts: Any, ins: Any, out: Tensor, attrs: Any, vals: list[Any]
) -> Any:
    """The JVP of an elementwise op from its backward rule (NOTE [JVP rules])."""
    total = None
    # every input "needs" its gradient: the saved values are laid out so (an op
    # that saves less when fewer inputs need one trims them after recording)
    node = _RuleNode(attrs, (True,) * len(ins), out._device)
    shape = out.data.shape
    if not _records(ts, vals):
        total = _elementwise_raw(cls, ts, out, vals, node)
        if total is not _NO_RAW:
            return total
        total = None
    for i, ti in enumerate(ts):
        if ti is None:
            continue
        if ti.data.shape != shape:
            ti = TENSOR_OPS.broadcast_to(ti, shape)
        gi = cls.rule(TENSOR_OPS, ti, vals, node)[i]  # type: ignore[arg-type]
        if gi is None:
            continue
        total = gi if total is None else total + gi
    return total


#: ``_elementwise_raw``'s answer where a rule wrote into its gradient (read-only here)
_NO_RAW = object()


def _records(ts: Any, vals: list[Any]) -> bool:
    """Whether a tangent computed now is recorded for reverse mode (NOTE [JVP rules])."""
    if not _grad_enabled.get():
        return False
    for t in ts:
        if t is not None and t._rg:
            return True
    for v in vals:
        if v._rg:
            return True
    return False


def _elementwise_raw(
    cls: type[OpNode], ts: Any, out: Tensor, vals: list[Any], node: _RuleNode
) -> Any:
    """``_elementwise`` on the backend's arrays, where nothing records the tangent.

    The rule runs as in a plain backward (``F`` the raw namespace), on
    read-only views of the tangents: a rule that would write into its
    gradient raises, and the Tensor path runs instead.
    """
    dev = out._device
    F = dev._backend.raw
    arrays = [v.data for v in vals]
    shape = out.data.shape
    total = None
    for i, ti in enumerate(ts):
        if ti is None:
            continue
        g = ti.data
        g = F.broadcast_to(g, shape) if g.shape != shape else g.view()
        if getattr(g, "flags", None) is not None:
            g.flags.writeable = False
        try:
            gi = cls.rule(F, g, arrays, node)[i]  # type: ignore[arg-type]
        except ValueError:
            return _NO_RAW
        if gi is None:
            continue
        total = gi if total is None else total + gi
    if total is None:
        return None
    if total.__class__ is not dev._array_type:
        total = dev._backend.asarray(total)
    flags = getattr(total, "flags", None)
    if flags is not None and not flags.writeable:  # a tangent given back (a view of it)
        total = total.copy()
    return Tensor._make(total, False, dev)


def _reduction(
    cls: type[OpNode], rule: Reduction, ts: Any, ins: Any, out: Tensor, attrs: Any, vals: Any
) -> Any:
    """The JVP of a reduction from its backward rule (``Reduction``'s docstring)."""
    node = _RuleNode(attrs, (True,) + (False,) * (len(ins) - 1), out._device)
    weights = cls.rule(TENSOR_OPS, TENSOR_OPS.ones_like(out), vals, node)[0]  # type: ignore[arg-type]
    dims, keepdim = rule.dims_of(attrs)
    r = TENSOR_OPS.sum(weights * ts[0], dims, keepdim)
    if r.data.shape != out.data.shape:
        r = TENSOR_OPS.reshape(r, out.data.shape)
    return r


def jvp_of(cls: type[OpNode], ts: Any, ins: Any, out: Any, attrs: Any, vals: list[Any]) -> Any:
    """The tangent of ``out`` (NOTE [JVP rules]), computed with ``computing`` set."""
    rule = cls.jvp
    if rule is None:
        raise unsupported(cls.__name__)
    token = _dual.computing.set(True)
    try:
        if rule == ELEMENTWISE:
            return _elementwise(cls, ts, ins, out, attrs, vals)
        if rule.__class__ is Reduction:
            return _reduction(cls, rule, ts, ins, out, attrs, vals)
        assert callable(rule)
        return rule(ts, ins, out, attrs, vals)
    finally:
        _dual.computing.reset(token)


def _give(t: Tensor, tangent: Any, ts: Any = ()) -> None:
    """Give the result ``t`` its tangent (zeros for a zero one, as PyTorch).

    A tangent that is an input's own (``x + 1``, ``clone``) is copied: an
    in-place op on the result updates its tangent in place, which must not
    reach the input's.
    """
    if t.data.dtype.kind not in "fc":
        return
    for x in ts:
        if tangent is x and tangent is not None:
            tangent = tangent.clone()
            break
    if tangent is None:
        token = _dual.computing.set(True)
        try:
            tangent = zeros_like(t)
        finally:
            _dual.computing.reset(token)
    elif tangent.data.dtype != t.data.dtype and tangent.data.dtype.kind in "fc":
        tangent = TENSOR_OPS.astype(tangent, t.data.dtype)
    _dual.set_tangent(t, tangent)


def _pending(t: Tensor, compute: Callable[[], Any]) -> None:
    t._fw_pending = compute


def _tangents(inputs: Any) -> tuple[Any, ...] | None:
    ts = tuple(x._fw if x.__class__ is Tensor else None for x in inputs)
    for t in ts:
        if t is not None:
            return ts
    return None


def _record(
    cls: type[OpNode],
    out: Any,
    dev: Any,
    inputs: tuple[Any, ...],
    saved: tuple[Tensor, ...],
    attrs: Any,
    save_output: bool,
    bcast: bool,
) -> Tensor:
    """``record`` inside a dual level: the result, and its tangent."""
    t = record(cls, out, dev, inputs, saved, attrs, save_output, bcast, False)
    if _dual.computing.get():
        return t
    ts = _tangents(inputs)
    if ts is None:
        return t
    vals = [*saved, t] if save_output else list(saved)
    if any(x.__class__ is Tensor and x._snap for x in inputs):
        _pending(t, lambda: jvp_of(cls, ts, inputs, t, attrs, vals))
        return t
    _give(t, jvp_of(cls, ts, inputs, t, attrs, vals), ts)
    return t


def _record_one(
    cls: type[OpNode],
    out: Any,
    dev: Any,
    x: Tensor,
    arity: int,
    attrs: Any,
    save_input: bool,
    save_output: bool,
    bcast: bool,
) -> Tensor:
    """``record_one`` inside a dual level: the result, and its tangent."""
    t = record_one(cls, out, dev, x, arity, attrs, save_input, save_output, bcast, False)
    tx = x._fw
    if tx is None or _dual.computing.get():
        return t
    ts = (tx,) if arity == 1 else (tx, None)
    ins = (x,) if arity == 1 else (x, None)
    vals = [x] if save_input else [t] if save_output else []
    if x._snap:
        _pending(t, lambda: jvp_of(cls, ts, ins, t, attrs, vals))
        return t
    _give(t, jvp_of(cls, ts, ins, t, attrs, vals), ts)
    return t


def _record_multi(
    cls: type[OpNode],
    outs: Any,
    dev: Any,
    inputs: tuple[Any, ...],
    saved: tuple[Tensor, ...],
    attrs: Any,
) -> list[Tensor]:
    """``record_multi`` inside a dual level: the results, and their tangents."""
    res = record_multi(cls, outs, dev, inputs, saved, attrs, False)
    if _dual.computing.get():
        return res
    ts = _tangents(inputs)
    if ts is None:
        return res
    tangents = jvp_of(cls, ts, inputs, res, attrs, list(saved))
    for t, tt in zip(res, tangents):
        _give(t, tt)
    return res


_core._dual_hooks[:] = [_record, _record_one, _record_multi]
_dual.on_level_change(_mirror)
