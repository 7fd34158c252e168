"""``allow_mutation_on_saved_tensors``: tensors saved for backward are cloned before a change.

# NOTE [Mutation of saved tensors]
# As torch.autograd.graph's: inside the context, every tensor a node saves
# is packed by a pair of saved-tensor hooks (NOTE [Saved-tensor hooks] in
# core/_saved_hooks.py) into a ``_Handle``; the context keeps the tensor
# (``original``), found by its identity and version (``tid``) and by the
# memory it lives in (``sid``: the array that owns the memory, so a view
# and its base are one storage).  Before an in-place op changes a tensor
# (``check_inplace`` calls ``_clone_saved``), every value saved from the
# same storage and still held by a graph is cloned (``cloned``), once; the
# backward unpacks the clone, so it computes with the values as they were
# saved.  A handle lives as long as a node keeps it (weak dictionaries), so
# a value whose graph was freed (a backward ran, the output was dropped) is
# not cloned (the tids of freed graphs are swept from ``sid_to_tid`` now
# and then, so a context open for a whole training loop stays small).
# The version check stays: a handle's ``TrackingVC`` reads the
# tensor's counter until the clone, then the version cloned, so a change
# the context did not see (a write to ``.data`` arrays) is still the
# in-place error, not silently used.  Leaving the context
# drops what it kept: a backward of its graph afterwards raises
# AssertionError, as torch.
#
# Every in-place op of a Tensor goes through ``check_inplace``; ``mul_`` and
# ``div_`` ask again after recording (their operand may be the tensor they
# change, saved just now), and optimizers before each parameter's update.
# Storages are compared as a whole (torch compares a view's first
# element's address, so a change through a view at an offset is not seen
# there).  The setting is task-local as the grad modes (nesting is checked
# in the task); the clone before a change applies to values saved by any
# open context, whichever task changes them.  Until a context is open the
# in-place path pays one global read.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import defaultdict
from collections.abc import Generator, MutableMapping
from typing import Any
from weakref import WeakKeyDictionary, WeakValueDictionary

from ..core._graph import own_vc
from ..core._modes import _grad_enabled, _inference
from ..core._saved_hooks import OwnVersion, TrackingVC, saved_tensors_hooks
from ..core._versions import current_version
from ..tensors import Tensor
from ..tensors._views import set_before_inplace

__all__ = ["allow_mutation_on_saved_tensors"]

_TID = tuple[int, int, int]

_ERR_OUTSIDE = (
    "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context "
    "in which the graph was originally recorded."
)
_ERR_NESTED = "allow_mutation_on_saved_tensors contexts cannot be nested"
#: saves between two sweeps of the tids of freed graphs (more while many are held)
_SWEEP_EVERY = 4096


class _Handle(OwnVersion):
    """What a node keeps of a tensor saved inside the context (its ``vc``: see NOTE above)."""

    __slots__ = ()


def _storage(data: Any) -> int:
    """The identity of the array that owns ``data``'s memory (the same for a view and its base)."""
    while True:
        base = getattr(data, "base", None)
        if base is None:
            return id(data)
        data = base


