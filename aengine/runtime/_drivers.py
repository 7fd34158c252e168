"""The two drivers of a GraphTask: a plain loop (``ae.sync``) and an anyio task.

Both are short loops over steps around ``GraphTask.run`` (NOTE [The
drivers' steps] below; NOTE [Scheduler invariants] in
aengine/core/_graph_task.py).  The async driver runs in the
awaiting task, as PyTorch's calling thread drains its graph task's CPU
queue, and yields to the event loop once per time slice rather than per node.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Coroutine
from time import perf_counter
from typing import TYPE_CHECKING, Any

import anyio

from ..core import ERR_BACKWARD_TWICE, YIELD, AutogradError, GraphTask, await_user, commit
from ..core import wrap_node_error as _wrap
from ..core._modes import _grad_enabled, _multithreading
from ..core._node_hooks import AWAIT
from ._calls import Call, adopting
from ._engine import (
    LAZY,
    NEED_ENGINE,
    Engine,
    _engine_var,
    cancelled_graph_error,
    mark_released,
    worker_name,
)
from ._loop import end_checkpoint, loop_running, yield_slice
from ._seeded import Explored
from ._settings import DEFAULT_TIME_SLICE, engines_here
from ._share import LoopShare, _here
from ._threaded import BACK, TO_THREAD, OnLoop

if TYPE_CHECKING:
    from ._choice import Choices

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
    # the user's frames stay in the traceback (torch re-raises the original
    # with its backtrace): the wrapper starts from the original's traceback
    raise err.with_traceback(exc.__traceback__) from exc


# NOTE [The drivers' steps]
# Both drivers are one loop over steps.  ``GraphTask.run`` returns the
# core's steps (None: drained; YIELD: the time slice is over; an awaitable:
# a node waits for a kernel, a hook or a nested backward); the runtime adds
# its own (``TO_THREAD``: go on in a compute thread; ``NEED_ENGINE``: the
# first non-cpu node of a backward without an Engine) and the driver's
# (``RUN``: run a slice; ``DONE``: drained and complete; ``ENDED``: a nested
# driver finished the task).  Running a slice, the one step every backward
# takes, is written in the loop; each other step is a small function taking
# the step and returning the next one, found by identity in ``_ASYNC_STEPS``
# (an awaitable: ``_await_node``).  Steps are values and the functions are
# module-level: a driver object with a method per step cost measurably more
# per backward (see docs/performance.md, "The walk of one gradient").

#: the driver's steps (NOTE [The drivers' steps])
RUN = object()
DONE = object()
ENDED = object()


def run_sync(gt: GraphTask) -> None:
    """Execute ``gt`` to completion on the calling thread (the async loop without awaits)."""
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
        step: Any = RUN
        while step is not DONE:
            try:
                if step is RUN:
                    step = gt.run() if call is None else gt.run(call.slice_end())
                elif step is None:
                    step = DONE
                elif step is YIELD:
                    if call is not None:
                        call.boundary(gt)  # cancelled here if its caller was
                    step = RUN
                else:  # a node's awaitable, which must not suspend here
                    drive_sync(step)
                    step = RUN
            except BaseException as exc:
                _raise_node_error(gt, exc)
        gt.check_complete()
        if gt.staged or gt.callbacks:
            drive_sync(_post(gt))
    finally:
        _grad_enabled.reset(token)
        gt.finish()


async def run_async(gt: GraphTask, time_slice: float | None = None) -> None:
    """Execute ``gt`` in the current task, yielding to the loop per time slice.

    Its slices run while it holds the loop's share (NOTE [The loop's share]
    in _share.py); ``time_slice``: the settings' here when None.
    """
    threads = _multithreading.get()  # NOTE [Multithreading mode] in core/_modes.py
    sched, time_slice, explored = _attach(gt, time_slice, threads)
    step: Any = RUN if sched is LAZY else await _admit(gt, sched, explored, threads)
    share = _here.share
    token = _grad_enabled.set(gt.create_graph)
    held = yielded = False
    try:
        while step is not DONE and step is not ENDED:
            try:
                if step is RUN:
                    # not held and running: a nested backward started inside
                    # its parent's slice runs in it (NOTE [The loop's share])
                    if not held and not share.running:
                        if not share.try_take():
                            yielded = True
                            await share.take()
                        held = True
                    start = perf_counter()
                    outer, share.running = share.running, True
                    try:
                        step = gt.run(start + time_slice)
                    finally:
                        share.running = outer
                    if held and step is not YIELD:  # hand the share over
                        held = False
                        share.hand_over(start, time_slice)
                elif step is None:
                    step = await _drained(gt, sched, explored, yielded, time_slice)
                    yielded = True
                elif step is YIELD:
                    yielded = True
                    held = await _yield(share, held, start, time_slice)
                    step = RUN
                else:  # (a sentinel is a bare ``object()``; an awaitable is not looked up)
                    yielded = True
                    run = _ASYNC_STEPS[step] if step.__class__ is object else _await_node
                    step = await run(gt, sched, explored, step, time_slice)
            except BaseException as exc:
                if held:
                    held = False
                    share.give()
                gt.fail(None, exc)  # a cancellation: stop scheduling this graph task
                _raise_node_error(gt, exc)
        if step is DONE:
            gt.check_complete()
            if gt.staged or gt.callbacks:
                await _post(gt)
    finally:
        if held:
            share.give()
        _grad_enabled.reset(token)
        gt.finish()
        if sched is not LAZY:
            sched.release(gt)


def _attach(
    gt: GraphTask, time_slice: float | None, threads: bool
) -> tuple[Any, float, Choices | None]:
    """Attach ``gt``'s scheduler: (that scheduler, the time slice, the explored run's choices).

    The Engine's device queues, or a lazy scheduler that asks for one when
    a non-cpu node shows up (NOTE [Device queues] in _engine.py); without
    ``threads`` (multithreading off), wrapped so that cpu nodes stay on the loop.
    """
    eng, settings = engines_here(_engine_var.get())
    if time_slice is None:
        time_slice = DEFAULT_TIME_SLICE if settings is None else settings.time_slice
    sched = LAZY if eng is None else eng
    choices = _here.share.choices  # an explored run's (NOTE [Choice points]), else None
    if choices is None:
        gt.attach(
            sched if threads else OnLoop(sched),
            node_hook=None if eng is None else eng.node_hook(),
        )
        return sched, time_slice, None
    # NOTE [Choice points] in _choice.py: every node goes through the seeded
    # scheduler's boundary; slices end by its choice, not the clock
    key = choices.label(gt)
    gt.attach(Explored(sched, choices, key), node_hook=choices.node_hook(gt, worker_name))
    return sched, math.inf, choices


async def _admit(gt: GraphTask, sched: Engine, explored: Choices | None, threads: bool) -> Any:
    """Wait for the Engine's admission (NOTE [Admission]); the first step."""
    admission = sched.admit(gt)
    if admission is not None:
        try:
            await admission
        except BaseException as exc:  # cancelled while waiting: nothing ran
            gt.fail(None, exc)
            gt.finish()
            raise
    if threads and explored is None and sched.starts_in_thread(gt):
        return TO_THREAD  # NOTE [A backward in a compute thread]
    return RUN


