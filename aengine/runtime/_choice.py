"""The seeded choice points of an explored run (``ae.testing``).

# NOTE [Choice points]
# Every scheduling decision that PyTorch's semantics leave free goes through
# one object, ``Choices``, while ``ae.testing`` explores a run; outside
# exploration the runtime takes its fastest policy and never asks.  The
# questions (``Step.kind``):
#
# * boundaries ("node", "end", "resume", "kernel", "thread", "choice"):
#   whether the running task lets others run here, and how much virtual time
#   its compute took: a node boundary of a backward (the owner:
#   ``Explored.dispatch`` in _seeded.py; a device worker: the end of its
#   one-node slice), the end of every ``await`` of an engine entry point
#   (even one that finished without yielding), the resumption after a wait
#   inside a node, an offloaded kernel's completion, the start of each
#   segment of a compute thread (NOTE [Threads under the explorer]), and
#   ``ae.testing.choice()`` in user code.  The answers (``boundary``): go on
#   (0, the usual policy); yield to the tasks that are ready; or let the
#   clock jump to one of the pending timers due within ``compute_time``
#   (NOTE [Compute takes virtual time]) and yield.
# * ``pick``: which of several candidates goes next: the graph task a device
#   worker serves (``SeededQueue.take`` in _queues.py), the waiter that
#   gets a place of the loop's share or of an Engine's admission
#   (``SeededSlots.give`` in _seeded.py).
# * ``delay``: jitter on a ``sim`` device's latency.
# * faults (``Faults``, ``buggify``): drawn at boundaries.
#
# Every answer is appended to ``log``; a schedule string is that log with
# the seed and backend, and a replay answers from the log instead of the
# generator (answers past its end are 0, the usual policy), so it
# reproduces the run exactly as long as the code is the same (a recorded
# answer that does not fit its question ends the run with
# ``ScheduleMismatch``).
#
# Equivalent answers are pruned (never asked): a yield when no other task
# is ready and no timer falls due within ``compute_time`` changes nothing,
# so that boundary is no question at all; "yield" is not offered without a
# ready task (it would equal "go on"), nor a timer jump without a timer.
# Exhaustive search and shrinking rely on it: fewer questions, each of whose
# answers leads somewhere else.
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

# NOTE [Compute takes virtual time]
# Time is virtual in an explored run, and compute takes none of it by
# itself: a backward that runs for 3 ms in a real run would take 0 ms, so a
# timer due 1 ms later would never expire in the middle of it, and a race
# that needs it (a second request arriving while the first one computes)
# could never show.  So at every boundary where the running task may yield,
# the explorer may also say that the compute since the last one took long
# enough for the next pending timer (or the one after...) to fall due,
# provided it is due within ``compute_time`` seconds: the clock jumps to
# that deadline (``LoopView.jump_to``) and the task yields so that the
# woken tasks run first, as they would in a real run whose backward took
# that long.  Jumping to a deadline rather than by a drawn duration keeps
# the answers few and meaningful (how many timers expire meanwhile) and the
# runs replayable.
"""

from __future__ import annotations

import base64
import contextvars
import os
import random
import sys
import zlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import anyio
from anyio.lowlevel import checkpoint, checkpoint_if_cancelled

from ..core import GraphTask, Node

__all__ = [
    "Choices",
    "Faults",
    "InjectedFault",
    "LoopView",
    "ScheduleMismatch",
    "Step",
    "encode_log",
    "decode_log",
]

T = TypeVar("T")

#: the kinds of question that count as preemptions when answered otherwise than 0
PREEMPTING = frozenset({"node", "end", "resume", "kernel", "thread", "choice", "pick"})
#: a boundary's answers: go on, yield, or jump the clock to a pending timer and yield
GO, YIELD = "go on", "yield"


class ScheduleMismatch(ValueError):
    """A replayed schedule does not fit the code it is replayed on (it changed)."""


class InjectedFault(RuntimeError):
    """The error ``ae.testing`` raises from a hook at a choice point (``Faults(hook_error=...)``)."""


