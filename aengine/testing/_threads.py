"""Compute threads under the explorer: one at a time, at choice points the explorer picks.

# NOTE [Threads under the explorer]
# A thread of an explored run (``anyio.to_thread.run_sync``, ``engine.run``)
# is a real OS thread that runs only while it holds a baton the loop's
# thread hands it: the loop stops (blocked in ``segment``) while the thread
# runs, and the thread stops (blocked in ``pause``) while the loop runs.
# So at every moment one of them runs, and where the baton changes hands is
# the explorer's: the awaiting task asks a boundary before each segment of
# the thread (kind "thread": whether the loop's other tasks run first, and
# whether compute took time meanwhile), and a segment ends where the
# thread reaches a choice point of its own (``ae.testing.choice()`` called
# in it) or returns.  Races between the thread and the loop's tasks are
# thus explored at those points; code between two of them runs as one
# step, as a task's code between two awaits does.  A thread that waits for
# the loop (``anyio.from_thread.run``) while holding the baton cannot be
# served (the loop is stopped): ``segment`` gives up after ``STUCK`` seconds
# of wall time with an error that says so.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from ..runtime._choice import Choices
from ..runtime._share import loop_share

__all__ = ["Baton", "current_baton", "explored_to_thread", "patched_to_thread"]

#: wall-clock seconds a segment may run before the explorer calls the thread stuck
STUCK = 60.0


class _Here(threading.local):
    baton: Baton | None = None


_here = _Here()


def current_baton() -> Baton | None:
    """The baton of the explored compute thread running here, else None."""
    return _here.baton


class Baton:
    """A compute thread of an explored run and the baton it runs with."""

    def __init__(self, call: Callable[[], Any], choices: Choices) -> None:
        self.call = call
        self.choices = choices
        self.ctx = contextvars.copy_context()
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="aengine-explored", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        self._go.acquire()
        _here.baton = self
        try:
            self.result = self.ctx.run(self.call)
        except BaseException as exc:
            self.error = exc
        finally:
            _here.baton = None
            self.done = True
            self._back.release()

    def segment(self) -> None:
        """On the loop's thread: let the thread run to its next choice point or its end."""
        self._go.release()
        if not self._back.acquire(timeout=STUCK):
            raise RuntimeError(
                f"a thread of the explored run ran {STUCK:.0f} s without reaching a choice point: "
                "it probably waits for the event loop (anyio.from_thread), which is stopped "
                "while an explored thread runs; call such code from the loop instead"
            )

    def pause(self) -> None:
        """In the thread: a choice point: give the baton back until the explorer hands it on."""
        self._back.release()
        self._go.acquire()


async def explored_to_thread(choices: Choices, call: Callable[[], Any]) -> Any:
    """Run ``call`` in a compute thread, segment by segment, each at a boundary of the awaiting task."""
    baton = Baton(call, choices)
    func = getattr(call, "func", call)  # engine.run's partial
    name = getattr(func, "__qualname__", type(func).__name__)
    try:
        while not baton.done:
            if choices.boundary("thread", name):
                await choices.yield_turns()
            baton.segment()
    except BaseException:
        while not baton.done:  # a thread cannot be stopped: it runs to its end first
            baton.segment()
        raise
    if baton.error is not None:
        raise baton.error
    return baton.result


_real_run_sync = anyio.to_thread.run_sync


async def to_thread(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    # the patched function serves every thread, explored or not
    choices = loop_share().choices
    if choices is None:
        return await _real_run_sync(func, *args, **kwargs)
    return await explored_to_thread(choices, functools.partial(func, *args))


class patched_to_thread:
    """``anyio.to_thread.run_sync`` runs explored threads while a run of this thread explores."""

    def __enter__(self) -> None:
        self.old = anyio.to_thread.run_sync
        anyio.to_thread.run_sync = to_thread  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        anyio.to_thread.run_sync = self.old
