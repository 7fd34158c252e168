"""ae.testing's strategies, virtual compute time, shrinking, saved failures, threads, the zoo."""

from __future__ import annotations

import importlib.util
import json
import pathlib
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

import aengine as ae
from aengine.runtime._choice import encode_log

BACKENDS = ["asyncio", "trio"]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


zoo = _load("zoo")


def _race(locked: bool) -> Callable[[], Awaitable[None]]:
    """Three workers 1 ms apart: read a counter, await ae.grad on a small graph, write it + 1."""

    async def race() -> None:
        state = {"n": 0}
        lock = anyio.Lock()
        x = ae.ones(3, requires_grad=True)

        async def body() -> None:
            seen = state["n"]
            (g,) = await ae.grad((x * x).tanh().sum(), [x])
            state["n"] = seen + 1

        async def worker(i: int) -> None:
            await anyio.sleep(0.001 * i)
            if locked:
                async with lock:
                    await body()
            else:
                await body()

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(worker, i)
        assert state["n"] == 3, f"lost update: {state['n']} of 3"

    return race


# -- compute takes virtual time ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_timer_expires_mid_backward_so_the_race_is_found_within_50_seeds(backend: str) -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(_race(False), seeds=50, backend=backend)
    failure = info.value
    assert failure.runs <= 50 and "lost update" in str(failure.__cause__)
    assert "compute took" in failure.interleaving  # a timer fell due while worker 0 computed
    with pytest.raises(AssertionError, match="lost update"):
        ae.testing.replay(_race(False), failure.shrunk)
    with pytest.raises(AssertionError, match="lost update"):
        ae.testing.replay(_race(False), failure.schedule)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_locked_twin_passes_every_strategy(backend: str) -> None:
    assert ae.testing.explore(_race(True), seeds=100, backend=backend).runs == 100
    assert ae.testing.explore(_race(True), seeds=100, strategy="pct", backend=backend).runs == 101
    report = ae.testing.explore(
        _race(True), seeds=1000, strategy="exhaustive", preemption_bound=2, backend=backend
    )
    assert report.complete and report.runs < 1000


def test_without_compute_time_the_race_hides() -> None:
    # what exploring looked like before compute took time: every run passes
    report = ae.testing.explore(_race(False), seeds=30, compute_time=0, backend="trio")
    assert report.runs == 30


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_seed_still_gives_the_same_run(backend: str) -> None:
    runs = []
    for _ in range(2):
        report = ae.testing.explore(_race(True), seeds=[5, 9], backend=backend)
        runs.append(report.traces)
    assert runs[0] == runs[1]


# -- strategies -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_pct_states_its_figures_and_finds_the_race(backend: str) -> None:
    report = ae.testing.explore(_race(True), seeds=20, strategy="pct", depth=2, backend=backend)
    pct = report.pct
    assert pct is not None and pct.depth == 2 and pct.steps > 0 and pct.tasks >= 2
    assert pct.bound == pytest.approx(1 / (pct.tasks * pct.steps))
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(_race(False), seeds=50, strategy="pct", depth=2, backend=backend)
    assert ":pct:" in info.value.schedule and info.value.preemptions <= 2


def test_exhaustive_finds_the_race_and_resumes_from_its_state(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(
            _race(False), seeds=100, strategy="exhaustive", preemption_bound=1, backend="trio"
        )
    assert info.value.preemptions == 1
    whole = ae.testing.explore(
        _race(True), seeds=1000, strategy="exhaustive", preemption_bound=2, backend="asyncio"
    )
    assert whole.complete
    state = tmp_path / "search.json"
    first = ae.testing.explore(
        _race(True),
        seeds=10,
        strategy="exhaustive",
        preemption_bound=2,
        backend="asyncio",
        state=state,
    )
    assert first.runs == 10 and not first.complete
    saved = json.loads(state.read_text())["asyncio"]
    assert saved["runs"] == 10 and saved["frontier"]
    rest = ae.testing.explore(
        _race(True),
        seeds=1000,
        strategy="exhaustive",
        preemption_bound=2,
        backend="asyncio",
        state=state,
    )
    assert rest.complete and first.runs + rest.runs == whole.runs
    with pytest.raises(ValueError, match="preemption_bound=2, not 1"):
        ae.testing.explore(
            _race(True), strategy="exhaustive", preemption_bound=1, backend="asyncio", state=state
        )


def test_coverage_stops_when_no_new_interleaving_appears() -> None:
    async def one() -> None:
        x = ae.ones(2, requires_grad=True)
        await (x * 2).sum().backward()

    report = ae.testing.explore(one, seeds=500, strategy="coverage", patience=20, backend="trio")
    assert report.saturated and report.runs < 500 and report.distinct_schedules >= 1


# -- shrinking --------------------------------------------------------------------------------


def test_a_depth_2_bug_shrinks_to_at_most_2_preemptions_with_a_readable_interleaving() -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(_race(False), seeds=50, backend="asyncio")
    failure = info.value
    assert failure.preemptions <= 2 and failure.steps <= 10
    text = failure.interleaving
    assert "worker#" in text and "test_strategies.py:" in text and "(body)" in text
    assert text in str(failure) and failure.shrunk in str(failure)
    for _ in range(3):
        with pytest.raises(AssertionError, match="lost update"):
            ae.testing.replay(_race(False), failure.shrunk)


# -- saved failures ---------------------------------------------------------------------------


def test_a_failure_is_saved_and_replayed_first(tmp_path: pathlib.Path) -> None:
    db = tmp_path / "schedules.json"
    with pytest.raises(ae.testing.ScheduleFailure) as first:
        ae.testing.explore(_race(False), seeds=50, backend="trio", database=db, key="race")
    saved = json.loads(db.read_text())["race"]["trio"]
    assert saved == [first.value.shrunk]
    with pytest.raises(ae.testing.ScheduleFailure) as again:
        ae.testing.explore(_race(False), seeds=[40], backend="trio", database=db, key="race")
    assert again.value.runs == 0 and "saved schedule" in again.value.interleaving
    # a schedule of other code is dropped, not run as something else
    db.write_text(json.dumps({"race": {"trio": ["ae1:trio:random:0:" + encode_log([9] * 4)]}}))
    ae.testing.explore(_race(True), seeds=2, backend="trio", database=db, key="race")
    assert json.loads(db.read_text())["race"]["trio"] == []


# -- threads, user choice points, faults -------------------------------------------------------


def _thread_and_loop(fixed: bool) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        box = {"n": 0}

        def in_thread(box: dict[str, int]) -> None:
            seen = box["n"]
            ae.testing.choice("thread")
            box["n"] = seen + 1

        async def on_loop() -> None:
            seen = box["n"]
            if not fixed:
                await ae.testing.choice("loop")
            box["n"] = seen + 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, in_thread if not fixed else _bump, box)
            tg.start_soon(on_loop)
        assert box["n"] == 2, f"lost: {box['n']}"

    return run


