"""The operator framework: backward nodes of ops, and recording a result.

# NOTE [Operator rules]
# An op's forward computes on backend arrays; when grad mode is on and an
# input requires grad it records an ``OpNode`` whose class carries the
# backward ``rule``.  A rule is ``rule(F, g, saved, node) -> grads``: ``F`` is
# an ops namespace, raw arrays (``adapters``' backend ``raw``) for a plain
# backward and differentiable aengine ops under create_graph, so one formula
# serves every order of derivative; ``g`` the incoming gradient (a list, for
# ops with several outputs); ``saved`` the unpacked saved values; ``node``
# gives ``attrs`` (non-tensor arguments) and ``needs`` (which inputs want a
# gradient).  It returns one gradient (or None) per input.  Undoing
# broadcasting and dtype promotion is done once, here, from ``node.meta``.
# Both namespaces implement the Protocol ``GradOps``, the type of ``F`` in
# ``Rule``, so mypy checks every call a rule makes on ``F`` (NOTE [Two
# gradient namespaces] in aengine/tensors/_tensor_ops.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from ..core import (
    AutogradError,
    Node,
    SavedTensor,
    _graph,
    _modes,
    _saved_hooks,
    gradient_edge,
    own_vc,
    record_forward,
    running_node,
)
from ..core._graph import (
    ZERO_VC,
    add_edge,
    add_edges,
    freed_error,
    inference_saved_error,
    nrs,
    set_history,
    split_edges,
    version_error,
)
from ..core._modes import _anomaly, _grad_enabled, _inference
from ..tensors import TENSOR_OPS, Device, Tensor
from ..tensors._creation import tensor as _tensor
from ..tensors._tensor_ops import GradOps, ViewFn
from ..tensors._views import stale_view_requires_grad as _stale_view_rg

__all__ = [
    "ShapeError",
    "OpNode",
    "node_class",
    "wrap",
    "record",
    "record_one",
    "record_multi",
    "tie",
    "weigh",
    "TRANSCENDENTAL",
    "as_tensor_arg",
    "same_device",
    "TENSOR_OPS",
    "GradOps",
    "Rule",
    "Jvp",
    "ELEMENTWISE",
    "Reduction",
]

#: ``rule(F, g, saved, node) -> grads`` (NOTE [Operator rules])
Rule: TypeAlias = Callable[[GradOps, Any, Any, "OpNode"], Any]

#: ``jvp(tangents, inputs, out, attrs, saved) -> tangent``, or "elementwise"
#: (NOTE [JVP rules] in _forward.py)
Jvp: TypeAlias = "Callable[..., Any] | str | Reduction | None"

#: the ``jvp`` of an op whose Jacobian in each input is diagonal (or symmetric:
#: softmax) (NOTE [JVP rules])
ELEMENTWISE = "elementwise"


class Reduction:
    """The ``jvp`` of a reduction (NOTE [JVP rules]): ``dims_of(attrs) -> (dims, keepdim)``.

    Each input element reaches one result element, with the weight its
    backward rule gives it for a gradient of ones: the tangent is the sum,
    over the reduced dims, of the weights times the input's tangent.
    """

    __slots__ = ("dims_of",)

    def __init__(self, dims_of: Callable[[Any], tuple[Any, bool]]) -> None:
        self.dims_of = dims_of


#: whether a dual level is open: the recorders' one test on their hot path,
#: kept by ops/_forward.py (NOTE [Forward-mode AD] in tensors/_dual.py)
_DUAL_ON = False
#: forward mode's record, record_one and record_multi, filled in by
#: ops/_forward.py at its import (it imports this module, not the reverse)
_dual_hooks: list[Any] = []


class ShapeError(ValueError, RuntimeError):
    """Shapes (or sizes, dims) of an op's operands that do not fit.

    A RuntimeError, as torch raises, and a ValueError, as aengine's shape
    checks raised before the operator table: ``except`` clauses of either
    kind catch it.
    """


class OpNode(Node):
    """Backward node of a built-in op (see NOTE [Operator rules])."""

    __slots__ = ("attrs", "dev", "meta", "needs", "numel", "saved", "versions")

    if TYPE_CHECKING:
        rule: Rule  # set by node_class, as a staticmethod
        jvp: Jvp
    else:
        rule = None
        jvp = None
    #: saved inputs (Tensors) and outputs (SavedTensors): a tuple, the value
    #: itself when there is one, None once freed; ``versions`` their versions
    #: when saved (NOTE [Saved tensors of built-in ops])
    saved: Any
    versions: tuple[int, ...]
    attrs: Any
    needs: tuple[bool, ...]
    meta: tuple[Any, ...] | None
    dev: Device

    @property
    def out_devs(self) -> Device:
        """The device of every output (an op's outputs share its device)."""
        return self.dev

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return self.evaluate(grads, create_graph, False)

    def evaluate(self, grads: list[Any], create_graph: bool, release: bool) -> Any:
        # Hot path of every backward: kept flat (see bench/ for its measurements).
        # One forward output (a node of several outputs is a _MultiOpNode).
        saved = self.saved
        if saved is None:
            raise freed_error()
        g = grads[0]
        if g is None:  # one output, and it got no gradient
            if release and saved is not _NOTHING:
                self.saved = None
            return (None,) * len(self)
        if create_graph:
            vals: Any = self._unpacked()
            outs = self.rule(TENSOR_OPS, g, vals, self)
            F = TENSOR_OPS
        else:
            F = self.dev._backend.raw
            if saved.__class__ is not tuple:  # one saved value, kept bare
                if saved._vc[0] != self.versions[0]:
                    self._version_error(0)
                vals = (saved.data,)
            elif not saved:
                vals = saved
            else:
                vals = []
                for i, (s, v) in enumerate(zip(saved, self.versions)):
                    if s._vc[0] != v:
                        self._version_error(i)
                    vals.append(s.data)
            outs = self.rule(F, g, vals, self)
        # after the rule succeeded, as release_variables (a node that saved
        # nothing keeps its empty tuple: it can run again, as in PyTorch)
        if release and saved is not _NOTHING:
            self.saved = None
        meta = self.meta
        if meta is not None:
            outs = _fix_outputs(F, outs, meta)
        return outs

    def _unpacked(self) -> list[Tensor]:
        """The saved values as Tensors connected to the graph (version-checked)."""
        vals: list[Tensor] = []
        for i, (s, v) in enumerate(zip(self.saved_values(), self.versions)):
            if s._vc[0] != v:
                self._version_error(i)
            vals.append(s if s.__class__ is Tensor else s.unpack_tensor(self))
        return vals

    def _version_error(self, i: int) -> None:
        raise AutogradError(version_error(self.saved_values()[i], self.versions[i], self))

    def saved_values(self) -> tuple[Any, ...]:
        """``saved`` as a tuple (raises once it was freed)."""
        saved = self.saved
        if saved is None:
            raise freed_error()
        return saved if saved.__class__ is tuple else (saved,)

    def release_variables(self) -> None:
        saved = self.saved
        if saved is not None and (saved.__class__ is not tuple or saved):
            self.saved = None

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors saved for backward (raises once they were freed)."""
        return tuple(
            s if s.__class__ is Tensor else s.unpack_tensor(self) for s in self.saved_values()
        )

    # -- the saved values by torch's names (NOTE [Saved values by torch's names]) ----------
    #: torch's name of each value this node class saves (``_saved_<name>``): a
    #: position in ``saved`` as recorded, or a function of the node (its
    #: ``attrs``); set per class by _saved_fields.py
    saved_fields: ClassVar[Mapping[str, int | Callable[[Any], Any]]] = {}
    #: for a binary op whose gradients each read part of what it saves: the
    #: positions (in the ``saved`` given to ``record``) that the first input's
    #: gradient alone reads, and those the second's alone reads; ``record``
    #: keeps only those when one input needs a gradient (NOTE [What a binary
    #: op saves]).  None: everything saved is kept.
    saved_reads: ClassVar[tuple[tuple[int, ...], tuple[int, ...]] | None] = None

    def saved_field(self, field: int | Callable[[Any], Any]) -> Any:
        """The value of one of ``saved_fields`` (what ``_saved_<name>`` gives)."""
        if field.__class__ is not int:
            return field(self)  # type: ignore[operator]
        i = self._slot_of(field)
        if i is None:
            return None
        if self.saved is None:
            raise freed_error()
        s = self.saved_values()[i]
        if s._vc[0] != self.versions[i]:
            self._version_error(i)
        return s if s.__class__ is Tensor else s.unpack_tensor(self)

    def raw_saved(self, position: int) -> Any:
        """The saved tensor at ``position`` as torch's SavedTensor (``_raw_saved_<name>``)."""
        i = self._slot_of(position)
        return None if i is None else _saved_hooks.RawSaved(self, i)

    def _slot_of(self, position: int) -> int | None:
        """Where the value saved at ``position`` is now (None: ``record`` dropped it)."""
        reads = type(self).saved_reads
        if reads is None or (self.needs[0] and self.needs[1]):
            return position
        keep = reads[0] if self.needs[0] else reads[1]
        return keep.index(position) if position in keep else None

    def _slots_freed(self) -> bool:
        return self.saved is None

    def _slot_value(self, i: int) -> Any:
        return self.saved_values()[i]

    def _set_slot_value(self, i: int, value: Any) -> None:
        saved = self.saved
        self.saved = value if saved.__class__ is not tuple else (*saved[:i], value, *saved[i + 1 :])


class _MultiOpNode(OpNode):
    """Backward node of a built-in op with several outputs (split, chunk, unbind)."""

    __slots__ = ()

    def evaluate(self, grads: list[Any], create_graph: bool, release: bool) -> Any:
        # the rule takes the list of gradients, one per output (None: none arrived)
        return OpNode.evaluate(self, [grads], create_graph, release)


#: the empty ``saved`` of a node that saves nothing (CPython's one empty tuple)
_NOTHING: tuple[()] = ()


def _fix_outputs(F: GradOps, outs: Any, meta: tuple[Any, ...]) -> Any:
    """Sum broadcast gradients back to their input's shape; cast to its dtype."""
    outs = list(outs)
    for i, m in enumerate(meta):
        g = outs[i]
        if m is None or g is None:
            continue
        shape, dtype = m
        if g.shape != shape:
            g = F.sum_to(g, shape)
        if g.dtype != dtype:
            g = F.astype(g, dtype)
        outs[i] = g
    return outs


def node_class(name: str, rule: Rule, num_outputs: int = 1, jvp: Jvp = None) -> type[OpNode]:
    """A new OpNode subclass named ``name`` (e.g. 'MulBackward0') using ``rule``.

    ``jvp`` is its forward-mode rule (NOTE [JVP rules] in _forward.py): None
    for none (forward AD through it raises NotImplementedError).
    """
    base = OpNode if num_outputs == 1 else _MultiOpNode
    attrs = {"__slots__": (), "rule": staticmethod(rule), "num_outputs": num_outputs}
    attrs["jvp"] = jvp if jvp is None or isinstance(jvp, (str, Reduction)) else staticmethod(jvp)
    return type(name, (base,), attrs)


def as_tensor_arg(x: Any, like: Tensor | None = None) -> Tensor:
    """Turn an array or a nested sequence given to an op into a constant Tensor."""
    if isinstance(x, Tensor):
        return x
    dev = like._device if like is not None else None
    return _tensor(x, device=dev) if dev is not None else _tensor(x)


def same_device(a: Tensor, b: Tensor) -> Device:
    if a._device is not b._device:
        raise AutogradError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{a._device} and {b._device}! Move one with .to(device)"
        )
    return a._device


