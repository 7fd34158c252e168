"""The two drivers of a GraphTask: a plain loop (``ae.sync``) and an anyio task.

Both are short loops around ``GraphTask.run`` (see NOTE [Scheduler
invariants] in _engine.py).  The async driver runs in the awaiting task, as
PyTorch's calling thread drains its graph task's CPU queue, and yields to the
event loop once per time slice rather than per node.
"""

from __future__ import annotations

import contextvars
import inspect
import math
from collections.abc import Coroutine
from time import perf_counter
from typing import Any

from anyio.lowlevel import checkpoint as _checkpoint
from anyio.lowlevel import checkpoint_if_cancelled as _checkpoint_if_cancelled

from ..core._errors import ERR_BACKWARD_TWICE, AutogradError
from ..core._grad_mode import _grad_enabled
from ..core._graph_task import YIELD, GraphTask, _current, wrap_node_error
from ..core._node_exec import commit
from ._loop import async_library, asyncio_cancelling

__all__ = ["run_sync", "run_async", "yield_slice", "end_checkpoint", "DEFAULT_TIME_SLICE"]

#: seconds a backward runs before it lets other tasks of the event loop run
DEFAULT_TIME_SLICE = 0.001

_sched_mod: Any = None  # aengine.runtime._engine, imported on first use (import cycle)

#: warned by every ``backward(create_graph=True)`` (see _api._backward)
WARNING_CREATE_GRAPH = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "ae.grad() when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break "
    "the cycle and avoid the leak."
)


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


def _raise_node_error(gt: GraphTask, exc: BaseException) -> None:
    if not gt.keep_graph:
        from ._engine import cancelled_graph_error, mark_released

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
    err = wrap_node_error(node, exc)
    if err is exc:
        raise exc
    raise err from exc


def run_sync(gt: GraphTask) -> None:
    """Execute ``gt`` to completion on the calling thread."""
    token = _grad_enabled.set(gt.create_graph)
    try:
        while True:
            try:
                step = gt.run()
                if step is None:
                    break
                if step is not YIELD:
                    drive_sync(step)
            except BaseException as exc:
                _raise_node_error(gt, exc)
        _check(gt)
        if gt.staged or gt.callbacks:
            drive_sync(_post(gt))
    finally:
        _grad_enabled.reset(token)
        gt.done = True


async def run_async(gt: GraphTask, time_slice: float = DEFAULT_TIME_SLICE) -> None:
    """Execute ``gt`` in the current task, yielding to the loop per time slice."""
    global _sched_mod
    if _sched_mod is None:
        from . import _engine as _sched_mod
    # the Engine's device queues, or a lazy scheduler that asks for one when a
    # non-cpu node shows up (NOTE [Device queues] in _scheduler.py)
    sched = gt.sched = _sched_mod.scheduler_for(gt)
    token = _grad_enabled.set(gt.create_graph)
    yielded = False
    try:
        while True:
            try:
                step = gt.run(perf_counter() + time_slice)
                if step is None:
                    if gt.error is not None:
                        raise gt.error  # failed on a device worker, or the Engine closed
                    if sched.busy(gt):
                        yielded = True
                        await sched.wait(gt)  # device workers hold the rest
                        continue
                    if not yielded:
                        # NOTE [The checkpoint of a short backward]
                        yielded = True
                        await end_checkpoint(time_slice)
                        if gt.heap or sched.busy(gt):
                            continue
                    break
                yielded = True
                if step is YIELD:
                    await yield_slice()
                elif step is _sched_mod.NEED_ENGINE:
                    # first non-cpu node and no Engine: run the rest in a short-lived one
                    async with _sched_mod.Engine(time_slice=time_slice, _ephemeral=True):
                        await run_async(gt, time_slice)
                    return
                else:
                    # async user code resumed here still runs inside gt (nested
                    # backward, queue_callback): GraphTask.run reset it on return
                    tok = _current.set(gt)
                    try:
                        await step
                    finally:
                        _current.reset(tok)
            except BaseException as exc:
                if gt.error is None:
                    gt.error = exc  # cancellation: stop scheduling this graph task
                _raise_node_error(gt, exc)
        _check(gt)
        if gt.staged or gt.callbacks:
            await _post(gt)
    finally:
        _grad_enabled.reset(token)
        gt.done = True
        sched.release(gt)


