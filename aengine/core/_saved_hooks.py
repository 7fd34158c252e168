"""Saved-tensor hooks: ``saved_tensors_hooks``, ``save_on_cpu``, ``disable_saved_tensors_hooks``.

# NOTE [Saved-tensor hooks]
# As torch.autograd.graph's: while ``saved_tensors_hooks(pack, unpack)`` is
# active in a task (a contextvar, like the grad modes; the innermost pair
# wins), every tensor a node saves for its backward, built-in op or custom
# Function, input or output, is given to ``pack`` once when the node is
# recorded, and the node keeps only what ``pack`` returned; the backward
# calls ``unpack`` on it once each time it needs the value (once per
# backward; each ``ctx.saved_tensors`` access of a custom Function) and
# uses the tensor it returns.  A node keeps a ``PackedSaved`` in place of
# the Tensor or SavedTensor it would keep (the same duck type: ``data``,
# ``_vc``, ``unpack_tensor``): the backward's code does not change, and
# the version counter of the tensor saved is still checked, so an in-place
# change of it after the save is still the in-place error (a pack result
# that is an ``OwnVersion`` brings the counter to check instead: NOTE
# [Mutation of saved tensors] in autograd/_mutation.py).  An error in
# ``pack`` surfaces in the forward, one in ``unpack`` in the backward, as
# raised.  Until hooks are first set, recording pays one global read.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from ._errors import AutogradError
from ._graph import SavedTensor, set_history, version_error

__all__ = [
    "OwnVersion",
    "PackedSaved",
    "TrackingVC",
    "RawSaved",
    "disable_saved_tensors_hooks",
    "ever_set",
    "pack_node",
    "pack_value",
    "pack_values",
    "saved_tensors_hooks",
]

Pack = Callable[[Any], Any]
Unpack = Callable[[Any], Any]

#: whether saved-tensor hooks were ever set in this process (never reset)
ever_set = False

#: the active (pack, unpack) pair of this task, or None
_hooks: contextvars.ContextVar[tuple[Pack, Unpack] | None] = contextvars.ContextVar(
    "aengine_saved_tensors_hooks", default=None
)
#: True while a pack or unpack hook runs: leaving there hooks entered
#: outside it changes nothing (the state in force before the hook comes
#: back after it, as torch restores its hooks after a backward); hooks
#: entered inside a hook (a checkpoint's recomputation) work as anywhere
_in_hook: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aengine_saved_tensors_hooks_running", default=False
)
#: the error message while hooks are disabled, or None
_disabled: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aengine_saved_tensors_hooks_disabled", default=None
)


class saved_tensors_hooks:
    """Context manager: pack and unpack every tensor saved for backward, as torch's.

    ``pack_hook(tensor) -> object`` runs once for each tensor a node saves
    when the node is recorded; ``unpack_hook(object) -> Tensor`` runs when
    the backward needs the value.  The innermost active pair applies; the
    setting is task-local (each task has its own, as the grad modes).  See
    NOTE [Saved-tensor hooks].

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> with ae.autograd.graph.saved_tensors_hooks(lambda t: t * 10, lambda t: t / 10):
        ...     y = x * x
        >>> _ = y.sum().backward()
        >>> x.grad.tolist()
        [2.0, 4.0]
    """

    def __init__(self, pack_hook: Pack, unpack_hook: Unpack) -> None:
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError(
                "saved_tensors_hooks expects two callables, pack_hook(tensor) -> object and "
                f"unpack_hook(object) -> Tensor; got {type(pack_hook).__name__} and "
                f"{type(unpack_hook).__name__}"
            )
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook
        #: per entry: its token, and whether it was entered inside a hook
        self._tokens: list[tuple[contextvars.Token[Any], bool]] = []

    def __enter__(self) -> saved_tensors_hooks:
        global ever_set
        message = _disabled.get()
        if message is not None:
            raise RuntimeError(message)
        ever_set = True
        self._tokens.append((_hooks.set((self.pack_hook, self.unpack_hook)), _in_hook.get()))
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._tokens:
            return  # left twice (as torch, no error)
        token, inside = self._tokens[-1]
        if _in_hook.get() and not inside:
            return  # inside a hook, hooks entered outside it: see _in_hook
        self._tokens.pop()
        _hooks.reset(token)


class disable_saved_tensors_hooks:
    """Context manager under which setting saved-tensor hooks raises ``error_message``.

    As torch's: for code whose saved tensors must not be packed (a feature
    that relies on them).  Hooks already active stay active; entering
    ``saved_tensors_hooks`` inside raises RuntimeError(error_message).

    Example::

        >>> import aengine as ae, pytest
        >>> with ae.autograd.graph.disable_saved_tensors_hooks("not here"):
        ...     with pytest.raises(RuntimeError, match="not here"):
        ...         with ae.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        ...             pass
    """

    def __init__(self, error_message: str) -> None:
        if not isinstance(error_message, str):
            raise TypeError(
                f"disable_saved_tensors_hooks expects a str message, got "
                f"{type(error_message).__name__}"
            )
        self.error_message = error_message
        self._tokens: list[contextvars.Token[Any]] = []

    def __enter__(self) -> None:
        self._tokens.append(_disabled.set(self.error_message))

    def __exit__(self, *exc: object) -> None:
        _disabled.reset(self._tokens.pop())


class TrackingVC(list):  # type: ignore[type-arg]
    """The version a value packed by ``allow_mutation_on_saved_tensors`` is checked at.

    It reads the saved tensor's counter (``tracked``) until ``freeze()``,
    called when the value was cloned just before an in-place change, and
    the version it was frozen at from then on: the clone is the value as
    saved, so the change does not fail the backward, while a change the
    clone did not see still does (NOTE [Mutation of saved tensors] in
    autograd/_mutation.py).
    """

    __slots__ = ("frozen", "tracked")

    def __init__(self, tracked: list[int]) -> None:
        super().__init__()
        self.tracked = tracked
        self.frozen: int | None = None

    def __getitem__(self, i: Any) -> Any:
        frozen = self.frozen
        return self.tracked[i] if frozen is None else frozen

    def freeze(self) -> None:
        self.frozen = self.tracked[0]


class OwnVersion:
    """Base of a pack hook's result that brings the counter its value is checked at (``vc``).

    ``PackedSaved`` then checks ``vc`` instead of the saved tensor's counter.
    """

    __slots__ = ("__weakref__", "vc")

    def __init__(self, vc: TrackingVC) -> None:
        self.vc = vc


class PackedSaved:
    """What a node keeps of a saved tensor while hooks are active (NOTE above).

    ``data`` unpacks (each access calls the unpack hook); ``_vc`` and
    ``version`` are the saved tensor's counter and its version at the save,
    checked by the backward as for any saved value.
    """

    __slots__ = ("_vc", "edge", "is_output", "output_nr", "packed", "rg", "unpack_hook", "version")

    #: as a saved input Tensor's, for the in-place error's message
    grad_fn = None
    tensor = None

    def __init__(self, t: Any, is_output: bool, pack_hook: Pack, unpack_hook: Unpack) -> None:
        vc = t._vc
        before = vc[0]
        token = _hooks.set(None)  # what the hook itself saves is not packed (as torch)
        running = _in_hook.set(True)
        try:
            self.packed = pack_hook(t)
        finally:
            _in_hook.reset(running)
            _hooks.reset(token)
        if t._vc[0] != before:
            raise RuntimeError("A saved tensor pack hook is modifying its input in place.")
        if isinstance(self.packed, OwnVersion):
            vc = self.packed.vc
        self._vc = vc
        self.version = before
        self.is_output = is_output
        self.output_nr = t.output_nr
        self.unpack_hook = unpack_hook
        # the saved tensor's place in the graph, which the unpacked value takes
        # (NOTE [Unpacked values keep the saved tensor's place])
        self.rg = t._rg
        fn = t._fn
        if is_output or not t._rg:
            self.edge: tuple[Any, int] | None = None
        elif fn is not None:
            self.edge = (fn, t.output_nr)
        else:
            self.edge = (t._grad_accumulator(), 0)

    def unpack_tensor(self, node: Any = None) -> Any:
        """The tensor ``unpack_hook`` gives back (a TypeError if it is not one)."""
        token = _hooks.set(None)
        running = _in_hook.set(True)
        try:
            t = self.unpack_hook(self.packed)
        finally:
            _in_hook.reset(running)
            _hooks.reset(token)
        if not hasattr(t, "_vc") or not hasattr(t, "data"):
            raise TypeError(
                "Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                f"type {type(t).__name__}"
            )
        if node is None or not (self.rg or t._rg):
            return t  # nothing to re-attach: the hook's tensor itself, as torch
        # NOTE [Unpacked values keep the saved tensor's place]
        # As torch's SavedVariable: what unpack_hook returns gives the values
        # only; in the graph the unpacked tensor stands where the saved one
        # stood (an output of ``node``, of its own grad_fn, or the leaf's
        # accumulator), so a gradient through it flows as through the saved
        # tensor, not through the ops the hooks ran.
        out = t._make(t.data, False, t._device)
        out._vc = t._vc
        if self.rg:
            if self.is_output:
                set_history(out, node, self.output_nr)
            elif self.edge is not None:
                set_history(out, self.edge[0], self.edge[1])
        return out

    @property
    def data(self) -> Any:
        """The unpacked tensor's array."""
        return self.unpack_tensor().data

    def rebase_output(self, vc: list[int]) -> int:
        """A saved output of an in-place op: its tensor's counter is ``vc`` now; the version to expect."""
        own = self._vc
        if own.__class__ is TrackingVC:
            own.tracked = vc
        else:
            self._vc = vc
        version: int = vc[0]
        self.version = version
        return version

    def check(self, node: Any) -> None:
        """The in-place check of a custom Function's saved value (as SavedTensor.check)."""
        if self._vc[0] != self.version:
            raise AutogradError(version_error(self, self.version, node))