def wrap(out: Any, dev: Device) -> Tensor:
    """A result array as a Tensor without graph (grad disabled or no input needs it)."""
    if out.__class__ is not dev._array_type:
        out = as_array(out, dev)
    return _plain(out, dev)


def as_array(out: Any, dev: Device) -> Any:
    """``out`` (a result: maybe a scalar of the backend) as an array of ``dev``'s backend."""
    backend = dev._backend or dev.backend
    return out if out.__class__ is backend.array_types[0] else backend.asarray(out)


def record(
    cls: type[OpNode],
    out: Any,
    dev: Device,
    inputs: tuple[Any, ...],
    saved: tuple[Tensor, ...] = (),
    attrs: Any = None,
    save_output: bool = False,
    bcast: bool = False,
    dual: bool = True,
) -> Tensor:
    """Wrap ``out`` and, if grad mode is on and an input requires grad, record ``cls``.

    ``inputs`` are the op's inputs (Tensors, or None / scalars for inputs that
    take no gradient); ``saved`` tensors are saved with their version;
    ``save_output`` appends the result itself to the saved values; ``bcast``
    records the shapes/dtypes of inputs that differ from the result's, so that
    their gradients are summed and cast back (see ``_fix_outputs``).  Inside a
    dual level the result also gets its tangent (``dual=False``: not here, the
    caller gives it one; NOTE [Forward-mode AD] in tensors/_dual.py).
    """
    # Hot path of every forward op of two or more tensors (one tensor: ``record_one``):
    # kept flat, one branch per arity.
    if _DUAL_ON and dual:
        return _dual_hooks[0](cls, out, dev, inputs, saved, attrs, save_output, bcast)  # type: ignore[no-any-return]
    if out.__class__ is not dev._array_type:  # a scalar (or the backend not loaded yet)
        out = (dev._backend or dev.backend).asarray(out)
    if not _grad_enabled.get():
        return _plain(out, dev)
    n_inputs = len(inputs)
    if n_inputs == 2:
        a, b = inputs
        ra = a.__class__ is Tensor and (a._rg or (a._view_meta is not None and _stale_view_rg(a)))
        rb = b.__class__ is Tensor and (b._rg or (b._view_meta is not None and _stale_view_rg(b)))
        if ra:
            if a._fn is not None and a._view_meta is None:
                fa, na = a._fn, a.output_nr
            else:
                if a._inference and b.__class__ is Tensor and b._inference:
                    return _plain(out, dev)
                fa, na = gradient_edge(a)
            topo = fa.topological_nr + 1
            node = _new_node(cls)
            add_edge(node, fa)
            if rb:
                if b._fn is not None and b._view_meta is None:
                    fb, nb = b._fn, b.output_nr
                else:
                    fb, nb = gradient_edge(b)
                if fb.topological_nr >= topo:
                    topo = fb.topological_nr + 1
                add_edge(node, fb)
                next_nrs = _NRS00 if not (na or nb) else nrs((na, nb))
                needs: tuple[bool, ...] = _NEEDS_TT
            else:  # tensor op scalar/constant: the common case
                add_edge(node, None)
                next_nrs = _NRS00 if not na else nrs((na, 0))
                needs = _NEEDS_TF
        elif rb:
            if b._inference and a.__class__ is Tensor and a._inference:
                return _plain(out, dev)
            fb, nb = gradient_edge(b)
            topo = fb.topological_nr + 1
            node = _new_node(cls)
            add_edge(node, None)
            add_edge(node, fb)
            next_nrs = _NRS00 if not nb else nrs((0, nb))
            needs = _NEEDS_FT
        else:
            return _plain(out, dev)
    elif n_inputs == 1:
        x = inputs[0]
        if x.__class__ is not Tensor or not (
            x._rg or (x._view_meta is not None and _stale_view_rg(x))
        ):
            return _plain(out, dev)
        if x._fn is not None and x._view_meta is None:
            fa, na = x._fn, x.output_nr
        else:  # a leaf or a view: maybe an inference tensor (NOTE [Ops on inference tensors])
            if x._inference:
                return _plain(out, dev)
            fa, na = gradient_edge(x)
        node = _new_node(cls)
        add_edge(node, fa)
        next_nrs = _NRS0 if not na else nrs((na,))
        topo = fa.topological_nr + 1
        needs = _NEEDS1
    else:
        flags = [
            x.__class__ is Tensor and (x._rg or (x._view_meta is not None and _stale_view_rg(x)))
            for x in inputs
        ]
        x0 = inputs[0]
        if not any(flags) or (x0.__class__ is Tensor and x0._inference and _all_inference(inputs)):
            return _plain(out, dev)
        next_nodes, next_nrs = split_edges(
            tuple(gradient_edge(x) if f else None for x, f in zip(inputs, flags))
        )
        needs = tuple(flags)
        topo = 0
        for fn in next_nodes:
            if fn is not None and fn.topological_nr >= topo:
                topo = fn.topological_nr + 1
        node = _new_node(cls)
        add_edges(node, next_nodes)
    # Node.__init__ inlined (this runs once per recorded op; the node, a list,
    # holds its next nodes: NOTE [A node is the list of its next nodes]).
    node.next_nrs = next_nrs
    node.sequence_nr = _graph.next_sequence_nr()  # (NOTE [Forward ops in a profile])
    node.topological_nr = topo
    node._special = cls._always_special
    node.dev = dev
    node.numel = out.size
    node.attrs = attrs
    node.needs = needs
    node.meta = broadcast_meta(inputs, out) if bcast else None
    t = _new_tensor(Tensor)  # Tensor._make inlined: the hot path of every forward op
    t.data = out
    t._rg = True
    t._fn = node
    t.output_nr = 0
    t._vc = ZERO_VC
    t._device = dev
    # NOTE [Saved tensors of built-in ops]: inputs as they are, with their versions
    if saved:
        if len(saved) != 1 and cls.saved_reads is not None and not (needs[0] and needs[1]):
            reads = cls.saved_reads  # NOTE [What a binary op saves]
            saved = tuple([saved[i] for i in (reads[0] if needs[0] else reads[1])])
        if len(saved) == 1 and not save_output:  # kept bare: the common case
            s = saved[0]
            if s._inference:
                raise inference_saved_error()
            v = s._vc[0]
            node.saved = s
            node.versions = _V0 if not v else (v,)
        else:
            versions = _versions(saved)
            if save_output:
                node.saved = (*saved, SavedTensor(t, True))
                node.versions = (*versions, 0)
            else:
                node.saved = saved
                node.versions = versions
    elif save_output:
        node.saved = SavedTensor(t, True)
        node.versions = _V0
    else:
        node.saved = ()
        node.versions = ()
    if _saved_hooks.ever_set:  # NOTE [Saved-tensor hooks]
        _saved_hooks.pack_node(node, (t,))
    if _modes.anomaly_ever_enabled and _anomaly.get()[0]:
        record_forward(node, running_node())
    return t


