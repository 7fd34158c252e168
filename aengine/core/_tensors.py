"""What the core knows of tensors: their fields, their history, versions and saved values.

``TensorBase`` (the fields the engine reads and writes) and the Tensor
class handed in from above (NOTE [The core and the Tensor]), the one writer
of a tensor's history (``set_history``), version counters (NOTE [The shared
zero version counter]) and tensors saved for backward (``SavedTensor``,
NOTE [Saved tensors of built-in ops]).  The graph (_graph.py) builds on
this module and re-exports its names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ERR_BACKWARD_TWICE, AutogradError
from ._modes import is_anomaly_enabled

if TYPE_CHECKING:
    from ._graph import Node

__all__ = [
    "TensorBase",
    "bind_tensor_type",
    "new_tensor",
    "set_history",
    "to_tensor",
    "to_raw",
    "host_device",
    "describe",
    "gradient_edge",
    "ZERO_VC",
    "own_vc",
    "DETACHED",
    "DetachedVC",
    "detach_vc",
    "current_version",
    "SavedTensor",
    "inference_saved_error",
    "ERR_DETACHED_SAVED",
    "version_error",
    "freed_error",
]


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


def describe(array: Any) -> str:
    """``float32 tensor [2, 3]``: a tensor's dtype and shape, for messages."""
    shape = ", ".join(str(s) for s in array.shape)
    return f"{array.dtype} tensor [{shape}]"


def gradient_edge(t: Any) -> tuple[Node, int]:
    """The edge that gradients for ``t`` flow along: its grad_fn or accumulator."""
    fn = t._fn if t._view_meta is None else t.grad_fn
    if fn is not None:
        return (fn, t.output_nr)
    return (t._grad_accumulator(), 0)


# NOTE [The shared zero version counter]
# Most tensors are never modified in place nor viewed: they all hold the one
# immutable ``ZERO_VC`` = (0,) as version counter, and get a list of their
# own (``own_vc``) the first time something must share or bump it: a view or
# ``detach()`` (they share the base's counter), an in-place op, a saved output
# (its SavedTensor keeps the counter, not the tensor).  A saved *input* is
# kept as the tensor itself (NOTE [Saved tensors of built-in ops]), so the
# check reads its counter at backward time, whichever it is by then.  A list
# per tensor was one more allocation per op, and for every saved input one
# more object for the garbage collector to walk while the graph lives.
# ``ZERO_VC`` being a tuple, a write that skipped ``own_vc`` fails loudly
# instead of bumping every tensor's version.
ZERO_VC: tuple[int] = (0,)


def own_vc(t: TensorBase) -> list[int]:
    """``t``'s version counter as a list of its own, to share, keep or bump."""
    vc = t._vc
    if vc.__class__ is not list:
        if vc.__class__ is DetachedVC:
            return vc.shared
        vc = t._vc = [vc[0]]  # ZERO_VC (or a copy of it, e.g. unpickled)
    return vc


# NOTE [Saved tensors detached in place]
# PyTorch refuses to unpack a saved input that had a grad_fn when it was
# saved and lost it since to ``detach_()`` ("Trying to use a saved tensor
# that has been detached in-place").  The saved-value check of a built-in op
# reads only the saved tensor's version counter (``t._vc[0]``, NOTE [Saved
# tensors of built-in ops]), so ``detach_`` of a tensor with a grad_fn gives
# the tensor a ``DetachedVC``: a view of its counter that reads DETACHED more
# than the counter itself.  A version recorded before ``detach_`` never
# matches it again, so the check fails on its existing (rare) error path,
# where ``version_error`` tells the two causes apart by the class; a save
# after ``detach_`` records the shifted value and matches as long as the
# tensor is not modified.  The counter stays shared: ``own_vc`` hands out the
# shared list (views, ``detach()``, in-place bumps), so the tensor's aliases
# see no change, and the plain backward pays nothing for the check.  As in
# PyTorch, only a saved input that had a grad_fn is refused: a leaf detached
# in place, a saved output and a custom Function's saved tensor (a
# SavedTensor keeps the shared counter) unpack fine.
DETACHED = 1 << 40


class DetachedVC(list):  # type: ignore[type-arg]
    """The version counter of a tensor detached in place (NOTE [Saved tensors detached in place])."""

    __slots__ = ("shared",)

    def __init__(self, shared: list[int]) -> None:
        super().__init__(shared)
        self.shared = shared

    def __getitem__(self, i: Any) -> Any:
        return self.shared[i] + DETACHED

    def __setitem__(self, i: Any, value: Any) -> None:
        self.shared[i] = value - DETACHED


def detach_vc(t: TensorBase) -> None:
    """``detach_`` of ``t``, which has a grad_fn: mark its counter (NOTE [Saved tensors detached in place])."""
    if t._vc.__class__ is not DetachedVC:
        t._vc = DetachedVC(own_vc(t))


def current_version(t: Any) -> int:
    """The version of a tensor (or SavedTensor), unshifted by ``detach_``."""
    vc = t._vc
    return vc.shared[0] if vc.__class__ is DetachedVC else vc[0]


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


def inference_saved_error() -> AutogradError:
    return AutogradError(
        "Inference tensors cannot be saved for backward. To work around "
        "you can make a clone to get a normal tensor and use it in autograd."
    )


#: PyTorch's text, word for word (saved_variable.cpp)
ERR_DETACHED_SAVED = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."
    "This is not supported, please use out-of-place `.detach()` instead"
)


def version_error(saved: Any, version: int, node: Node) -> str:
    """The in-place error for ``saved`` (a SavedTensor or a saved input Tensor).

    Or the error of a saved input detached in place since (NOTE [Saved
    tensors detached in place]).
    """
    if saved._vc.__class__ is DetachedVC:  # a saved input Tensor, detached in place
        if version >= DETACHED:  # saved after detach_: modified in place since
            version -= DETACHED
        elif saved._fn is None:  # saved before detach_, and still detached
            return ERR_DETACHED_SAVED
    where = ""
    if getattr(saved, "is_output", False):
        where = f", which is output {saved.output_nr} of {node.name()},"
    else:
        t = saved if saved.__class__ is not SavedTensor else saved.tensor
        if t is not None and t.grad_fn is not None:
            fn = t.grad_fn
            where = f", which is output {t.output_nr} of {fn.name()},"
    if is_anomaly_enabled():
        hint = (
            "Hint: the backtrace further above shows the operation that failed to compute "
            "its gradient. The variable in question was changed in there or anywhere later. "
            "Good luck!"
        )
    else:
        hint = (
            "Hint: enable anomaly detection to find the operation that failed to compute its "
            "gradient, with ae.detect_anomaly()."
        )
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{describe(saved.data)}]{where} is at version "
        f"{current_version(saved)}; "
        f"expected version {version} instead. {hint}"
    )


def freed_error() -> AutogradError:
    return AutogradError(ERR_BACKWARD_TWICE)