def _packed(s: Any, outputs: Any, hooks: tuple[Pack, Unpack]) -> Any:
    """One saved value packed: an input Tensor, or a SavedTensor (an output of ``outputs``)."""
    if s.__class__ is SavedTensor:
        t = s.tensor if s.tensor is not None else outputs[s.output_nr]
        return PackedSaved(t, True, *hooks)
    return PackedSaved(s, False, *hooks)


def pack_node(node: Any, outputs: Any) -> None:
    """Pack the values ``node`` saved (its ``saved``), where hooks are active (NOTE above).

    ``outputs``: the node's output tensors (a saved output is kept without
    its tensor; the pack hook is given the tensor).
    """
    hooks = _hooks.get()
    saved = node.saved
    if hooks is None or saved is None:
        return
    if saved.__class__ is tuple:
        if saved:
            node.saved = tuple([_packed(s, outputs, hooks) for s in saved])
    else:
        node.saved = _packed(saved, outputs, hooks)


def pack_values(values: tuple[Any, ...], tensors: Sequence[Any]) -> tuple[Any, ...]:
    """A custom Function's SavedTensors packed (``tensors``: what was saved), where hooks are active."""
    hooks = _hooks.get()
    if hooks is None:
        return values
    return tuple(
        None if s is None else PackedSaved(t, s.is_output, *hooks)
        for s, t in zip(values, tensors, strict=True)
    )


