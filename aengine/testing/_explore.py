"""``explore`` and ``replay``: run an async function under seeded, replayable schedules.

How one run is made deterministic: NOTE [Deterministic runs] in _run.py.
"""

from __future__ import annotations

import inspect
import numbers
import os
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime._choice import Choices, Faults, ScheduleMismatch, decode_log, encode_log
from ..runtime._loop import loop_here
from ..runtime._share import loop_share
from . import _store
from ._run import RunTimeout, _last, _limit, _needs, _run_once
from ._search import Exhaustive, Pct, PctBound, Seeded
from ._shrink import interleaving, preemptions_of, shrink, trimmed

__all__ = ["ExploreReport", "RunTimeout", "ScheduleFailure", "explore", "replay", "trace"]

BACKENDS = ("asyncio", "trio")
STRATEGIES = ("random", "pct", "exhaustive", "coverage")
#: schedule strings start with this (its version)
PREFIX = "ae1"
#: ``compute_time``'s default: one stretch of compute takes at most 10 ms (virtual)
COMPUTE_TIME = 0.01


class ScheduleFailure(AssertionError):
    """An explored run failed: ``.seed``, ``.backend``, ``.schedule``; the run's error is the cause.

    ``.shrunk``: the smallest failing schedule found from it (NOTE [Shrinking]),
    ``.preemptions`` and ``.steps`` its size, ``.interleaving`` its steps as
    text (task, choice point, source line, answer).  The message shows
    them and the call that replays the run exactly.

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

    def __init__(
        self,
        seed: int,
        backend: str,
        schedule: str,
        error: BaseException,
        shrunk: str | None = None,
        preemptions: int = 0,
        steps: int = 0,
        interleaving: str = "",
        options: str = "",
    ) -> None:
        self.seed = seed
        self.backend = backend
        self.schedule = schedule
        self.shrunk = shrunk if shrunk is not None else schedule
        self.preemptions = preemptions
        self.steps = steps
        self.interleaving = interleaving
        #: how many runs ``explore`` made on this backend up to this one (0: a saved one)
        self.runs = 0
        shown = (
            f"shrunk to {preemptions} preemption(s) in {steps} step(s):\n{interleaving}\n"
            if interleaving
            else ""
        )
        super().__init__(
            f"the explored function failed with seed {seed} under {backend}: "
            f"{type(error).__name__}: {error}\n"
            f"{shown}"
            f"replay it exactly with:\n"
            f"    ae.testing.replay(fn, {self.shrunk!r}{options})\n"
            + (f"(the run as found: {schedule!r})\n" if self.shrunk != schedule else "")
            + f"or, for a test marked aengine_explore:\n"
            f"    pytest --aengine-replay='{self.shrunk}' <the test>"
        )


@dataclass(frozen=True)
class ExploreReport:
    """What ``explore`` ran.

    * ``runs``; ``distinct_schedules``: distinct interleavings (node order,
      and the order in which tasks reached choice points);
    * ``traces[(backend, seed)]``: the node order of that run: one
      ``(backward, node name, where)`` per node, ``backward`` being ``b0``,
      ``b1``... in the order the backwards started, ``where`` ``'owner'``
      or a device worker's name (``'sim:0#0'``); for ``exhaustive`` the
      "seed" is the run's number, ``pct``'s first run (the usual policy's,
      which counts the steps) is under -1;
    * ``complete``: ``exhaustive`` ran every schedule within its bound;
    * ``pct``: ``pct``'s figures and guarantee (``PctBound``), else None;
    * ``saturated``: ``coverage`` stopped because new interleavings stopped
      appearing.
    """

    runs: int
    distinct_schedules: int
    traces: dict[tuple[str, int], tuple[tuple[str, str, str], ...]] = field(repr=False)
    strategy: str = "random"
    complete: bool = False
    pct: PctBound | None = None
    saturated: bool = False


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
    depth: int | None = None,
    preemption_bound: int | None = None,
    compute_time: float = COMPUTE_TIME,
    state: str | os.PathLike[str] | None = None,
    database: str | os.PathLike[str] | None = None,
    key: str | None = None,
    shrink_failures: bool = True,
    patience: int = 30,
    run_limit: float = 600.0,
) -> ExploreReport:
    """Run ``await fn()`` once per seed, each on an explored schedule in virtual time.

    Every scheduling choice aengine makes (NOTE [Choice points]) comes from
    the strategy: whether a task lets others run at each boundary (each
    node of a backward, the end of every ``await`` of an engine entry
    point, a kernel's completion, a compute thread's next step,
    ``ae.testing.choice()``), how long its compute took (pending timers due
    within ``compute_time`` seconds may expire meanwhile), which waiter
    goes next; trio's own scheduler is seeded too.  The same seed on the
    same backend gives the same run every time.

    ``strategy``:

    * ``"random"``: each choice drawn from the seed;
    * ``"pct"``: probabilistic concurrency testing with bug depth ``depth``
      (default 3): the report's ``pct`` states the chance per run of
      finding a bug of that depth (NOTE [PCT's guarantee]);
    * ``"exhaustive"``: every schedule with at most ``preemption_bound``
      (default 2) preemptions, at most ``seeds`` runs of it; ``state``, a
      file, saves the search and resumes it (NOTE [Exhaustive search]);
    * ``"coverage"``: random, stopping once ``patience`` runs in a row
      found no new interleaving.

    ``backend``: "asyncio", "trio" or "both" (those installed: trio, or
    looptime for asyncio); ``faults``: ``Faults`` to
    inject at choice points; ``compute_time``: the most virtual seconds one
    stretch of compute may take (0: compute takes no time); ``run_limit``:
    virtual seconds after which a run fails with ``RunTimeout`` (a
    deadlock); ``database``: a JSON file where failing
    schedules are saved (under ``key``, by default the function's name) and
    from which saved ones are replayed first.  Like ``anyio.run`` it runs
    the event loops itself: call it from plain code, not from a running loop.

    The first failing run is shrunk (``shrink_failures``) and raises
    ``ScheduleFailure`` (its error as the cause), whose message shows the
    shrunk interleaving and the ``replay`` call for it.

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
    s = _explore_settings(
        fn,
        seeds=seeds,
        strategy=strategy,
        backend=backend,
        faults=faults,
        depth=depth,
        preemption_bound=preemption_bound,
        compute_time=compute_time,
        state=state,
        database=database,
        key=key,
        shrink_failures=shrink_failures,
        patience=patience,
        run_limit=run_limit,
    )
    _limit.seconds = s.run_limit
    explored = _Explored()
    complete, saturated, pct = True, False, None
    for b in s.backends:
        if s.db is not None:
            _replay_saved(fn, b, s.db, s.key, s.faults, s.compute_time)
        search = _search(s, b)
        saturated = _run_search(fn, b, search, s, explored) or saturated
        if isinstance(search, Exhaustive):
            search.save()
            complete = complete and search.complete
        if isinstance(search, Pct):
            pct = search.figures()
    return ExploreReport(
        runs=len(explored.traces),
        distinct_schedules=len(explored.shapes),
        traces=explored.traces,
        strategy=strategy,
        complete=strategy == "exhaustive" and complete,
        pct=pct,
        saturated=saturated,
    )


@dataclass(frozen=True)
class _Settings:
    """``explore``'s arguments, checked."""

    seeds: list[int]
    strategy: str
    backends: tuple[str, ...]
    faults: Faults | None
    depth: int
    bound: int
    compute_time: float
    state: str | os.PathLike[str] | None
    db: Path | None
    key: str
    shrink: bool
    patience: int
    run_limit: float


def _explore_settings(
    fn: Callable[[], Awaitable[Any]],
    *,
    seeds: Any,
    strategy: str,
    backend: str,
    faults: Faults | None,
    depth: int | None,
    preemption_bound: int | None,
    compute_time: float,
    state: str | os.PathLike[str] | None,
    database: str | os.PathLike[str] | None,
    key: str | None,
    shrink_failures: bool,
    patience: int,
    run_limit: float,
) -> _Settings:
    """``explore``'s arguments checked (a clear error for a bad one), with their defaults."""
    seed_list = _seeds(seeds)
    d, bound = _strategy_options(strategy, depth, preemption_bound, state)
    ct = _compute_time(compute_time)
    backends = _backends(backend)
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError(
            f"faults must be an ae.testing.Faults or None, got {type(faults).__name__} {faults!r}"
        )
    backends = _usable(backends, backend)
    db = Path(database) if database is not None else None
    name = key if key is not None else f"{fn.__module__}.{getattr(fn, '__qualname__', fn)}"
    if isinstance(run_limit, bool) or not isinstance(run_limit, int | float) or not run_limit > 0:
        raise ValueError(f"run_limit is in virtual seconds (> 0), got {run_limit!r}")
    return _Settings(
        seeds=seed_list,
        strategy=strategy,
        backends=backends,
        faults=faults,
        depth=d,
        bound=bound,
        compute_time=ct,
        state=state,
        db=db,
        key=name,
        shrink=shrink_failures,
        patience=patience,
        run_limit=float(run_limit),
    )


def _search(s: _Settings, backend: str) -> Seeded | Pct | Exhaustive:
    """The search that gives the schedules of ``s.strategy`` on ``backend``."""
    if s.strategy == "pct":
        return Pct(s.seeds, s.depth, s.faults, s.compute_time)
    if s.strategy == "exhaustive":
        path = Path(s.state) if s.state is not None else None
        return Exhaustive(s.bound, len(s.seeds), s.faults, s.compute_time, path, backend)
    return Seeded(s.seeds, s.strategy, s.faults, s.compute_time)


@dataclass
class _Explored:
    """What ``explore`` ran: each run's node order, and the distinct interleavings."""

    traces: dict[tuple[str, int], tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    shapes: set[Any] = field(default_factory=set)

    def note(self, backend: str, run_key: int, choices: Choices) -> bool:
        """Keep a run's node order; True when its interleaving is a new one."""
        self.traces[(backend, run_key)] = tuple(choices.trace)
        shape = (backend, tuple(choices.trace), tuple(s.task for s in choices.steps))
        if shape in self.shapes:
            return False
        self.shapes.add(shape)
        return True


def _run_search(
    fn: Callable[[], Awaitable[Any]],
    backend: str,
    search: Seeded | Pct | Exhaustive,
    s: _Settings,
    explored: _Explored,
) -> bool:
    """Run each schedule of ``search`` on ``backend``; True when ``coverage`` saturated.

    The first failing run raises its ``ScheduleFailure`` (shrunk and saved).
    """
    quiet = 0  # runs in a row that found no new interleaving
    number = 0
    while (choices := search.next()) is not None:
        _run_or_fail(fn, backend, search, choices, s, number)
        search.ran(choices)
        if explored.note(backend, _run_key(search, choices, number), choices):
            quiet = 0
        else:
            quiet += 1
        number += 1
        if s.strategy == "coverage" and quiet >= s.patience:
            return True
    return False


def _run_or_fail(
    fn: Callable[[], Awaitable[Any]],
    backend: str,
    search: Seeded | Pct | Exhaustive,
    choices: Choices,
    s: _Settings,
    number: int,
) -> None:
    """Run one schedule; a failure raises its ``ScheduleFailure`` (its error as the cause)."""
    try:
        _run_once(fn, backend, choices)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        if isinstance(search, Exhaustive):
            search.save()
        failure = _failure(fn, backend, choices, exc, s.db, s.key, s.shrink)
        failure.runs = number + 1
        raise failure from exc


def _run_key(search: Seeded | Pct | Exhaustive, choices: Choices, number: int) -> int:
    """The run's key in ``ExploreReport.traces``: its seed, or its number for ``exhaustive``."""
    if isinstance(search, Exhaustive):
        return number
    if isinstance(search, Pct) and number == 0:
        return -1  # the usual policy's run, that counts pct's steps
    return choices.seed


def _failure(
    fn: Callable[[], Awaitable[Any]],
    backend: str,
    choices: Choices,
    exc: BaseException,
    db: Path | None,
    key: str,
    shrink_it: bool,
) -> ScheduleFailure:
    """The ``ScheduleFailure`` of a failing run: shrunk, saved, printed."""
    schedule = schedule_of(choices, backend)
    if isinstance(exc, ScheduleMismatch):
        return ScheduleFailure(choices.seed, backend, schedule, exc)
    small: Choices | None = choices
    if shrink_it:
        kind = _kind(exc)

        def attempt(prefix: list[int]) -> Choices | None:
            again = Choices(
                choices.seed,
                choices.strategy,
                replay=prefix,
                faults=choices.faults,
                compute_time=choices.compute_time,
                lenient=True,
            )
            try:
                _run_once(fn, backend, again)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as err:
                return again if _kind(err) == kind else None
            return None

        small = shrink(choices.log, attempt) or choices
    assert small is not None
    log = trimmed(small.log)
    shrunk = f"{PREFIX}:{backend}:{small.strategy}:{small.seed}:{encode_log(log)}"
    failure = ScheduleFailure(
        choices.seed,
        backend,
        schedule,
        exc,
        options=_options(choices),
        shrunk=shrunk,
        preemptions=preemptions_of(small.steps[: len(log)]),
        steps=len(log),
        interleaving=interleaving(small.steps, len(log)),
    )
    if db is not None:
        _store.remember(db, key, backend, shrunk)
    print(f"aengine.testing: {failure}", file=sys.stderr)
    return failure


def _options(choices: Choices) -> str:
    """The keywords ``replay`` needs besides the schedule (those that differ from the defaults)."""
    out = ""
    if choices.faults is not None:
        out += f", faults={choices.faults!r}"
    if choices.compute_time != COMPUTE_TIME:
        out += f", compute_time={choices.compute_time!r}"
    return out


def _kind(exc: BaseException) -> Any:
    """What a shrunk run must fail with: the error's type (a group's: its errors' kinds)."""
    if isinstance(exc, BaseExceptionGroup):
        return (type(exc), tuple(sorted(map(repr, {_kind(e) for e in exc.exceptions}))))
    return type(exc)


def _replay_saved(
    fn: Callable[[], Awaitable[Any]],
    backend: str,
    db: Path,
    key: str,
    faults: Faults | None,
    ct: float,
) -> None:
    """Replay the schedules saved for ``key`` (a failing one raises ``ScheduleFailure``)."""
    for schedule in _store.load(db, key, backend):
        b, strategy, seed, log = parse_schedule(schedule)
        choices = Choices(seed, strategy, replay=log, faults=faults, compute_time=ct)
        try:
            _run_once(fn, b, choices)
        except ScheduleMismatch:
            _store.forget(db, key, backend, schedule)  # recorded on other code
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            n = len(trimmed(log))
            failure = ScheduleFailure(
                seed,
                b,
                schedule,
                exc,
                shrunk=schedule,
                preemptions=preemptions_of(choices.steps[:n]),
                steps=n,
                interleaving="(a saved schedule, replayed first)\n"
                + interleaving(choices.steps, n),
            )
            print(f"aengine.testing: {failure}", file=sys.stderr)
            raise failure from exc


def replay(
    fn: Callable[[], Awaitable[Any]],
    schedule: str,
    *,
    backend: str | None = None,
    faults: Faults | None = None,
    compute_time: float = COMPUTE_TIME,
) -> Any:
    """Run ``await fn()`` once on ``schedule`` (from a ``ScheduleFailure``); its result or error.

    The run makes the same choices as the recorded one, so it fails the same
    way; its exception is raised as it is.  ``backend`` overrides the one
    in the string.  ``faults`` and ``compute_time`` must be the ones the
    schedule was explored with (they decide which questions a run asks).  A
    schedule recorded on other code may not fit: then ``ScheduleMismatch``
    (a ValueError) says so.

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
    if faults is not None and not isinstance(faults, Faults):
        raise TypeError(f"faults must be an ae.testing.Faults or None, got {faults!r}")
    choices = Choices(seed, strategy, replay=log, faults=faults, compute_time=compute_time)
    return _run_once(fn, b, choices)


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


def _strategy_options(
    strategy: str, depth: int | None, preemption_bound: int | None, state: Any
) -> tuple[int, int]:
    """pct's bug depth and exhaustive's preemption bound, each refused for another strategy."""
    if strategy not in STRATEGIES:
        raise ValueError(
            f"strategy must be 'random', 'pct', 'exhaustive' or 'coverage', got {strategy!r}"
        )
    d = _positive_int(depth, "depth", 3, 1)
    bound = _positive_int(preemption_bound, "preemption_bound", 2, 0)
    if depth is not None and strategy != "pct":
        raise ValueError(f"depth is pct's bug depth; pass strategy='pct' (got {strategy!r})")
    if preemption_bound is not None and strategy != "exhaustive":
        raise ValueError(
            f"preemption_bound bounds the exhaustive search; pass strategy='exhaustive' "
            f"(got {strategy!r})"
        )
    if state is not None and strategy != "exhaustive":
        raise ValueError("state saves an exhaustive search; pass strategy='exhaustive'")
    return d, bound


def _compute_time(compute_time: Any) -> float:
    if (
        isinstance(compute_time, bool)
        or not isinstance(compute_time, int | float)
        or not (0 <= compute_time < float("inf"))
    ):
        raise ValueError(
            f"compute_time is the most virtual seconds one stretch of compute may take "
            f"(>= 0, 0 turns it off), got {compute_time!r}"
        )
    return float(compute_time)


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


def _usable(backends: tuple[str, ...], asked: Any) -> tuple[str, ...]:
    """The backends to explore, their libraries checked before any run (``_needs``).

    With "both" a backend whose library is not installed is left out (trio
    alone, or looptime alone, will do); one that is there but unusable (a
    trio without a seedable scheduler) is refused all the same.
    """
    if asked != "both":
        for b in backends:
            _needs(b)
        return backends
    usable = []
    missing: list[ImportError] = []
    for b in backends:
        try:
            _needs(b)
        except ImportError as exc:
            missing.append(exc)
        else:
            usable.append(b)
    if not usable:
        raise ImportError(
            "ae.testing needs trio, or the looptime library for asyncio runs: "
            "pip install 'aengine[testing]'"
        ) from missing[0]
    return tuple(usable)


def _backends(backend: Any) -> tuple[str, ...]:
    if backend == "both":
        return BACKENDS
    if backend in BACKENDS:
        return (backend,)
    raise ValueError(f"backend must be 'asyncio', 'trio' or 'both', got {backend!r}")


def _positive_int(value: Any, name: str, default: int, least: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    return int(value)