class LoopView(Protocol):
    """What the explorer needs to see of the running event loop (``ae.testing`` gives one).

    NOTE [Compute takes virtual time], NOTE [Choice points]: whether another
    task is ready, the pending timers, the virtual clock and its jumps.
    """

    def others_ready(self) -> bool: ...

    def deadlines(self, horizon: float) -> list[float]: ...

    def now(self) -> float: ...

    def jump_to(self, when: float) -> None: ...

    async def yield_turns(self) -> None: ...


class Step(NamedTuple):
    """One question of a run: its kind, the task that asked, where, how many answers, the answer."""

    kind: str
    task: str
    where: str
    n: int
    answer: int
    meaning: str


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


_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the aengine package
_LIBS = (
    *tuple(
        os.sep + name + os.sep for name in ("anyio", "asyncio", "trio", "sniffio", "contextlib")
    ),
    "contextlib.py",
    "threading.py",
)
#: the event loops' functions that run a task's step: a task's frames end there
_RUNNERS = frozenset({"_run", "unrolled_run", "_run_once", "run_forever", "run"})


def user_frame(depth: int = 2) -> str:
    """``file:line (function)`` of the innermost caller outside aengine and the async libraries.

    Only the running task's own frames count: at its first frame of the
    event loop (the loop's callback runner) the task is aengine's (a device
    worker): its outermost aengine function is named instead.
    """
    f: Any = sys._getframe(depth)
    ours = "?"
    while f is not None:
        code = f.f_code
        name = code.co_filename
        if name.startswith(_HERE):
            ours = f"(aengine: {code.co_name})"
        elif any(lib in name for lib in _LIBS):
            if code.co_name in _RUNNERS:
                return ours
        else:
            return f"{os.path.basename(name)}:{f.f_lineno} ({code.co_name})"
        f = f.f_back
    return ours