#: the cost of one element of a backward kernel that evaluates a
#: transcendental function (sin, cos, exp, a power), in elements of a
#: cheap elementwise kernel (a product, a sum): what ``weigh`` multiplies
#: a node's ``numel`` by (NOTE [Kernel offload policy])
TRANSCENDENTAL = 8


def weigh(t: Tensor, factor: int) -> Tensor:
    """Count each element of ``t``'s backward kernel as ``factor`` cheap ones; return ``t``.

    A node's ``numel`` is the measure from which the runtime runs its
    kernel off the event loop (NOTE [Kernel offload policy] in the
    runtime): the result's size for a kernel of cheap elementwise
    operations, more for one that evaluates a transcendental function.
    """
    node = t._fn
    if node is not None:
        node.numel *= factor
    return t


def record_one(
    cls: type[OpNode],
    out: Any,
    dev: Device,
    x: Tensor,
    arity: int = 1,
    attrs: Any = None,
    save_input: bool = False,
    save_output: bool = False,
    bcast: bool = False,
    dual: bool = True,
) -> Tensor:
    """``record`` of an op whose one tensor input is ``x``: unary ops, a tensor and a number.

    ``x`` (a Tensor) is the first of the op's ``arity`` inputs (1, or 2 where
    the second is a Python number: its edge is None); ``save_input`` saves ``x``,
    ``save_output`` the result.  The same node as ``record(cls, out, dev,
    (x,) or (x, number), ...)`` records, in fewer steps: the forward of a
    graph of small ops spends most of its time here.
    """
    # NOTE [Recording an op of one tensor]
    # ``record`` and this function build the same node; this one is the
    # hot path of most ops (a unary function, a tensor and a number), kept
    # apart so that they skip ``record``'s tuple of inputs and its dispatch
    # on their number.  Both set every field that Node.__init__ sets, plus
    # OpNode's, and write the result's history as ``set_history`` does
    # (core/_graph.py, inlined: a call per op costs here); tests/ops/
    # test_layers.py checks that they agree field by field.
    if _DUAL_ON and dual:
        return _dual_hooks[1](cls, out, dev, x, arity, attrs, save_input, save_output, bcast)  # type: ignore[no-any-return]
    if out.__class__ is not dev._array_type:  # a scalar (or the backend not loaded yet)
        out = (dev._backend or dev.backend).asarray(out)
    if not _grad_enabled.get() or not (x._rg or (x._view_meta is not None and _stale_view_rg(x))):
        return _plain(out, dev)
    fa = x._fn
    if fa is not None and x._view_meta is None:
        na = x.output_nr
    else:  # a leaf or a view: maybe an inference tensor (NOTE [Ops on inference tensors])
        if x._inference and arity == 1:  # (a number beside it counts as a normal tensor)
            return _plain(out, dev)
        if x._view_meta is None:  # a leaf: its accumulator (Tensor._grad_accumulator
            acc = x._acc  # makes it when the weak reference is dead or missing)
            fa = acc() if acc is not None else None
            if fa is None:
                fa = x._grad_accumulator()
            na = 0
        else:
            fa, na = gradient_edge(x)
    node = _new_node(cls)
    add_edge(node, fa)
    if arity == 1:
        node.next_nrs = _NRS0 if not na else nrs((na,))
        node.needs = _NEEDS1
    else:
        add_edge(node, None)
        node.next_nrs = _NRS00 if not na else nrs((na, 0))
        node.needs = _NEEDS_TF
    node.sequence_nr = _graph.next_sequence_nr()  # (NOTE [Forward ops in a profile])
    node.topological_nr = fa.topological_nr + 1
    node._special = False  # (no OpNode class is _always_special)
    node.dev = dev
    node.numel = out.size
    node.attrs = attrs
    node.meta = broadcast_meta((x,) if arity == 1 else (x, None), out) if bcast else None
    t = _new_tensor(Tensor)  # Tensor._make inlined
    t.data = out
    t._rg = True
    t._fn = node
    t.output_nr = 0
    t._vc = ZERO_VC
    t._device = dev
    if save_input:  # NOTE [Saved tensors of built-in ops]: the input as it is
        if x._inference:
            raise inference_saved_error()
        v = x._vc[0]
        node.saved = x
        node.versions = _V0 if not v else (v,)
    elif save_output:
        node.saved = SavedTensor(t, True)
        node.versions = _V0
    else:
        node.saved = _NOTHING
        node.versions = _NOTHING
    if _saved_hooks.ever_set:  # NOTE [Saved-tensor hooks]
        _saved_hooks.pack_node(node, (t,))
    if _modes.anomaly_ever_enabled and _anomaly.get()[0]:
        record_forward(node, running_node())
    return t


