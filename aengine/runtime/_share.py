"""The loop's share: one backward time slice at a time between two turns of the loop.

# NOTE [The loop's share]
# Every async backward of a thread's event loop (the drivers' slices and the
# device workers' slices) computes only while it holds this thread's
# ``LoopShare``.  Without it, N backwards in flight would each run a slice
# per turn of the loop, and a request handler or a timer woken meanwhile
# would wait behind N slices: the loop's responsiveness would fall as the
# load rises.  With it:
#
# * A backward takes the share at once when nobody holds it and nobody
#   waits (the fast path: a lone backward drains inline, as before).
#   Otherwise it waits in a FIFO; the holder, at the end of its slice,
#   hands the share to the first waiter (``give``) and then queues again if
#   it has more work.  The waiter wakes through an event, i.e. on a later
#   turn of the loop, after the loop polled for I/O: so at most about one
#   slice runs between two turns, however many backwards are in flight, and
#   the backwards take turns slice by slice (round robin; inside one
#   backward PyTorch's order is kept by its own ready queue).
# * The share is never held across an await: before a driver awaits a node
#   (an offloaded kernel, an async hook, a nested backward) it gives the
#   share back, and takes it again after.  So a nested backward never waits
#   for its parent, and kernels in threads overlap with other backwards'
#   slices.
# * A slice may start a nested backward synchronously: the first steps of
#   an ``async def`` backward or hook run inside the node, inside the slice.
#   Such a backward finds ``running`` set (a slice is executing on this
#   thread right now, and nothing else can run on the thread meanwhile, so
#   it is the enclosing one of the same task) and runs within its
#   enclosing slice, without taking the share: waiting for it would wait
#   for itself.  Once it suspends, its parent's driver gives the share back
#   before awaiting it, and the nested one takes it as any other.
# * A waiter that is cancelled leaves the queue; one cancelled after the
#   share was handed to it passes it on.
# * One share per thread: an event loop runs in one thread, and one thread
#   runs at most one loop at a time (a nested backward moved to a new
#   thread has a loop, and a share, of its own).
"""

from __future__ import annotations

import threading
from collections import deque
from time import perf_counter
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from ._choice import Choices

__all__ = ["FifoSlots", "LoopShare", "loop_share", "swap_share"]


class FifoSlots:
    """``n`` places taken in the order asked, handed on directly (no checkpoint to take a free one).

    The loop's share (one place) and an Engine's admission (``max_inflight``
    places) both use it.  A place given back goes to the first waiter
    without ever being free, so no newcomer can take it meanwhile.  A waiter
    cancelled before its turn leaves the line; one cancelled as its turn
    came passes the place on.  Not ``anyio.Semaphore``: the loop's share
    lives as long as its thread, which may run asyncio, then trio, and an
    anyio primitive belongs to the backend it was made under; this one only
    makes an ``anyio.Event`` per wait, under the running loop.
    """

    __slots__ = ("free", "waiters")

    def __init__(self, places: int) -> None:
        self.free = places
        self.waiters: deque[anyio.Event] = deque()

    def try_take(self) -> bool:
        """Take a place if one is free and nobody waits for one (no checkpoint)."""
        if self.free and not self.waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a place in FIFO order (a checkpoint, cancellable)."""
        ev = anyio.Event()
        self.waiters.append(ev)
        try:
            await ev.wait()
        except BaseException:
            if ev.is_set():  # handed to us as we were cancelled: pass it on
                self.give()
            else:
                self.waiters.remove(ev)
            raise

    def give(self) -> None:
        """Hand a place to the first waiter, else free it."""
        waiters = self.waiters
        if waiters:
            waiters.popleft().set()  # still taken: it moves to the waiter
        else:
            self.free += 1


class LoopShare(FifoSlots):
    """The right to run a backward time slice on this thread's event loop (one place)."""

    __slots__ = ("overran", "running", "slices")

    #: the seeded choices of the explored run on this thread (``SeededShare``),
    #: None otherwise: read once per backward, where the share is fetched anyway
    choices: Choices | None = None

    def __init__(self) -> None:
        super().__init__(1)
        #: True while a slice executes (synchronously) on this thread
        self.running = False
        #: slices run; slices longer than twice their time slice
        self.slices = 0
        self.overran = 0

    @property
    def held(self) -> bool:
        """Whether a backward holds the share."""
        return not self.free

    def count(self, start: float, time_slice: float) -> None:
        """Record a slice that began at ``start`` (perf_counter)."""
        self.slices += 1
        if perf_counter() - start > 2 * time_slice:
            self.overran += 1

    def hand_over(self, start: float, time_slice: float) -> None:
        """End a slice that began at ``start``: record it and give the share (``count``, ``give``)."""
        self.slices += 1
        if perf_counter() - start > 2 * time_slice:
            self.overran += 1
        if self.waiters:
            self.give()
        else:  # (``give`` without waiters, a call less on every backward's path)
            self.free += 1


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.share = LoopShare()


_here = _PerThread()


def loop_share() -> LoopShare:
    """This thread's share (NOTE [The loop's share])."""
    return _here.share


def swap_share(share: LoopShare) -> LoopShare:
    """Make ``share`` this thread's share; return the one it replaces.

    For ``ae.testing``, whose runs hand the share on in a seeded order
    (NOTE [Choice points] in _choice.py); called between two runs of a loop.
    """
    old = _here.share
    _here.share = share
    return old