def pack_value(t: Any) -> Any:
    """``t`` packed by the active hooks as a saved input (a PackedSaved), or ``t`` where none are."""
    hooks = _hooks.get()
    return t if hooks is None else PackedSaved(t, False, *hooks)


class RawSaved:
    """One saved value of a node, as torch's ``grad_fn._raw_saved_<name>`` (a SavedTensor).

    ``register_hooks(pack, unpack)`` packs this one value now and unpacks
    it where the backward (or ``_saved_<name>``) reads it, as the hooks of
    ``saved_tensors_hooks`` do for every value (NOTE [Saved-tensor hooks]);
    one pair per value, and not once the value was freed.  ``node`` gives
    the value by ``_slot_value(i)`` and takes its packed form by
    ``_set_slot_value(i, v)``.
    """

    __slots__ = ("index", "node")

    def __init__(self, node: Any, index: int) -> None:
        self.node = node
        self.index = index

    def register_hooks(self, pack_hook: Pack, unpack_hook: Unpack) -> None:
        """Pack this saved value with ``pack_hook`` now; unpack it with ``unpack_hook``."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError(
                "register_hooks(): incompatible function arguments: it expects two callables, "
                f"pack_hook(tensor) -> object and unpack_hook(object) -> Tensor; got "
                f"{type(pack_hook).__name__} and {type(unpack_hook).__name__}"
            )
        node = self.node
        if node._slots_freed():
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved variables after calling "
                "backward."
            )
        s = node._slot_value(self.index)
        if s is None:
            raise RuntimeError("register_hooks: no tensor was saved here (None was saved)")
        if s.__class__ is PackedSaved:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor whose hooks have already been set. "
                "Hint: only one pair of hooks is allowed at a time."
            )
        if s.__class__ is SavedTensor:
            t = s.tensor if s.tensor is not None else s.unpack_tensor(node)
            packed = PackedSaved(t, s.is_output, pack_hook, unpack_hook)
            packed.version = s.version  # the version at the save, as checked since
        else:
            packed = PackedSaved(s, False, pack_hook, unpack_hook)
        node._set_slot_value(self.index, packed)

    def __repr__(self) -> str:
        return f"<SavedTensor {self.index} of {self.node.name()}>"