_NEEDS1 = (True,)
_NEEDS_TT = (True, True)
_NEEDS_TF = (True, False)
_NEEDS_FT = (False, True)
_NRS0 = nrs((0,))
_NRS00 = nrs((0, 0))
_V0 = (0,)
_V00 = (0, 0)


def _versions(saved: tuple[Tensor, ...]) -> tuple[int, ...]:
    """The versions of tensors being saved (a shared tuple when all are 0).

    Inference tensors cannot be saved (as SavedTensor says too).
    """
    for s in saved:
        if s._inference:
            raise inference_saved_error()
    versions = tuple([s._vc[0] for s in saved])
    if versions == _V00:
        return _V00
    return versions


_new_tensor = object.__new__
_new_node = list.__new__


def _all_inference(inputs: Any) -> bool:
    """Whether every input is an inference tensor (NOTE [Ops on inference tensors]).

    # NOTE [Ops on inference tensors]
    # As PyTorch, an op whose inputs are all inference tensors is not recorded,
    # even outside inference mode and whatever their requires_grad: its result
    # is a plain tensor.  A Python number among the inputs counts as a normal
    # tensor (PyTorch wraps the scalar of ``c + 1`` or ``c * 2`` in one, and
    # records those), so does a constant.  An inference tensor is always a leaf
    # (nothing is recorded in inference mode, nothing modifies it in place
    # outside), so ``record`` looks only where it takes a leaf's edge, never on
    # the path of a non-leaf input; its views are no autograd views
    # (``as_view``).  An op that mixes it with a normal tensor is recorded.
    """
    for x in inputs:
        if x.__class__ is not Tensor or not x._inference:
            return False
    return True


