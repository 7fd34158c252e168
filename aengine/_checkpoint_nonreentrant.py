"""``ae.checkpoint(..., use_reentrant=False)``: the non-reentrant variant, as torch's.

Its frames, the saved-tensor hooks that drop a segment's values in the
forward and recompute them on their first use in a backward, the settings
(early stop, debug, GraphExecGroup) and ``CheckpointError``.  The public
function, ``ae.checkpoint``, is in _checkpoint.py.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from .core import AutogradError, current_graph_task
from .core._graph import set_history
from .core._modes import enable_grad, is_grad_enabled
from .core._saved_hooks import PackedSaved, pack_value, saved_tensors_hooks
from .tensors import Tensor, default_generator

__all__ = [
    "CheckpointError",
    "GraphExecGroup",
    "checkpoint_without_reentrant",
    "noop_context_fn",
    "rng_state",
    "set_checkpoint_debug_enabled",
    "set_checkpoint_early_stop",
    "set_rng_state",
]


def rng_state() -> Any:
    return default_generator._rng.bit_generator.state


def set_rng_state(state: Any) -> None:
    default_generator._rng.bit_generator.state = state


# NOTE [Non-reentrant checkpoint]
# As torch.utils.checkpoint with ``use_reentrant=False``: ``fn`` runs once
# normally (grad enabled, its graph recorded) under saved-tensor hooks
# whose pack keeps, for every tensor a node saves, an empty ``_Holder``
# instead of the tensor (NOTE [Saved-tensor hooks] in core/_saved_hooks.py):
# the segment's intermediate values die with the forward.  The first
# unpack of a holder in a backward re-runs ``fn`` on the same arguments
# (grad enabled, the forward's RNG state, no checkpoint active but the ones
# ``fn`` opens itself), under hooks that fill the live holders, in order,
# with the values saved this time; the backward then goes on through the
# *original* graph.  No nested backward runs, so it works with ``ae.grad``,
# ``backward(inputs=...)``, nested checkpoints and higher-order gradients.
#
# * Identity, as torch's SavedVariable: a holder gives back a recomputed
#   value detached and re-attached to the *forward's* node (its grad_fn and
#   output number, kept weakly), so a create_graph backward differentiates
#   through the original graph; a leaf (or a tensor outside autograd) is
#   given back as the very object the recomputation saved.
# * No reference cycle: the recomputed graph's own nodes keep what they
#   save the same way (detached, their producer kept weakly), never a node's
#   own output, so a graph dies by reference counting alone.
# * Nesting (torch's NOTE [ Nestable Checkpoint ]): a checkpoint's tensor
#   arguments are saved through the hooks active when it is called, so an
#   enclosing checkpoint manages them like its other saved values (frees
#   them, recomputes them first when the inner recomputation needs them).
# * Lifetime: recomputed values belong to one backward (its graph task id)
#   and are dropped as they are unpacked, even with retain_graph=True (a
#   second unpack in the same backward is a CheckpointError); each unpack
#   outside any backward recomputes.
# * Early stop (``early_stop``, overridden by ``set_checkpoint_early_stop``
#   while the *forward* runs): the recomputation stops, by raising
#   ``_StopRecomputation`` from the hook, as soon as every holder has its
#   value.  The signal is an AutogradError so that a backward run inside the
#   recomputation (``ae.grad`` inside ``fn``) lets it through unwrapped.
# * Determinism (``determinism_check="default"``): the recomputation must
#   save as many tensors as the forward (more is an error only without
#   early stop) with the same shapes, dtypes and devices, else
#   CheckpointError; ``debug`` adds where each tensor was saved, both times.


class CheckpointError(AutogradError):
    """A non-reentrant checkpoint's recomputation differs from its forward (as torch's).

    Example::

        >>> import aengine as ae
        >>> issubclass(ae.CheckpointError, RuntimeError)
        True
    """


class _StopRecomputation(AutogradError):
    """Raised by the recomputation's hook once every holder is filled (early stop)."""

    def __init__(self, frame: _Frame) -> None:
        super().__init__("ae.checkpoint: recomputation stopped early")
        self.frame = frame


#: set_checkpoint_early_stop's setting in this task (None: each checkpoint's own)
_early_stop_override: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "aengine_checkpoint_early_stop", default=None
)
#: set_checkpoint_debug_enabled's setting in this task (None: each checkpoint's own)
_debug_override: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "aengine_checkpoint_debug", default=None
)


