"""``explore`` and ``replay``: run an async function under seeded, replayable schedules.

How one run is made deterministic: NOTE [Deterministic runs] in _run.py.
Their arguments are checked in _args.py; a failing run's ``ScheduleFailure``,
shrunk and saved, and the schedule strings are _failure.py's.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runtime._choice import Choices, Faults
from ..runtime._share import loop_share
from ._args import COMPUTE_TIME, _backends, _check_fn, _explore_settings, _Settings
from ._failure import _failure, _replay_saved, parse_schedule
from ._run import _last, _limit, _needs, _run_once
from ._search import Exhaustive, Pct, PctBound, Seeded

__all__ = ["ExploreReport", "explore", "replay", "trace"]


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