def _plain(out: Any, dev: Device) -> Tensor:
    """``out`` (a backend array) as a Tensor that records no node."""
    t = Tensor._make(out, False, dev)
    if _inference.get():
        t._inference = True
    return t


# NOTE [Gradients tied to an input]
# Some of torch's backward functions take an input they do not depend on
# (pooling, reflection padding, nll_loss, the masks of piecewise-linear
# activations), so under create_graph torch's first derivative "depends" on
# that input with a zero derivative: it requires grad, and differentiating
# it again gives zeros where aengine's would otherwise raise that it does
# not require grad.  ``tie`` records that dependence: ``y`` as a function of
# ``y`` (the identity) and of ``x`` (a zero gradient).  Rules call it on
# Tensors only, so a plain backward never pays for it.
def _tie_rule(F: GradOps, g: Any, s: Any, n: OpNode) -> Any:
    return (g if n.needs[0] else None, F.zeros(n.attrs, g) if n.needs[1] else None)


_TIE = node_class("TieBackward0", _tie_rule, jvp=lambda ts, ins, out, a, s: ts[0])


def tie(y: Tensor, x: Any) -> Tensor:
    """``y`` recorded as a function of ``y`` and of ``x`` with a zero derivative in ``x``.

    ``y`` itself where ``x`` is not a Tensor that requires grad (NOTE [Gradients
    tied to an input]).
    """
    if x.__class__ is not Tensor or not x._rg or y.__class__ is not Tensor:
        return y
    return record(_TIE, y.data.copy(), y._device, (y, x), attrs=x.data.shape)


