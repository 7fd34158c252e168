"""Activation checkpointing: ``ae.checkpoint`` (both variants) and ``checkpoint_sequential``.

# NOTE [Reentrant checkpoint]
# As torch.utils.checkpoint with ``use_reentrant=True``: the forward runs
# ``fn`` under no_grad and keeps only its inputs (the segment's intermediate
# values are not referenced once the forward returns).  The backward node
# (an ``ae.Function``) recomputes ``fn`` with grad enabled on detached copies
# of the inputs and runs a *reentrant* backward through the recomputed
# segment; the gradients of the detached inputs are the node's results, and
# parameters captured by ``fn`` get their ``.grad`` from that nested
# backward (NOTE [Reentrant stacks] in runtime/_reentrant.py; NOTE [Checkpoint
# flavour] below for the sync and async forms of the node).
#
# A nested backward can only accumulate into ``.grad``: it cannot deliver
# gradients to an enclosing ``ae.grad()`` or honour ``backward(inputs=...)``.
# Each graph task therefore carries ``checkpoint_valid`` (False for grad() and
# inputs=, inherited by nested graph tasks), and the checkpoint's backward
# refuses to run when it is False, as PyTorch does.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ._autograd import backward, sync_backward
from ._function import Function
from .core import AutogradError, current_graph_task
from .core._graph import set_history
from .core._modes import enable_grad, is_grad_enabled, no_grad
from .core._saved_hooks import PackedSaved, pack_value, saved_tensors_hooks
from .runtime import loop_running
from .tensors import Tensor, default_generator

__all__ = [
    "AsyncCheckpointFunction",
    "CheckpointError",
    "CheckpointFunction",
    "GraphExecGroup",
    "checkpoint",
    "checkpoint_sequential",
    "set_checkpoint_debug_enabled",
    "set_checkpoint_early_stop",
]

ERR_CHECKPOINT_GRAD = (
    "When use_reentrant=True, ae.checkpoint is incompatible with ae.grad() (or "
    "ae.sync.grad()) or passing an `inputs` parameter to backward(). To resolve this "
    "error, call backward() without passing the `inputs` argument, or differentiate the "
    "function without checkpointing it."
)
ERR_NO_OUTPUT_GRAD = "none of output has requires_grad=True, this checkpoint() is not necessary"


def _rng_state() -> Any:
    return default_generator._rng.bit_generator.state


def _set_rng_state(state: Any) -> None:
    default_generator._rng.bit_generator.state = state


class CheckpointFunction(Function):
    """The backward node of ``ae.checkpoint``: recompute, then a reentrant backward."""

    @staticmethod
    def forward(
        ctx: Any, run_function: Callable[..., Any], preserve_rng_state: bool, *args: Any
    ) -> Any:
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None",
                UserWarning,
                stacklevel=4,
            )
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = _rng_state()
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)
        ctx.save_for_backward(*tensor_inputs)
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        outputs, out_grads, detached = _recompute(ctx, grads)
        sync_backward(outputs, out_grads)
        return (None, None, *(x.grad if isinstance(x, Tensor) else None for x in detached))


class AsyncCheckpointFunction(CheckpointFunction):
    """``CheckpointFunction`` whose nested backward is awaited (made inside event loops)."""

    @staticmethod
    async def backward(ctx: Any, *grads: Any) -> Any:
        outputs, out_grads, detached = _recompute(ctx, grads)
        await backward(outputs, out_grads)
        return (None, None, *(x.grad if isinstance(x, Tensor) else None for x in detached))


def _recompute(ctx: Any, grads: tuple[Any, ...]) -> tuple[list[Tensor], list[Any], list[Any]]:
    """Re-run the segment with grad enabled on detached inputs (same RNG state)."""
    gt = current_graph_task()
    if gt is not None and not gt.checkpoint_valid:
        raise AutogradError(ERR_CHECKPOINT_GRAD)
    inputs = list(ctx.inputs)
    for i, t in zip(ctx.tensor_indices, ctx.saved_tensors, strict=True):
        inputs[i] = t
    detached = [_detach(x) for x in inputs]
    if ctx.preserve_rng_state:
        outer_state = _rng_state()
        _set_rng_state(ctx.rng_state)
    try:
        with enable_grad():
            outputs = ctx.run_function(*detached)
    finally:
        if ctx.preserve_rng_state:
            _set_rng_state(outer_state)
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    outputs_with_grad = []
    grads_with_grad = []
    for out, g in zip(outputs, grads, strict=False):
        if isinstance(out, Tensor) and out.requires_grad:
            outputs_with_grad.append(out)
            grads_with_grad.append(g)
    if not outputs_with_grad:
        raise AutogradError(ERR_NO_OUTPUT_GRAD)
    return outputs_with_grad, grads_with_grad, detached


def _detach(x: Any) -> Any:
    if not isinstance(x, Tensor):
        return x
    d = x.detach()
    d.requires_grad_(x.requires_grad)
    return d


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


def _checkpoint_without_reentrant(
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
    if debug and context_fn is not _noop_context_fn:
        raise ValueError("debug=True is incompatible with non-default context_fn")
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check}"
        )
    forward_ctx, recompute_ctx = context_fn()
    rng = _rng_state() if preserve_rng_state else None
    if not is_grad_enabled():
        return function(*args, **kwargs)
    # the arguments are saved as the enclosing checkpoint's saved tensors (torch's rule
    # 2 of nested checkpoints), freed with its other values; kept as they are otherwise
    saved = [pack_value(a) if isinstance(a, Tensor) else a for a in args]

    def recompute() -> None:
        # (unpacking may recompute the enclosing checkpoint first, with its own RNG state)
        inputs = [a.unpack_tensor() if a.__class__ is PackedSaved else a for a in saved]
        outer = _rng_state()
        if rng is not None:
            _set_rng_state(rng)
        try:
            with enable_grad(), recompute_ctx:
                function(*inputs, **kwargs)
        finally:
            if rng is not None:
                _set_rng_state(outer)

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


def _noop_context_fn() -> tuple[Any, Any]:
    return contextlib.nullcontext(), contextlib.nullcontext()


_USE_REENTRANT_WARNING = (
    "ae.checkpoint: the use_reentrant parameter should be passed explicitly. "
    "use_reentrant=False is recommended (it works with ae.grad, backward(inputs=...) and "
    "nesting); pass use_reentrant=True to keep today's default, the reentrant variant."
)


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple[Any, Any]] = _noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its intermediate values for backward.

    The backward recomputes what it needs: memory for compute, as
    ``torch.utils.checkpoint.checkpoint``, with its two variants:

    * ``use_reentrant=False`` (recommended; NOTE [Non-reentrant checkpoint]):
      the segment's saved tensors are dropped in the forward and recomputed
      on their first use in a backward, which then goes on through the
      original graph.  Works with ``ae.grad``, ``backward(inputs=...)``,
      nested checkpoints and higher-order gradients; ``context_fn``,
      ``determinism_check`` (``"default"``: the recomputed tensors' shapes,
      dtypes and devices must match, else :class:`CheckpointError`;
      ``"none"``) and ``early_stop`` as torch's; ``kwargs`` go to
      ``function``.
    * ``use_reentrant=True``: ``function`` runs under no_grad and the
      backward recomputes it and runs a nested backward through it
      (NOTE [Reentrant checkpoint]); not with ``ae.grad`` or ``inputs=``.

    Without ``use_reentrant`` it warns and takes ``True``, as torch 2.13.
    With ``preserve_rng_state`` the recomputation sees the same random
    numbers (the default generator) as the forward.  The recomputation runs
    inside the backward (in its time slice, on the loop for an awaited
    backward).

    Example::

        >>> import aengine as ae
        >>> w = ae.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        >>> x = ae.tensor([[1.0, 2.0]], requires_grad=True)
        >>> y = ae.checkpoint(lambda t: (t @ w).tanh() @ w, x, use_reentrant=False)
        >>> gx, gw = ae.sync.grad(y.sum(), [x, w])
        >>> gx.shape, gw.shape
        ((1, 2), (2, 2))
    """
    if not callable(function):
        raise TypeError(f"checkpoint needs a callable, got {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    if not use_reentrant:
        return _checkpoint_without_reentrant(
            function,
            args,
            kwargs,
            preserve_rng_state,
            context_fn,
            determinism_check,
            debug,
            early_stop,
        )
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if context_fn is not _noop_context_fn or debug is not False:
        raise ValueError(
            "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
        )
    # NOTE [Checkpoint flavour]: a segment recorded inside an event loop will most
    # likely be differentiated there (await ae.backward): its nested backward is
    # awaited and yields per time slice.  Outside a loop the plain flavour avoids
    # running an event loop per segment under ae.sync.backward.  Both give the
    # same gradients under either API (NOTE [Reentrant stacks]).
    fn_cls = AsyncCheckpointFunction if loop_running() else CheckpointFunction
    return fn_cls.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Run a sequence of modules/functions in ``segments`` checkpointed chunks, as torch's.

    ``functions`` is an ``ae.nn.Sequential`` or a list of callables; every
    segment but the last is run through :func:`checkpoint` (the last runs
    normally: its values are needed at once).  ``use_reentrant`` and the
    other keyword arguments as :func:`checkpoint`'s.

    Example::

        >>> import aengine as ae
        >>> layers = [lambda t: t.sin(), lambda t: t * 2.0, lambda t: t.exp()]
        >>> x = ae.tensor([0.5, 1.0], requires_grad=True)
        >>> y = ae.checkpoint_sequential(layers, 2, x, use_reentrant=False)
        >>> ae.sync.backward(y.sum())
        >>> x.grad.shape
        (2,)
    """
    if use_reentrant is None:
        warnings.warn(_USE_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(
            f"checkpoint_sequential: segments must be a positive int, got {segments!r}"
        )

    def run(start: int, end: int) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = fns[j](x)
            return x

        return forward

    size = len(fns) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(fns) - 1)(input)
