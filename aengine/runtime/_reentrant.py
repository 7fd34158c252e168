"""Reentrant backward: a graph task started while the engine runs a node.

A backward function or a hook may itself call ``ae.sync.backward/grad`` or
``await ae.backward/grad``.  The new graph task gets ``depth = parent depth +
1`` (``new_graph_task`` in aengine/_autograd.py) and its own CPU queue, and the caller runs it
to completion before its node returns, so every nested graph task finishes
before any other pending node of the outer one runs (PyTorch's
``test_reentrant_priority``).

# NOTE [Reentrant stacks]
# Python's stack is the limit, not the graph: CPython 3.11 raises
# RecursionError around 1000 frames, and one level of sync nesting costs
# many frames (driver, GraphTask.run, the node, the user's function,
# the sync twin...).  So:
#
# * A nested *async* call (``await ae.backward`` from a node) is awaited
#   inline while fewer than ``reentrant_depth_limit()`` graph tasks (default
#   60, PyTorch's MAX_DEPTH) are nested in this task and the stack is not deep
#   already.  A chain of nested awaits inside one task is resumed through
#   every level (a deep enough chain raises RecursionError, measured), so
#   beyond that the nested graph task moves off this stack.  By default
#   (``reentrant_overflow="thread"``) it runs in a new OS thread with its own
#   event loop of the same backend, through ``anyio.to_thread`` with a
#   one-token limiter of its own (nested hops never wait for kernel threads);
#   cancelling the caller stops it within 4 nodes and waits for the thread.
#   Its user code must not await objects bound to the caller's loop.  With
#   ``ae.Engine(reentrant_overflow="task")`` it runs in a fresh task of the
#   same loop instead: an empty stack too, loop-bound objects stay usable,
#   and inline nesting is cheaper (measurably less per level); the fresh
#   task checks for the caller's cancellation before it runs (a chain of
#   nested backwards never suspends on its way down, so nothing else would).
#   Errors come back unwrapped (no ExceptionGroup); nothing is left behind.
# * A nested *sync* call (``ae.sync.backward`` from a node, whatever drives
#   the outer graph task) runs on the caller's stack under the same two
#   conditions; beyond them it runs in a new OS thread that starts with a
#   fresh stack, and the caller blocks until it finishes (PyTorch hands the
#   graph task to a pool thread).
#   The thread gets a copy of the caller's contextvars (current graph task,
#   grad and anomaly modes), so depth keeps counting.
# * A nested async call made while the enclosing graph task is driven
#   synchronously (an ``async def`` backward run by ``ae.sync.backward``)
#   runs synchronously too: it must not suspend, as the rest of a sync
#   backward.  This makes one ``async def backward`` usable from both APIs.
#
# Every graph task that nests (parent = the running graph task) is registered
# with ``parent.adopt``; ``GraphTask.fail`` stops them when the parent fails.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from typing import Any

import anyio
import sniffio
from anyio.lowlevel import checkpoint_if_cancelled

from ..core import AutogradError, GraphTask, current_graph_task
from ._drivers import run_async, run_sync
from ._engine import _engine_var
from ._settings import reentrant_depth_limit, reentrant_overflow
from ._settings import time_slice as current_time_slice

__all__ = ["drive_sync_entry", "drive_async_entry"]

#: graph tasks nested on the current stack (this thread, this task)
_stack: contextvars.ContextVar[int] = contextvars.ContextVar("aengine_stack", default=0)
#: True while the innermost running graph task is driven by the sync driver
_sync_driven: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aengine_sync_driven", default=False
)

#: a nested sync call hops to a thread when the stack is deeper than this
#: share of the recursion limit, whatever the depth count says
_STACK_SHARE = 0.5


def _frames_deep(limit: int) -> bool:
    f: Any = sys._getframe(2)
    n = 0
    while f is not None:
        n += 1
        if n > limit:
            return True
        f = f.f_back
    return False


def drive_sync_entry(gt: GraphTask) -> None:
    """Run ``gt`` for a sync entry point (top-level or nested)."""
    parent = current_graph_task()
    if parent is None:
        _run_sync_here(gt)
        return
    parent.adopt(gt)
    try:
        limit = int(sys.getrecursionlimit() * _STACK_SHARE)
        if _stack.get() >= reentrant_depth_limit() or _frames_deep(limit):
            _run_in_thread(gt)
        else:
            _run_sync_here(gt)
    finally:
        parent.disown(gt)


def _run_sync_here(gt: GraphTask) -> None:
    t1 = _stack.set(_stack.get() + 1)
    t2 = _sync_driven.set(True)
    try:
        run_sync(gt)
    finally:
        _sync_driven.reset(t2)
        _stack.reset(t1)


def _run_in_thread(gt: GraphTask) -> None:
    """Run a nested graph task on a new thread (fresh stack); block until done."""
    ctx = contextvars.copy_context()
    failure: list[BaseException] = []

    def body() -> None:
        _stack.set(1)
        _sync_driven.set(True)
        try:
            run_sync(gt)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=ctx.run, args=(body,), name=f"aengine-reentrant-{gt.depth}")
    thread.start()
    try:
        thread.join()
    except BaseException as exc:  # KeyboardInterrupt: stop the nested task, leave no thread
        gt.fail(None, exc)
        thread.join()
        raise
    _raise_first(failure)


def _raise_first(failure: list[BaseException]) -> None:
    """Raise the error a nested run collected, if any (without a reference cycle)."""
    if failure:
        err = failure[0]
        failure.clear()
        try:
            raise err
        finally:
            del err


async def drive_async_entry(gt: GraphTask, time_slice: float | None = None) -> None:
    """Run ``gt`` for an async entry point (top-level or nested).

    ``time_slice``: the settings' here when None (NOTE [Which Engine's
    settings apply]); a nested backward moved off this stack takes them here.
    """
    parent = current_graph_task()
    if parent is None:
        t1 = _stack.set(1)
        t2 = _sync_driven.set(False)
        try:
            await run_async(gt, time_slice)
        finally:
            _sync_driven.reset(t2)
            _stack.reset(t1)
        return
    if _sync_driven.get():
        drive_sync_entry(gt)  # see NOTE [Reentrant stacks]: must not suspend
        return
    parent.adopt(gt)
    try:
        n = _stack.get()
        limit = int(sys.getrecursionlimit() * _STACK_SHARE)
        if n >= reentrant_depth_limit() or _frames_deep(limit):
            if time_slice is None:  # (a thread's loop has no Engine of ours)
                time_slice = current_time_slice()
            if reentrant_overflow() == "thread":
                await _run_in_thread_loop(gt, time_slice)
            else:
                await _run_in_new_task(gt, time_slice)
        else:
            t1 = _stack.set(n + 1)
            try:
                await run_async(gt, time_slice)
            finally:
                _stack.reset(t1)
    finally:
        parent.disown(gt)


async def _run_in_thread_loop(gt: GraphTask, time_slice: float) -> None:
    """Run a nested async graph task in a new OS thread with its own event loop.

    The thread starts with an empty stack (any depth works) and runs the
    same anyio backend as the caller.  The Engine of the caller's loop is not
    used there (its device queues belong to the other loop): device nodes of
    the nested graph get a short-lived Engine in the new loop.  Cancelling
    the caller stops the nested graph task (it sees the error within 4
    nodes) and waits for the thread, so no thread is left behind.
    """
    backend = sniffio.current_async_library()
    failure: list[BaseException] = []

    def body() -> None:
        async def main() -> None:
            _engine_var.set(None)
            _stack.set(1)
            _sync_driven.set(False)
            await run_async(gt, time_slice)

        try:
            anyio.run(main, backend=backend)
        except BaseException as exc:
            failure.append(exc)

    finished = False
    cancelled = False

    async def watch_cancel() -> None:
        nonlocal cancelled
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if not finished:  # the caller was cancelled: stop the nested loop
                cancelled = True
                gt.fail(None, AutogradError("the caller of this nested backward was cancelled"))
            raise

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_cancel)
        try:
            # its own one-token limiter: nested hops never wait for kernel threads
            await anyio.to_thread.run_sync(body, limiter=anyio.CapacityLimiter(1))
        finally:
            finished = True
            tg.cancel_scope.cancel()
    if cancelled:
        # the nested graph task stopped because the caller is cancelled: let
        # the cancellation (not the nested task's stop error) reach the caller
        await anyio.lowlevel.checkpoint()
    _raise_first(failure)


async def _run_in_new_task(gt: GraphTask, time_slice: float) -> None:
    """Run a nested async graph task in a fresh task of this loop (an empty stack).

    A chain of nested backwards never suspends on its way down (each level
    starts the next before its first time slice is over), so a cancellation
    of the caller is only noticed where a task starts: the fresh task checks
    it before running the nested graph task, as the thread mode's watcher
    stops the nested graph task.
    """
    failure: list[BaseException] = []

    async def child() -> None:
        _stack.set(1)
        _sync_driven.set(False)
        try:
            await checkpoint_if_cancelled()
        except BaseException as exc:
            gt.fail(None, exc)  # never run: nothing to release but the task itself
            gt.finish()
            raise
        try:
            await run_async(gt, time_slice)
        except Exception as exc:  # cancellation goes through the task group
            failure.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(child, name=f"aengine-reentrant-{gt.depth}")
    _raise_first(failure)
