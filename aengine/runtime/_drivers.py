"""The two drivers of a GraphTask: a plain loop (``ae.sync``) and an anyio task.

Both are short loops around ``GraphTask.run`` (see NOTE [Scheduler
invariants] in aengine/core/_graph_task.py).  The async driver runs in the
awaiting task, as PyTorch's calling thread drains its graph task's CPU
queue, and yields to the event loop once per time slice rather than per node.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Coroutine
from time import perf_counter
from typing import Any

import anyio

from ..core import ERR_BACKWARD_TWICE, YIELD, AutogradError, GraphTask, await_user, commit
from ..core import wrap_node_error as _wrap
from ..core._modes import _grad_enabled
from ..core._node_hooks import AWAIT
from ._calls import Call, adopting
from ._engine import (
    LAZY,
    NEED_ENGINE,
    Engine,
    cancelled_graph_error,
    mark_released,
    scheduler_for,
    worker_name,
)
from ._loop import end_checkpoint, loop_running, yield_slice
from ._seeded import Explored
from ._settings import DEFAULT_TIME_SLICE
from ._share import loop_share
from ._threaded import BACK, TO_THREAD

__all__ = ["run_sync", "run_async", "drive_sync", "run_detached"]


def drive_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that must not suspend (user code in a sync backward)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AutogradError(
        "an async hook or backward suspended during a synchronous backward (ae.sync); "
        "use the awaitable API instead: await ae.backward(...) / await ae.grad(...)"
    )


def detach_if_no_loop(awaitable: Awaitable[Any]) -> Any:
    """The sync driver's Detach runner: ``run_detached`` where no event loop runs here.

    Where one runs (an ``ae.sync`` call inside async code, which warned), the
    awaitable is awaited: if it suspends, ``drive_sync`` says so.
    """
    if loop_running():
        return AWAIT
    return run_detached(awaitable)


def run_detached(awaitable: Awaitable[Any]) -> Any:
    """Run ``awaitable`` to completion in a new event loop (no loop in this thread).

    Used when ``ae.sync`` drives async user code (hooks, async backward,
    callbacks) from plain code: the context (grad mode, the running graph
    task) is copied into the loop.
    """

    async def main() -> Any:
        return await awaitable

    return anyio.run(main)


def _raise_node_error(gt: GraphTask, exc: BaseException) -> None:
    if not gt.keep_graph:
        clear = cancelled_graph_error(gt, exc)
        if clear is not None:
            raise clear from exc
        if not (isinstance(exc, AutogradError) and str(exc) == ERR_BACKWARD_TWICE):
            # A backward that met a graph freed by an earlier, successful
            # backward (or one running in another thread) freed nothing of it.
            mark_released(gt)
    node = gt.error_node
    if node is None or gt.error is not exc:
        raise exc
    err = _wrap(node, exc)
    if err is exc:
        raise exc
    raise err from exc


def run_sync(gt: GraphTask) -> None:
    """Execute ``gt`` to completion on the calling thread."""
    call = adopting(gt)  # started by engine.run: NOTE [A backward inside engine.run]
    if call is None:
        _run_sync(gt, None)
    else:
        call.backward(gt, _run_sync)


def _run_sync(gt: GraphTask, call: Call | None) -> None:
    # async user code runs in a loop of its own where none runs in this thread
    gt.attach(None, detach=detach_if_no_loop)
    token = _grad_enabled.set(gt.create_graph)
    try:
        while True:
            try:
                step = gt.run() if call is None else gt.run(call.slice_end())
                if step is None:
                    break
                if step is YIELD:
                    if call is not None:
                        call.boundary(gt)  # cancelled here if its caller was
                else:
                    drive_sync(step)
            except BaseException as exc:
                _raise_node_error(gt, exc)
        gt.check_complete()
        if gt.staged or gt.callbacks:
            drive_sync(_post(gt))
    finally:
        _grad_enabled.reset(token)
        gt.finish()


async def run_async(gt: GraphTask, time_slice: float = DEFAULT_TIME_SLICE) -> None:
    """Execute ``gt`` in the current task, yielding to the loop per time slice.

    Its slices run while it holds the loop's share (NOTE [The loop's share]
    in _share.py): one backward's slice at a time between two turns of the
    loop, the backwards in flight taking turns.
    """
    # the Engine's device queues, or a lazy scheduler that asks for one when a
    # non-cpu node shows up (NOTE [Device queues] in _engine.py)
    sched = scheduler_for(gt)
    share = loop_share()
    choices = share.choices  # an explored run's (NOTE [Choice points]), else None
    if choices is None:
        gt.attach(sched, node_hook=sched.node_hook())
    else:
        # NOTE [Choice points] in _choice.py: every node goes through the
        # seeded scheduler's boundary; slices end by its choice, not the clock
        key = choices.label(gt)
        gt.attach(Explored(sched, choices, key), node_hook=choices.node_hook(gt, worker_name))
        time_slice = math.inf
    first: Any = None  # the first step, when it is not a slice on the loop
    if sched is not LAZY:
        assert isinstance(sched, Engine)
        admission = sched.admit(gt)  # NOTE [Admission] in _engine.py
        if admission is not None:
            try:
                await admission
            except BaseException as exc:  # cancelled while waiting: nothing ran
                gt.fail(None, exc)
                gt.finish()
                raise
        if choices is None and sched.starts_in_thread(gt):
            first = TO_THREAD  # NOTE [A backward in a compute thread]
    token = _grad_enabled.set(gt.create_graph)
    held = False
    yielded = False
    try:
        while True:
            try:
                step: Any
                if first is not None:
                    step, first = first, None  # straight to the thread
                else:
                    # not held and running: a nested backward started inside
                    # its parent's slice runs in it (NOTE [The loop's share])
                    if not held and not share.running:
                        if not share.try_take():
                            yielded = True
                            await share.take()
                        held = True
                    start = perf_counter()
                    outer = share.running
                    share.running = True
                    try:
                        step = gt.run(start + time_slice)
                    finally:
                        share.running = outer
                if step is YIELD:
                    # the share is kept while the loop turns (NOTE [Yielding a
                    # time slice]), then handed to the next backward, if any
                    yielded = True
                    if held:
                        share.count(start, time_slice)
                        await yield_slice()
                        if share.waiters:
                            held = False
                            share.give()
                    else:
                        await yield_slice()
                    continue
                if held:
                    held = False
                    share.count(start, time_slice)
                    share.give()
                if step is TO_THREAD:
                    # NOTE [A backward in a compute thread]: the rest runs there
                    assert isinstance(sched, Engine)  # only an Engine moves backwards
                    yielded = True
                    step = await sched.in_thread(gt)
                    if step is None or step is BACK:
                        continue  # drained, or a device node to dispatch from the loop
                if step is None:
                    if gt.error is not None:
                        raise gt.error  # failed on a device worker, or the Engine closed
                    if sched.busy(gt):
                        yielded = True
                        assert isinstance(sched, Engine)  # only an Engine has workers
                        await sched.wait(gt)  # device workers hold the rest
                        continue
                    if not yielded:
                        # NOTE [The checkpoint of a short backward]
                        yielded = True
                        if choices is None:
                            await end_checkpoint(time_slice)
                        else:
                            await choices.end_checkpoint()
                        if gt.has_ready() or sched.busy(gt):
                            continue
                    break
                yielded = True
                if step is NEED_ENGINE:
                    # first non-cpu node and no Engine: run the rest in a short-lived one
                    async with Engine(time_slice=time_slice, _ephemeral=True):
                        await run_async(gt, time_slice)
                    return
                # async user code resumed here still runs inside gt (nested
                # backward, queue_callback): GraphTask.run reset it on return
                with gt.as_current():
                    await step
                if choices is not None:
                    await choices.resume()  # waiters resume in a seeded order
            except BaseException as exc:
                if held:
                    held = False
                    share.give()
                gt.fail(None, exc)  # a cancellation: stop scheduling this graph task
                _raise_node_error(gt, exc)
        gt.check_complete()
        if gt.staged or gt.callbacks:
            await _post(gt)
    finally:
        if held:
            share.give()
        _grad_enabled.reset(token)
        gt.finish()
        sched.release(gt)


async def _post(gt: GraphTask) -> None:
    """Await the commit guards, commit staged gradients, then post-accumulate hooks and final callbacks."""
    for guard in gt.take_before_commit():  # NOTE [Commit guards] in core/_graph_task.py
        res = guard()
        if inspect.isawaitable(res):
            await await_user(res, gt.detach)
    hooks = commit(gt)
    if not hooks and not gt.callbacks:
        return
    with gt.as_current():  # callbacks may queue callbacks or run a nested backward
        for fn, t in hooks:
            res = fn(t)
            if inspect.isawaitable(res):
                res = await await_user(res, gt.detach)
            if res is not None:
                raise AutogradError("hooks should return None.")
        i = 0
        while i < len(gt.callbacks):  # callbacks may queue callbacks
            res = gt.callbacks[i]()
            if inspect.isawaitable(res):
                await await_user(res, gt.detach)
            i += 1
