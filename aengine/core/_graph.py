"""The backward graph: nodes, edges, saved tensors and hook handles.

# NOTE [Graph ownership]
# Tensors own their ``grad_fn``; a node owns the nodes of its ``next_edges``
# (strongly), so a graph lives exactly as long as some output that reaches it.
# A leaf owns nothing of the graph: it refers to its ``AccumulateGrad`` node
# weakly, and the node refers to the leaf strongly (as in PyTorch).  A node
# never holds its own outputs strongly: a saved output keeps only its data and
# version counter and is rebuilt with this node as ``grad_fn`` when unpacked
# for a create_graph backward, so tensor -> grad_fn -> saved -> tensor cycles
# never form and dropping the outputs frees the graph by reference counting.

An edge is a plain tuple ``(node, input_nr)``; a missing edge is ``None``.

# NOTE [A node is the list of its next nodes]
# A node keeps its edges in two parallel parts: the node itself is a list
# (``Node`` derives from ``list``) whose item ``i`` is the node that input
# ``i`` of the forward op sends its gradient to (None for an input that
# takes no gradient), and ``next_nrs`` holds the input_nr of each edge, a
# tuple shared between nodes (``nrs``: (0,), (0, 0), ...).  Every object
# a forward leaves alive is one more for the cyclic garbage collector to
# walk, at each of its collections, for as long as the graph lives: one
# tuple per edge was one such object per edge, and a separate tuple of next
# nodes one per node, the largest share of what recording a graph cost
# after the numpy calls.  A list keeps its items outside the object (a
# plain allocation the collector never sees), so a recorded node is one
# tracked object, and the engine's loops iterate the node itself (``for nxt
# in node``), C-level iteration without an attribute read.
#
# Being a list is not part of what a node means: identity, not contents,
# decides equality and hashing (a node is a dict key of the engine), a node
# is always true, and it orders as an object (not at all).  Its edges are
# fixed once it is made: the list's methods that would change them raise
# (``Node.__init__`` and the recorders fill it through ``list``'s own
# methods, ``add_edge`` / ``add_edges``).  ``next_edges``, ``next_functions``
# and ``next_nodes`` give the edges as tuples, for code off the hot path.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import AutogradError
from ._handles import RemovableHandle, TensorPreHook, add_hook
from ._modes import _grad_enabled
from ._versions import (
    DETACHED,
    ERR_DETACHED_SAVED,
    ZERO_VC,
    DetachedVC,
    current_version,
    describe,
    detach_vc,
    freed_error,
    inference_saved_error,
    own_vc,
    version_error,
)

__all__ = [
    "TensorBase",
    "bind_tensor_type",
    "new_tensor",
    "set_history",
    "to_tensor",
    "to_raw",
    "host_device",
    "describe",
    "Node",
    "AccumulateGrad",
    "GraphRoot",
    "RemovableHandle",
    "SavedTensor",
    "gradient_edge",
    "next_sequence_nr",
    "observe_sequence",
    "nrs",
    "own_vc",
    "ZERO_VC",
    "DetachedVC",
    "detach_vc",
    "current_version",
    "DETACHED",
    "ERR_DETACHED_SAVED",
    "freed_error",
    "inference_saved_error",
    "version_error",
]

Edge = tuple["Node", int]

#: (the name the tensor layer imports)
_add_hook = add_hook


class TensorBase:
    """What the core knows of a tensor: the fields it reads and writes.

    # NOTE [The core and the Tensor]
    # The core imports no Tensor (it sits below the tensor layer).  The
    # Tensor class (aengine.tensors) derives from this class, which declares
    # the fields the engine touches, and hands itself in once at import
    # (``bind_tensor_type``) with the host device, so that the core can wrap a
    # gradient array as a Tensor (hooks, ``.grad``, saved outputs) without an
    # import: a registry filled from above.  The methods declared for type
    # checking only are attached to Tensor by the ops layer.
    """

    # the instance dict holds a Tensor's cold fields (NOTE [Hot and cold fields])
    __slots__ = ("__dict__",)

    data: Any
    _device: Any
    _rg: bool
    _fn: Node | None
    output_nr: int
    _vc: list[int] | tuple[int]
    _grad: Any
    _hooks: dict[int, Any] | None
    _post_acc_hooks: dict[int, Any] | None
    _inference: bool

    if TYPE_CHECKING:

        @property
        def grad_fn(self) -> Node | None: ...

        def clone(self) -> Any: ...

        def to(self, *args: Any, **kwargs: Any) -> Any: ...

        def __add__(self, other: Any) -> Any: ...

        @staticmethod
        def _make(data: Any, requires_grad: bool = False, dev: Any = None) -> Any: ...


class _Bound:
    """The Tensor class and the host device, handed in by the tensor layer."""

    __slots__ = ("host", "tensor")

    def __init__(self) -> None:
        self.tensor: type[TensorBase] = TensorBase
        self.host: Any = None


_bound = _Bound()


def bind_tensor_type(tensor: type[TensorBase], host: Any) -> None:
    """Hand the Tensor class and the host (cpu) device to the core (NOTE [The core and the Tensor])."""
    _bound.tensor = tensor
    _bound.host = host


def new_tensor(data: Any, dev: Any) -> Any:
    """A Tensor of backend array ``data`` on ``dev``, without graph."""
    return _bound.tensor._make(data, False, dev)


def set_history(t: Any, fn: Node | None, output_nr: int, requires_grad: bool = True) -> None:
    """Make ``t`` output ``output_nr`` of node ``fn`` (None: no history): its one writer.

    Every change of a tensor's history goes through here (a Function's
    outputs, an in-place op or a view's rebase, a saved output unpacked,
    ``detach_``), but for the recorders of built-in ops, which inline it
    (aengine/ops/_core.py: NOTE [Recording an op of one tensor]).
    """
    t._rg = requires_grad
    t._fn = fn
    t.output_nr = output_nr


def to_tensor(g: Any, dev: Any) -> Any:
    """A raw gradient array as a Tensor (no graph) on ``dev``; Tensors and None pass through."""
    if g is None or isinstance(g, TensorBase):
        return g
    backend = dev._backend or dev.backend  # (the property when not loaded yet)
    if not isinstance(g, backend.array_types):
        g = backend.asarray(g)
    return _bound.tensor._make(g, False, dev)


def to_raw(g: Any) -> Any:
    """A Tensor's array; raw arrays and None pass through."""
    if isinstance(g, TensorBase):
        return g.data
    return g


