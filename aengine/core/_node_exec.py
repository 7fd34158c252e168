"""The general path of running one node, and committing a finished graph task.

``GraphTask.run`` handles plain nodes inline; everything else comes here:
hooks, grad() captures and pruning, AccumulateGrad, anomaly checks and user
code that may be ``async``.  It is written once as a coroutine: when no user
code suspends, ``evaluate_general`` finishes it synchronously (one
``send(None)``), so the sync driver uses it too.

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
# removed by an earlier hook of the same group still runs this time.  Any hook may be ``async def``: it is awaited, so the event
# loop keeps running; under ``ae.sync`` with no event loop in the thread it
# is run to completion by ``anyio.run`` (see ``await_user``).
#
# NOTE [Post-accumulate hooks run at commit]
# PyTorch runs ``register_post_accumulate_grad_hook`` hooks inside
# AccumulateGrad, right after ``.grad`` is written, so they come before that
# node's post-hooks and before the rest of the graph runs.  aengine writes
# leaf gradients only when the whole graph task succeeded (an error or a
# cancellation leaves every ``.grad`` untouched), so these hooks run at
# commit, after every node (and every AccumulateGrad post-hook) ran and
# every ``.grad`` was written, in the order the leaves were reached; final
# callbacks (``queue_callback``) run after them.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Coroutine
from typing import Any

from ..runtime._loop import loop_running
from ..tensors._tensor import Tensor, own_vc
from ._errors import AutogradError
from ._graph import AccumulateGrad, Node

__all__ = ["evaluate_general", "commit", "to_tensor", "to_raw"]


def to_tensor(g: Any, dev: Any) -> Any:
    """A raw gradient array as a Tensor (no graph); Tensors pass through."""
    if g is None or isinstance(g, Tensor):
        return g
    backend = dev.backend
    if not isinstance(g, backend.array_types):
        g = backend.asarray(g)
    return Tensor._make(g, False, dev)


def to_raw(g: Any) -> Any:
    if isinstance(g, Tensor):
        return g.data
    return g


def evaluate_general(gt: Any, node: Node, buffer: list[Any]) -> Coroutine[Any, Any, None] | None:
    """Run ``node``; None when it finished, else a coroutine to await."""
    # NOTE [Plain nodes of a filtered graph task]
    # grad() and backward(inputs=...) send every node here (the hot loop of
    # GraphTask.run knows nothing of exec_info).  A node without hooks that
    # is needed and not captured runs as in the hot loop, without the
    # coroutine: 3-4x faster for grad() on long graphs.
    if not node._special and gt.node_hook is None and not gt.anomaly:
        needed = gt.needed
        sched = gt.sched
        if (
            needed is not None
            and node in needed
            and node not in gt.captures
            and (sched is None or not sched.offload)
        ):
            gt.running_node = node
            try:
                outs = node.evaluate(buffer, gt.create_graph, not gt.keep_graph)
            except BaseException as exc:
                gt._fail(node, exc)
                raise
            gt.route(node, outs)
            return None
    captures = gt.captures
    if captures and gt.node_hook is None and not gt.anomaly:
        # a captured node that does not run and has no tensor hooks: its
        # gradients are only recorded (a leaf's AccumulateGrad in grad())
        caps = captures.get(node)
        if caps is not None and node not in gt.needed:
            if type(node) is AccumulateGrad:
                plain = not node.variable._hooks
            else:
                plain = not node._tensor_pre_hooks and not node._retains_grad
            if plain:
                gt.running_node = node
                captured = gt.captured
                for slot, idx in caps:
                    captured[idx] = buffer[slot]
                return None
    coro = _evaluate(gt, node, buffer)
    try:
        first = coro.send(None)
    except StopIteration:
        return None
    return _Resume(coro, first).wait()  # type: ignore[return-value]


class _Resume:
    """Continue a coroutine that already suspended once, inside the caller's await."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Any, first: Any) -> None:
        self.coro = coro
        self.first = first

    async def wait(self) -> Any:
        return await self

    def __await__(self) -> Any:
        coro = self.coro
        value = self.first
        while True:
            try:
                sent = yield value
            except BaseException as exc:
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        if not loop_running():
            return run_detached(value)
        return await value
    return value


await_user = _maybe_await