def set_checkpoint_early_stop(enable: bool) -> contextlib.AbstractContextManager[None]:
    """Within this context, non-reentrant checkpoints use ``early_stop=enable``, as torch's.

    It needs to be active only while the checkpointed *forward* runs (the
    setting is taken then; the backward may run outside); it overrides the
    ``early_stop`` argument.  Task-local.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([0.5, 1.0], requires_grad=True)
        >>> with ae.set_checkpoint_early_stop(False):
        ...     y = ae.checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False)
        >>> ae.sync.backward(y.sum())
        >>> x.grad.shape
        (2,)
    """
    if not isinstance(enable, bool):
        raise TypeError(f"set_checkpoint_early_stop expects a bool, got {type(enable).__name__}")
    return _setting(_early_stop_override, enable)


def set_checkpoint_debug_enabled(enabled: bool | None) -> contextlib.AbstractContextManager[None]:
    """Within this context, checkpoints run with ``debug=enabled`` (None: their own), as torch's.

    With debug, a CheckpointError of a non-reentrant checkpoint lists the
    tensors saved in the forward and in the recomputation, with where each
    was saved.  Task-local.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([0.5, 1.0], requires_grad=True)
        >>> with ae.set_checkpoint_debug_enabled(True):
        ...     y = ae.checkpoint(lambda t: t.sin(), x, use_reentrant=False)
        >>> ae.sync.backward(y.sum())
    """
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(
            f"set_checkpoint_debug_enabled expects a bool or None, got {type(enabled).__name__}"
        )
    return _setting(_debug_override, enabled)


@contextlib.contextmanager
def _setting(var: contextvars.ContextVar[bool | None], value: bool | None) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


#: the GraphExecGroup active in this task, or None
_exec_group: contextvars.ContextVar[GraphExecGroup | None] = contextvars.ContextVar(
    "aengine_checkpoint_exec_group", default=None
)


class GraphExecGroup:
    """The backwards run inside share one recomputation of each checkpoint, as torch's.

    Without it, every backward (each graph task) recomputes what it needs
    of a non-reentrant checkpoint.  The backwards run under one group must
    use disjoint parts of a checkpointed region (no saved value unpacked
    twice, even with retain_graph=True), else CheckpointError.  Groups do
    not nest; task-local.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([0.5, 1.0], requires_grad=True)
        >>> def two(t):
        ...     y = t.sin()
        ...     return y, y.cos()
        >>> y, z = ae.checkpoint(two, x, use_reentrant=False)
        >>> with ae.GraphExecGroup():
        ...     (gy,) = ae.sync.grad(z.sum(), [y])
        ...     (gx,) = ae.sync.grad(y, [x], gy)
        >>> gx.shape
        (2,)
    """

    def __init__(self) -> None:
        self.id = next(_local_ids)
        self._token: contextvars.Token[GraphExecGroup | None] | None = None

    def __enter__(self) -> GraphExecGroup:
        current = _exec_group.get()
        if current is not None:
            raise RuntimeError(
                f"GraphExecGroup contexts cannot be nested. Already inside group {current!r}"
            )
        self._token = _exec_group.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _exec_group.reset(self._token)
            self._token = None


_UNPACKED = None  # a holder's value once unpacked in that backward


class _Holder:
    """What a node keeps of a tensor saved inside a non-reentrant checkpoint."""

    __slots__ = ("__weakref__", "fn", "output_nr", "values")

    def __init__(self, t: Tensor) -> None:
        fn = t.grad_fn
        self.fn = None if fn is None else weakref.ref(fn)
        self.output_nr = t.output_nr
        # graph task id -> recomputed value (detached), _UNPACKED once given out
        self.values: dict[int, Tensor | None] = {}


def _attached(value: Tensor, fn: weakref.ref[Any] | None, output_nr: int) -> Tensor:
    """``value``'s data as output ``output_nr`` of the node ``fn`` (if it lives), as SavedVariable."""
    node = None if fn is None else fn()
    if node is None:
        return value
    t = Tensor._make(value.data, True, value._device)
    t._vc = value._vc
    set_history(t, node, output_nr)
    return t


class _Live:
    """What a node of a recomputed graph keeps of a tensor it saved (no cycle)."""

    __slots__ = ("fn", "output_nr", "value")

    def __init__(self, t: Tensor) -> None:
        self.value = t.detach()
        self.fn = weakref.ref(t.grad_fn)
        self.output_nr = t.output_nr


def _unpack_live(p: Any) -> Any:
    if p.__class__ is _Live:
        return _attached(p.value, p.fn, p.output_nr)
    return p


