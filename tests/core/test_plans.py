"""Backward plans (aengine/core/_plan.py): reused schedules give the general path's results.

Every test compares a run with plans against the same run without them,
bit for bit (``np.array_equal`` on float64 and the errors' text), and
checks through ``PLANS.hits`` / ``PLANS.misses`` that the plan was (or was
not) used, so that none passes by never taking the path it is about.
"""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aengine as ae
from aengine.core import GraphTask
from aengine.core._plan import BUILD_AT, MAX_PLANS, PLANS
from aengine.core._plan_code import LONG

DEPTH = 12  # links: well above the depth below which graphs are not planned


@pytest.fixture(autouse=True)
def _plans() -> Iterator[None]:
    """Plans on, an empty cache, and each plan built at its structure's second sighting.

    (The default, BUILD_AT, builds later: NOTE [When a plan is built]; these
    tests count their steps from the second, as ``test_a_plan_is_built_at_the_
    build_at_th_sighting`` does from the default.)
    """
    PLANS.enabled = True
    PLANS.cache.clear()
    PLANS.build_at = 2
    yield
    PLANS.enabled = True
    PLANS.build_at = BUILD_AT
    PLANS.cache.clear()


def _x(n: int = 4) -> ae.Tensor:
    return ae.tensor(np.linspace(0.1, 0.9, n), requires_grad=True)


def _chain(x: ae.Tensor, depth: int = DEPTH) -> ae.Tensor:
    y = x
    for i in range(depth):
        y = ae.sin(y * (1.0 + i / 100) + 0.01)
    return y.sum()


def _wide(x: ae.Tensor, w: ae.Tensor, branches: int = DEPTH) -> ae.Tensor:
    loss = (ae.sin(x * w) * 0.5).sum()
    for c in np.linspace(0.5, 1.5, branches):
        loss = loss + (ae.sin(x * float(c)) * w).sum()
    return loss


def _steps(fn: Callable[[], Any], steps: int, plans: bool) -> list[Any]:
    """``fn()`` ``steps`` times with plans on or off (a fresh cache), its results."""
    PLANS.enabled = plans
    PLANS.cache.clear()
    return [fn() for _ in range(steps)]


def _same(a: Any, b: Any) -> None:
    if isinstance(a, list | tuple):
        assert len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            _same(u, v)
    elif a is None:
        assert b is None
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _grads(x: ae.Tensor, *more: ae.Tensor) -> Callable[..., Any]:
    return lambda loss, **kw: [
        None if g is None else g.data for g in ae.sync.grad(loss, [x, *more], **kw)
    ]


def test_plan_hits_give_the_general_paths_gradients() -> None:
    x, w = _x(), _x()
    for build in (lambda: _chain(x), lambda: _wide(x, w)):

        def step(build: Callable[[], ae.Tensor] = build) -> Any:
            return _grads(x, w)(build(), allow_unused=True)

        general = _steps(step, 5, plans=False)
        hits = PLANS.hits
        planned = _steps(step, 5, plans=True)
        assert PLANS.hits - hits == 3  # seen, built, then run by the plan
        _same(planned, general)


def test_backward_accumulates_the_same_grad() -> None:
    x, w = _x(), _x()

    def step() -> Any:
        x.grad = w.grad = None
        ae.sync.backward(_wide(x, w))
        return [x.grad.data, w.grad.data]

    general = _steps(step, 4, plans=False)
    hits = PLANS.hits
    _same(_steps(step, 4, plans=True), general)
    assert PLANS.hits - hits == 2


def test_a_structure_change_under_the_same_key_misses() -> None:
    """Same root, same depth, other edges: the plan does not match; the general path runs."""
    x = _x()

    def step(i: int) -> Any:
        a = x * 2.0
        b = x * 3.0
        y = ae.sin(a * (a if i < 3 else b))  # the same nodes, recorded alike; another edge
        return _grads(x)(_chain(y))

    general = [step(i) for i in range(5)]
    PLANS.cache.clear()
    misses = PLANS.misses
    _same([step(i) for i in range(5)], general)
    assert PLANS.misses - misses == 1


