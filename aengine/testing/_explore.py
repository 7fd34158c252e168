"""``explore`` and ``replay``: run an async function under seeded, replayable schedules.

# NOTE [Deterministic runs]
# One run is deterministic when every source of order in it is fixed by the
# seed:
#
# * aengine's own choices come from ``Choices`` (NOTE [Choice points] in
#   aengine/runtime/_choice.py); no compute thread runs (kernels and
#   ``engine.run`` stay on the loop) and no slice ends by the wall clock.
# * Time is virtual, so simulated latencies and timeouts cost no wall time
#   and fire in an order fixed by the program: trio's ``MockClock`` with
#   ``autojump_threshold=0``; for asyncio the ``looptime`` library's event
#   loop (a mixin on asyncio's own loop class that keeps a fake clock and
#   jumps it to the next timer when the loop is idle; well kept, and not a
#   loop of our own: asyncio's scheduling is untouched).
# * trio reorders each batch of runnable tasks with a module-level
#   ``random.Random`` (``trio._core._run._r``), and a batch's own order
#   depends on which timer of a tie fires first (trio breaks deadline ties
#   by object address).  A run seeds that generator with its seed and turns
#   on trio's deterministic mode (``_ALLOW_DETERMINISTIC_SCHEDULING``: each
#   batch is sorted by task creation order, then shuffled by the seeded
#   generator), and restores both afterwards: what trio's own Hypothesis
#   plugin does.  Private names of trio: if a version lacks them, trio runs
#   are refused with a clear error rather than being silently unreproducible.
#   asyncio's ready queue is FIFO: deterministic already.
"""

from __future__ import annotations

import inspect
import numbers
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..runtime._choice import Choices, Faults, decode_log, encode_log
from ..runtime._loop import loop_here
from ..runtime._seeded import SeededShare
from ..runtime._share import loop_share, swap_share

__all__ = ["ExploreReport", "ScheduleFailure", "explore", "replay", "trace"]

BACKENDS = ("asyncio", "trio")
STRATEGIES = ("random", "pct")
#: schedule strings start with this (its version)
PREFIX = "ae1"


class _Last(threading.local):
    """The choices of the last run started in this thread (for ``trace()``)."""

    def __init__(self) -> None:
        self.choices: Choices | None = None


_last = _Last()


class ScheduleFailure(AssertionError):
    """An explored run failed: ``.seed``, ``.backend``, ``.schedule``; the run's error is the cause.

    Its message shows the call that replays the run exactly.

    Example::

        >>> import aengine as ae
        >>> async def fails():
        ...     raise ValueError("boom")
        >>> try:
        ...     ae.testing.explore(fails, seeds=1, backend="trio")
        ... except ae.testing.ScheduleFailure as failure:
        ...     print(failure.seed, failure.backend, type(failure.__cause__).__name__)
        0 trio ValueError
    """

    def __init__(self, seed: int, backend: str, schedule: str, error: BaseException) -> None:
        self.seed = seed
        self.backend = backend
        self.schedule = schedule
        super().__init__(
            f"the explored function failed with seed {seed} under {backend}: "
            f"{type(error).__name__}: {error}\n"
            f"replay this run exactly with:\n"
            f"    ae.testing.replay(fn, {schedule!r})\n"
            f"or, for a test marked aengine_explore:\n"
            f"    pytest --aengine-replay='{schedule}' <the test>"
        )


@dataclass(frozen=True)
class ExploreReport:
    """What ``explore`` ran: ``runs``, ``distinct_schedules`` (distinct node orders), the traces.

    ``traces[(backend, seed)]`` is the node order of that run: one
    ``(backward, node name, where)`` per node, ``backward`` being ``b0``,
    ``b1``... in the order the backwards started, ``where`` ``'owner'`` or
    a device worker's name (``'sim:0#0'``).
    """

    runs: int
    distinct_schedules: int
    traces: dict[tuple[str, int], tuple[tuple[str, str, str], ...]] = field(repr=False)


def trace() -> list[tuple[str, str, str]]:
    """The node order of the explored run in progress, else of the last one in this thread.

    One ``(backward, node name, where)`` per node run (see ``ExploreReport``).

    Example::

        >>> import aengine as ae
        >>> async def step():
        ...     x = ae.ones(2, requires_grad=True)
        ...     await (x * 3).sum().backward()
        >>> ae.testing.explore(step, seeds=1, backend="asyncio").runs
        1
        >>> [name for _, name, _ in ae.testing.trace()]
        ['SumBackward0', 'MulBackward0', 'AccumulateGrad']
    """
    choices = loop_share().choices or _last.choices
    return [] if choices is None else list(choices.trace)


