"""The seeded choice points of an explored run (``ae.testing``).

# NOTE [Choice points]
# Every scheduling decision that PyTorch's semantics leave free goes through
# one object, ``Choices``, while ``ae.testing`` explores a run; outside
# exploration the runtime takes its fastest policy and never asks.  The
# decisions:
#
# * ``pick``: which of several candidates goes next: the graph task a device
#   worker serves (``_SeededQueue.take`` in _engine.py), the waiter that
#   gets a place of the loop's share or of an Engine's admission
#   (``SeededSlots.give`` in _seeded.py).
# * ``yield_here``: whether a backward lets the loop run at a node boundary
#   (the owner: ``Explored.dispatch`` in _seeded.py; a device worker: the
#   end of its one-node slice) and whether a short backward yields at its
#   end.
# * ``delay``: how many turns of the loop an offloaded kernel takes, run on
#   the loop, not in a thread (``Explored.kernel``), so kernels complete in
#   a seeded order; how many a backward that waited inside a node (an async
#   hook, an async backward, a nested backward) lets pass before it goes on
#   (``resume``), so waiters resume in a seeded order; jitter on a ``sim``
#   device's latency.
#
# Every answer is appended to ``log``; a schedule string is that log with
# the seed and backend, and a replay answers from the log instead of the
# generator, so it reproduces the run exactly as long as the code is the
# same (a recorded answer that does not fit its question ends the run with
# ``ScheduleMismatch``).
#
# PyTorch's order inside one graph task is never a choice: a node held back
# at a boundary goes back to the front of its own ready queue
# (``ReadyQueue.push_front``), so it runs next in that graph task.
#
# How the runtime knows: ``ae.testing`` installs a ``SeededShare`` as the
# thread's loop share for the run, and the drivers and Engines read its
# ``choices`` where they fetch the share anyway.  Cost when exploration is
# off: one attribute read and one test per backward; none per node.  When
# on, every node takes the general path (the trace's node hook): slower,
# deliberately, since each node boundary becomes a choice point.
"""

from __future__ import annotations

import base64
import random
import zlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

import anyio
from anyio.lowlevel import checkpoint

from ..core import GraphTask, Node

__all__ = [
    "Choices",
    "Faults",
    "InjectedFault",
    "ScheduleMismatch",
    "encode_log",
    "decode_log",
]


class ScheduleMismatch(ValueError):
    """A replayed schedule does not fit the code it is replayed on (it changed)."""


class InjectedFault(RuntimeError):
    """The error ``ae.testing`` raises from a hook at a choice point (``Faults(hook_error=...)``)."""


@dataclass(frozen=True)
class Faults:
    """Faults injected at choice points of an explored run, each with a probability per point.

    * ``cancel``: cancel the explored function (every task of it) at that
      point; the run passes if it ends by that cancellation and nothing else
      (no hang, no other error, no crash of the loop).
    * ``hook_error``: raise ``InjectedFault`` at a node boundary of a
      backward, as a failing hook would: the backward fails with it and
      leaves ``.grad`` as it was; the explored function must handle it.
    * ``delay``: hold a kernel or a waiter for ``delay_seconds`` of (virtual)
      time.

    Example::

        >>> import aengine as ae
        >>> ae.testing.Faults(cancel=0.01).cancel
        0.01
    """

    cancel: float = 0.0
    hook_error: float = 0.0
    delay: float = 0.0
    delay_seconds: float = 0.001

    def __post_init__(self) -> None:
        for name in ("cancel", "hook_error", "delay"):
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
                raise ValueError(f"Faults.{name} is a probability in [0, 1], got {p!r}")
        d = self.delay_seconds
        if isinstance(d, bool) or not isinstance(d, int | float) or not d >= 0:
            raise ValueError(f"Faults.delay_seconds must be >= 0 seconds, got {d!r}")