def test_a_node_recorded_apart_from_the_graph_keeps_the_plan() -> None:
    """Another node recorded between two of the graph's (not part of it) shifts the
    sequence numbers of a chain, which decide nothing there: the plan still runs it.

    (Only the numbers that the heap compares are matched: ``plan.ordered``.)
    """
    x = _x()

    def step(i: int) -> Any:
        a = x * 2.0
        b = x * 3.0
        y = ae.sin(a if i < 3 else b)  # the graph reaches one of the two
        return _grads(x)(_chain(y))

    general = [step(i) for i in range(5)]
    PLANS.cache.clear()
    hits, misses = PLANS.hits, PLANS.misses
    _same([step(i) for i in range(5)], general)
    assert (PLANS.hits - hits, PLANS.misses - misses) == (3, 0)


def test_a_shape_change_gives_the_general_paths_result() -> None:
    xs = [_x(4), _x(4), _x(4), _x(7), _x(4)]

    def run() -> list[Any]:
        return [_grads(x)(_chain(x)) for x in xs]

    general = _steps(run, 1, plans=False)
    _same(_steps(run, 1, plans=True), general)


def test_a_hook_added_takes_the_general_path_and_runs() -> None:
    x = _x()
    calls: list[str] = []

    def step(i: int) -> Any:
        y = ae.sin(x * 1.5)
        handle = None
        if i == 3:
            y.register_hook(lambda g: calls.append("tensor") or g * 2)
        if i == 4:
            handle = x.register_hook(lambda g: calls.append("leaf") or g * 3)
        try:
            return _grads(x)(_chain(y))
        finally:
            if handle is not None:
                handle.remove()

    general = [step(i) for i in range(5)]
    assert calls == ["tensor", "leaf"]
    calls.clear()
    PLANS.cache.clear()
    hits, misses = PLANS.hits, PLANS.misses
    planned = [step(i) for i in range(5)]
    assert calls == ["tensor", "leaf"]
    _same(planned, general)
    # step 2 by the plan; step 3 misses it; step 4 (a hook on a leaf) gets none built
    assert (PLANS.hits - hits, PLANS.misses - misses) == (1, 1)


def test_a_saved_tensor_modified_in_place_raises_the_same_error() -> None:
    x = _x()

    def step(bump: bool) -> str:
        h = x * 1.0
        y = ae.sin(h)  # saves h
        loss = _chain(y)
        if bump:
            with ae.no_grad():
                h.add_(1.0)
        try:
            ae.sync.grad(loss, [x])
        except Exception as exc:  # the same class and text on both paths
            return f"{type(exc).__name__}: {exc}"
        return "no error"

    PLANS.enabled = False
    expected = step(True)
    assert "modified by an inplace operation" in expected
    PLANS.enabled = True
    for _ in range(3):
        assert step(False) == "no error"
    hits = PLANS.hits
    assert step(True) == expected
    assert PLANS.hits - hits == 1  # the plan matched: the check is evaluate's


def test_backward_twice_raises_the_same_error() -> None:
    x = _x()
    for _ in range(3):
        ae.sync.grad(_chain(x), [x], retain_graph=True)
    loss = _chain(x)
    ae.sync.grad(loss, [x], retain_graph=True)  # a plan, keeping the graph
    again = ae.sync.grad(loss, [x])  # the same graph again (by the plan)
    _same([g.data for g in again], [g.data for g in ae.sync.grad(_chain(x), [x])])
    with pytest.raises(ae.AutogradError, match="backward through the graph a second time"):
        ae.sync.grad(loss, [x])


def test_create_graph_gives_the_same_second_order() -> None:
    x = _x()

    def step() -> Any:
        (g,) = ae.sync.grad(_chain(x), [x], create_graph=True)
        return [g.data, ae.sync.grad(g.sum(), [x])[0].data]

    general = _steps(step, 4, plans=False)
    _same(_steps(step, 4, plans=True), general)


def test_nodes_run_in_the_same_order() -> None:
    """A sync custom Function records when its backward runs (ties between branches included)."""
    order: list[int] = []

    class Tag(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, k: int) -> Any:
            ctx.k = k
            return a * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            order.append(ctx.k)
            return g, None

    x = _x()

    def step() -> list[int]:
        order.clear()
        loss = Tag.apply(x, 0).sum()
        for k in range(1, DEPTH):
            loss = loss + Tag.apply(ae.sin(x * float(k)), k).sum() * Tag.apply(x, -k).sum()
        ae.sync.grad(loss, [x])
        return list(order)

    general = _steps(step, 4, plans=False)
    hits = PLANS.hits
    assert _steps(step, 4, plans=True) == general
    assert PLANS.hits - hits == 2


