"""In-process ranks: one group per rank, all served by one hub on one event loop.

# NOTE [The local hub]
# The ranks are tasks of one event loop; the hub holds, per collective tag,
# the contributions so far, and per (src, dst) pair the messages sent and not
# yet received.  A contribution never waits (``start``); the last one
# computes the result and wakes the waiters.  ``latency`` and ``bandwidth``
# stand for the network, one link that carries one transfer at a time: a
# result is released when the link is free, ``latency`` seconds after the
# last contribution arrived plus its size over ``bandwidth``; a message
# likewise after it was sent.  The ranks go on computing meanwhile, so
# overlap shows as on a real network (the benchmark measures it).  After
# ``abort`` every wait raises the abort's RankFailedError (NOTE [Abort]).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from typing import Any

import anyio
import numpy as np

from ._group import ProcessGroup, RankFailedError, combine, describe_error, mismatch

__all__ = ["LocalGroup", "local_groups"]


class _Slot:
    __slots__ = ("arrays", "count", "done", "error", "op", "ready_at", "result")

    def __init__(self, n: int, op: str) -> None:
        self.arrays: list[Any] = [None] * n
        self.count = 0
        self.op = op
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.ready_at = 0.0


class _Hub:
    """The state every rank's LocalGroup shares (owned here: groups call its methods)."""

    def __init__(self, world_size: int, latency: float, bandwidth: float) -> None:
        self.world_size = world_size
        self.latency = latency
        self.bandwidth = bandwidth
        #: when the simulated link is done with the transfers given to it so far
        self.link_free = 0.0
        self.slots: dict[Hashable, _Slot] = {}
        #: (src, dst, channel) -> messages not received yet, each with its arrival time
        self.boxes: dict[tuple[int, int, str], deque[tuple[float, Any]]] = {}
        self.box_events: dict[tuple[int, int, str], anyio.Event] = {}
        self.failure: RankFailedError | None = None

    def contribute(self, rank: int, tag: Hashable, array: Any, op: str) -> _Slot:
        self.check()
        slot = self.slots.get(tag)
        if slot is None:
            slot = self.slots[tag] = _Slot(self.world_size, op)
        if slot.op != op:
            slot.error = ValueError(mismatch(tag, rank, op, slot.op))
        elif slot.arrays[rank] is not None:
            raise RuntimeError(f"rank {rank} contributed twice to collective {tag!r}")
        slot.arrays[rank] = np.array(array, copy=True)
        slot.count += 1
        if slot.count == self.world_size:
            del self.slots[tag]
            if slot.error is None:
                try:
                    slot.result = combine(slot.arrays, slot.op)
                except ValueError as exc:
                    slot.error = exc
            slot.arrays = []
            slot.ready_at = self.transfer(slot.result)
            slot.done.set()
        return slot

    def post(self, src: int, dst: int, channel: str, message: Any) -> None:
        self.check()
        key = (src, dst, channel)
        self.boxes.setdefault(key, deque()).append((self.transfer(message), message))
        ev = self.box_events.pop(key, None)
        if ev is not None:
            ev.set()

    def transfer(self, payload: Any) -> float:
        """When a transfer of ``payload`` that starts now arrives (NOTE [The local hub])."""
        now = anyio.current_time()
        if self.latency == 0 and self.bandwidth == math.inf:
            return now
        size = payload.nbytes if isinstance(payload, np.ndarray) else 0
        start = max(now, self.link_free)
        self.link_free = start + size / self.bandwidth
        return self.link_free + self.latency

    async def take(self, src: int, dst: int, channel: str) -> Any:
        key = (src, dst, channel)
        while True:
            self.check()
            box = self.boxes.get(key)
            if box:
                ready_at, message = box.popleft()
                await _sleep_until(ready_at)
                self.check()
                return message
            ev = self.box_events.get(key)
            if ev is None:
                ev = self.box_events[key] = anyio.Event()
            await ev.wait()

    def abort(self, rank: int, reason: str) -> None:
        if self.failure is not None:
            return  # the first failure is the one every rank reports
        self.failure = RankFailedError(rank, reason)
        for slot in self.slots.values():
            slot.done.set()
        for ev in self.box_events.values():
            ev.set()
        self.slots.clear()
        self.box_events.clear()

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure


async def _sleep_until(t: float) -> None:
    delay = t - anyio.current_time()
    if delay > 0:
        await anyio.sleep(delay)


class _LocalWork:
    __slots__ = ("hub", "slot")

    def __init__(self, hub: _Hub, slot: _Slot) -> None:
        self.hub = hub
        self.slot = slot

    async def wait(self) -> Any:
        slot = self.slot
        await slot.done.wait()
        if slot.error is not None:
            raise slot.error
        self.hub.check()  # woken by an abort: raises
        await _sleep_until(slot.ready_at)
        self.hub.check()
        return slot.result


class LocalGroup(ProcessGroup):
    """A rank of in-process ranks (``local_groups``): tasks of one event loop."""

    def __init__(self, hub: _Hub, rank: int) -> None:
        super().__init__(rank, hub.world_size)
        self._hub = hub

    def start(self, tag: Hashable, array: Any, op: str) -> _LocalWork:
        return _LocalWork(self._hub, self._hub.contribute(self.rank, tag, array, op))

    async def send_message(self, message: Any, dst: int, channel: str) -> None:
        self._hub.post(self.rank, dst, channel, message)
        await anyio.lowlevel.checkpoint()

    async def recv_message(self, src: int, channel: str) -> Any:
        return await self._hub.take(src, self.rank, channel)

    def abort(self, exc: BaseException | str) -> None:
        if isinstance(exc, RankFailedError):
            return  # another rank's failure reached this one: already aborted
        self._hub.abort(self.rank, exc if isinstance(exc, str) else describe_error(exc))


def local_groups(
    world_size: int, *, latency: float = 0.0, bandwidth: float = math.inf
) -> list[LocalGroup]:
    """``world_size`` in-process groups, one per rank, for tasks of one event loop.

    ``latency`` (seconds) and ``bandwidth`` (bytes per second, one transfer at
    a time) delay every collective's result and every message as a network
    would, while the ranks keep computing: a test bed for overlap and for
    failures (NOTE [The local hub]).

    Example::

        >>> import anyio, aengine as ae
        >>> async def main():
        ...     groups = ae.distributed.local_groups(3)
        ...     res = {}
        ...     async def rank(g):
        ...         res[g.rank] = (await g.all_reduce(ae.tensor([1.0, g.rank]))).tolist()
        ...     async with anyio.create_task_group() as tg:
        ...         for g in groups:
        ...             tg.start_soon(rank, g)
        ...     return res[0]
        >>> anyio.run(main)
        [3.0, 3.0]
    """
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"local_groups: world_size must be an int >= 1, got {world_size!r}")
    if not latency >= 0:
        raise ValueError(f"local_groups: latency must be >= 0 seconds, got {latency!r}")
    if not bandwidth > 0:
        raise ValueError(f"local_groups: bandwidth must be > 0 bytes/s, got {bandwidth!r}")
    hub = _Hub(world_size, float(latency), float(bandwidth))
    return [LocalGroup(hub, r) for r in range(world_size)]
