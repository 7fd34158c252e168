"""Seeds per second of ``ae.testing.explore`` on the lost-update example.

Run ``python -m bench.explore`` (``--seeds N``, default 200 per backend).
Prints a markdown table that ``docs/performance.md`` quotes: for the buggy
and the fixed version of ``examples/lost_update.py`` on each backend, the
seeds explored per second (the fixed one runs every seed; the buggy one
stops at its first failure, so its row times seeds up to it, replays
included) and the number of distinct node orders seen.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import time
from typing import Any

import aengine as ae

__all__ = ["load_example", "main", "seeds_per_second"]

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_example() -> Any:
    """examples/lost_update.py as a module (the tests load it the same way)."""
    spec = importlib.util.spec_from_file_location("lost_update", ROOT / "examples/lost_update.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def seeds_per_second(locked: bool, backend: str, seeds: int) -> tuple[float, int, str]:
    """(seeds/s, distinct node orders, outcome) of exploring the example on one backend."""
    example = load_example()
    start = time.perf_counter()
    try:
        report = ae.testing.explore(example.training(locked), seeds=seeds, backend=backend)
    except ae.testing.ScheduleFailure as failure:
        ran = failure.seed + 1
        return ran / (time.perf_counter() - start), -1, f"failed at seed {failure.seed}"
    return report.runs / (time.perf_counter() - start), report.distinct_schedules, "passed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.explore", description=__doc__)
    parser.add_argument("--seeds", type=int, default=200, help="seeds per backend (default 200)")
    args = parser.parse_args(argv)
    seeds_per_second(True, "trio", 5)  # warm-up: imports, first loops
    print(f"ae.testing.explore on examples/lost_update.py, {args.seeds} seeds per backend\n")
    print("| version | backend | seeds/s | distinct node orders | outcome |")
    print("|---|---|---|---|---|")
    for locked in (True, False):
        for backend in ("asyncio", "trio"):
            rate, distinct, outcome = seeds_per_second(locked, backend, args.seeds)
            name = "fixed (lock)" if locked else "buggy"
            shown = "-" if distinct < 0 else str(distinct)
            print(f"| {name} | {backend} | {rate:.0f} | {shown} | {outcome} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
