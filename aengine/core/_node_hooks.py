"""Calling the hooks of a node: tensor pre-hooks, node pre-hooks and post-hooks.

# NOTE [Hook order]
# As PyTorch's call_function: tensor pre-hooks (registered on the tensor the
# gradient is for, in registration order), then retain_grad staging, then
# node pre-hooks, then the node, then node post-hooks.  For grad() captures,
# a node that does not run gets its tensor pre-hooks applied before the
# capture; a node that runs is captured before them (PyTorch's behaviour).
# AccumulateGrad runs the same sequence: the leaf's tensor hooks, the node's
# pre-hooks (given ``(g,)``), staging, then its post-hooks, called as
# ``hook((), (g,))`` (it produces nothing and received g).  Each group of
# hooks of a node is snapshotted before it runs, as in PyTorch: a hook
# removed by an earlier hook of the same group still runs this time.  Any
# hook may be ``async def``: it is awaited, so the event loop keeps running;
# under ``ae.sync`` with no event loop in the thread the sync driver hands
# the graph task a runner (``GraphTask.run_detached``) that runs it to
# completion in an event loop of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from . import _trace
from ._errors import AutogradError
from ._graph import AccumulateGrad, Node, TensorBase, host_device, to_raw, to_tensor

__all__ = ["AWAIT", "Detach", "await_user", "tensor_pre_hooks", "pre_hooks", "post_hooks"]

#: runs an awaitable to completion where no event loop runs, or returns
#: AWAIT when one does (see NOTE [Hook order])
Detach = Callable[[Awaitable[Any]], Any]
#: what a Detach runner returns for an awaitable it leaves to be awaited
AWAIT = object()


async def await_user(value: Any, detach: Detach | None) -> Any:
    """The result of user code: awaited if awaitable (or run by ``detach`` when it can)."""
    if inspect.isawaitable(value):
        rec = _trace.active
        if rec is not None:  # a profile times the wait (NOTE [Profiling seam])
            return await rec.wait(_await(value, detach), value)
        return await _await(value, detach)
    return value


async def _await(value: Awaitable[Any], detach: Detach | None) -> Any:
    if detach is not None:
        res = detach(value)
        if res is not AWAIT:
            return res
    return await value


def node_device(node: Node, slot: int) -> Any:
    """The device of gradient ``slot`` that ``node`` receives."""
    dev = getattr(node, "out_devs", None)
    if dev is not None:
        return dev[slot] if isinstance(dev, tuple) else dev
    if isinstance(node, AccumulateGrad):
        return node.variable._device
    return host_device()


# NOTE [Checking what a hook returns]
# As PyTorch's check_single_result / check_variable_result: a hook's result
# (each value of a node hook's tuple) is None (a tensor hook: unchanged; a
# node hook: no gradient) or a Tensor of the dtype and shape of the
# gradient it replaces; a node hook returns one value per gradient.  Checked
# as the hook returns, so a wrong value never reaches the staged commit.


def hook_name(fn: Any) -> str:
    """The name of a hook for messages (a function's, a partial's function's...)."""
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    inner = getattr(fn, "func", None)  # functools.partial
    name = getattr(inner, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


def check_result(fn: Any, original: Any, result: Any) -> Any:
    """``result``, which hook ``fn`` returned for gradient ``original``, once checked.

    Both are Tensors or None (see NOTE [Checking what a hook returns]).
    """
    if result is None:
        return None
    if original is None:
        raise AutogradError(
            f"can't replace a None gradient with a non-None value (hook '{hook_name(fn)}' "
            "returned a Tensor for a gradient that is None: return None there)"
        )
    if not isinstance(result, TensorBase):
        raise TypeError(
            f"hook '{hook_name(fn)}' must return a Tensor or None, but it returned "
            f"'{type(result).__name__}'"
        )
    a, b = original.data, result.data
    if b.dtype != a.dtype:
        raise AutogradError(
            f"hook '{hook_name(fn)}' has changed the type of value (was {a.dtype} got {b.dtype})"
        )
    if b.shape != a.shape:
        raise AutogradError(
            f"hook '{hook_name(fn)}' has changed the size of value: "
            f"expected shape {tuple(a.shape)}, got {tuple(b.shape)}"
        )
    return result


def _check_results(fn: Any, originals: tuple[Any, ...], res: Any) -> list[Any]:
    """A node hook's results (one per gradient in ``originals``), checked."""
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    if len(res) != len(originals):
        raise AutogradError(
            f"hook '{hook_name(fn)}' has returned an incorrect number of values "
            f"(got {len(res)}, but expected {len(originals)})"
        )
    return [check_result(fn, o, r) for o, r in zip(originals, res, strict=True)]


async def tensor_pre_hooks(
    node: Node, inputs: list[Any], create_graph: bool, detach: Detach | None
) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """Apply the tensor hooks of ``node``'s inputs; also the gradients to retain.

    Returns the new inputs and ``(tensor, gradient)`` pairs for retain_grad.
    """
    hooks = node.variable._hooks if isinstance(node, AccumulateGrad) else node._tensor_pre_hooks
    if hooks:
        inputs = list(inputs)
        for hook in list(hooks.values()):
            if isinstance(node, AccumulateGrad):
                slot, fn = 0, hook
            else:
                slot, fn = hook.output_nr, hook.fn
            g = inputs[slot]
            dev = node_device(node, slot)
            # an undefined gradient (None) is passed to the hook too, as PyTorch does
            old = to_tensor(g, dev)
            res = check_result(fn, old, await await_user(fn(old), detach))
            if res is not None:
                inputs[slot] = res if create_graph else res.data
    retained: list[tuple[Any, Any]] = []
    retains = node._retains_grad
    if retains:
        for slot, ref in list(retains.items()):
            t = ref()
            g = inputs[slot]
            if t is not None and g is not None:
                retained.append((t, g))
    return inputs, retained


def _as_tuple(grads: list[Any], node: Node, create_graph: bool) -> tuple[Any, ...]:
    if create_graph:
        return tuple(grads)
    return tuple(to_tensor(g, node_device(node, i)) for i, g in enumerate(grads))


async def pre_hooks(
    node: Node, inputs: list[Any], create_graph: bool, detach: Detach | None
) -> list[Any]:
    """Apply ``node``'s pre-hooks to the gradients it received."""
    hooks = node._pre_hooks
    if not hooks:
        return inputs
    for fn in list(hooks.values()):
        grads = _as_tuple(inputs, node, create_graph)
        res = await await_user(fn(grads), detach)
        if res is not None:
            res = _check_results(fn, grads, res)
            inputs = [r if create_graph else to_raw(r) for r in res]
    return inputs


async def post_hooks(
    node: Node, outs: Any, inputs: list[Any], create_graph: bool, detach: Detach | None
) -> Any:
    """Apply ``node``'s post-hooks to the gradients it computed."""
    hooks = node._post_hooks
    if not hooks:
        return outs
    grad_outputs = _as_tuple(inputs, node, create_graph)
    for fn in list(hooks.values()):
        grad_inputs = tuple(
            g if create_graph else _out_tensor(node, i, g) for i, g in enumerate(outs)
        )
        res = await await_user(fn(grad_inputs, grad_outputs), detach)
        if res is not None:
            res = _check_results(fn, grad_inputs, res)
            outs = [r if create_graph else to_raw(r) for r in res]
    return outs


def _out_tensor(node: Node, i: int, g: Any) -> Any:
    if g is None or isinstance(g, TensorBase):
        return g
    nxt = node[i] if i < len(node) else None
    dev = None
    if isinstance(nxt, AccumulateGrad):
        dev = nxt.variable._device
    if dev is None:
        dev = node_device(node, 0)
    return to_tensor(g, dev)
