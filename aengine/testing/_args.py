"""``explore``'s and ``replay``'s arguments, checked: a clear error for a bad one."""

from __future__ import annotations

import inspect
import numbers
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime._choice import Faults
from ..runtime._loop import loop_here
from ._run import _needs

BACKENDS = ("asyncio", "trio")
STRATEGIES = ("random", "pct", "exhaustive", "coverage")
#: ``compute_time``'s default: one stretch of compute takes at most 10 ms (virtual)
COMPUTE_TIME = 0.01


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