async def _yield(share: LoopShare, held: bool, start: float, time_slice: float) -> bool:
    """Let the loop turn after a slice; whether the share is still held after.

    The share is kept while the loop turns (NOTE [Yielding a time slice]),
    then handed to the next backward, if any.
    """
    if held:
        share.count(start, time_slice)
    await yield_slice()
    if held and share.waiters:
        share.give()
        return False
    return held


async def _drained(
    gt: GraphTask, sched: Any, explored: Choices | None, yielded: bool, time_slice: float
) -> Any:
    """The task's own queue is empty: wait for device workers, or take the end checkpoint."""
    if gt.error is not None:
        raise gt.error  # failed on a device worker, or the Engine closed
    if sched is not LAZY and sched.busy(gt):
        await sched.wait(gt)  # device workers hold the rest
        return RUN
    if yielded:
        return DONE
    # NOTE [The checkpoint of a short backward]
    if explored is None:
        await end_checkpoint(time_slice)
    else:
        await explored.end_checkpoint()
    if gt.has_ready() or (sched is not LAZY and sched.busy(gt)):
        return RUN
    return DONE


async def _await_node(
    gt: GraphTask, sched: Any, explored: Choices | None, step: Any, time_slice: float
) -> Any:
    """Await what a node waits for: a kernel, async user code, a nested backward."""
    # async user code resumed here still runs inside gt (nested backward,
    # queue_callback): GraphTask.run reset it on return
    with gt.as_current():
        await step
    if explored is not None:
        await explored.resume()  # waiters resume in a seeded order
    return RUN


async def _to_thread(
    gt: GraphTask, sched: Any, explored: Choices | None, step: Any, time_slice: float
) -> Any:
    """NOTE [A backward in a compute thread]: the rest runs there, until it needs the loop."""
    step = await sched.in_thread(gt)  # (only an Engine moves backwards)
    return RUN if step is None or step is BACK else step  # BACK: a device node to dispatch


async def _need_engine(
    gt: GraphTask, sched: Any, explored: Choices | None, step: Any, time_slice: float
) -> Any:
    """The first non-cpu node and no Engine: run the rest in a short-lived one."""
    async with Engine(time_slice=time_slice, _ephemeral=True):
        await run_async(gt, time_slice)
    return ENDED


#: the steps other than running a slice, YIELD and None (NOTE [The drivers' steps])
_ASYNC_STEPS = {TO_THREAD: _to_thread, NEED_ENGINE: _need_engine}


async def _post(gt: GraphTask) -> None:
    """Await the commit guards, commit staged gradients, then post-accumulate hooks and final callbacks."""
    for guard in gt.take_before_commit():  # NOTE [Commit guards] in core/_outcome.py
        res = guard()
        if inspect.isawaitable(res):
            await await_user(res, gt.detach)
            await _resumed()
    hooks = commit(gt)
    if not hooks and not gt.callbacks:
        return
    with gt.as_current():  # callbacks may queue callbacks or run a nested backward
        for fn, t in hooks:
            res = fn(t)
            if inspect.isawaitable(res):
                res = await await_user(res, gt.detach)
                await _resumed()
            if res is not None:
                raise AutogradError("hooks should return None.")
        i = 0
        while i < len(gt.callbacks):  # callbacks may queue callbacks
            res = gt.callbacks[i]()
            if inspect.isawaitable(res):
                await await_user(res, gt.detach)
                await _resumed()
            i += 1


async def _resumed() -> None:
    """After awaited user code in ``_post``: in an explored run, a boundary (NOTE [Choice points])."""
    choices = _here.share.choices
    if choices is not None:
        await choices.resume()