def host_device() -> Any:
    """The device whose nodes the caller's own loop runs (cpu)."""
    return _bound.host


#: AccumulateGrad nodes run first in a ready queue (PyTorch gives them UINT64_MAX).
ACC_SEQ = 1 << 62

_sequence = itertools.count()
#: the next node's sequence number (the counter's own C method; while
#: ``observe_sequence`` has an observer, a function that also reports it).
#: The forward's recorders call it through this module (``_graph.next_sequence_nr()``)
#: so that only this module ever rebinds it.
_take_sequence_nr = _sequence.__next__  # (one object: each access makes a new one)
next_sequence_nr: Callable[[], int] = _take_sequence_nr


def observe_sequence(observer: Callable[[int], object] | None) -> None:
    """Report each sequence number taken to ``observer(seq)``; None stops it.

    A profile notes the time of every recorded op this way (NOTE [Forward
    ops in a profile] in aengine/_profile/_recorder.py); with no observer
    the counter costs nothing more.
    """
    global next_sequence_nr
    if observer is None:
        next_sequence_nr = _take_sequence_nr
        return
    take = _take_sequence_nr

    def observed() -> int:
        seq = take()
        observer(seq)
        return seq

    next_sequence_nr = observed


#: fill a node with its next nodes as it is made (NOTE [A node is the list of
#: its next nodes]: a made node's edges are fixed; ``list``'s own methods)
add_edge = list.append
add_edges = list.extend

