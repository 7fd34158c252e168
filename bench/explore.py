"""How fast ``ae.testing.explore`` runs, and how many runs each strategy needs to find a bug.

Run ``python -m bench.explore`` (``--seeds N``, default 200 per backend;
``--budget N``, default 1000 runs per strategy; ``--zoo NAME,...`` for
some of the zoo only, ``--no-zoo`` to skip it).  Prints two markdown
tables that ``docs/performance.md`` quotes:

* seeds per second on ``examples/lost_update.py``, buggy and fixed, on each
  backend (the fixed one runs every seed; the buggy one stops at its first
  failure, shrinking included) and the distinct interleavings seen;
* for each bug of ``examples/zoo.py`` on each backend: the runs to the first
  failure of ``random``, ``pct`` (depth 3) and ``exhaustive`` (preemption
  bound 2), at most ``--budget`` each ("-" when not found); the mean time
  of one run; the preemptions and steps of the shrunk failing schedule;
  and whether the fixed twin passed ``--budget`` runs of every strategy.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import time
from typing import Any

import aengine as ae

__all__ = ["load_example", "main", "runs_to_failure", "seeds_per_second"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
STRATEGIES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("random", {}),
    ("pct", {"depth": 3}),
    ("exhaustive", {"preemption_bound": 2}),
)


def load_example(name: str = "lost_update") -> Any:
    """examples/<name>.py as a module (the tests load it the same way)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def seeds_per_second(locked: bool, backend: str, seeds: int) -> tuple[float, int, str]:
    """(seeds/s, distinct interleavings, outcome) of exploring the example on one backend."""
    example = load_example()
    start = time.perf_counter()
    try:
        report = ae.testing.explore(example.training(locked), seeds=seeds, backend=backend)
    except ae.testing.ScheduleFailure as failure:
        ran = failure.runs
        return ran / (time.perf_counter() - start), -1, f"failed at run {ran}"
    return report.runs / (time.perf_counter() - start), report.distinct_schedules, "passed"


def runs_to_failure(
    make: Any, backend: str, strategy: str, options: dict[str, Any], budget: int
) -> tuple[int | None, float, ae.testing.ScheduleFailure | None]:
    """(runs to the first failure or None, seconds a run, the failure) of one strategy."""
    start = time.perf_counter()
    try:
        report = ae.testing.explore(
            make(False),
            seeds=budget,
            strategy=strategy,
            backend=backend,
            shrink_failures=False,
            **options,
        )
    except ae.testing.ScheduleFailure as failure:
        return failure.runs, (time.perf_counter() - start) / max(failure.runs, 1), failure
    return None, (time.perf_counter() - start) / max(report.runs, 1), None


def _shrunk(make: Any, backend: str, strategy: str, options: dict[str, Any], budget: int) -> str:
    try:
        ae.testing.explore(make(False), seeds=budget, strategy=strategy, backend=backend, **options)
    except ae.testing.ScheduleFailure as failure:
        return f"{failure.preemptions} / {failure.steps}"
    return "-"


def _twin_passes(make: Any, backend: str, budget: int) -> str:
    for strategy, options in STRATEGIES:
        try:
            ae.testing.explore(
                make(True), seeds=budget, strategy=strategy, backend=backend, **options
            )
        except ae.testing.ScheduleFailure as failure:
            return f"FAILED ({strategy}, run {failure.runs})"
    return "passed"


def zoo_table(budget: int, names: list[str] | None) -> None:
    """Print the zoo's table (see the module's docstring)."""
    zoo = load_example("zoo")
    print(f"\nexamples/zoo.py: runs to the first failure (at most {budget} a strategy)\n")
    print(
        "| bug | backend | random | pct (d=3) | exhaustive (k=2) | ms/run "
        "| shrunk: preemptions / steps | fixed twin |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (make, kind) in zoo.BUGS.items():
        if names and name not in names:
            continue
        for backend in ("asyncio", "trio"):
            cells, times, first = [], [], None
            for strategy, options in STRATEGIES:
                runs, per_run, failure = runs_to_failure(make, backend, strategy, options, budget)
                cells.append("-" if runs is None else str(runs))
                times.append(per_run)
                if failure is not None and first is None:
                    first = (strategy, options)
            shrunk = "-" if first is None else _shrunk(make, backend, *first, budget)
            twin = _twin_passes(make, backend, budget)
            ms = 1e3 * sum(times) / len(times)
            print(
                f"| {name} ({kind}) | {backend} | {' | '.join(cells)} | {ms:.1f} | {shrunk} "
                f"| {twin} |",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.explore", description=__doc__)
    parser.add_argument("--seeds", type=int, default=200, help="seeds per backend (default 200)")
    parser.add_argument("--budget", type=int, default=1000, help="runs per strategy (zoo)")
    parser.add_argument("--zoo", default="", help="comma-separated zoo bugs (default: all)")
    parser.add_argument("--no-zoo", action="store_true", help="only the seeds/s table")
    args = parser.parse_args(argv)
    seeds_per_second(True, "trio", 5)  # warm-up: imports, first loops
    print(f"ae.testing.explore on examples/lost_update.py, {args.seeds} seeds per backend\n")
    print("| version | backend | seeds/s | distinct interleavings | outcome |")
    print("|---|---|---|---|---|")
    for locked in (True, False):
        for backend in ("asyncio", "trio"):
            rate, distinct, outcome = seeds_per_second(locked, backend, args.seeds)
            name = "fixed (lock)" if locked else "buggy"
            shown = "-" if distinct < 0 else str(distinct)
            print(f"| {name} | {backend} | {rate:.0f} | {shown} | {outcome} |", flush=True)
    if not args.no_zoo:
        zoo_table(args.budget, [n for n in args.zoo.split(",") if n] or None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