def run_detached(awaitable: Any) -> Any:
    """Run ``awaitable`` to completion in a new event loop (no loop in this thread).

    Used when ``ae.sync`` drives async user code (hooks, async backward,
    callbacks) from plain code: the context (grad mode, the running graph
    task) is copied into the loop.
    """
    import anyio

    async def main() -> Any:
        return await awaitable

    return anyio.run(main)


def _node_device(node: Node, slot: int) -> Any:
    dev = getattr(node, "out_devs", None)
    if dev is not None:
        return dev[slot] if isinstance(dev, tuple) else dev
    if isinstance(node, AccumulateGrad):
        return node.variable._device
    from ..tensors._device import CPU

    return CPU


async def _tensor_pre_hooks(gt: Any, node: Node, inputs: list[Any]) -> list[Any]:
    hooks = node.variable._hooks if isinstance(node, AccumulateGrad) else node._tensor_pre_hooks
    if hooks:
        inputs = list(inputs)
        for hook in list(hooks.values()):
            if isinstance(node, AccumulateGrad):
                slot, fn = 0, hook
            else:
                slot, fn = hook.output_nr, hook.fn
            g = inputs[slot]
            dev = _node_device(node, slot)
            # an undefined gradient (None) is passed to the hook too, as PyTorch does
            old = to_tensor(g, dev)
            res = await _maybe_await(fn(old))
            if res is not None:
                if not isinstance(res, Tensor):
                    raise TypeError(
                        f"a tensor hook must return a Tensor or None, got {type(res).__name__}"
                    )
                if old is not None and res.data.shape != old.data.shape:
                    raise AutogradError(
                        f"hook '{getattr(fn, '__name__', fn)}' has changed the size of value: "
                        f"expected shape {tuple(old.data.shape)}, got {tuple(res.data.shape)}"
                    )
                inputs[slot] = res if gt.create_graph else res.data
    retains = node._retains_grad
    if retains:
        for slot, ref in list(retains.items()):
            t = ref()
            g = inputs[slot]
            if t is not None and g is not None:
                gt.stage(t, g, "retain")
    return inputs


def _as_tuple(grads: list[Any], node: Node, create_graph: bool) -> tuple[Any, ...]:
    if create_graph:
        return tuple(grads)
    return tuple(to_tensor(g, _node_device(node, i)) for i, g in enumerate(grads))


async def _pre_hooks(gt: Any, node: Node, inputs: list[Any]) -> list[Any]:
    hooks = node._pre_hooks
    if not hooks:
        return inputs
    for fn in list(hooks.values()):
        res = await _maybe_await(fn(_as_tuple(inputs, node, gt.create_graph)))
        if res is not None:
            res = list(res) if isinstance(res, (tuple, list)) else [res]
            if len(res) != len(inputs):
                raise AutogradError(
                    f"a pre-hook of {node.name()} returned {len(res)} gradients, expected {len(inputs)}"
                )
            inputs = [r if gt.create_graph else to_raw(r) for r in res]
    return inputs


async def _post_hooks(gt: Any, node: Node, outs: Any, inputs: list[Any]) -> Any:
    hooks = node._post_hooks
    if not hooks:
        return outs
    grad_outputs = _as_tuple(inputs, node, gt.create_graph)
    for fn in list(hooks.values()):
        grad_inputs = tuple(
            g if gt.create_graph else _out_tensor(node, i, g) for i, g in enumerate(outs)
        )
        res = await _maybe_await(fn(grad_inputs, grad_outputs))
        if res is not None:
            res = list(res) if isinstance(res, (tuple, list)) else [res]
            if len(res) != len(outs):
                raise AutogradError(
                    f"a hook of {node.name()} returned {len(res)} gradients, expected {len(outs)}"
                )
            outs = [r if gt.create_graph else to_raw(r) for r in res]
    return outs


def _out_tensor(node: Node, i: int, g: Any) -> Any:
    if g is None or isinstance(g, Tensor):
        return g
    nxt = node.next_nodes[i] if i < len(node.next_nodes) else None
    dev = None
    if isinstance(nxt, AccumulateGrad):
        dev = nxt.variable._device
    if dev is None:
        dev = _node_device(node, 0)
    return to_tensor(g, dev)