def _bump(box: dict[str, int] | None = None) -> None:
    if box is not None:
        box["n"] += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thread_runs_in_steps_the_explorer_picks(backend: str) -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(_thread_and_loop(False), seeds=100, backend=backend)
    failure = info.value
    assert failure.preemptions >= 1
    with pytest.raises(AssertionError, match="lost: 1"):
        ae.testing.replay(_thread_and_loop(False), failure.shrunk)
    assert ae.testing.explore(_thread_and_loop(True), seeds=50, backend=backend).runs == 50


def test_a_threads_error_and_result_come_back() -> None:
    async def run() -> None:
        assert await anyio.to_thread.run_sync(sum, [1, 2]) == 3
        with pytest.raises(ZeroDivisionError):
            await anyio.to_thread.run_sync(lambda: 1 / 0)
        async with ae.Engine() as engine:
            assert await engine.run(max, 4, 7) == 7

    ae.testing.explore(run, seeds=5)


def test_choice_and_buggify_do_nothing_outside_explore() -> None:
    async def run() -> bool:
        await ae.testing.choice("here")
        return ae.testing.buggify(1.0)

    assert anyio.run(run) is False
    with pytest.raises(TypeError, match="str name"):
        ae.testing.choice(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="probability"):
        ae.testing.buggify(2)


def test_a_deadlock_is_a_run_timeout() -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(zoo.two_locks(False), seeds=50, backend="trio")
    cause = info.value.__cause__
    assert isinstance(cause, ae.testing.RunTimeout) and "deadlock" in str(cause)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"depth": 2}, "pass strategy='pct'"),
        ({"strategy": "pct", "depth": 0}, "depth must be an int >= 1"),
        ({"preemption_bound": 1}, "pass strategy='exhaustive'"),
        ({"strategy": "exhaustive", "preemption_bound": -1}, "preemption_bound must be"),
        ({"state": "x.json"}, "state saves an exhaustive search"),
        ({"compute_time": -1}, "compute_time is the most virtual seconds"),
        ({"run_limit": 0}, "run_limit is in virtual seconds"),
    ],
)
def test_strategy_arguments_are_checked(kwargs: dict[str, Any], match: str) -> None:
    async def noop() -> None:
        pass

    with pytest.raises(ValueError, match=match):
        ae.testing.explore(noop, **kwargs)


# -- the zoo ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(zoo.BUGS))
def test_each_zoo_bug_is_found_and_its_twin_passes(name: str, backend: str) -> None:
    make, _ = zoo.BUGS[name]
    found = False
    for strategy, options in (("pct", {"depth": 3}), ("exhaustive", {"preemption_bound": 2})):
        try:
            ae.testing.explore(
                make(False),
                seeds=1000,
                strategy=strategy,
                backend=backend,
                shrink_failures=False,
                **options,
            )
        except ae.testing.ScheduleFailure:
            found = True
            break
    assert found, f"{name} was not found on {backend}"
    ae.testing.explore(make(True), seeds=50, strategy="pct", depth=3, backend=backend)
    ae.testing.explore(
        make(True), seeds=50, strategy="exhaustive", preemption_bound=2, backend=backend
    )


def test_pick_makes_seeded_scenarios_that_exhaustive_enumerates() -> None:
    seen: set[tuple[str, ...]] = set()

    async def scenario() -> None:
        actions = tuple(ae.testing.pick(["request", "retry", "timeout"]) for _ in range(2))
        seen.add(actions)

    report = ae.testing.explore(
        scenario, seeds=100, strategy="exhaustive", preemption_bound=2, backend="trio"
    )
    assert report.complete and report.runs == 9 and len(seen) == 9
    assert ae.testing.pick(("a", "b")) == "a"  # outside explore: the first
    with pytest.raises(ValueError, match="non-empty sequence"):
        ae.testing.pick([])


def test_a_failure_with_faults_replays_with_them() -> None:
    faults = ae.testing.Faults(hook_error=0.3)

    async def unhandled() -> None:
        x = ae.ones(2, requires_grad=True)
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(_grad_twice, x)

    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(unhandled, seeds=50, faults=faults, backend="trio")
    failure = info.value
    assert "faults=Faults(" in str(failure)
    with pytest.raises(BaseExceptionGroup) as again:
        ae.testing.replay(unhandled, failure.shrunk, faults=faults)
    assert again.group_contains(ae.testing.InjectedFault)


async def _grad_twice(x: ae.Tensor) -> None:
    for k in (1.0, 2.0):
        await ae.grad((x * k).exp().sum(), [x])
