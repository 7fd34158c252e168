"""The general path of one node: hooks, captures, staging, user code that may await.

What a graph task does with a node that leaves a runner's hot loop (NOTE
[Where a node runs] in _running.py: ``GraphTask._general``) and what a
device worker does with any node (``run_node``).  Functions over the task:
they change it only through its methods (``enter_node``, ``capture``,
``stage``, ``fail``, its general runner's ``route``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Coroutine
from typing import Any

from . import _trace
from ._anomaly import check_nan, report_error
from ._errors import AutogradError, BackwardError
from ._graph import AccumulateGrad, Node
from ._node_hooks import post_hooks, pre_hooks, tensor_pre_hooks
from ._running import InputBuffer, Task, slow_nodes

__all__ = ["evaluate_general", "run_node", "wrap_node_error"]


def run_node(gt: Task, node: Node, buffer: InputBuffer) -> Awaitable[Any] | None:
    """Run one node for a device worker: None when it finished, else an awaitable.

    Errors are recorded on the task (``fail``), never raised: a
    KeyboardInterrupt or SystemExit too, which the owner raises as it is
    (the worker serves other graph tasks; nothing can suspend here, so
    no cancellation of the worker comes through this call).
    """
    try:
        # the hot loop's rule, but for the device
        slow = slow_nodes(gt)
        if node._special or (slow is not None and node in slow) or _heavy(gt, node):
            return evaluate_general(gt, node, buffer)
        gt.enter_node(node)
        outs = node.evaluate(buffer, gt.create_graph, not gt.keep_graph)
        gt.route(node, outs)  # (only the general runner routes here)
    except BaseException as exc:
        gt.fail(node, exc)
    return None


def _heavy(gt: Task, node: Node) -> bool:
    """Whether the scheduler runs ``node``'s kernel in a thread (NOTE [Where a node runs])."""
    sched = gt.sched
    return sched is not None and node.numel >= sched.offload_min


def evaluate_general(gt: Task, node: Node, buffer: InputBuffer) -> Awaitable[Any] | None:
    """Run ``node`` with hooks, captures, staging and user code that may await.

    Written once as a coroutine: when no user code suspends it finishes
    here (one ``send(None)``), so the sync driver uses it too; else the
    rest is returned as an awaitable.
    """
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
                gt.enter_node(node)
                for slot, idx in caps:
                    gt.capture(idx, buffer[slot])
                return None
    coro = _evaluate(gt, node, buffer)
    prof = _trace.active
    if prof is not None:
        coro = prof.node(gt, node, coro)
    try:
        first = coro.send(None)
    except StopIteration:
        return None
    return _Resume(coro, first).wait()


async def _tensor_pre_hooks(gt: Task, node: Node, inputs: InputBuffer) -> InputBuffer:
    inputs, retained = await tensor_pre_hooks(node, inputs, gt.create_graph, gt.detach)
    for t, g in retained:
        gt.stage(t, g, "retain")
    return inputs


async def _evaluate(gt: Task, node: Node, buffer: InputBuffer) -> None:
    create_graph, detach = gt.create_graph, gt.detach
    try:
        gt.enter_node(node)
        if gt.node_hook is not None:
            gt.node_hook(node)
        inputs = buffer
        needed = gt.needed
        if needed is not None:
            is_needed = node in needed
            caps = gt.captures.get(node)  # type: ignore[union-attr]
            if not is_needed:
                inputs = await _tensor_pre_hooks(gt, node, inputs)
            if caps:
                for slot, idx in caps:
                    gt.capture(idx, inputs[slot])
            if not is_needed:
                return
        inputs = await _tensor_pre_hooks(gt, node, inputs)
        inputs = await pre_hooks(node, inputs, create_graph, detach)
        if type(node) is AccumulateGrad:
            if inputs[0] is not None:
                gt.stage(node.variable, inputs[0], "leaf")
            await post_hooks(node, (), inputs, create_graph, detach)
            return
        if _heavy(gt, node):  # NOTE [Where a node runs]
            assert gt.sched is not None
            outs = await gt.kernel(node, inputs)
        else:
            outs = node.apply(inputs, create_graph)
        if inspect.isawaitable(outs):  # an async backward
            prof = _trace.active
            if prof is not None:
                outs = prof.wait(outs, f"await the async backward of {node.name()}")
            outs = await outs
        if not gt.keep_graph:
            node.release_variables()
        outs = await post_hooks(node, outs, inputs, create_graph, detach)
        if gt.anomaly:
            check_nan(node, outs)
        gt.route(node, outs)  # (only the general runner routes here)
    except BaseException as exc:
        gt.fail(node, exc)
        if gt.anomaly and isinstance(exc, Exception):
            report_error(node)
        raise


class _Resume:
    """Continue a coroutine that already suspended once, inside the caller's await."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
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


def wrap_node_error(node: Node, exc: BaseException) -> BaseException:
    """The error the caller sees for ``exc`` raised while ``node`` ran."""
    if isinstance(exc, AutogradError) or not isinstance(exc, Exception):
        return exc
    err = BackwardError(
        f"{type(exc).__name__}: {exc} (raised in the backward of {node.name()})",
        node.name(),
        exc,
    )
    err.__cause__ = exc
    return err