#: when the current task last yielded to the loop inside the engine (perf_counter)
_last_yield: contextvars.ContextVar[float] = contextvars.ContextVar(
    "aengine_last_yield", default=-math.inf
)


async def end_checkpoint(time_slice: float) -> None:
    """The checkpoint of a backward that finished without yielding.

    # NOTE [The checkpoint of a short backward]
    # Every ``await ae.backward/grad`` sees cancellation, as trio's own
    # functions do.  A backward that finished within its first time slice
    # also lets the other tasks run, unless this task already yielded inside
    # the engine less than a time slice ago: then it only checks for
    # cancellation (``checkpoint_if_cancelled``; and asyncio's own
    # ``Task.cancel``).  When it does yield, it yields as between two slices
    # (NOTE [Yielding a time slice]): after one checkpoint a task woken by
    # its timer meanwhile would run only one or two slices later.  A loop of
    # small backwards thus yields once per time slice, as one long backward
    # does, instead of paying an event-loop iteration (8-11 us here, more
    # than a 1-node backward) per call.  The time since the engine's last
    # yield in this task bounds the time the task ran without yielding from
    # above, so no task holds the loop longer than a slice (plus one
    # backward) this way.
    """
    if perf_counter() - _last_yield.get() < time_slice and not asyncio_cancelling():
        await _checkpoint_if_cancelled()
        return
    # as between slices: the tasks woken meanwhile (a timer, I/O) run first
    await yield_slice()


async def yield_slice() -> None:
    """Let every task that became ready during the slice run before resuming.

    # NOTE [Yielding a time slice]
    # One checkpoint is not enough for the task that became ready while the
    # slice ran.  asyncio runs a woken sleeper two loop iterations after its
    # timer expired (the timer handle sets a future; the future schedules the
    # task), an I/O waiter likewise (reader callback, then the task), while a
    # task that yields with ``sleep(0)`` runs in the next iteration: after one
    # checkpoint the backward would run one more slice, often two, before a
    # sleeper woken during the first one (p99 wake-up 3.5 ms for 1 ms slices).
    # trio runs each batch in a random order, so half of the time the
    # backward's next slice came first.  Resuming three asyncio iterations
    # (two trio batches) later lets them all go first: a task woken during a
    # slice waits for the rest of that slice only.  The extra iterations cost
    # about 2-4% of a long backward.
    """
    await _checkpoint()
    await _checkpoint()
    if async_library() == "asyncio":
        await _checkpoint()
    _last_yield.set(perf_counter())


def _check(gt: GraphTask) -> None:
    if gt.error is not None:
        raise gt.error
    gt.check_complete()


async def _post(gt: GraphTask) -> None:
    """Commit staged gradients, then post-accumulate hooks and final callbacks."""
    hooks = commit(gt)
    if not hooks and not gt.callbacks:
        return
    tok = _current.set(gt)  # callbacks may queue callbacks or run a nested backward
    try:
        await _run_post(gt, hooks)
    finally:
        _current.reset(tok)


async def _run_post(gt: GraphTask, hooks: list[Any]) -> None:
    from ..core._node_exec import await_user  # async user code also runs under ae.sync

    for fn, t in hooks:
        res = fn(t)
        if inspect.isawaitable(res):
            res = await await_user(res)
        if res is not None:
            raise AutogradError("hooks should return None.")
    i = 0
    while i < len(gt.callbacks):  # callbacks may queue callbacks
        res = gt.callbacks[i]()
        if inspect.isawaitable(res):
            await await_user(res)
        i += 1
