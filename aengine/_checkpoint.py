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
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from ._autograd import backward, sync_backward
from ._function import Function
from .core import AutogradError, current_graph_task
from .core._modes import enable_grad, no_grad
from .core._saved_hooks import saved_tensors_hooks
from .runtime import loop_running
from .tensors import Tensor, default_generator

__all__ = [
    "AsyncCheckpointFunction",
    "CheckpointError",
    "CheckpointFunction",
    "checkpoint",
    "checkpoint_sequential",
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
# (grad enabled, the forward's RNG state), under hooks that fill the
# holders, in order, with the values saved this time; the backward then
# goes on through the *original* graph.  No nested backward runs, so it
# works with ``ae.grad``, ``backward(inputs=...)``, nested checkpoints and
# higher-order gradients (a ``create_graph`` backward keeps the recomputed
# values' graph, which reaches the same inputs).  Recomputed values are per backward (by graph
# task id) and are dropped once unpacked (a second unpack in the same
# backward raises); outside any backward each unpack recomputes.  With
# ``early_stop`` the recomputation stops as soon as every holder is
# filled.  ``determinism_check="default"`` compares each recomputed
# value's shape, dtype and device with the forward's.


class CheckpointError(AutogradError):
    """A non-reentrant checkpoint's recomputation differs from its forward (as torch's)."""


class _StopRecomputation(Exception):
    """Raised inside the recomputation once every holder is filled (early stop)."""


class _Holder:
    """What a node keeps of a tensor saved inside a non-reentrant checkpoint."""

    __slots__ = ("__weakref__", "index", "meta", "values")

    def __init__(self, index: int, meta: tuple[Any, ...]) -> None:
        self.index = index
        self.meta = meta
        self.values: dict[int, Tensor] = {}  # graph task id -> recomputed value


def _meta(t: Tensor) -> tuple[Any, ...]:
    return (tuple(t.shape), t.dtype, t.device)


class _Frame:
    """One checkpointed call: its holders (weakly) and how to recompute it."""

    def __init__(
        self,
        recompute: Callable[[], Any],
        determinism_check: str,
        early_stop: bool,
    ) -> None:
        self.recompute = recompute
        self.determinism_check = determinism_check
        self.early_stop = early_stop
        self.holders: list[weakref.ref[_Holder]] = []
        self.recomputed: set[int] = set()  # graph task ids whose recomputation ran
        self.unpacked: dict[int, set[int]] = {}  # graph task id -> holder indices unpacked

    def pack(self, t: Tensor) -> _Holder:
        holder = _Holder(len(self.holders), _meta(t))
        self.holders.append(weakref.ref(holder))
        return holder

    def unpack(self, holder: _Holder) -> Tensor:
        gt = current_graph_task()
        gid = -1 if gt is None else gt.id
        if gid in self.unpacked and holder.index in self.unpacked[gid]:
            raise CheckpointError(
                "ae.checkpoint: Unpack is being triggered for a tensor that was already "
                "unpacked once. If you are calling ctx.saved_tensors in backward, make sure "
                "to do so only once. Otherwise please open an issue with details on your "
                "use case."
            )
        if gid not in self.recomputed or gid == -1:
            self._recompute(gid)
        value = holder.values.pop(gid, None)
        if value is None:
            raise CheckpointError(
                "ae.checkpoint: the recomputation saved fewer tensors than the forward: "
                "the checkpointed function must compute the same operations both times"
            )
        if gid != -1:
            self.unpacked.setdefault(gid, set()).add(holder.index)
        return value

    def _recompute(self, gid: int) -> None:
        gt = current_graph_task()
        # a create_graph backward differentiates through the recomputed values: keep their
        # graph (it reaches the same inputs as the forward's)
        keep_graph = gt is not None and gt.create_graph
        count = 0
        live = [ref() for ref in self.holders]
        wanted = sum(h is not None for h in live)

        def fill(t: Tensor) -> Any:
            nonlocal count, wanted
            index = count
            count += 1
            if index >= len(live):
                raise CheckpointError(
                    "ae.checkpoint: A different number of tensors was saved during the "
                    "original forward and recomputation.\n"
                    f"Number of tensors saved during forward: {len(live)}\n"
                    f"Number of tensors saved during recomputation: {count}"
                )
            holder = live[index]
            if holder is not None:
                if self.determinism_check == "default" and _meta(t) != holder.meta:
                    raise CheckpointError(
                        "ae.checkpoint: Recomputed values for the following tensors have "
                        "different metadata than during the forward pass.\n"
                        f"tensor at position {index}:\n"
                        f"saved metadata: {holder.meta}\n"
                        f"recomputed metadata: {_meta(t)}"
                    )
                holder.values[gid] = t if keep_graph or not t.requires_grad else t.detach()
                wanted -= 1
                if self.early_stop and wanted == 0:
                    raise _StopRecomputation
            return t  # the recomputed graph's own nodes keep what they saved

        self.recomputed.add(gid)
        try:
            with saved_tensors_hooks(fill, _identity):
                self.recompute()
        except _StopRecomputation:
            pass


def _identity(t: Tensor) -> Tensor:
    return t


def _checkpoint_without_reentrant(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    preserve_rng_state: bool,
    context_fn: Callable[[], tuple[Any, Any]],
    determinism_check: str,
    early_stop: bool,
) -> Any:
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check!r}"
        )
    forward_ctx, recompute_ctx = context_fn()
    rng = _rng_state() if preserve_rng_state else None

    def recompute() -> None:
        outer = _rng_state()
        if rng is not None:
            _set_rng_state(rng)
        try:
            with enable_grad(), recompute_ctx:
                function(*args, **kwargs)
        finally:
            if rng is not None:
                _set_rng_state(outer)

    frame = _Frame(recompute, determinism_check, early_stop)
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_ctx:
        return function(*args, **kwargs)


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
            function, args, kwargs, preserve_rng_state, context_fn, determinism_check, early_stop
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
