"""The worker tasks draining an Engine's device queues (see NOTE [Device queues] in _engine.py)."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable
from time import perf_counter
from typing import Any, Protocol

import anyio
from anyio.lowlevel import checkpoint

from ..core import GraphTask, Node
from ..core._modes import _grad_enabled
from ..tensors import Device
from ._choice import Choices
from ._loop import yield_slice
from ._queues import DeviceQueue, SeededQueue
from ._share import loop_share


class Engine(Protocol):
    """What the workers see of their Engine (``ae.Engine``, the one implementation;
    a Protocol so that this module imports nothing of _engine.py)."""

    @property
    def time_slice(self) -> float: ...
    @property
    def offload_threads(self) -> int: ...
    @property
    def workers_per_device(self) -> int: ...
    @property
    def sim_latency(self) -> float | dict[str, float]: ...
    @property
    def _explore(self) -> Choices | None: ...
    @property
    def _ctx(self) -> contextvars.Context: ...
    @property
    def _tg(self) -> Any: ...
    def _done(self, gt: GraphTask, n: int = 1) -> None: ...


__all__ = ["open_queue", "worker_name"]

_worker_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aengine_worker", default=None
)


def worker_name() -> str:
    """The name of the device worker running here (``'sim:0#0'``), else ``'owner'``."""
    return _worker_var.get() or "owner"


def open_queue(eng: Engine, dev: Device) -> DeviceQueue:
    """The ready queue of ``dev`` for ``eng``, its workers started."""
    lat = eng.sim_latency
    latency = 0.0
    if dev.type == "sim":
        latency = lat.get(str(dev), 0.0) if isinstance(lat, dict) else float(lat)
    explore = eng._explore
    if explore is None:
        q = DeviceQueue(dev, eng.workers_per_device, eng.offload_threads, latency)
    else:
        q = SeededQueue(dev, eng.workers_per_device, eng.offload_threads, latency, explore)
    for _ in range(eng.workers_per_device):
        _spawn(eng, q)
    return q


def _spawn(eng: Engine, q: DeviceQueue) -> None:
    q.workers += 1
    name = f"{q.dev}#{next(q.names)}"
    eng._ctx.run(eng._tg.start_soon, _worker, eng, q, name, name=f"aengine-worker-{name}")


class _Turn:
    """A worker's hold on the loop's share: taken per slice, never held across an await."""

    __slots__ = ("held", "share", "start", "time_slice")

    def __init__(self, time_slice: float) -> None:
        self.share = loop_share()
        self.time_slice = time_slice
        self.held = False
        self.start = 0.0

    async def take(self) -> None:
        if not self.held:
            if not self.share.try_take():
                await self.share.take()
            self.held = True
            self.start = perf_counter()

    def give(self) -> None:
        """End the slice held (counted), if one is."""
        if self.held:
            self.held = False
            self.share.count(self.start, self.time_slice)
            self.share.give()


async def _worker(eng: Engine, q: DeviceQueue, name: str) -> None:
    _worker_var.set(name)
    explore = eng._explore
    # an explored run: a slice of one node; whether to yield is a choice
    turn = _Turn(eng.time_slice if explore is None else 0.0)
    try:
        while True:
            if not q.rr:
                if turn.held:  # the queue emptied while it yielded: never wait holding it
                    turn.held = False  # (the slice was counted when it ended)
                    turn.share.give()
                if q.workers - q.blocked > q.target:
                    return  # a replacement whose worker came back
                ev = q.event
                if ev is None:
                    ev = q.event = anyio.Event()
                await ev.wait()
                continue
            gt = await _run_slice(eng, q, turn)
            if turn.held and await _end_slice(q, turn, gt, explore):
                continue
            await checkpoint()
    finally:
        if turn.held:
            turn.share.give()
        q.workers -= 1


async def _run_slice(eng: Engine, q: DeviceQueue, turn: _Turn) -> GraphTask:
    """Run ``q``'s nodes until the time slice is over or the queue is empty; the last's task."""
    share = turn.share
    while True:
        gt, node, buffer = q.take()
        if gt.error is not None or gt.done:
            eng._done(gt)
        elif q.latency and await _sleep_latency(q, turn, gt):
            eng._done(gt)
        else:
            await turn.take()
            share.running = True
            try:
                step = _start(eng, q, gt, node, buffer)
            finally:
                share.running = False
            if step is not None:
                turn.give()
                await _wait(eng, q, gt, step)
            elif perf_counter() - turn.start > turn.time_slice:
                return gt
        if not q.rr:
            return gt


async def _sleep_latency(q: DeviceQueue, turn: _Turn, gt: GraphTask) -> bool:
    """A simulated device's latency, the share given back meanwhile; True if gt ended."""
    turn.give()
    await anyio.sleep(q.pause())
    return gt.error is not None or gt.done


async def _end_slice(q: DeviceQueue, turn: _Turn, gt: GraphTask, explore: Choices | None) -> bool:
    """The slice is over (NOTE [The loop's share]); True: go on at once, no checkpoint."""
    share = turn.share
    share.count(turn.start, turn.time_slice)
    if not q.rr:
        turn.held = False
        share.give()
        return False
    if explore is not None and not explore.yield_here(explore.label(gt)):
        turn.start = perf_counter()
        return True
    await yield_slice()  # holding it: NOTE [Yielding a time slice]
    if share.waiters:
        turn.held = False
        share.give()
    else:
        turn.start = perf_counter()
    return True


def _start(
    eng: Engine, q: DeviceQueue, gt: GraphTask, node: Node, buffer: list[Any]
) -> Awaitable[Any] | None:
    """Run one node of ``gt`` on this worker, as the owner would; what to await, if any."""
    t2 = _grad_enabled.set(gt.create_graph)
    step = None
    try:
        with gt.as_current():
            if q.select is None:
                step = gt.run_node(node, buffer)
            else:
                with q.select():  # cuda: this device, in this thread
                    step = gt.run_node(node, buffer)
    finally:
        _grad_enabled.reset(t2)
        if step is None:
            eng._done(gt)
    return step


async def _wait(eng: Engine, q: DeviceQueue, gt: GraphTask, step: Awaitable[Any]) -> None:
    """Wait inside a node (kernel, async hook, nested backward); replaced meanwhile."""
    cancelled = anyio.get_cancelled_exc_class()
    q.blocked += 1
    if q.workers - q.blocked < q.target:
        _spawn(eng, q)  # (the new worker starts in no graph task's context)
    try:
        with gt.as_current():
            t2 = _grad_enabled.set(gt.create_graph)
            try:
                await step
                if eng._explore is not None:
                    await eng._explore.resume()  # waiters resume in a seeded order
            finally:
                _grad_enabled.reset(t2)
    except cancelled:
        raise  # this worker is cancelled (the Engine closes)
    except BaseException:
        # recorded on gt (GraphTask.fail), KeyboardInterrupt and
        # SystemExit too: the owner raises them as they are
        pass
    finally:
        q.blocked -= 1
        eng._done(gt)
