"""What the explorer sees of a running event loop: ready tasks, pending timers, the virtual clock.

The ``LoopView`` of each backend (NOTE [Compute takes virtual time] in
aengine/runtime/_choice.py).  Both read private state of their loop, as the
run's seeding of trio already does (NOTE [Deterministic runs] in
_run.py): asyncio's ``_ready`` queue and ``_scheduled`` timer heap
(unchanged since Python 3.4) and looptime's integer clock; trio's deadline
heap.  ``check_*`` refuses a version without them before any run, rather
than exploring less than it says.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from anyio.lowlevel import checkpoint

__all__ = ["AsyncioView", "TrioView", "check_asyncio", "check_trio", "view_for"]

#: at most this many pending timers are offered as the end of one stretch of compute
MOST_TIMERS = 3
_CLOCK = "_LoopTimeEventLoop__now"
_RESOLUTION = "_LoopTimeEventLoop__resolution_reciprocal"


def check_asyncio(loop: Any) -> None:
    """Refuse a looptime loop whose clock the explorer cannot move."""
    if not (hasattr(loop, _CLOCK) and hasattr(loop, _RESOLUTION) and hasattr(loop, "_scheduled")):
        raise RuntimeError(
            "this looptime version keeps its clock elsewhere, so ae.testing cannot let compute "
            "take virtual time; use looptime 0.2 to 0.9, or pass backend='trio'"
        )


def check_trio() -> Any:
    """trio's run module, refused when its deadline heap is not where the explorer reads it."""
    # local: trio is optional (the caller checked that it imports)
    from trio._core import _run

    if not hasattr(_run, "Deadlines") or "_heap" not in getattr(
        _run.Deadlines, "__annotations__", {}
    ):
        raise RuntimeError(
            "this trio version keeps its timers elsewhere, so ae.testing cannot let compute "
            "take virtual time; use trio 0.25 to 0.35, or pass backend='asyncio'"
        )
    return _run


class AsyncioView:
    """The view of a looptime asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        check_asyncio(loop)
        self.loop: Any = loop
        self.per_second: int = getattr(loop, _RESOLUTION)

    def others_ready(self) -> bool:
        return bool(self.loop._ready)

    def deadlines(self, horizon: float) -> list[float]:
        now = self.loop.time()
        due = {
            h._when for h in self.loop._scheduled if not h._cancelled and h._when <= now + horizon
        }
        return sorted(d for d in due if d > now)[:MOST_TIMERS]

    def now(self) -> float:
        return float(self.loop.time())

    def jump_to(self, when: float) -> None:
        ticks = math.ceil(when * self.per_second)
        if ticks > getattr(self.loop, _CLOCK):
            setattr(self.loop, _CLOCK, ticks)

    async def yield_turns(self) -> None:
        # a woken sleeper runs two iterations after its timer fires (NOTE [Yielding a
        # time slice] in aengine/runtime/_loop.py): three checkpoints let it go first
        await checkpoint()
        await checkpoint()
        await checkpoint()


class TrioView:
    """The view of a trio run on ``MockClock``: an instrument tracks which tasks are ready."""

    def __init__(self) -> None:
        # local: trio is optional; only trio runs build this view
        import trio

        self.trio = trio
        self.runner = check_trio().GLOBAL_RUN_CONTEXT.runner
        self.clock: Any = trio.lowlevel.current_clock()  # a MockClock: it can jump
        self.ready: set[Any] = set()
        trio.lowlevel.add_instrument(self)  # type: ignore[arg-type]  # duck-typed hooks

    # the instrument (trio.abc.Instrument's hooks)
    def task_scheduled(self, task: Any) -> None:
        self.ready.add(task)

    def before_task_step(self, task: Any) -> None:
        self.ready.discard(task)

    def task_exited(self, task: Any) -> None:
        self.ready.discard(task)

    def others_ready(self) -> bool:
        return bool(self.ready)

    def deadlines(self, horizon: float) -> list[float]:
        now = self.clock.current_time()
        due = {
            d
            for d, _, scope in self.runner.deadlines._heap
            if d == scope._registered_deadline and now < d <= now + horizon
        }
        return sorted(due)[:MOST_TIMERS]

    def now(self) -> float:
        return float(self.clock.current_time())

    def jump_to(self, when: float) -> None:
        now = self.clock.current_time()
        if when > now:
            self.clock.jump(when - now)
            while self.clock.current_time() < when:  # float rounding: never short of it
                self.clock.jump(math.ulp(when))

    async def yield_turns(self) -> None:
        # a task woken by the jump is in the next batch; trio orders a batch by
        # its seeded shuffle, so two checkpoints let it run first
        await checkpoint()
        await checkpoint()


def view_for(backend: str) -> AsyncioView | TrioView:
    """The view of the loop running this task."""
    if backend == "trio":
        return TrioView()
    return AsyncioView(asyncio.get_running_loop())