class Choices:
    """The seeded source of every scheduling choice of one explored run (NOTE [Choice points]).

    Each question has ``n`` answers, ``0 .. n - 1``; 0 is always what the
    usual policy does (go on, the first waiter, no delay).  Strategies:

    * ``random``: a boundary yields with probability 1/4 (to one of its
      yielding answers, uniformly), a pick is uniform.
    * ``pct`` (probabilistic concurrency testing, Burckhardt et al., ASPLOS
      2010): every candidate of a pick (a backward, a waiter's place) gets
      a random priority when first seen, and a pick takes the highest;
      ``pct_depth - 1`` boundary steps, drawn uniformly and distinct among
      the first ``pct_steps``, are change points, where the running task is
      preempted (the clock jumps to the next timer due, if any, and it
      yields) and its backward's priority drops below every other; every
      other boundary goes on.
    * ``exhaustive`` and replays: the answers of ``replay``, then 0.

    ``lenient``: a replayed answer out of range is taken as 0 instead of a
    mismatch (shrinking replays edited schedules).
    """

    def __init__(
        self,
        seed: int,
        strategy: str = "random",
        replay: Sequence[int] | None = None,
        faults: Faults | None = None,
        pct_depth: int = 3,
        pct_steps: int = 200,
        *,
        compute_time: float = 0.01,
        lenient: bool = False,
        record: bool = True,
    ) -> None:
        self.seed = seed
        self.strategy = strategy
        self.rng = random.Random(seed)
        self.log: list[int] = []
        #: every question asked, with where and by whom (``record``)
        self.steps: list[Step] = []
        self._record = record
        self._replay = replay
        self._lenient = lenient
        #: a replayed answer that did not fit (the run is cancelled, then this raised)
        self.mismatch: ScheduleMismatch | None = None
        self.faults = faults
        self.compute_time = compute_time
        #: the running loop (set by ``ae.testing`` as the run starts)
        self.loop: LoopView | None = None
        #: the node order: (backward's label, node name, where it ran)
        self.trace: list[tuple[str, str, str]] = []
        #: GraphTask.id -> label (ids, not the tasks: a finished run keeps no graph alive)
        self._labels: dict[int, str] = {}
        #: task id -> its name in this run's steps (``worker#1``)
        self._tasks: dict[int, str] = {}
        #: set by the runner: cancels the explored function (Faults.cancel)
        self.cancel: Callable[[], None] | None = None
        #: runs compute threads one segment at a time (NOTE [Threads under the explorer])
        self.threads: Any = None
        #: virtual seconds a run may take before it counts as stuck (set by ``ae.testing``)
        self.run_limit = 600.0
        # PCT: a priority per task (first seen, seeded), lowered at change points
        self._prio: dict[Hashable, float] = {}
        self.pct_depth = pct_depth
        self.pct_steps = pct_steps
        self._changes = set(self.rng.sample(range(pct_steps), min(pct_depth - 1, pct_steps)))
        self.boundaries = 0  # boundary questions asked (PCT's steps)
        self._low = 0.0

    # -- the answers --------------------------------------------------------------------------
    def _answer(self, kind: str, n: int, fresh: Callable[[], int], meaning: Any = None) -> int:
        """The next answer (of ``n``): replayed from the log, else ``fresh()``; recorded."""
        i = len(self.log)
        rep = self._replay
        if rep is not None:
            v = rep[i] if i < len(rep) else 0
            if not 0 <= v < n:
                v = 0
                if not self._lenient and self.mismatch is None:
                    # raised by the runner once the run ended: raising here would
                    # break whichever engine task asked (a worker, a hand-off)
                    self.mismatch = ScheduleMismatch(
                        f"choice {i} of the replayed schedule is {rep[i]}, but this run offers "
                        f"{n} answers there: the code changed since the schedule was recorded; "
                        "run ae.testing.explore again to get a schedule of this code"
                    )
                    if self.cancel is not None:
                        self.cancel()
        else:
            v = fresh()
        self.log.append(v)
        if self._record:
            shown = meaning(v) if callable(meaning) else str(v)
            self.steps.append(Step(kind, self.task_name(), user_frame(3), n, v, shown))
        return v

    def task_name(self) -> str:
        """The running task's name in this run: its function's name and ``#k`` by first question."""
        try:
            info = anyio.get_current_task()
        except Exception:  # a compute thread of the explorer (no task)
            return "thread"
        name = self._tasks.get(info.id)
        if name is None:
            base = (info.name or "task").rsplit(".", 1)[-1].removeprefix("aengine-")
            name = f"{base}#{len(self._tasks)}" if "#" not in base else base
            if name in self._tasks.values():
                name = f"{name}.{len(self._tasks)}"
            self._tasks[info.id] = name
        return name

    def pick(self, keys: Sequence[Hashable]) -> int:
        """The index of the candidate that goes next (0: the first, the default policy's)."""
        n = len(keys)
        if n < 2:
            return 0
        if self.strategy == "pct":
            return self._answer("pick", n, lambda: self._pct_pick(keys), lambda v: str(keys[v]))
        if self.strategy == "random":
            return self._answer("pick", n, lambda: self.rng.randrange(n), lambda v: str(keys[v]))
        return self._answer("pick", n, lambda: 0, lambda v: str(keys[v]))

    def user_pick(self, n: int, name: str, shown: Sequence[str]) -> int:
        """``ae.testing.pick``: one of ``n`` options (0 unless the strategy draws)."""
        fresh = (lambda: self.rng.randrange(n)) if self.strategy == "random" else lambda: 0
        return self._answer("action", n, fresh, lambda v: f"{name}: {shown[v]}")

    def boundary(self, kind: str, label: str = "", key: Hashable = None) -> bool:
        """A boundary (NOTE [Choice points]): True to yield; the clock may have jumped already.

        Not asked (False) when nothing else could run and no timer is due
        within ``compute_time``.
        """
        loop = self.loop
        if loop is None:
            return False
        others = loop.others_ready()
        due = loop.deadlines(self.compute_time) if self.compute_time > 0 else []
        options: list[float | str] = [GO]
        if others:
            options.append(YIELD)
        options.extend(due)
        if len(options) == 1:
            return False
        self.boundaries += 1
        now = loop.now()

        def meaning(v: int) -> str:
            o = options[v]
            said = o if isinstance(o, str) else f"compute took {(o - now) * 1e3:.3g} ms, yield"
            return f"{label}: {said}" if label else said

        v = self._answer(kind, len(options), lambda: self._fresh_boundary(options, key), meaning)
        chosen = options[v]
        if isinstance(chosen, float):
            loop.jump_to(chosen)
        return v != 0

    def _fresh_boundary(self, options: list[float | str], key: Hashable) -> int:
        if self.strategy == "random":
            return 1 + self.rng.randrange(len(options) - 1) if self.rng.random() < 0.25 else 0
        if self.strategy == "pct" and self._pct_change(key):
            # preempted: descheduled until the next event, the first timer due if
            # any (the ready tasks run before it too), else the ready tasks
            return 2 if len(options) > 2 and options[1] == YIELD else 1
        return 0

    def yield_here(self, key: Hashable = None) -> bool:
        """Whether to let the loop run at a node boundary (the clock may jump first)."""
        return self.boundary("node", key=key)

    def delay(self, most: int) -> int:
        """How many quarters of jitter (0 .. most) a ``sim`` device's latency takes."""
        fresh = (lambda: self.rng.randrange(most + 1)) if self.strategy == "random" else lambda: 0
        return self._answer("latency", most + 1, fresh, lambda v: f"+{25 * v}% latency")

    def fault(self, p: float, kind: str = "fault") -> bool:
        """Whether to inject a fault of probability ``p`` here (recorded like any choice)."""
        if not p and kind == "fault":
            return False
        fresh = (lambda: int(self.rng.random() < p)) if self.strategy != "exhaustive" else lambda: 0
        return self._answer(kind, 2, fresh, lambda v: "inject" if v else "no") == 1

    # -- PCT (probabilistic concurrency testing): random priorities, d - 1 change points ------
    def _priority(self, key: Hashable) -> float:
        p = self._prio.get(key)
        if p is None:
            p = self._prio[key] = 1.0 + self.rng.random()
        return p

    def _pct_pick(self, keys: Sequence[Hashable]) -> int:
        prios = [self._priority(k) for k in keys]
        return prios.index(max(prios))

    def _pct_change(self, key: Hashable) -> bool:
        """Whether this boundary is a change point (then ``key``'s priority drops)."""
        if self.boundaries - 1 not in self._changes:
            return False
        self._low -= 1.0
        self._prio[key if key is not None else self.task_name()] = self._low  # below all
        return True

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

    def preemptions(self) -> int:
        """How many answers of this run's preempting questions were not the usual policy's."""
        return sum(1 for s in self.steps if s.answer and s.kind in PREEMPTING)

    # -- the drivers' questions ---------------------------------------------------------------
    async def yield_turns(self) -> None:
        """Yield so that every task woken meanwhile (a timer) runs before this one goes on."""
        loop = self.loop
        if loop is None:
            await checkpoint()
        else:
            await loop.yield_turns()

    async def turn(self, key: Hashable = None) -> None:
        """A node boundary where the driver lets the loop run: a yield, or a fault."""
        faults = self.faults
        if faults is not None:
            if self.fault(faults.cancel) and self.cancel is not None:
                self.cancel()
            if self.fault(faults.hook_error):
                raise InjectedFault(f"a fault injected at choice {len(self.log) - 1}")
            if self.fault(faults.delay):
                await anyio.sleep(faults.delay_seconds)
                return
        await self.yield_turns()

    async def resume(self) -> None:
        """After a wait inside a node (an async hook, an async backward, a nested backward).

        The order in which backwards waiting on user code resume: a boundary.
        """
        faults = self.faults
        if faults is not None and self.fault(faults.delay):
            await anyio.sleep(faults.delay_seconds)
        if self.boundary("resume"):
            await self.yield_turns()

    async def end_checkpoint(self) -> None:
        """The end of a backward that never yielded: a boundary, else a cancellation check."""
        if self.boundary("end"):
            await self.yield_turns()
        else:
            await checkpoint_if_cancelled()

    async def kernel_turns(self) -> None:
        """An offloaded kernel completes after the other tasks ran, or at once: a boundary."""
        faults = self.faults
        if faults is not None and self.fault(faults.delay):
            await anyio.sleep(faults.delay_seconds)
        if self.boundary("kernel"):
            await self.yield_turns()

    async def user_choice(self, name: str) -> None:
        """``ae.testing.choice(name)`` in a task: a boundary."""
        if self.boundary("choice", name):
            await self.yield_turns()

    async def in_thread(self, call: Callable[[], T]) -> T:
        """Run ``call`` as a compute thread under the explorer (NOTE [Threads under the explorer])."""
        if self.threads is None:
            await checkpoint()
            return contextvars.copy_context().run(call)
        result: T = await self.threads(self, call)
        return result


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
