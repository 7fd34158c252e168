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

import warnings
from collections.abc import Callable
from typing import Any

from ._autograd import backward, sync_backward
from ._checkpoint_nonreentrant import (
    CheckpointError,
    GraphExecGroup,
    checkpoint_without_reentrant,
    noop_context_fn,
    rng_state,
    set_checkpoint_debug_enabled,
    set_checkpoint_early_stop,
    set_rng_state,
)
from ._function import Function
from .core import AutogradError, current_graph_task
from .core._modes import enable_grad, no_grad
from .runtime import loop_running
from .tensors import Tensor

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
            ctx.rng_state = rng_state()
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
        outer_state = rng_state()
        set_rng_state(ctx.rng_state)
    try:
        with enable_grad():
            outputs = ctx.run_function(*detached)
    finally:
        if ctx.preserve_rng_state:
            set_rng_state(outer_state)
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


_USE_REENTRANT_WARNING = (
    "ae.checkpoint: the use_reentrant parameter should be passed explicitly. "
    "use_reentrant=False is recommended (it works with ae.grad, backward(inputs=...) and "
    "nesting); pass use_reentrant=True to keep today's default, the reentrant variant."
)


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple[Any, Any]] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its intermediate values for backward.

    The backward recomputes what it needs: memory for compute, as
    ``torch.utils.checkpoint.checkpoint``, with its two variants:

    * ``use_reentrant=False`` (recommended; NOTE [Non-reentrant checkpoint]
      in _checkpoint_nonreentrant.py): the segment's saved tensors are
      dropped in the forward and recomputed on their first use in a backward, which then goes on through the
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
        return checkpoint_without_reentrant(
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
    if context_fn is not noop_context_fn or debug is not False:
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