def _meta(t: Tensor) -> tuple[Any, ...]:
    return (tuple(t.shape), t.dtype, t.device)


def _meta_text(meta: tuple[Any, ...]) -> str:
    shape, dtype, device = meta
    return f"{{'shape': {shape}, 'dtype': {dtype}, 'device': {device}}}"


_DEBUG_TIP = (
    "\nTip: To see a more detailed error message, pass `debug=True` to ae.checkpoint(...) "
    "or wrap the code block in `with ae.set_checkpoint_debug_enabled(True):`."
)
_AENGINE_DIR = os.path.dirname(os.path.abspath(__file__))


def _where() -> str:
    """The innermost caller outside aengine (where a saved tensor was recorded)."""
    for fs in reversed(traceback.extract_stack()):
        if not os.path.abspath(fs.filename).startswith(_AENGINE_DIR):
            return f"{fs.filename}:{fs.lineno} in {fs.name}: {fs.line}"
    return "?"


_local_ids = itertools.count(-2, -1)  # one per unpack outside any backward


class _Frame:
    """One checkpointed call: its holders (weakly) and how to recompute it."""

    def __init__(
        self,
        recompute: Callable[[], Any],
        check_meta: bool,
        early_stop: bool,
        debug: bool,
    ) -> None:
        self.recompute = recompute
        self.check_meta = check_meta
        self.early_stop = early_stop
        self.holders: list[weakref.ref[_Holder]] = []
        self.metas: list[tuple[Any, ...]] = []
        self.recomputed: set[int] = set()  # graph task ids whose recomputation ran
        self.forward_completed = False
        self.ignore_saved_mismatch = False
        self.forward_log: list[str] | None = [] if debug else None
        self.recompute_log: list[str] = []

    def pack(self, t: Tensor) -> _Holder:
        holder = _Holder(t)
        self.holders.append(weakref.ref(holder))
        self.metas.append(_meta(t))
        if self.forward_log is not None:
            self.forward_log.append(f"{_meta_text(_meta(t))}\n    at {_where()}")
        return holder

    def unpack(self, holder: _Holder) -> Tensor:
        try:
            return self._unpack(holder)
        except CheckpointError as err:
            if self.forward_log is None:
                raise
            raise CheckpointError(self._debug_report(err)) from err

    def _unpack(self, holder: _Holder) -> Tensor:
        group = _exec_group.get()
        gt = current_graph_task()
        if group is not None:
            gid = group.id
        else:
            gid = next(_local_ids) if gt is None else gt.id
        if gid not in self.recomputed:
            self._recompute(gid)
        if gid not in holder.values:
            raise CheckpointError(
                "ae.checkpoint: A different number of tensors was saved during the original "
                "forward and recomputation: this tensor was not saved again." + _DEBUG_TIP
            )
        value = holder.values[gid]
        if value is _UNPACKED:
            overlap = (
                "Performing two backward calls that overlap (i.e. require the same saved "
                "activation in order to compute gradients) is not allowed while under the "
                "ae.GraphExecGroup context. "
                if group is not None
                else ""
            )
            raise CheckpointError(
                "ae.checkpoint: Unpack is being triggered for a tensor that was already "
                f"unpacked once. {overlap}If you are calling ctx.saved_tensors in backward, make sure "
                "to do so only once. Otherwise please open an issue with details on your "
                "use case."
            )
        if gt is None and group is None:
            del holder.values[gid]
        else:
            holder.values[gid] = _UNPACKED
        return _attached(value, holder.fn, holder.output_nr)

    def _recompute(self, gid: int) -> None:
        count = 0
        holders = self.holders
        total = len(holders)
        if self.forward_log is not None:
            self.recompute_log = []

        def fill(t: Tensor) -> Any:
            nonlocal count
            index = count
            count += 1
            if self.forward_log is not None:
                self.recompute_log.append(f"{_meta_text(_meta(t))}\n    at {_where()}")
            if index >= total:
                if not self.forward_completed:
                    # a backward inside the forward itself: the forward has saved only
                    # part of what the whole recomputation saves
                    self.ignore_saved_mismatch = True
                    return _pack_live(t)
                raise CheckpointError(
                    "ae.checkpoint: trying to save more tensors during recomputation than "
                    "during the original forward pass." + _DEBUG_TIP
                )
            holder = holders[index]()
            if holder is not None:  # else freed by a backward within the forward
                holder.values[gid] = t.detach() if t.grad_fn is not None else t
            if self.early_stop and count == total:
                raise _StopRecomputation(self)
            return _pack_live(t)

        self.recomputed.add(gid)
        try:
            with saved_tensors_hooks(fill, _unpack_live):
                self.recompute()
        except _StopRecomputation as stop:
            if stop.frame is not self:
                raise
            # the traceback's frames may hold a nested backward's graph task, which holds
            # the error: a cycle that would keep the graph alive until a gc pass
            stop.__traceback__ = None
        self._check(gid, count)

    def _check(self, gid: int, count: int) -> None:
        """As torch's: as many tensors saved both times, with the same metadata."""
        if self.ignore_saved_mismatch:
            return
        if count != len(self.holders):
            raise CheckpointError(
                "ae.checkpoint: A different number of tensors was saved during the original "
                "forward and recomputation.\n"
                f"Number of tensors saved during forward: {len(self.holders)}\n"
                f"Number of tensors saved during recomputation: {count}." + _DEBUG_TIP
            )
        if not self.check_meta:
            return
        different = []
        for index, ref in enumerate(self.holders):
            holder = ref()
            if holder is None:
                continue
            value = holder.values.get(gid)
            if value is not None and _meta(value) != self.metas[index]:
                different.append(
                    f"tensor at position {index}:\n"
                    f"saved metadata: {_meta_text(self.metas[index])}\n"
                    f"recomputed metadata: {_meta_text(_meta(value))}\n"
                )
        if different:
            raise CheckpointError(
                "ae.checkpoint: Recomputed values for the following tensors have different "
                "metadata than during the forward pass.\n" + "".join(different) + _DEBUG_TIP
            )

    def _debug_report(self, err: CheckpointError) -> str:
        def listing(log: list[str]) -> str:
            return "\n".join(f"  {i}: {line}" for i, line in enumerate(log)) or "  (none)"

        return (
            "An error happened while unpacking tensors; the tensors saved in the original "
            "forward and in the recomputation follow because you passed `debug=True` to "
            "ae.checkpoint().\n\n"
            f"Tensors saved during the original forward:\n{listing(self.forward_log or [])}\n\n"
            f"Tensors saved during recomputation:\n{listing(self.recompute_log)}\n\n"
            "ERROR: Detected non-determinism while running activation checkpointing\n"
            "You are seeing this error because you passed `debug=True` to checkpoint and "
            "tensors to be saved during the original forward and differ between those saved "
            "during recomputation. Compare the two lists above to find where the "
            f"computations differ.\n\n{err}"
        )