class Choices:
    """The seeded source of every scheduling choice of one explored run (NOTE [Choice points]).

    Each question has ``n`` answers, ``0 .. n - 1``; 0 is always what the
    usual policy does (the first waiter, no yield, no delay).  ``pct``
    strategy: a random priority per backward, lowered for the running one
    at ``pct_depth - 1`` change points among the first ``pct_steps``
    boundary questions.
    """

    def __init__(
        self,
        seed: int,
        strategy: str = "random",
        replay: Sequence[int] | None = None,
        faults: Faults | None = None,
        pct_depth: int = 3,
        pct_steps: int = 200,
    ) -> None:
        self.seed = seed
        self.strategy = strategy
        self.rng = random.Random(seed)
        self.log: list[int] = []
        self._replay = replay
        #: a replayed answer that did not fit (the run is cancelled, then this raised)
        self.mismatch: ScheduleMismatch | None = None
        self.faults = faults
        #: the node order: (backward's label, node name, where it ran)
        self.trace: list[tuple[str, str, str]] = []
        #: GraphTask.id -> label (ids, not the tasks: a finished run keeps no graph alive)
        self._labels: dict[int, str] = {}
        #: set by the runner: cancels the explored function (Faults.cancel)
        self.cancel: Callable[[], None] | None = None
        # PCT: a priority per actor (first seen, seeded), lowered at change points
        self._prio: dict[Hashable, float] = {}
        self._changes = set(self.rng.sample(range(pct_steps), min(pct_depth - 1, pct_steps)))
        self._steps = 0
        self._low = 0.0

    # -- the answers --------------------------------------------------------------------------
    def _answer(self, n: int, fresh: Callable[[], int]) -> int:
        """The next answer (of ``n``): replayed from the log, else ``fresh()``; recorded."""
        i = len(self.log)
        rep = self._replay
        if rep is not None:
            v = rep[i] if i < len(rep) else 0
            if not 0 <= v < n:
                # raised by the runner once the run ended: raising here would
                # break whichever engine task asked (a worker, a hand-off)
                if self.mismatch is None:
                    self.mismatch = ScheduleMismatch(
                        f"choice {i} of the replayed schedule is {v}, but this run offers {n} "
                        "answers there: the code changed since the schedule was recorded; run "
                        "ae.testing.explore again to get a schedule of this code"
                    )
                    if self.cancel is not None:
                        self.cancel()
                v = 0
        else:
            v = fresh()
        self.log.append(v)
        return v

    def pick(self, keys: Sequence[Hashable]) -> int:
        """The index of the candidate that goes next (0: the first, the default policy's)."""
        n = len(keys)
        if n < 2:
            return 0
        if self.strategy == "pct":
            return self._answer(n, lambda: self._pct_pick(keys))
        return self._answer(n, lambda: self.rng.randrange(n))

    def yield_here(self, key: Hashable = None) -> bool:
        """Whether to let the loop run here (a node boundary, the end of a backward)."""
        if self.strategy == "pct":
            return self._answer(2, lambda: self._pct_change(key)) == 1
        return self._answer(2, lambda: int(self.rng.random() < 0.25)) == 1

    def delay(self, most: int) -> int:
        """How many turns of the loop to wait (0 .. most)."""
        return self._answer(most + 1, lambda: self.rng.randrange(most + 1))

    def fault(self, p: float) -> bool:
        """Whether to inject a fault of probability ``p`` here (recorded like any choice)."""
        if not p:
            return False
        return self._answer(2, lambda: int(self.rng.random() < p)) == 1

    # -- PCT (probabilistic concurrency testing): random priorities, d - 1 change points ------
    def _priority(self, key: Hashable) -> float:
        p = self._prio.get(key)
        if p is None:
            p = self._prio[key] = 1.0 + self.rng.random()
        return p

    def _pct_pick(self, keys: Sequence[Hashable]) -> int:
        prios = [self._priority(k) for k in keys]
        return prios.index(max(prios))

    def _pct_change(self, key: Hashable) -> int:
        self._steps += 1
        if self._steps in self._changes:
            self._low -= 1.0
            self._prio[key] = self._low  # the running actor drops below every other
            return 1
        return 0

    # -- the trace ----------------------------------------------------------------------------
    def label(self, gt: GraphTask) -> str:
        """A backward's name in this run's trace: ``b0``, ``b1``... in the order they started."""
        name = self._labels.get(gt.id)
        if name is None:
            name = self._labels[gt.id] = f"b{len(self._labels)}"
        return name

    def node_hook(self, gt: GraphTask, where: Callable[[], str]) -> Callable[[Node], None]:
        """The node hook that records ``gt``'s nodes (and sends every node to the general path)."""
        label = self.label(gt)
        trace = self.trace

        def record(node: Node) -> None:
            trace.append((label, node.name(), where()))

        return record

    # -- the drivers' questions ---------------------------------------------------------------
    async def turn(self, key: Hashable) -> None:
        """A node boundary where the driver lets the loop run: a checkpoint, or a fault."""
        faults = self.faults
        if faults is not None:
            if self.fault(faults.cancel) and self.cancel is not None:
                self.cancel()
            if self.fault(faults.hook_error):
                raise InjectedFault(f"a fault injected at choice {len(self.log) - 1}")
            if self.fault(faults.delay):
                await anyio.sleep(faults.delay_seconds)
                return
        await checkpoint()

    async def resume(self) -> None:
        """After a wait inside a node: go on now, or after other waiters (0 to 2 turns, a delay).

        The order in which backwards waiting on user code (async hooks, async
        backward functions, nested backwards) or on kernels resume.
        """
        faults = self.faults
        if faults is not None and self.fault(faults.delay):
            await anyio.sleep(faults.delay_seconds)
        for _ in range(self.delay(2)):
            await checkpoint()

    async def end_checkpoint(self) -> None:
        """The end of a backward that never yielded: a seeded checkpoint or yield."""
        if self.yield_here("end"):
            await checkpoint()
            await checkpoint()
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()


# -- schedule strings ---------------------------------------------------------------------------


def encode_log(log: Iterable[int]) -> str:
    """The answers of a run as a short string (varints, deflated, base64 for URLs)."""
    out = bytearray()
    for v in log:
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return base64.urlsafe_b64encode(zlib.compress(bytes(out), 9)).decode().rstrip("=")


def decode_log(text: str) -> list[int]:
    """The answers written by ``encode_log`` (ValueError when the text is not one)."""
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except Exception as exc:
        raise ValueError(f"not a schedule's choices: {text[:40]!r} ({exc})") from None
    log: list[int] = []
    v = shift = 0
    for b in raw:
        v |= (b & 0x7F) << shift
        if b & 0x80:
            shift += 7
        else:
            log.append(v)
            v = shift = 0
    return log