def explore(
    fn: Callable[[], Awaitable[Any]],
    *,
    seeds: int | Iterable[int] = 200,
    strategy: str = "random",
    backend: str = "both",
    faults: Faults | None = None,
) -> ExploreReport:
    """Run ``await fn()`` once per seed, each on a seeded schedule in virtual time.

    Every scheduling choice aengine makes (NOTE [Choice points]) comes from
    the seed: which backward a device worker serves next, whether a
    backward lets the loop run at a node boundary, the order in which
    waiters get the loop's share or admission, kernels' completion order,
    ``sim`` latency jitter; trio's own scheduler is seeded too.  The same
    seed on the same backend gives the same run every time.

    ``seeds``: an int (that many, from 0) or ints; ``strategy``: "random"
    (each choice uniform) or "pct" (random priorities per backward with a
    few change points, which finds bugs that need one rare preemption);
    ``backend``: "asyncio", "trio" or "both"; ``faults``: ``Faults`` to
    inject at choice points.  Like ``anyio.run`` it runs the event loops
    itself: call it from plain code, not from a running loop.

    The first failing run raises ``ScheduleFailure`` (its error as the
    cause) whose message shows the ``replay`` call for it.

    Example::

        >>> import aengine as ae
        >>> async def step():
        ...     x = ae.ones(2, requires_grad=True)
        ...     await (x * 3).sum().backward()
        ...     assert x.grad.tolist() == [3.0, 3.0]
        >>> ae.testing.explore(step, seeds=5).runs
        10
    """
    _check_fn(fn, "explore")
    seed_list = _seeds(seeds)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be 'random' or 'pct', got {strategy!r}")
    backends = _backends(backend)
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError(
            f"faults must be an ae.testing.Faults or None, got {type(faults).__name__} {faults!r}"
        )
    for b in backends:
        _needs(b)
    traces: dict[tuple[str, int], tuple[tuple[str, str, str], ...]] = {}
    for b in backends:
        for seed in seed_list:
            choices = Choices(seed, strategy, faults=faults)
            try:
                _run_once(fn, b, choices)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                failure = ScheduleFailure(seed, b, schedule_of(choices, b), exc)
                print(f"aengine.testing: {failure}", file=sys.stderr)
                raise failure from exc
            traces[(b, seed)] = tuple(choices.trace)
    return ExploreReport(
        runs=len(traces), distinct_schedules=len(set(traces.values())), traces=traces
    )


def replay(fn: Callable[[], Awaitable[Any]], schedule: str, *, backend: str | None = None) -> Any:
    """Run ``await fn()`` once on ``schedule`` (from a ``ScheduleFailure``); its result or error.

    The run makes the same choices as the recorded one, so it fails the same
    way; its exception is raised as it is.  ``backend`` overrides the one
    in the string.  A schedule recorded on other code may not fit: then
    ``ScheduleMismatch`` (a ValueError) says so.

    Example::

        >>> import aengine as ae
        >>> async def step():
        ...     x = ae.ones(2, requires_grad=True)
        ...     await (x * 3).sum().backward()
        ...     return x.grad.tolist()
        >>> ae.testing.replay(step, "ae1:trio:random:7:eNoDAAAAAAE")
        [3.0, 3.0]
    """
    _check_fn(fn, "replay")
    b, strategy, seed, log = parse_schedule(schedule)
    if backend is not None:
        b = _backends(backend)[0] if backend != "both" else "both"
        if b == "both":
            raise ValueError("replay runs on one backend: pass 'asyncio' or 'trio'")
    _needs(b)
    return _run_once(fn, b, Choices(seed, strategy, replay=log))


def schedule_of(choices: Choices, backend: str) -> str:
    """The schedule string of a run: version, backend, strategy, seed, its choices."""
    return f"{PREFIX}:{backend}:{choices.strategy}:{choices.seed}:{encode_log(choices.log)}"


def parse_schedule(schedule: str) -> tuple[str, str, int, list[int]]:
    """``(backend, strategy, seed, choices)`` of a schedule string (ValueError if it is not one)."""
    if not isinstance(schedule, str):
        raise TypeError(
            f"schedule must be the string of a ScheduleFailure, got {type(schedule).__name__}"
        )
    parts = schedule.strip().split(":")
    hint = (
        f"not a schedule string: {schedule[:60]!r}; copy .schedule of the "
        "ae.testing.ScheduleFailure (it looks like 'ae1:trio:random:12:eJ...')"
    )
    if len(parts) != 5 or parts[0] != PREFIX:
        raise ValueError(hint)
    _, b, strategy, seed, text = parts
    if b not in BACKENDS or strategy not in STRATEGIES or not seed.isdigit():
        raise ValueError(hint)
    try:
        log = decode_log(text)
    except ValueError:
        raise ValueError(hint) from None
    return b, strategy, int(seed), log