_NRS: dict[tuple[int, ...], tuple[int, ...]] = {}


def nrs(numbers: tuple[int, ...]) -> tuple[int, ...]:
    """The shared tuple equal to ``numbers`` (NOTE [A node is the list of its next nodes])."""
    shared = _NRS.get(numbers)
    if shared is None:
        if len(_NRS) > 4096:  # unusual input_nr patterns: stop sharing, stay bounded
            return numbers
        shared = _NRS[numbers] = numbers
    return shared


def split_edges(
    edges: tuple[Edge | None, ...],
) -> tuple[tuple[Node | None, ...], tuple[int, ...]]:
    """``(next_nodes, next_nrs)`` of a tuple of edges."""
    return (
        tuple(None if e is None else e[0] for e in edges),
        nrs(tuple(0 if e is None else e[1] for e in edges)),
    )


class Node(list["Node | None"]):
    """A function of the backward graph (``tensor.grad_fn``).

    ``next_edges`` holds one edge per input of the forward op: a tuple
    ``(node, input_nr)`` or ``None`` where that input needs no gradient
    (kept in the node itself and ``next_nrs``, NOTE [A node is the list of
    its next nodes]).
    ``apply`` takes one gradient per forward output (``None`` where none
    arrived) and returns one gradient per forward input.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(2, requires_grad=True)
        >>> (x * 2).grad_fn.name()
        'MulBackward0'
    """

    # NOTE [Hot and cold fields]
    # The fields every node needs are slots; the rarely used ones (hooks,
    # metadata, anomaly info) default to None at class level and land in the
    # instance __dict__ only when set, so creating a node stays cheap.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_special",
        "next_nrs",
        "sequence_nr",
        "topological_nr",
    )

    _metadata: dict[str, Any] | None = None
    _pre_hooks: dict[int, Any] | None = None
    _post_hooks: dict[int, Any] | None = None
    _tensor_pre_hooks: dict[int, Any] | None = None
    _retains_grad: dict[int, Any] | None = None
    _anomaly: Any = None

    #: number of forward outputs (gradients this node receives)
    num_outputs: int = 1
    #: the device its gradients are computed on (None: the host); an op's node
    #: records its result's device and the cost of its kernel in elements
    #: touched (``numel``: the result's size, a matrix product's scaled by its
    #: depth), facts from which the runtime decides where the node runs (NOTE
    #: [Where a node runs])
    dev: Any = None
    numel: int = 0
    #: True for nodes whose apply may return an awaitable (async backward)
    _is_async: bool = False
    #: True for nodes that always take the engine's general path
    _always_special: bool = False
    # ``_special``: True when the node must take the general path (hooks,
    # retained gradients, ``_always_special``); only this class sets it.

    next_nrs: tuple[int, ...]
    sequence_nr: int
    topological_nr: int

    # NOTE [A node is the list of its next nodes]: identity semantics.  The
    # slot wrappers of ``object`` are C functions the type calls directly.
    __hash__ = object.__hash__  # type: ignore[assignment]
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __lt__ = object.__lt__  # type: ignore[operator]
    __le__ = object.__le__  # type: ignore[operator]
    __gt__ = object.__gt__  # type: ignore[operator]
    __ge__ = object.__ge__  # type: ignore[operator]

    def __bool__(self) -> bool:
        return True

    def _fixed(self, *args: object, **kwargs: object) -> Any:
        raise TypeError(f"the edges of {self.name()} are fixed: a backward node cannot change them")

    append = extend = insert = pop = remove = clear = sort = reverse = _fixed
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _fixed

    def __init__(self, next_edges: tuple[Edge | None, ...], sequence_nr: int | None = None) -> None:
        nodes, self.next_nrs = split_edges(next_edges)
        add_edges(self, nodes)
        self.sequence_nr = next_sequence_nr() if sequence_nr is None else sequence_nr
        topo = 0
        for fn in nodes:
            if fn is not None and fn.topological_nr >= topo:
                topo = fn.topological_nr + 1
        self.topological_nr = topo
        self._special = self._always_special

    # -- identity ---------------------------------------------------------
    def name(self) -> str:
        """The node's name, as PyTorch spells it (``'MulBackward0'``)."""
        return type(self).__name__

    def _sequence_nr(self) -> int:
        return self.sequence_nr

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_nodes(self) -> tuple[Node | None, ...]:
        """The node each forward input sends its gradient to (None: no gradient)."""
        return tuple(self)

    @property
    def next_edges(self) -> tuple[Edge | None, ...]:
        """``(node, input_nr)`` per forward input, None for an input without gradient."""
        return tuple(
            None if fn is None else (fn, nr) for fn, nr in zip(self, self.next_nrs, strict=True)
        )

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """``((node, input_nr), ...)`` per forward input; ``(None, 0)`` for none."""
        return tuple(zip(self, self.next_nrs, strict=True))

    @property
    def metadata(self) -> dict[str, Any]:
        """A dict for the user's own annotations of this node."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    # -- execution ----------------------------------------------------------
    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        """Return one gradient per forward input, given one per forward output.

        Gradients are raw arrays, or Tensors recording a graph when
        ``create_graph`` is true.
        """
        raise NotImplementedError

    def release_variables(self) -> None:
        """Free what was saved for backward (called unless retain_graph)."""

    def evaluate(self, grads: list[Any], create_graph: bool, release: bool) -> Any:
        """``apply``, then ``release_variables`` if ``release``: the engine's call per node.

        Built-in op nodes do both in one call (the hot path of a backward).
        """
        outs = self.apply(grads, create_graph)
        if release:
            self.release_variables()
        return outs

    def __call__(self, *grads: Any) -> Any:
        """``grad_fn(*grads)``: run this node directly on gradient Tensors."""
        if len(grads) != self.num_outputs:
            raise TypeError(
                f"{self.name()} expected {self.num_outputs} arguments, got {len(grads)} instead"
            )
        create_graph = _grad_enabled.get()
        raw = [g if create_graph or g is None else g.data for g in grads]
        outs = self.apply(raw, create_graph)
        dev = self.dev if self.dev is not None else _bound.host
        res = tuple(to_tensor(o, dev) for o in outs)
        return res[0] if len(res) == 1 else res

    # -- hooks -------------------------------------------------------------------
    def register_hook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Run ``fn(grad_inputs, grad_outputs)`` after the node ran.

        A non-None return value replaces ``grad_inputs``.
        """
        if self._post_hooks is None:
            self._post_hooks = {}
        self._special = True
        return _add_hook(self._post_hooks, fn)

    def register_prehook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Run ``fn(grad_outputs)`` before the node runs.

        A non-None return value replaces ``grad_outputs``.
        """
        if self._pre_hooks is None:
            self._pre_hooks = {}
        self._special = True
        return _add_hook(self._pre_hooks, fn)

    def _register_tensor_pre_hook(self, output_nr: int, fn: Any) -> RemovableHandle:
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        self._special = True
        hook = TensorPreHook(output_nr, fn)
        return _add_hook(self._tensor_pre_hooks, hook)

    def _retain_output(self, output_nr: int, t: TensorBase) -> None:
        """Stage the gradient of output ``output_nr`` as ``t.grad`` (``retain_grad``)."""
        if self._retains_grad is None:
            self._retains_grad = {}
        self._retains_grad[output_nr] = weakref.ref(t)
        self._special = True

    def _forget_output(self, output_nr: int) -> None:
        """Stop retaining the gradient of output ``output_nr`` (it moved to another node)."""
        if self._retains_grad:
            self._retains_grad.pop(output_nr, None)

    def _has_hooks(self) -> bool:
        return bool(
            self._pre_hooks or self._post_hooks or self._tensor_pre_hooks or self._retains_grad
        )


class AccumulateGrad(Node):
    """Sink node of a leaf that requires grad: accumulates into ``leaf.grad``.

    One per leaf, created on first use; the leaf refers to it weakly.
    """

    __slots__ = ("variable",)
    _always_special = True

    def __init__(self, variable: TensorBase) -> None:
        # the largest number, without taking one from the counter: a leaf's
        # accumulator made anew (its last graph freed) must not shift the
        # numbers of the nodes recorded after it (as in PyTorch); a backward
        # plan compares those numbers (NOTE [Backward plans])
        super().__init__((), ACC_SEQ)
        self.variable = variable
        self.dev = variable._device

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        # The engine handles AccumulateGrad itself (staging, see _graph_task.py).
        raise AutogradError("AccumulateGrad is run by the engine, not called directly")


class GraphRoot(Node):
    """Fans the initial gradients out to several roots."""

    __slots__ = ("grads",)

    def __init__(self, edges: tuple[Edge | None, ...], grads: list[Any]) -> None:
        super().__init__(edges)
        self.grads = grads

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return self.grads


def gradient_edge(t: Any) -> Edge:
    """The edge that gradients for ``t`` flow along: its grad_fn or accumulator."""
    fn = t._fn if t._view_meta is None else t.grad_fn
    if fn is not None:
        return (fn, t.output_nr)
    return (t._grad_accumulator(), 0)


class SavedTensor:
    """A tensor saved for backward: its data plus the version it was saved at.

    Unpacking checks the version counter and raises the in-place error when
    the tensor was modified since; after :meth:`release` it raises the
    "backward through the graph a second time" error.  An output of the node
    that saved it is kept without the tensor object (see NOTE [Graph ownership]).

    # NOTE [Saved tensors of built-in ops]
    # An OpNode keeps the tensors it saved in ``saved`` and their versions at
    # save time in ``versions`` (a tuple of ints, shared when all are 0): a
    # saved input is the Tensor itself, and only a saved output becomes a
    # SavedTensor (its ``data`` and ``_vc``, as a Tensor's, without the tensor:
    # NOTE [Graph ownership]).  A SavedTensor per input would be one more
    # object per op for the garbage collector to track while the graph lives.
    # For the same reason a single saved value (most unary ops) is kept bare,
    # not in a 1-tuple: ``saved`` is a tuple, one Tensor or SavedTensor, or
    # None once freed; ``saved_values`` gives the tuple form.
    # Custom Functions keep SavedTensors for every saved value.
    """

    __slots__ = (
        "_vc",
        "data",
        "device",
        "is_output",
        "output_nr",
        "requires_grad",
        "tensor",
        "version",
    )

    def __init__(self, t: TensorBase, is_output: bool = False) -> None:
        if t._inference:
            raise inference_saved_error()
        self.data = t.data
        vc = self._vc = own_vc(t)
        self.version = vc[0]
        self.is_output = is_output
        if is_output:
            self.output_nr = t.output_nr
            self.requires_grad = t._rg
            self.device = t._device
            self.tensor: TensorBase | None = None
        else:
            self.tensor = t

    def check(self, node: Node) -> None:
        # the counter kept at save time, not the tensor's: a custom Function's
        # input detached in place since unpacks fine, as in PyTorch (NOTE
        # [Saved tensors detached in place])
        if self._vc[0] != self.version:
            raise AutogradError(version_error(self, self.version, node))

    def unpack_tensor(self, node: Node) -> Any:
        """The saved value as a Tensor connected to the graph (create_graph)."""
        if self.tensor is not None:
            return self.tensor
        t = _bound.tensor._make(self.data, self.requires_grad, self.device)
        t._vc = self._vc
        if self.requires_grad:
            set_history(t, node, self.output_nr)
        return t
