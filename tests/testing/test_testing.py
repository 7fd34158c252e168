"""ae.testing: seeded exploration and exact replay of concurrent schedules, on both backends."""

from __future__ import annotations

import doctest
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.runtime._choice import decode_log, encode_log
from aengine.testing import _explore, _failure, _search, _user
from bench.explore import load_example
from tests.oracle import torch_or_skip

pytest_plugins = ["pytester"]

BACKENDS = ["asyncio", "trio"]


lost_update = load_example()


# -- the worked example: a lost update ------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_lost_update_is_found_and_its_schedule_replays_it(backend: str) -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(lost_update.training(), seeds=200, backend=backend)
    failure = info.value
    assert failure.backend == backend and 0 <= failure.seed < 200
    assert isinstance(failure.__cause__, AssertionError)
    assert "lost an update" in str(failure.__cause__)
    assert failure.schedule in str(failure) and "ae.testing.replay(fn" in str(failure)
    for _ in range(10):
        with pytest.raises(AssertionError, match="lost an update") as again:
            ae.testing.replay(lost_update.training(), failure.schedule)
        assert str(again.value) == str(failure.__cause__)


def test_the_fix_passes_500_seeds() -> None:
    report = ae.testing.explore(lost_update.training(locked=True), seeds=500)
    assert report.runs == 1000  # 500 per backend


def test_pct_finds_the_lost_update_too() -> None:
    with pytest.raises(ae.testing.ScheduleFailure) as info:
        ae.testing.explore(lost_update.training(), seeds=200, strategy="pct", backend="trio")
    assert ":pct:" in info.value.schedule
    with pytest.raises(AssertionError, match="lost an update"):
        ae.testing.replay(lost_update.training(), info.value.schedule)


# -- three concurrent backwards on two sim devices -------------------------------------------


def _three_backwards(grads: list[list[float]]) -> Callable[[], Awaitable[None]]:
    """Backward i has i + 1 extra branches (so each graph task's node names tell which it is)."""

    async def three() -> None:
        async with ae.Engine(sim_latency=0.001):
            xs = [ae.tensor([0.5, -1.0, 2.0], requires_grad=True) for _ in range(3)]

            async def one(i: int) -> None:
                h = xs[i].to(f"sim:{i % 2}") * 1.5
                y = h.tanh()
                for _ in range(i + 1):
                    y = y + h.sin() * h
                await y.sum().backward()

            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(one, i)
            grads.extend(x.grad.tolist() for x in xs)

    return three


def _alone_orders() -> list[list[str]]:
    """Each backward's node order when it runs alone, unexplored (on_node)."""
    orders: list[list[str]] = []

    async def main() -> None:
        for i in range(3):
            seen: list[str] = []
            async with ae.Engine(on_node=lambda node, where: seen.append(node.name())):
                x = ae.tensor([0.5, -1.0, 2.0], requires_grad=True)
                h = x.to(f"sim:{i % 2}") * 1.5
                y = h.tanh()
                for _ in range(i + 1):
                    y = y + h.sin() * h
                await y.sum().backward()
            orders.append(seen)

    anyio.run(main)
    return orders


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_seed_gives_the_same_run_every_time(backend: str) -> None:
    for seed in (3, 11):
        runs = []
        for _ in range(2):
            grads: list[list[float]] = []
            report = ae.testing.explore(_three_backwards(grads), seeds=[seed], backend=backend)
            runs.append((report.traces[(backend, seed)], grads))
        assert runs[0] == runs[1]
        assert len(runs[0][0]) > 20 and len(runs[0][1]) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_interleavings_and_pytorchs_order_inside_each_backward(backend: str) -> None:
    torch = torch_or_skip()
    grads: list[list[float]] = []
    report = ae.testing.explore(_three_backwards(grads), seeds=100, backend=backend)
    # Each run answers a few dozen independent choices (which backward a
    # device serves, whether to yield at each boundary, jitter), so two seeds
    # rarely give the same node order: about 99 of 100 are distinct when
    # measured.  Half of them is the floor; without the choices every run
    # would have one order.
    assert report.distinct_schedules >= 50, report.distinct_schedules
    alone = _alone_orders()
    for trace in report.traces.values():
        by_backward: dict[str, list[str]] = {}
        for label, name, _ in trace:
            by_backward.setdefault(label, []).append(name)
        assert sorted(by_backward.values()) == sorted(alone)
    # the gradients are torch's in every run
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float32, requires_grad=True)
    want = []
    for i in range(3):
        h = x * 1.5
        y = h.tanh()
        for _ in range(i + 1):
            y = y + h.sin() * h
        (g,) = torch.autograd.grad(y.sum(), [x])
        want.append(g.tolist())
    got = np.array(grads).reshape(100, 3, 3)
    np.testing.assert_allclose(got, np.broadcast_to(np.array(want), got.shape), rtol=1e-5)