# -- one run --------------------------------------------------------------------------------------


def _run_once(fn: Callable[[], Awaitable[Any]], backend: str, choices: Choices) -> Any:
    """Run ``fn`` once under ``choices`` on ``backend`` in virtual time (NOTE [Deterministic runs])."""
    _last.choices = choices
    old_share = swap_share(SeededShare(choices))
    try:
        if backend == "trio":
            result = _run_trio(fn, choices)
        else:
            opts = {"loop_factory": _virtual_loop}
            result = anyio.run(_main, fn, choices, backend="asyncio", backend_options=opts)
    except BaseException:
        if choices.mismatch is not None:
            raise choices.mismatch from None
        raise
    finally:
        swap_share(old_share)
    if choices.mismatch is not None:
        raise choices.mismatch
    return result


def _needs(backend: str) -> Any:
    """What runs of ``backend`` need, imported: trio's run module, or looptime.

    Asked before any run, so a missing library is reported as such, not as
    a failing schedule.
    """
    if backend == "trio":
        try:
            # local: trio is optional, and only trio runs need it (its
            # seedable scheduler: NOTE [Deterministic runs])
            from trio._core import _run as trio_run
        except ImportError:
            raise ImportError(
                "ae.testing on trio needs trio: pip install 'aengine[testing]', or pass "
                "backend='asyncio'"
            ) from None
        if not hasattr(trio_run, "_r") or not hasattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING"):
            raise RuntimeError(
                "this trio version has no seedable scheduler (trio._core._run._r), so its runs "
                "cannot be replayed; use trio 0.25 to 0.35, or pass backend='asyncio'"
            )
        return trio_run
    try:
        # local: optional, and only asyncio runs need it
        import looptime
    except ImportError:
        raise ImportError(
            "ae.testing on asyncio needs the looptime library (virtual time): "
            "pip install 'aengine[testing]', or pass backend='trio'"
        ) from None
    return looptime


def _run_trio(fn: Callable[[], Awaitable[Any]], choices: Choices) -> Any:
    trio_run = _needs("trio")
    # local: optional (``_needs`` checked that it imports)
    import trio.testing

    rng = trio_run._r
    state = rng.getstate()
    sorted_batches = trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    rng.seed(choices.seed)
    trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True
    try:
        clock = trio.testing.MockClock(autojump_threshold=0)
        return anyio.run(_main, fn, choices, backend="trio", backend_options={"clock": clock})
    finally:
        trio_run._ALLOW_DETERMINISTIC_SCHEDULING = sorted_batches
        rng.setstate(state)


def _virtual_loop() -> Any:
    return _needs("asyncio").new_event_loop(noop_cycles=1)


async def _main(fn: Callable[[], Awaitable[Any]], choices: Choices) -> Any:
    with anyio.CancelScope() as scope:
        choices.cancel = scope.cancel  # Faults.cancel
        return await fn()
    return None  # cancelled by an injected fault, and nothing else went wrong


# -- arguments ------------------------------------------------------------------------------------


def _check_fn(fn: Any, who: str) -> None:
    if loop_here() is not None:
        raise RuntimeError(
            f"ae.testing.{who} runs its own event loops, like anyio.run: call it from plain "
            "(synchronous) code, e.g. a plain test function, not from async code"
        )
    if inspect.isawaitable(fn):
        raise TypeError(
            f"ae.testing.{who}(fn) takes the async function itself, not a coroutine: pass "
            "`step`, not `step()` (each run calls it anew)"
        )
    if not callable(fn):
        raise TypeError(
            f"ae.testing.{who}(fn) takes an async function of no arguments, got "
            f"{type(fn).__name__} {fn!r}"
        )


def _seeds(seeds: Any) -> list[int]:
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1 (how many seeds to run), got {seeds}")
        return list(range(int(seeds)))
    try:
        out = list(seeds)
    except TypeError:
        raise TypeError(
            f"seeds must be an int (how many, from 0) or an iterable of ints, got "
            f"{type(seeds).__name__} {seeds!r}"
        ) from None
    for s in out:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
            raise ValueError(f"seeds must be ints >= 0, got {s!r}")
    if not out:
        raise ValueError("seeds is empty: give at least one seed")
    return [int(s) for s in out]


def _backends(backend: Any) -> tuple[str, ...]:
    if backend == "both":
        return BACKENDS
    if backend in BACKENDS:
        return (backend,)
    raise ValueError(f"backend must be 'asyncio', 'trio' or 'both', got {backend!r}")