class _AllowMutationOnSavedContext:
    """What ``allow_mutation_on_saved_tensors`` keeps (as torch's; for debugging).

    ``original``: handle -> the tensor saved; ``cloned``: handle -> its
    clone, made before the tensor was changed in place;
    ``tid_to_weakhandle``: (id, array id, version) -> handle;
    ``sid_to_tid``: storage -> the tids saved from it.  Handles are weakly
    referenced: an entry goes when the graph that saved it does.
    """

    def __init__(self) -> None:
        self.cloned: MutableMapping[_Handle, Tensor] = WeakKeyDictionary()
        self.original: MutableMapping[_Handle, Tensor] = WeakKeyDictionary()
        self.tid_to_weakhandle: MutableMapping[_TID, _Handle] = WeakValueDictionary()
        self.sid_to_tid: dict[int, set[_TID]] = defaultdict(set)
        self.closed = False
        self._until_sweep = _SWEEP_EVERY

    def clear(self) -> None:
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()

    def pack(self, t: Tensor) -> _Handle:
        self._until_sweep -= 1
        if not self._until_sweep:
            self._sweep()
        own_vc(t)  # a list of its own (shared with later views), for the handle to read
        tid = (id(t), id(t.data), current_version(t))
        self.sid_to_tid[_storage(t.data)].add(tid)
        handle = self.tid_to_weakhandle.get(tid)
        if handle is None:  # (the same tensor at the same version may be saved many times)
            handle = _Handle(TrackingVC(t._vc))  # type: ignore[arg-type]  # (a list: own_vc)
            self.tid_to_weakhandle[tid] = handle
            self.original[handle] = t
        return handle

    def _sweep(self) -> None:
        """Forget the tids whose graphs were freed (a context open for a whole training run)."""
        live = self.tid_to_weakhandle
        for sid, tids in list(self.sid_to_tid.items()):
            tids.intersection_update([tid for tid in tids if tid in live])
            if not tids:
                del self.sid_to_tid[sid]
        self._until_sweep = _SWEEP_EVERY + 2 * len(live)

    def unpack(self, handle: _Handle) -> Tensor:
        if not self.closed:
            value = self.cloned.get(handle)
            if value is None:
                value = self.original.get(handle)
            if value is not None:
                return value
        raise AssertionError(_ERR_OUTSIDE)

    def clone_saved(self, t: Any) -> None:
        """Clone what was saved from ``t``'s storage and is still held, before ``t`` changes."""
        tids = self.sid_to_tid.get(_storage(t.data))
        if not tids:
            return
        for tid in list(tids):
            handle = self.tid_to_weakhandle.get(tid)
            if handle is None:  # saved once, freed since (a backward ran, the graph went)
                tids.discard(tid)
                continue
            if handle in self.cloned:
                continue
            self.cloned[handle] = _clone(self.original.pop(handle))
            handle.vc.freeze()


def _clone(t: Tensor) -> Tensor:
    """A copy of ``t`` whose history is ``t``'s (for a double backward), whatever the mode."""
    grad = _grad_enabled.set(True)
    inference = _inference.set(False)
    try:
        return t.clone()
    finally:
        _inference.reset(inference)
        _grad_enabled.reset(grad)


#: the context open in this task, if any (only to refuse nesting)
_current: contextvars.ContextVar[_AllowMutationOnSavedContext | None] = contextvars.ContextVar(
    "aengine_allow_mutation_on_saved_tensors", default=None
)
#: every open context, of any task: a change of a tensor one of them saved clones it
_open: list[_AllowMutationOnSavedContext] = []


def _clone_saved(t: Any) -> None:
    for ctx in tuple(_open):
        ctx.clone_saved(t)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Generator[_AllowMutationOnSavedContext, None, None]:
    """Context manager under which tensors saved for backward may be changed in place, as torch's.

    A tensor that a node saved is cloned just before an in-place op changes
    it (or a view of it, or its base), and the backward uses the clone: it
    computes with the values as they were saved instead of raising the
    in-place error.  It costs a clone per changed saved tensor.  Run the
    forward and the backward inside the same context: a backward of its
    graph after it was left raises AssertionError.  Contexts do not nest
    (RuntimeError).  Task-local, as the grad modes.  Returns the
    context's state (its ``cloned`` and ``original`` dictionaries, for
    debugging), emptied on exit.  See docs/memory.md.

    Example::

        >>> import aengine as ae
        >>> a = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> with ae.autograd.graph.allow_mutation_on_saved_tensors():
        ...     b = a.clone()
        ...     out = (b * b).sum()  # saves b
        ...     _ = b.mul_(10.0)  # b is cloned first
        ...     _ = out.backward()
        >>> a.grad.tolist()
        [2.0, 4.0]
    """
    ctx = _AllowMutationOnSavedContext()
    with saved_tensors_hooks(ctx.pack, ctx.unpack):
        if _current.get() is not None:
            raise RuntimeError(_ERR_NESTED)
        token = _current.set(ctx)
        _open.append(ctx)
        set_before_inplace(_clone_saved)
        try:
            yield ctx
        finally:
            _open.remove(ctx)
            if not _open:
                set_before_inplace(None)
            ctx.closed = True
            ctx.clear()
            _current.reset(token)
