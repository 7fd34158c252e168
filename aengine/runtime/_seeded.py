"""The runtime's seeded stand-ins while ``ae.testing`` explores a run.

The loop's share and admission places handed to a seeded waiter, and the
scheduler a backward of an explored run attaches (NOTE [Choice points] in
_choice.py).  None of them exists outside an explored run.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from ..core import GraphTask, Node
from ._choice import Choices
from ._share import FifoSlots, LoopShare

__all__ = ["Explored", "SeededShare", "SeededSlots"]


def _give_seeded(slots: FifoSlots, choices: Choices) -> bool:
    """Hand a place to a seeded waiter; False when the first one gets it (as FIFO would)."""
    waiters = slots.waiters
    if len(waiters) < 2:
        return False
    i = choices.pick(range(len(waiters)))
    if not i:
        return False
    ev = waiters[i]
    del waiters[i]
    ev.set()  # still taken: it moves to that waiter
    return True


class SeededSlots(FifoSlots):
    """``FifoSlots`` whose freed place goes to a seeded waiter, not always the first."""

    __slots__ = ("choices",)

    def __init__(self, places: int, choices: Choices) -> None:
        super().__init__(places)
        self.choices = choices

    def give(self) -> None:
        if not _give_seeded(self, self.choices):
            super().give()


class SeededShare(LoopShare):
    """The loop's share of an explored run: a freed share goes to a seeded waiter.

    Its ``choices`` tell the drivers and Engines of the run that they are
    explored (``LoopShare.choices`` is None).
    """

    __slots__ = ("choices",)
    choices: Choices

    def __init__(self, choices: Choices) -> None:
        super().__init__()
        self.choices = choices

    def give(self) -> None:
        if not _give_seeded(self, self.choices):
            super().give()


class Explored:
    """The scheduler a backward of an explored run attaches: the real one, with choice points.

    Its cpu nodes run in the awaiting task (never in a compute thread); at
    each of them the seeded source may let the loop run first.  Other nodes
    go to the real scheduler (the Engine's device queues).  Offloaded
    kernels run on the loop, completing at a boundary (NOTE [Choice points]).
    """

    __slots__ = ("choices", "home", "key", "offload_min", "real")

    def __init__(self, real: Any, choices: Choices, key: Hashable) -> None:
        self.real = real
        self.choices = choices
        self.key = key
        self.home = real.home
        self.offload_min = real.offload_min

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        self.real.push(gt, node, buffer)

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        dev = node.dev
        if dev is not None and dev is not self.home:
            return self.real.dispatch(gt, node, buffer)
        if self.choices.yield_here(self.key):
            gt.keep_first(node, buffer)  # it stays next in its graph task
            return self.choices.turn(self.key)
        return False

    def busy(self, gt: GraphTask) -> bool:
        return bool(self.real.busy(gt))

    def release(self, gt: GraphTask) -> None:
        self.real.release(gt)

    async def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        await self.choices.kernel_turns()  # kernels complete in a seeded order
        with gt.as_current():
            return node.apply(inputs, gt.create_graph)
