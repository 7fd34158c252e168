"""A failing explored run: ``ScheduleFailure``, shrunk and saved; the schedule strings."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..runtime._choice import Choices, Faults, ScheduleMismatch, decode_log, encode_log
from . import _store
from ._args import BACKENDS, COMPUTE_TIME, STRATEGIES
from ._run import _run_once
from ._shrink import interleaving, preemptions_of, shrink, trimmed

#: schedule strings start with this (its version)
PREFIX = "ae1"


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