def record_multi(
    cls: type[OpNode],
    outs: Any,
    dev: Device,
    inputs: tuple[Any, ...],
    saved: tuple[Tensor, ...] = (),
    attrs: Any = None,
    dual: bool = True,
) -> list[Tensor]:
    """Like :func:`record` for ops with several outputs (split, chunk, unbind).

    Wraps each array of ``outs``; if a node is recorded (``cls.num_outputs ==
    len(outs)``) every output gets it as ``grad_fn`` and its position as
    ``output_nr``.  The rule then receives a list of gradients with None for
    outputs that got none (see NOTE [Operator rules]).
    """
    if _DUAL_ON and dual:
        return _dual_hooks[2](cls, outs, dev, inputs, saved, attrs)  # type: ignore[no-any-return]
    backend = dev._backend or dev.backend
    at = backend.array_types[0]
    ts = [Tensor._make(o if o.__class__ is at else backend.asarray(o), False, dev) for o in outs]
    if not _grad_enabled.get():
        if _inference.get():
            for t in ts:
                t._inference = True
        return ts
    rg = False
    for x in inputs:
        if x.__class__ is Tensor and x._rg:
            rg = True
            break
    if not rg or _all_inference(inputs):
        return ts
    edges = tuple(gradient_edge(x) if x.__class__ is Tensor and x._rg else None for x in inputs)
    node = cls(edges)
    node.dev = dev
    node.attrs = attrs
    node.needs = tuple(e is not None for e in edges)
    node.meta = None
    node.numel = max((o.size for o in outs), default=0)
    for i, t in enumerate(ts):
        set_history(t, node, i)
    node.saved = tuple(saved) if len(saved) != 1 else saved[0]
    node.versions = _versions(tuple(saved))
    if _saved_hooks.ever_set:  # NOTE [Saved-tensor hooks]
        _saved_hooks.pack_node(node, ts)
    if _modes.anomaly_ever_enabled and _anomaly.get()[0]:
        record_forward(node, running_node())
    return ts