async def _evaluate(gt: Any, node: Node, buffer: list[Any]) -> None:
    try:
        gt.running_node = node
        if gt.node_hook is not None:
            gt.node_hook(node)
        inputs = buffer
        needed = gt.needed
        if needed is not None:
            is_needed = node in needed
            caps = gt.captures.get(node)
            if not is_needed:
                inputs = await _tensor_pre_hooks(gt, node, inputs)
            if caps:
                for slot, idx in caps:
                    gt.captured[idx] = inputs[slot]
            if not is_needed:
                return
        if type(node) is AccumulateGrad:
            inputs = await _tensor_pre_hooks(gt, node, inputs)
            if node._pre_hooks:
                inputs = await _pre_hooks(gt, node, inputs)
            if inputs[0] is not None:
                gt.stage(node.variable, inputs[0], "leaf")
            if node._post_hooks:
                await _post_hooks(gt, node, (), inputs)
            return
        inputs = await _tensor_pre_hooks(gt, node, inputs)
        inputs = await _pre_hooks(gt, node, inputs)
        sched = gt.sched
        if sched is not None and sched.offload and getattr(node, "_offload", False):
            # a heavy kernel runs in a thread (NOTE [Kernel offload policy])
            outs = await sched.kernel(gt, node, inputs)
        else:
            outs = node.apply(inputs, gt.create_graph)
        if inspect.isawaitable(outs):
            outs = await outs
        if not gt.keep_graph:
            node.release_variables()
        outs = await _post_hooks(gt, node, outs, inputs)
        if gt.anomaly:
            from ._anomaly import check_nan

            check_nan(node, outs)
        gt.route(node, outs)
    except BaseException as exc:
        gt._fail(node, exc)
        if gt.anomaly and isinstance(exc, Exception):
            from ._anomaly import report_error

            report_error(node)
        raise


#: commits of graph tasks of different threads (each with its own loop, or sync)
#: update shared leaves one at a time: the sum of all their gradients lands
_COMMIT_LOCK = threading.Lock()


def commit(gt: Any) -> list[tuple[Any, Tensor]]:
    """Write the staged gradients into ``.grad``; return post-accumulate hooks to run.

    Atomic with respect to other threads' commits (``_COMMIT_LOCK``).
    """
    with _COMMIT_LOCK:
        return _commit(gt)


def _commit(gt: Any) -> list[tuple[Any, Tensor]]:
    """Write the staged gradients into ``.grad``; return post-accumulate hooks to run.

    Follows PyTorch's AccumulateGrad: the first gradient is stored (a copy,
    or a differentiable clone under create_graph); later ones are added in
    place, or out of place building a graph under create_graph.
    """
    create_graph = gt.create_graph
    hooks: list[tuple[Any, Tensor]] = []
    for t, (g, kind) in gt.staged.items():
        if g is None:
            continue
        if kind == "retain":
            if isinstance(g, Tensor):
                new = g
            else:
                new = to_tensor(g, t._device)
            if t._grad is None:
                t._grad = _clone(new) if create_graph else _fresh(new)
            else:
                t._grad = t._grad + new if create_graph else _fresh_add(t._grad, new)
            continue
        dev = t._device
        if create_graph:
            gt_ = g if isinstance(g, Tensor) else to_tensor(g, dev)
            if gt_.data.dtype != t.data.dtype:
                gt_ = gt_.to(dtype=t.data.dtype)
            if t._grad is None:
                t._grad = _clone(gt_)
            else:
                t._grad = t._grad + gt_
        else:
            arr = to_raw(g)
            if t._grad is None:
                backend = dev.backend
                t._grad = Tensor._make(
                    backend.xp.array(arr, dtype=t.data.dtype, copy=True), False, dev
                )
            else:
                old = t._grad
                if getattr(old.data, "flags", None) is not None and not old.data.flags.writeable:
                    # e.g. a broadcast view assigned by the user: cannot add in place
                    t._grad = Tensor._make(old.data + arr, False, dev)
                else:
                    # in place even when the old grad carries a graph (from a
                    # create_graph backward), as PyTorch: same object, version bumped
                    old.data += arr
                    own_vc(old)[0] += 1
        if t._post_acc_hooks:
            for fn in list(t._post_acc_hooks.values()):
                hooks.append((fn, t))
    gt.staged = {}
    return hooks


def _clone(t: Tensor) -> Tensor:
    """A differentiable copy (create_graph); imported here, not per commit (1 us)."""
    from ..ops import clone

    return clone(t)


def _fresh(new: Tensor) -> Tensor:
    return Tensor._make(new.data.copy(), False, new._device)


def _fresh_add(old: Tensor, new: Tensor) -> Tensor:
    return Tensor._make(old.data + new.data, False, new._device)
