"""The ready queue of one device of an Engine, served by its workers.

See NOTE [Device queues] in _engine.py: one ReadyQueue per graph task with
ready nodes on the device, the graph tasks served in turn; an explored run's
queue picks the graph task served next by a seeded choice.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from ..core import GraphTask, Node, ReadyQueue
from ..tensors import Device
from ._choice import Choices

__all__ = ["DeviceQueue", "SeededQueue"]


class DeviceQueue:
    """The ready queue of one device of an Engine (see NOTE [Device queues])."""

    __slots__ = (
        "blocked",
        "dev",
        "event",
        "inline",
        "latency",
        "limiter",
        "names",
        "queues",
        "rr",
        "select",
        "target",
        "workers",
    )

    def __init__(self, dev: Device, target: int, threads: int, latency: float) -> None:
        self.dev = dev
        #: one ReadyQueue per graph task with ready nodes here, served in turn
        self.queues: dict[GraphTask, ReadyQueue] = {}
        self.rr: deque[GraphTask] = deque()
        self.event: anyio.Event | None = None
        self.workers = 0
        self.blocked = 0
        self.target = target
        self.limiter = anyio.CapacityLimiter(threads)
        self.latency = latency
        self.names = itertools.count()
        self.select: Callable[[], Any] | None = None
        #: kernels launched inline (NOTE [Kernel offload policy] in _offload.py)
        self.inline = bool(dev.backend.launches_async)
        if dev.type == "cuda":
            select = getattr(dev.backend, "device_context", None)
            if select is not None:
                index = dev.index or 0
                self.select = lambda: select(index)

    def put(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        q = self.queues.get(gt)
        if q is None:
            q = self.queues[gt] = ReadyQueue()
            self.rr.append(gt)
        q.push(node, buffer)
        ev = self.event
        if ev is not None:
            self.event = None
            ev.set()

    def take(self) -> tuple[GraphTask, Node, list[Any]]:
        gt = self.rr.popleft()
        q = self.queues[gt]
        node, buffer = q.pop()
        if len(q):
            self.rr.append(gt)
        else:
            del self.queues[gt]
        return gt, node, buffer

    def discard(self, gt: GraphTask) -> int:
        q = self.queues.pop(gt, None)
        if q is None:
            return 0
        self.rr.remove(gt)
        return len(q)

    def pause(self) -> float:
        """Seconds a node waits before it runs here (a ``sim`` device's latency)."""
        return self.latency


class SeededQueue(DeviceQueue):
    """A device queue of an explored run: the graph task served next is a seeded choice.

    See NOTE [Choice points] in _choice.py.  Inside one graph task the order
    is its own heap's, as always.
    """

    __slots__ = ("choices",)

    def __init__(
        self, dev: Device, target: int, threads: int, latency: float, choices: Choices
    ) -> None:
        super().__init__(dev, target, threads, latency)
        self.choices = choices

    def take(self) -> tuple[GraphTask, Node, list[Any]]:
        rr = self.rr
        i = self.choices.pick([self.choices.label(gt) for gt in rr])
        if i:
            rr.rotate(-i)  # the chosen one first; the others keep their turns
        return super().take()

    def pause(self) -> float:
        # jitter: up to half the latency more, in quarters
        return self.latency * (1.0 + self.choices.delay(2) / 4) if self.latency else 0.0