def broadcast_meta(inputs: tuple[Any, ...], out: Any) -> tuple[Any, ...] | None:
    """``meta`` for ``record``: (shape, dtype) per tensor input that differs from ``out``."""
    meta: list[Any] | None = None
    oshape, odtype = out.shape, out.dtype
    for i, x in enumerate(inputs):
        if x.__class__ is Tensor and x._rg:
            d = x.data
            if d.shape != oshape or d.dtype != odtype:
                if meta is None:
                    meta = [None] * len(inputs)
                meta[i] = (d.shape, d.dtype)
    return tuple(meta) if meta is not None else None


def as_view(t: Tensor, base: Tensor, view_fn: ViewFn, creation: str | None = None) -> Tensor:
    """Mark ``t`` as a view of ``base``: shared version counter and data.

    ``view_fn(F, x)`` rebuilds the view from its base's value ``x`` (array or
    Tensor, with ``F`` the matching namespace); views of views compose, so
    ``t._view_fn`` always starts from the root base ``t._base``.
    ``creation`` marks views that restrict in-place use: pass
    ``"multi_output:<NodeName>"`` for outputs of ops returning several views
    (split, chunk, unbind); views made in no_grad mode are marked "no_grad"
    (NOTE [Restricted views] in tensors/_views.py).
    """
    root = base._base
    if root is None:
        t._base = base
        t._view_fn = view_fn
    else:
        t._base = root
        inner = base._view_fn
        assert inner is not None  # every view has one

        def composed(F: GradOps, x: Any, _inner: ViewFn = inner, _outer: ViewFn = view_fn) -> Any:
            return _outer(F, _inner(F, x))

        t._view_fn = composed
    t._vc = own_vc(base)
    inference = t._inference = base._inference
    # As PyTorch's CreationMeta: views made in no_grad / inference mode are marked
    # whatever the base, and propagate_creation_meta: a view of a restricted view
    # stays restricted unless it is restricted itself (an inference mark stays).
    grad_on = _grad_enabled.get()
    if not grad_on:
        creation = "inference" if _inference.get() and not base._inference else "no_grad"
    prev = base._creation if root is not None else None
    if prev is not None and (creation is None or prev.startswith("inference")):
        creation = prev if grad_on else prev.partition(":")[0]
    if grad_on and (creation == "no_grad" or creation == "inference") and t._base._rg:
        creation += ":fn"  # a view of a no_grad view, with a grad_fn in PyTorch
    t._creation = creation
    if t.data.dtype.kind in "fc" and not inference:  # (NOTE [Ops on inference tensors])
        # the version at which the view's grad_fn was made (see _inplace.py)
        t._view_meta = t._vc[0]
    return t
