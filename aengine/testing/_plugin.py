"""The pytest plugin of ``ae.testing`` (registered by the package's ``pytest11`` entry point).

A test marked ``@pytest.mark.aengine_explore(seeds=..., strategy=...,
backend=..., faults=...)`` is an ``async def`` that runs under
``ae.testing.explore`` (both backends unless the marker says otherwise);
its fixtures are made as usual.  ``--aengine-seed=N`` runs only seed N,
``--aengine-replay=SCHEDULE`` only that schedule (from a failure report).
A failing test's shrunk schedule is saved in pytest's cache directory
(``.pytest_cache/d/aengine/schedules.json``, keyed by the test's node id)
and replayed first on the next run, before any new seed;
``--aengine-schedules=PATH`` keeps them elsewhere (a file to commit, say)
and ``--aengine-schedules=`` (empty) turns saving off.  Tests without the
marker are left alone: the plugin's one hook returns at once for them.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from ._explore import explore, replay

MARKER = "aengine_explore"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aengine", "aengine.testing: seeded schedules")
    group.addoption(
        "--aengine-seed",
        type=int,
        default=None,
        help=f"run the tests marked {MARKER} with this seed only",
    )
    group.addoption(
        "--aengine-replay",
        default=None,
        metavar="SCHEDULE",
        help=f"run the tests marked {MARKER} on this schedule only (from a ScheduleFailure)",
    )
    group.addoption(
        "--aengine-schedules",
        default=None,
        metavar="PATH",
        help="where failing schedules are saved and replayed first from (default: in pytest's "
        "cache directory; empty: not saved)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(seeds=200, strategy='random', backend='both', ...explore's keywords): run this "
        "async test under aengine.testing.explore",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    marker = pyfuncitem.get_closest_marker(MARKER)
    if marker is None:
        return None
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test):
        raise pytest.UsageError(
            f"{pyfuncitem.nodeid}: @pytest.mark.{MARKER} is for `async def` tests; this one "
            "is not async"
        )
    if marker.args:
        raise pytest.UsageError(
            f"{pyfuncitem.nodeid}: @pytest.mark.{MARKER} takes keyword arguments only "
            "(seeds=, strategy=, backend=, faults=)"
        )
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}

    async def run() -> Any:
        return await test(**kwargs)

    config = pyfuncitem.config
    schedule = config.getoption("aengine_replay")
    if schedule is not None:
        same = {k: v for k, v in marker.kwargs.items() if k in ("faults", "compute_time")}
        replay(run, schedule, **same)
        return True
    options = dict(marker.kwargs)
    seed = config.getoption("aengine_seed")
    if seed is not None:
        options["seeds"] = [seed]
    database = _database(config)
    if database is not None and "database" not in options:
        options["database"] = database
        options.setdefault("key", pyfuncitem.nodeid)
    explore(run, **options)
    return True


def _database(config: pytest.Config) -> Path | None:
    """The saved schedules' file: the option's, else in pytest's cache; None when off."""
    path = config.getoption("aengine_schedules")
    if path is not None:
        return Path(path) if path else None
    cache = getattr(config, "cache", None)  # None with -p no:cacheprovider
    if cache is None:
        return None
    return Path(cache.mkdir("aengine")) / "schedules.json"