def test_a_plan_holds_no_graph() -> None:
    x = _x()
    for _ in range(3):
        ae.sync.grad(_chain(x), [x])
    loss = _chain(x)
    hits = PLANS.hits
    ae.sync.grad(loss, [x])
    assert PLANS.hits - hits == 1
    node = weakref.ref(loss.grad_fn)
    del loss
    gc.collect()
    assert node() is None


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _x()
    for depth in range(DEPTH, DEPTH + MAX_PLANS + 10):
        ae.sync.grad(_chain(x, depth), [x])
    assert len(PLANS.cache.entries) == MAX_PLANS
    # in nodes too: the least recently used plans go; a larger graph gets none
    monkeypatch.setattr("aengine.core._plan.MAX_PLAN_NODES", 200)
    PLANS.cache.clear()
    hits = PLANS.hits
    for depth in (12, 13, 14, 40, 70):  # 3 * depth + 2 nodes
        for _ in range(3):
            ae.sync.grad(_chain(x, depth), [x])
        assert PLANS.cache.nodes <= 200
    assert PLANS.hits - hits == 4  # 212 nodes (depth 70) get no plan
    plans = [e[0] for e in PLANS.cache.entries.values() if e[0] is not None]
    assert sorted(len(p.types) for p in plans) == [44, 122]  # 38 and 41 went first
    assert PLANS.cache.nodes == 166


def test_leaving_a_plan_part_way_gives_the_same_gradients() -> None:
    """``_leave_plan`` (another scheduler mid-backward): the general path goes on exactly."""
    x, w = _x(), _x()
    (expected,) = ae.sync.grad(_wide(x, w), [x])
    for _ in range(2):
        ae.sync.grad(_wide(x, w), [x])
    for stop in (1, 5, 17, 30):
        loss = _wide(x, w)
        gt = GraphTask(keep_graph=False, create_graph=False)
        gt.plan((loss,), [(loss.grad_fn, 0)], [np.ones(())], [(x._grad_accumulator(), 0)], False)
        gt.attach(None)
        for _ in gt.pending:  # type: ignore[union-attr]
            pass
        gt.pending = None
        assert gt.planned is not None and gt.planned.pos == 0
        _run_until(gt, stop)
        gt._leave_plan()
        assert gt.planned is None
        assert gt.run() is None
        gt.check_complete()
        np.testing.assert_array_equal(gt.captured[0], expected.data)


def _run_until(gt: GraphTask, stop: int) -> None:
    """Run the first ``stop`` nodes of ``gt``'s plan (a deadline already past yields)."""
    assert gt.planned is not None
    plan = gt.planned.plan
    keep = plan.steps
    plan.steps = keep[:stop]
    try:
        assert gt.run() is None
    finally:
        plan.steps = keep


@pytest.mark.anyio
async def test_async_plans_yield_and_give_the_same_gradients() -> None:
    x, w = _x(), _x()
    PLANS.enabled = False
    (expected,) = await ae.grad(_wide(x, w, 200), [x])
    PLANS.enabled = True
    hits = PLANS.hits
    async with ae.Engine(time_slice=1e-9):  # a yield at every clock check
        for _ in range(4):
            (g,) = await ae.grad(_wide(x, w, 200), [x])
            np.testing.assert_array_equal(g.data, expected.data)
    assert PLANS.hits - hits >= 2


