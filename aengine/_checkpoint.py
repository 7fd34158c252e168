"""Activation checkpointing: ``ae.checkpoint`` (the reentrant variant).

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
from ._function import Function
from .core import AutogradError, current_graph_task
from .core._modes import enable_grad, no_grad
from .runtime import loop_running
from .tensors import Tensor, default_generator

__all__ = ["checkpoint", "CheckpointFunction", "AsyncCheckpointFunction"]

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


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool = True,
    preserve_rng_state: bool = True,
) -> Any:
    """Run ``function(*args)`` without keeping its intermediate values for backward.

    The backward recomputes ``function`` on the saved inputs and
    backpropagates through the recomputed segment with a nested (reentrant)
    backward: memory for compute.  Works with ``await ae.backward`` and
    ``ae.sync.backward``; not with ``ae.grad`` or ``backward(inputs=...)``
    (they raise "is incompatible with").  Parameters used inside
    ``function`` receive their ``.grad`` from the nested backward.  With
    ``preserve_rng_state`` the recomputation sees the same random numbers
    (``ae.rand``/``ae.randn`` of the default generator) as the forward.
    Only ``use_reentrant=True`` is implemented.

    Example::

        >>> import aengine as ae
        >>> w = ae.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        >>> x = ae.tensor([[1.0, 2.0]], requires_grad=True)
        >>> y = ae.checkpoint(lambda t: (t @ w).tanh() @ w, x)
        >>> ae.sync.backward(y.sum())
        >>> x.grad.shape, w.grad.shape
        ((1, 2), (2, 2))
    """
    if not use_reentrant:
        raise NotImplementedError(
            "ae.checkpoint implements only use_reentrant=True (recompute + nested backward)"
        )
    if not callable(function):
        raise TypeError(f"checkpoint needs a callable, got {type(function).__name__}")
    # NOTE [Checkpoint flavour]: a segment recorded inside an event loop will most
    # likely be differentiated there (await ae.backward): its nested backward is
    # awaited and yields per time slice.  Outside a loop the plain flavour avoids
    # running an event loop per segment under ae.sync.backward.  Both give the
    # same gradients under either API (NOTE [Reentrant stacks]).
    fn_cls = AsyncCheckpointFunction if loop_running() else CheckpointFunction
    return fn_cls.apply(function, preserve_rng_state, *args)