def _pack_live(t: Tensor) -> Any:
    return t if t.grad_fn is None else _Live(t)


_CONTEXT_SUPPRESSED = (
    "ae.checkpoint: the forward context provided by context_fn suppressed an exception "
    "raised during the checkpointed forward. This is not supported because checkpoint "
    "cannot return a value for a failed forward."
)


def checkpoint_without_reentrant(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    preserve_rng_state: bool,
    context_fn: Callable[[], tuple[Any, Any]],
    determinism_check: str,
    debug: bool,
    early_stop: bool,
) -> Any:
    override = _debug_override.get()
    debug = override if override is not None else debug
    if debug and context_fn is not noop_context_fn:
        raise ValueError("debug=True is incompatible with non-default context_fn")
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check}"
        )
    forward_ctx, recompute_ctx = context_fn()
    rng = rng_state() if preserve_rng_state else None
    if not is_grad_enabled():
        return function(*args, **kwargs)
    # the arguments are saved as the enclosing checkpoint's saved tensors (torch's rule
    # 2 of nested checkpoints), freed with its other values; kept as they are otherwise
    saved = [pack_value(a) if isinstance(a, Tensor) else a for a in args]

    def recompute() -> None:
        # (unpacking may recompute the enclosing checkpoint first, with its own RNG state)
        inputs = [a.unpack_tensor() if a.__class__ is PackedSaved else a for a in saved]
        outer = rng_state()
        if rng is not None:
            set_rng_state(rng)
        try:
            with enable_grad(), recompute_ctx:
                function(*inputs, **kwargs)
        finally:
            if rng is not None:
                set_rng_state(outer)

    stop = _early_stop_override.get()
    frame = _Frame(
        recompute, determinism_check == "default", early_stop if stop is None else stop, debug
    )
    suppressed = True
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_ctx:
        out = function(*args, **kwargs)
        suppressed = False
    if suppressed:
        raise RuntimeError(_CONTEXT_SUPPRESSED)
    frame.forward_completed = True
    return out


def noop_context_fn() -> tuple[Any, Any]:
    return contextlib.nullcontext(), contextlib.nullcontext()