@st.composite
def _programs(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    n = draw(st.integers(10, 30))
    return [
        (draw(st.sampled_from(["add", "mul", "sin", "sum"])), draw(st.integers(0, 99)), i)
        for i in range(n)
    ]


def _run_program(prog: list[tuple[str, int, int]], xs: list[ae.Tensor]) -> Any:
    vals = list(xs)
    for op, a, _ in prog:
        u = vals[a % len(vals)]
        v = vals[(a * 7 + 3) % len(vals)]
        if op == "add":
            vals.append(u + v)
        elif op == "mul":
            vals.append(u * v)
        elif op == "sin":
            vals.append(ae.sin(u))
        else:
            vals.append(u.sum() * v)
    loss = vals[-1].sum()
    for t in vals[-4:-1]:
        loss = loss + t.sum()
    return loss


@settings(max_examples=25, deadline=None)
@given(_programs())
def test_random_programs_give_the_same_gradients_with_and_without_plans(
    prog: list[tuple[str, int, int]],
) -> None:
    xs = [ae.tensor(np.linspace(0.1, 0.5, 3) * (i + 1), requires_grad=True) for i in range(3)]

    def step() -> Any:
        loss = _run_program(prog, xs)
        return [
            None if g is None else g.data
            for g in ae.sync.grad(loss, xs, allow_unused=True, materialize_grads=False)
        ]

    general = _steps(step, 4, plans=False)
    hits = PLANS.hits
    with pytest.MonkeyPatch.context() as mp:  # small programs too
        mp.setattr("aengine.core._graph_task.MIN_DEPTH", 0)
        _same(_steps(step, 4, plans=True), general)
    assert PLANS.hits - hits == 2


def test_anomaly_mode_and_a_profile_keep_the_general_path() -> None:
    x = _x()
    for _ in range(3):
        ae.sync.grad(_chain(x), [x])
    (expected,) = ae.sync.grad(_chain(x), [x])
    hits, before = PLANS.hits, PLANS.misses
    with (
        pytest.warns(UserWarning, match="Anomaly Detection has been enabled"),
        ae.detect_anomaly(),
    ):
        (g,) = ae.sync.grad(_chain(x), [x])
    np.testing.assert_array_equal(g.data, expected.data)
    with ae.profile():
        (g,) = ae.sync.grad(_chain(x), [x])
    np.testing.assert_array_equal(g.data, expected.data)
    assert (PLANS.hits, PLANS.misses) == (hits, before)  # not even looked up
    ae.sync.grad(_chain(x), [x])
    assert PLANS.hits == hits + 1  # and the plan is still there


@pytest.mark.anyio
async def test_a_planned_backward_sent_back_from_its_thread_goes_on_by_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A heavy first node starts the backward in a compute thread; past a slice a large
    graph comes back to the loop (another scheduler): the plan hands over mid-run."""
    left: list[int] = []
    leave = GraphTask._leave_plan

    def counted(gt: GraphTask) -> None:
        assert gt.planned is not None
        left.append(gt.planned.pos)
        leave(gt)

    monkeypatch.setattr(GraphTask, "_leave_plan", counted)

    class Slow(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            return a * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            time.sleep(0.002)  # 40 of them: past the thread's time slice
            return g

    rng = np.random.default_rng(0)
    w = ae.tensor(rng.standard_normal((32, 32)) / 6, requires_grad=True)
    x = ae.tensor(np.linspace(-1, 1, 8 * 32).reshape(8, 32), requires_grad=True)

    def loss() -> ae.Tensor:
        h = x
        for i in range(300):  # 600 nodes: more than a thread keeps
            h = ae.sin(h) * 0.99 if i % 10 else Slow.apply(h)
        return ae.tanh(h @ w).sum()  # heavy first nodes

    PLANS.enabled = False
    want = [g.numpy() for g in await ae.grad(loss(), [x, w])]
    PLANS.enabled = True
    hits = PLANS.hits
    async with ae.Engine(offload_threshold=1) as engine:
        for _ in range(4):
            got = await ae.grad(loss(), [x, w])
            for g, ref in zip(got, want, strict=True):
                np.testing.assert_array_equal(g.numpy(), ref)
        in_threads = engine.stats().backwards_in_threads
        assert in_threads >= 4, in_threads
    assert PLANS.hits - hits == 2, PLANS.hits - hits
    assert len(left) == 2 and all(pos > 0 for pos in left), left  # (positions where it left)


def test_a_node_with_another_number_of_outputs_misses() -> None:
    """A custom Function's node keeps its own output count: part of the structure."""

    class Split(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, two: bool) -> Any:
            return (a * 1.0, a * 2.0) if two else a * 1.0

        @staticmethod
        def backward(ctx: Any, *gs: Any) -> Any:
            return (gs[0] if gs[1] is None else gs[0] + gs[1]) if len(gs) == 2 else gs[0], None

    x = _x()

    def step(i: int) -> Any:
        out = Split.apply(x, i < 3)
        return _grads(x)(_chain(out[0] if i < 3 else out))

    general = [step(i) for i in range(4)]
    PLANS.cache.clear()
    hits, misses = PLANS.hits, PLANS.misses
    _same([step(i) for i in range(4)], general)
    assert (PLANS.hits - hits, PLANS.misses - misses) == (1, 1)


def test_time_slices_end_at_the_same_nodes() -> None:
    """With the deadline past, ``run`` yields at every clock check: at the same nodes."""
    ran: list[int] = []

    class Tag(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            return a * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            ran.append(0)
            return g

    x = _x()

    def slices() -> list[int]:
        loss = Tag.apply(x).sum()
        for k in range(DEPTH):
            loss = loss + (Tag.apply(ae.sin(x * float(k))) * Tag.apply(x)).sum()
        gt = GraphTask(keep_graph=False, create_graph=False)
        gt.plan((loss,), [(loss.grad_fn, 0)], [np.ones(())], [(x._grad_accumulator(), 0)], False)
        gt.attach(None)
        ran.clear()
        ends = []
        while gt.run(deadline=-1.0) is not None:
            ends.append(len(ran))
        gt.check_complete()
        return ends

    def running(ends: list[int]) -> list[int]:
        """The slices once nodes run (preparing, matching and building yield apart)."""
        return ends[ends.index(0) + ends.count(0) - 1 :] if 0 in ends else ends

    general = _steps(slices, 4, plans=False)
    hits = PLANS.hits
    planned = _steps(slices, 4, plans=True)
    assert PLANS.hits - hits == 2
    assert list(map(running, planned)) == list(map(running, general)) and len(general[-1]) > 5
    # the step that builds the plan yields between the passes of its build
    assert planned[1].count(0) > general[1].count(0) + 5


def test_every_kind_of_step_gives_the_general_paths_gradients_and_slices() -> None:
    """A plan's step kinds (NOTE [Backward plans], ``Step``): each runs as the general path.

    The graph has chains (NEXT: a buffer handed straight to the next node),
    fan-in (ADD), a node of several outputs (a buffer of several slots),
    gradients to a node that runs later (ONE_ROUTE) and leaves (GENERAL);
    with the deadline past, the run yields at every clock check, also
    between a node and the next one it hands its buffer to.
    """
    from aengine.core._plan_code import GENERAL, NEXT, ONE_ROUTE, ROUTES

    x, w = _x(8), _x(8)

    def loss_of() -> ae.Tensor:
        a, b = ae.split(ae.sin(x * w), 4)
        loss = (a * b).sum()
        for k in range(DEPTH):
            loss = loss + ae.sin(a * float(k) + b).sum() * 0.5
        return _chain(loss.reshape(1), 3) + (ae.cos(x) * w).sum()

    def slices() -> tuple[list[Any], list[int]]:
        loss = loss_of()
        gt = GraphTask(keep_graph=False, create_graph=False)
        edges = [(x._grad_accumulator(), 0), (w._grad_accumulator(), 0)]
        gt.plan((loss,), [(loss.grad_fn, 0)], [np.ones(())], edges, False)
        gt.attach(None)
        ends = []
        runs = 0
        while gt.run(deadline=-1.0) is not None:
            if gt.pending is None:  # (preparing, matching and building yield apart)
                runs += 1
                ends.append(runs)
        gt.check_complete()
        return [g.copy() for g in gt.captured], ends

    general = _steps(slices, 4, plans=False)
    hits = PLANS.hits
    planned = _steps(slices, 4, plans=True)
    assert PLANS.hits - hits == 2
    _same([g for g, _ in planned], [g for g, _ in general])
    assert [e for _, e in planned] == [e for _, e in general] and len(general[0][1]) > 10
    plan = next(e[0] for e in PLANS.cache.entries.values() if e[0] is not None)
    kinds = {kind for _, kind, _ in plan.steps}
    assert kinds == {GENERAL, ROUTES, ONE_ROUTE, NEXT}
    hows = {r[3] for _, kind, prog in plan.steps if kind == ROUTES for r in prog}
    # a new one-slot buffer, an addition by offset and by position (a large
    # fan-in: the leaves' accumulators), a new 2-slot buffer
    assert {0, -1, -2, 2} <= hows


def test_a_leafs_accumulator_made_anew_keeps_the_plan() -> None:
    """A leaf's AccumulateGrad made during a forward takes no sequence number.

    Otherwise the nodes recorded after it are numbered one further than in
    the step that built the plan, and the plan misses whenever the last
    graph holding the accumulator was freed before the forward.
    """
    x, w = _x(), _x()

    def loss() -> ae.Tensor:
        return _chain(x) + (ae.sin(w) * 2.0).sum()

    hold = loss()  # keeps both accumulators alive while the plan is built
    for _ in range(2):
        _grads(x, w)(loss())  # seen, then built
    del hold
    gc.collect()
    assert x._acc is not None and x._acc() is None  # gone: the next forward makes them anew
    hits, misses = PLANS.hits, PLANS.misses
    _grads(x, w)(loss())
    assert (PLANS.hits - hits, PLANS.misses - misses) == (1, 0)


@pytest.mark.anyio
async def test_every_step_of_a_repeated_structure_yields_to_the_loop() -> None:
    """A ticker counts the loop's turns during each backward of one structure.

    With a time slice that ends at every clock check, each step yields at
    least once per clock check's worth of nodes; the step that builds the
    plan yields at least once more per BUILD_CHUNK nodes (the build runs in
    the slices: NOTE [Slicing plans]); the planned steps (matching, then
    the planned run) yield at least as often as the general path does.
    Counts, not times: the ticker's turns per yield are fixed by the loop.
    """
    from aengine.core._plan import BUILD_CHUNK
    from aengine.core._running import CLOCK_EVERY

    links = 700
    nodes = 3 * links + 2  # (mul, add and sin per link; the sum and the leaf's accumulator)
    x = _x(16)

    async def ticks_per_step(plans: bool) -> list[int]:
        PLANS.enabled = plans
        PLANS.cache.clear()
        counts = []
        async with ae.Engine(time_slice=1e-9):  # a slice ends at every clock check
            for _ in range(4):
                loss = _chain(x, links)
                ticks = 0
                done = False

                async def ticker() -> None:
                    nonlocal ticks
                    while not done:
                        await anyio.sleep(0)
                        ticks += 1

                async with anyio.create_task_group() as tg:
                    tg.start_soon(ticker)
                    await ae.grad(loss, [x])
                    done = True
                counts.append(ticks)
        return counts

    general = await ticks_per_step(False)
    hits = PLANS.hits
    planned = await ticks_per_step(True)
    assert PLANS.hits - hits == 2
    assert min(general + planned) >= nodes // (CLOCK_EVERY + 1)
    assert planned[0] == pytest.approx(general[0], abs=4)  # the first step: the general path
    assert planned[1] >= general[1] + nodes // BUILD_CHUNK, (planned, general)
    assert min(planned[2:]) >= max(general[2:]), (planned, general)


@pytest.mark.anyio
async def test_a_backward_cancelled_while_it_builds_or_matches_its_plan_leaves_nothing_behind() -> (
    None
):
    """Cancelled inside the sliced build (or match): ``.grad`` untouched, the plan built
    at a later sighting, and every later step gives the general path's gradients."""
    x = _x(16)
    PLANS.enabled = False
    expected = (await ae.grad(_chain(x, 600), [x]))[0].data
    PLANS.enabled = True

    async def step() -> Any:
        x.grad = None
        await ae.backward(_chain(x, 600))
        return x.grad.data

    async def cancel_after(turns: int, scope: anyio.CancelScope) -> None:
        for _ in range(turns):
            await anyio.sleep(0)
        scope.cancel()

    # loop turns before the cancellation: past the dependency pass's few
    # slices into the build's many; a couple of slices into the match
    for phase, turns in (("build", 60), ("match", 6)):
        PLANS.cache.clear()
        async with ae.Engine(time_slice=1e-9):  # a slice ends at every clock check
            await step()  # seen once
            if phase == "match":
                await step()  # built
            x.grad = None
            loss = _chain(x, 600)
            hits = PLANS.hits
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as scope:
                    tg.start_soon(cancel_after, turns, scope)
                    await ae.backward(loss)
            assert scope.cancelled_caught and x.grad is None
            (entry,) = PLANS.cache.entries.values()
            if phase == "build":
                assert entry[0] is None  # cancelled before the build was stored
            else:
                assert entry[0] is not None and PLANS.hits == hits  # before the match ended
            hits, misses = PLANS.hits, PLANS.misses
            for _ in range(3):
                np.testing.assert_array_equal(await step(), expected)
        assert PLANS.misses == misses
        # build: built again, then two hits; match: the plan was kept, three hits
        assert PLANS.hits - hits == (2 if phase == "build" else 3)


@pytest.mark.anyio
async def test_two_backwards_building_one_structures_plan_at_once() -> None:
    """Two backwards of one structure, their builds interleaved slice by slice: both give
    the general path's gradients, and the plan left serves the next ones."""
    x = _x(16)
    PLANS.enabled = False
    expected = (await ae.grad(_chain(x, 400), [x]))[0].data
    PLANS.enabled = True
    got: list[Any] = []

    async def one() -> None:
        (g,) = await ae.grad(_chain(x, 400), [x])
        got.append(g.data)

    async with ae.Engine(time_slice=1e-9):
        await one()  # seen once
        async with anyio.create_task_group() as tg:  # both build
            tg.start_soon(one)
            tg.start_soon(one)
        hits = PLANS.hits
        await one()
        assert PLANS.hits - hits == 1
    assert len(got) == 4
    for g in got:
        np.testing.assert_array_equal(g, expected)


# -- plans compiled to code (NOTE [Plans compiled to code] in _plan_code.py) ---------------


def _plan_of_cache() -> Any:
    (plan,) = [e[0] for e in PLANS.cache.entries.values() if e[0] is not None]
    return plan


def test_compiled_stretches_give_the_node_by_node_loops_results() -> None:
    """The generated stretches run almost every node of a chain and of a wide graph, with
    the gradients of the plan's loop (its stretches turned off) and of the general path."""
    x, w = _x(), _x()
    for build in (lambda: _chain(x, 40), lambda: _wide(x, w, 40)):

        def step(build: Callable[[], ae.Tensor] = build) -> Any:
            return _grads(x, w)(build(), allow_unused=True)

        general = _steps(step, 3, plans=False)
        planned = _steps(step, 3, plans=True)  # (the last one by the plan)
        plan = _plan_of_cache()
        first, more = plan.codes
        assert len(first) == len(more) == len(plan.steps)
        assert sum(f is not None for f in more) > 0.8 * len(more)
        # a stretch with a node of the general path (a leaf's accumulator) has none
        general_at = [p for p, (_, kind, _) in enumerate(plan.steps) if kind == 0]
        assert general_at and all(more[p] is None for p in general_at)
        # a sync run reads no clock: runs of LONG nodes are one function each
        assert len(plan.longs) > len(plan.steps) // (2 * LONG)
        assert not any(p <= g < p + LONG for p in plan.longs for g in general_at)
        hits = PLANS.hits
        longs, plan.longs = plan.longs, {}
        plan.codes = ([None] * len(first), [None] * len(more))  # the loop, node by node
        looped = step()
        plan.codes, plan.longs = (first, more), longs
        again = step()
        assert PLANS.hits - hits == 2
        _same([planned[-1], looped, again], [general[-1]] * 3)


def test_a_rule_changed_after_the_plan_was_built_is_the_one_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Generated code calls each node's ``evaluate``: it keeps no rule of its own."""
    x = _x()
    sin_node = type(ae.sin(x * 1.0).grad_fn)
    rule = sin_node.rule

    def doubled(F: Any, g: Any, saved: Any, node: Any) -> Any:
        return [None if o is None else o * 2.0 for o in rule(F, g, saved, node)]

    def step() -> Any:
        return _grads(x)(_chain(x))

    before = _steps(step, 3, plans=True)[-1]  # built and run by a plan
    monkeypatch.setattr(sin_node, "rule", staticmethod(doubled))
    hits = PLANS.hits
    planned = step()
    assert PLANS.hits - hits == 1
    general = _steps(step, 1, plans=False)[0]
    _same(planned, general)
    assert not np.array_equal(planned[0], before[0])


def test_grad_of_some_inputs_prunes_the_same_nodes_by_a_plan() -> None:
    """grad() of one leaf of two: the nodes that lead only to the other one never run."""
    ran: list[int] = []

    class Tag(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            return a * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            ran.append(0)
            return g

    x, w = _x(), _x()

    def step() -> Any:
        ran.clear()
        loss = _chain(x) + (ae.sin(Tag.apply(w)) * 2.0).sum() + _chain(x * w, 3)
        return [*_grads(x)(loss), len(ran)]

    general = _steps(step, 4, plans=False)
    hits = PLANS.hits
    planned = _steps(step, 4, plans=True)
    assert PLANS.hits - hits == 2
    _same(planned, general)
    assert planned[-1][-1] == 0  # the branch of w alone was pruned


def test_an_error_inside_a_compiled_stretch_stops_where_the_general_path_stops() -> None:
    """A node that raises in the middle of a stretch: the same error, and no node after it
    runs; the plan stays and serves the next backward."""
    ran: list[int] = []

    class Tag(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, k: int) -> Any:
            ctx.k = k
            return a * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            ran.append(ctx.k)
            if ctx.k == fail_at:
                raise ValueError(f"boom at {ctx.k}")
            return g, None

    fail_at = -1
    x = _x()

    def step() -> Any:
        ran.clear()
        y = x
        for k in range(DEPTH):
            y = Tag.apply(ae.sin(y * 1.01), k)
        try:
            return _grads(x)(y.sum())
        except Exception as exc:  # the same class and text on both paths
            return [f"{type(exc).__name__}: {exc}", list(ran)]

    general = _steps(step, 3, plans=False)
    planned = _steps(step, 3, plans=True)
    _same(planned, general)
    plan = _plan_of_cache()
    assert sum(f is not None for f in plan.codes[1]) > len(plan.steps) // 2
    for k in (DEPTH - 1, 5, 0):
        fail_at = k
        PLANS.enabled = False
        want = step()
        PLANS.enabled = True
        hits = PLANS.hits
        assert step() == want and f"boom at {k}" in want[0]
        assert PLANS.hits - hits == 1
    fail_at = -1
    _same(step(), general[-1])


@pytest.mark.anyio
async def test_a_planned_backward_cancelled_mid_run_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cancelled between two stretches of a planned run: ``.grad`` untouched, the plan
    kept, and the next backwards by it give the general path's gradients."""
    from aengine.core._planned_run import PlannedRun

    calls: list[int] = []
    run = PlannedRun.run

    def counted(self: PlannedRun, gt: Any, deadline: float) -> Any:
        calls.append(self.pos)
        return run(self, gt, deadline)

    monkeypatch.setattr(PlannedRun, "run", counted)
    x = _x(16)
    PLANS.enabled = False
    expected = (await ae.grad(_chain(x, 600), [x]))[0].data
    PLANS.enabled = True

    async def step() -> Any:
        x.grad = None
        await ae.backward(_chain(x, 600))
        return x.grad.data

    async def cancel_after(turns: int, scope: anyio.CancelScope) -> None:
        for _ in range(turns):
            await anyio.sleep(0)
        scope.cancel()

    async with ae.Engine(time_slice=1e-9):  # a slice ends at every clock check
        await step()  # seen once
        await step()  # built
        x.grad = None
        loss = _chain(x, 600)
        calls.clear()
        hits = PLANS.hits
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(cancel_after, 150, scope)
                await ae.backward(loss)
        assert scope.cancelled_caught and x.grad is None
        assert PLANS.hits == hits + 1 and len(calls) > 10 and calls[-1] > 0  # mid-run
        assert calls[-1] < 3 * 600
        for _ in range(2):
            np.testing.assert_array_equal(await step(), expected)
    assert PLANS.hits == hits + 3


def test_branches_recorded_in_another_order_miss_and_run_in_the_general_paths_order() -> None:
    """The same structure recorded in another order: the heap would run its branches in
    another order, so the sequence numbers it compares differ from the plan's: a miss."""
    order: list[int] = []

    class Tag(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, k: int) -> Any:
            ctx.k = k
            return a * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            order.append(ctx.k)
            return g, None

    x = _x()

    def step(i: int) -> Any:
        order.clear()
        if i < 3:
            u, v = Tag.apply(ae.sin(x * 1.5), 1), Tag.apply(ae.cos(x * 2.5), 2)
        else:
            v, u = Tag.apply(ae.cos(x * 2.5), 2), Tag.apply(ae.sin(x * 1.5), 1)
        return [*_grads(x)(_chain(u * v)), list(order)]

    general = _steps(lambda: [step(i) for i in range(5)], 1, plans=False)[0]
    assert general[0][-1] != general[-1][-1]  # the heap's order follows the recording's
    PLANS.cache.clear()
    PLANS.enabled = True
    hits, misses = PLANS.hits, PLANS.misses
    _same([step(i) for i in range(5)], general)
    assert (PLANS.hits - hits, PLANS.misses - misses) == (1, 1)  # step 2 by the plan; 3 misses