def test_trace_inside_a_run_and_after_it() -> None:
    seen: list[Any] = []

    async def step() -> None:
        x = ae.ones(2, requires_grad=True)
        await (x * 3).sum().backward()
        seen.append(ae.testing.trace())

    ae.testing.explore(step, seeds=1, backend="trio")
    assert [name for _, name, _ in seen[0]] == ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    assert ae.testing.trace() == seen[0]


class _Remote(ae.Function):
    """x * x whose backward awaits (a remote service), then runs a nested backward."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    async def backward(ctx, g):  # type: ignore[no-untyped-def]
        (x,) = ctx.saved_tensors
        await anyio.sleep(0.001)
        with ae.enable_grad():
            z = ae.tensor(x.detach().numpy(), requires_grad=True)
            (dz,) = await ae.grad((z * z).sum(), [z])  # nested: 2x
        return g * dz


def _waiters() -> Callable[[], Awaitable[None]]:
    """Four backwards, one admitted at a time; each has an async backward with a nested one."""

    async def four() -> None:
        async with ae.Engine(max_inflight=1):
            xs = [ae.tensor([1.0, 2.0], requires_grad=True) for _ in range(4)]

            async def one(i: int) -> None:
                y = _Remote.apply(xs[i] * float(i + 1)).sum()
                await y.backward()

            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(one, i)
        for i, x in enumerate(xs):
            k = float(i + 1)
            np.testing.assert_allclose(x.grad.numpy(), 2 * k * k * np.array([1.0, 2.0]))

    return four


@pytest.mark.parametrize("backend", BACKENDS)
def test_waiters_resume_in_a_seeded_order(backend: str) -> None:
    report = ae.testing.explore(_waiters(), seeds=30, backend=backend)
    # The first backward takes the free place; admission hands it on to a
    # seeded waiter each time, so the other three run in any of 3! = 6
    # orders (FIFO would give one); 30 seeds meet nearly all of them.
    orders_run = {
        tuple(dict.fromkeys(label for label, _, _ in trace if label < "b4"))
        for trace in report.traces.values()
    }
    assert len(orders_run) >= 5, orders_run
    assert all(order[0] == "b0" for order in orders_run)
    twice = ae.testing.explore(_waiters(), seeds=range(5), backend=backend)
    assert all(twice.traces[k] == report.traces[k] for k in twice.traces)


# -- faults ----------------------------------------------------------------------------------


def test_faults_cancel_raise_and_delay_and_grads_stay_clean() -> None:
    outcomes = {"done": 0, "fault": 0, "cancelled": 0}

    async def steps() -> None:
        w = ae.ones(3, requires_grad=True)
        failed = 0

        async def step() -> None:
            nonlocal failed
            try:
                await (w * 2).exp().sum().backward()
                outcomes["done"] += 1
            except ae.testing.InjectedFault:
                failed += 1
                outcomes["fault"] += 1

        try:
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(step)
        except anyio.get_cancelled_exc_class():
            outcomes["cancelled"] += 1
            raise
        # a failed backward commits nothing: each finished one added its gradient once
        done = 3 - failed
        got = np.zeros(3) if w.grad is None else w.grad.numpy()
        np.testing.assert_allclose(got, np.full(3, done * 2 * np.exp(2.0)), rtol=1e-6)

    faults = ae.testing.Faults(cancel=0.03, hook_error=0.05, delay=0.1)
    report = ae.testing.explore(steps, seeds=60, faults=faults)
    assert report.runs == 120
    assert all(outcomes.values()), outcomes


# -- bad input -------------------------------------------------------------------------------


async def _noop() -> None:
    pass


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        ({"seeds": 0}, ValueError, "seeds must be >= 1"),
        ({"seeds": [1, -2]}, ValueError, "ints >= 0"),
        ({"seeds": []}, ValueError, "seeds is empty"),
        ({"seeds": 2.5}, TypeError, "iterable of ints"),
        ({"strategy": "dfs"}, ValueError, "'random', 'pct', 'exhaustive' or 'coverage'"),
        ({"backend": "curio"}, ValueError, "'asyncio', 'trio' or 'both'"),
        ({"faults": {"cancel": 0.1}}, TypeError, "ae.testing.Faults"),
    ],
)
def test_explore_rejects_bad_arguments(kwargs: dict[str, Any], err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        ae.testing.explore(_noop, **kwargs)


def test_bad_functions_faults_and_schedules() -> None:
    with pytest.raises(TypeError, match="async function of no arguments"):
        ae.testing.explore(42, seeds=1)  # type: ignore[arg-type]
    coro = _noop()
    with pytest.raises(TypeError, match="not `step\\(\\)`"):
        ae.testing.explore(coro, seeds=1)  # type: ignore[arg-type]
    coro.close()
    with pytest.raises(ValueError, match="Faults.cancel is a probability"):
        ae.testing.Faults(cancel=2)
    with pytest.raises(ValueError, match="not a schedule string"):
        ae.testing.replay(_noop, "trio:17")
    with pytest.raises(ValueError, match="not a schedule string"):
        ae.testing.replay(_noop, "ae1:trio:random:3:@@@")
    with pytest.raises(ValueError, match="one backend"):
        ae.testing.replay(_noop, "ae1:trio:random:3:" + encode_log([]), backend="both")


def test_a_schedule_of_other_code_is_refused_clearly() -> None:
    grads: list[list[float]] = []
    # answers no run offers at its first choice (which has 2 to 3 answers)
    schedule = "ae1:asyncio:random:0:" + encode_log([7] * 5)
    with pytest.raises(ae.testing.ScheduleMismatch, match="the code changed"):
        ae.testing.replay(_three_backwards(grads), schedule)


@pytest.mark.anyio
async def test_explore_inside_a_running_loop_says_to_call_it_from_plain_code() -> None:
    with pytest.raises(RuntimeError, match="call it from plain"):
        ae.testing.explore(_noop, seeds=1)


def test_schedule_strings_round_trip() -> None:
    log = [0, 1, 0, 0, 2, 300, 1 << 20, 0]
    assert decode_log(encode_log(log)) == log
    failure = ae.testing.ScheduleFailure(4, "trio", "ae1:trio:random:4:x", ValueError("v"))
    assert isinstance(failure, AssertionError) and failure.seed == 4


def test_docstring_examples() -> None:
    for mod in (_explore, _failure, _search, _user, ae.testing):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
        assert result.failed == 0 and result.attempted > 0


# -- the pytest plugin -----------------------------------------------------------------------

PLUGIN_TEST = """
import anyio, pytest
import aengine as ae

counts = {"runs": 0}

@pytest.fixture
def box():
    return {"n": 0}

@pytest.mark.aengine_explore(seeds=3, backend="trio")
async def test_passes(box):
    counts["runs"] += 1
    x = ae.ones(2, requires_grad=True)
    await (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]

def test_ran_one_seed_on_trio():
    assert counts["runs"] == 1  # --aengine-seed=0; the marker's backend="trio"

@pytest.mark.aengine_explore(seeds=50)
async def test_fails():
    async with anyio.create_task_group() as tg:
        seen = []
        async def one(i):
            x = ae.ones(2, requires_grad=True)
            await (x * 2).exp().sum().backward()
            seen.append(i)
        for i in range(2):
            tg.start_soon(one, i)
    assert seen == [0, 1]
"""


#: native tracebacks: pytest's own formatting of the inner failure re-parses
#: sources, which Python 3.11.7 may refuse ("AST constructor recursion depth
#: mismatch") after the deep stacks of a failing run
INNER = (
    "-p",
    "no:cacheprovider",
    "--tb=native",
    "-o",
    "asyncio_default_fixture_loop_scope=function",
)


def test_the_pytest_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plugin=PLUGIN_TEST)
    result = pytester.runpytest_inprocess(*INNER, "--aengine-seed=0")
    result.assert_outcomes(passed=2, failed=1)
    text = result.stdout.str()
    assert "ScheduleFailure" in text and "--aengine-replay=" in text
    schedule = text.split("--aengine-replay='")[1].split("'")[0]
    again = pytester.runpytest_inprocess(*INNER, f"--aengine-replay={schedule}", "-k", "fails")
    again.assert_outcomes(failed=1)
    assert "ScheduleFailure" not in again.stdout.str()  # the test's own error, as it is


# -- what a run needs ------------------------------------------------------------------------


def test_a_missing_virtual_clock_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "looptime", None)  # its import fails
    with pytest.raises(ImportError, match=r"pip install 'aengine\[testing\]'"):
        ae.testing.explore(_noop, seeds=1, backend="asyncio")
    with pytest.raises(ImportError, match="looptime"):
        ae.testing.replay(_noop, "ae1:asyncio:random:0:" + encode_log([]))


def test_the_default_backends_need_only_one_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """backend="both" (the default) explores what is installed: trio alone will do."""
    monkeypatch.setitem(sys.modules, "looptime", None)  # its import fails
    report = ae.testing.explore(_noop, seeds=2)
    assert report.runs == 2 and {b for b, _ in report.traces} == {"trio"}
    for name in ("trio", "trio._core", "trio._core._run"):  # and now neither
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"needs trio, or the looptime library"):
        ae.testing.explore(_noop, seeds=1)


def test_a_trio_without_a_seedable_scheduler_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from trio._core import _run

    monkeypatch.delattr(_run, "_r")
    with pytest.raises(RuntimeError, match="no seedable scheduler"):
        ae.testing.explore(_noop, seeds=1)  # before any run, asyncio's too


def test_the_benchmark_prints_seeds_per_second(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.explore import main

    assert main(["--seeds", "3", "--budget", "20", "--zoo", "lost_update"]) == 0
    out = capsys.readouterr().out
    assert out.count("| fixed (lock) |") == 2 and out.count("| buggy |") == 2
    assert out.count("| lost_update (lost update) |") == 2 and "| passed |" in out


def test_the_plugin_saves_failures_and_replays_them_first(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plugin=PLUGIN_TEST)
    with_cache = tuple(a for a in INNER if a not in ("-p", "no:cacheprovider"))
    first = pytester.runpytest_inprocess(*with_cache, "-k", "fails")
    first.assert_outcomes(failed=1)
    saved = pytester.path / ".pytest_cache" / "d" / "aengine" / "schedules.json"
    (key,) = json.loads(saved.read_text())
    assert key.endswith("test_plugin.py::test_fails")
    again = pytester.runpytest_inprocess(*with_cache, "-k", "fails")
    again.assert_outcomes(failed=1)
    assert "a saved schedule, replayed first" in again.stdout.str()
    elsewhere = pytester.path / "kept.json"
    off = pytester.runpytest_inprocess(
        *with_cache, "-k", "fails", f"--aengine-schedules={elsewhere}"
    )
    off.assert_outcomes(failed=1)
    assert elsewhere.exists()
