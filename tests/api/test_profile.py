"""ae.profile(): the Trace Event JSON it writes, its table, progress reports, and no cost when off."""

from __future__ import annotations

import json
import pathlib
import sys
import threading
from collections import Counter, defaultdict
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine._profile import Progress
from aengine.core import _graph, _trace
from aengine.core._graph_task import GraphTask


def chain(n: int = 20, requires_grad: bool = True) -> tuple[ae.Tensor, ae.Tensor]:
    x = ae.tensor(np.linspace(0.1, 1.0, 8), requires_grad=requires_grad)
    y = x
    for _ in range(n):
        y = (y * 1.0001).sin()
    return x, y.sum()


# -- checking a trace ------------------------------------------------------------------------


def check_trace(events: list[dict[str, Any]]) -> None:
    """Valid Trace Event JSON: spans closed and nested per track, flows paired and bound."""
    events = json.loads(json.dumps(events))  # plain JSON values only
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    asyncs: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    flows: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        assert {"name", "ph", "pid"} <= e.keys(), e
        ph = e["ph"]
        if ph == "M":
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0, e
        assert e["tid"] in names, f"event on a track without a name: {e}"
        if ph == "X":
            assert e["dur"] >= 0, e
            spans[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
        elif ph in "be":
            asyncs[(e["cat"], e["id"])].append(e)
        elif ph in "sf":
            flows[(e["cat"], e["id"])].append(e)
        else:
            assert ph == "i", e
    for tid, track in spans.items():  # complete events of one track nest
        track.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[float] = []
        for start, end in track:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-6, (
                f"span {start}-{end} crosses its parent's end on track {names[tid]}"
            )
            open_ends.append(end)
    for key, evs in asyncs.items():  # async spans: every b closed by an e, nested
        stack: list[str] = []
        for e in evs:  # in the order written (sorted by time within one id)
            if e["ph"] == "b":
                stack.append(e["name"])
            else:
                assert stack and stack.pop() == e["name"], f"async span {key} not nested"
        assert not stack, f"async span {key} not closed: {stack}"
        assert [e["ts"] for e in evs] == sorted(e["ts"] for e in evs), key
    for key, pair in flows.items():  # one start and one end per flow, each on a span
        assert sorted(e["ph"] for e in pair) == ["f", "s"], (key, pair)
        for e in pair:
            track = spans[e["tid"]]
            if e["ph"] == "s":
                assert any(s <= e["ts"] <= t for s, t in track), f"flow start off any span: {e}"
            else:
                assert e["bp"] == "e"
                assert any(s == e["ts"] for s, _ in track), f"flow end not at a span's start: {e}"


def node_events(p: ae.profile) -> list[dict[str, Any]]:
    return [e for e in p.events if e.get("cat") == "node"]


def track_names(p: ae.profile) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in p.events if e["name"] == "thread_name"}


def forward_flows(p: ae.profile) -> int:
    return len({e["id"] for e in p.events if e.get("cat") == "autograd"})


def graph_task_spans(p: ae.profile) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(begin, end) of each backward's async span (its outermost pair)."""
    by_id: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in p.events:
        if e.get("cat") == "backward":
            by_id[e["id"]].append(e)
    return [(evs[0], evs[-1]) for evs in by_id.values()]


# -- off --------------------------------------------------------------------------------------


def test_nothing_is_recorded_when_no_profile_runs() -> None:
    original = _graph.next_sequence_nr
    x, loss = chain(5)
    with ae.profile() as p:
        pass
    assert _trace.active is None
    assert _graph.next_sequence_nr is original  # the forward's counter is back
    gt = GraphTask(keep_graph=False, create_graph=False)
    assert gt.prof is None
    ae.sync.grad(loss, [x])
    assert node_events(p) == []
    assert [e for e in p.events if e["ph"] != "M"] == []
    assert "0 nodes in 0 backwards" in p.table()


def test_a_profile_sees_only_backwards_created_while_it_records() -> None:
    x, loss = chain(5)
    with ae.profile() as p:
        ae.sync.grad(loss, [x], retain_graph=True)
    n = len(p.events)
    ae.sync.grad(loss, [x])
    assert len(p.events) == n


# -- sync ------------------------------------------------------------------------------------


def test_sync_backward_trace() -> None:
    with ae.profile() as p:
        x, loss = chain(10)
        (gx,) = ae.sync.grad(loss, [x])
    check_trace(p.events)
    nodes = node_events(p)
    names = Counter(e["name"] for e in nodes)
    assert names["SinBackward0"] == 10 and names["MulBackward0"] == 10
    assert names["SumBackward0"] == 1
    assert {e["args"]["kernel"] for e in nodes} == {"inline"}
    assert {e["args"]["device"] for e in nodes} == {"cpu"}
    assert all(isinstance(e["args"]["sequence_nr"], int) for e in nodes)
    # one flow per forward op / backward node pair (the leaf's accumulator has no forward op)
    assert forward_flows(p) == 21
    forward = [e for e in p.events if e.get("cat") == "forward"]
    assert Counter(e["name"] for e in forward) == {"Sin": 10, "Mul": 10, "Sum": 1}
    # one track, the main thread's; one graph task span, which succeeded
    assert list(track_names(p).values()) == ["thread MainThread"]
    ((begin, end),) = graph_task_spans(p)
    assert begin["name"] == f"backward #{begin['id']}" and begin["args"]["outcome"] == "ok"
    assert begin["args"]["nodes"] == len(nodes)
    # the gradient is what it is without a profile
    x2, loss2 = chain(10)
    np.testing.assert_allclose(gx.data, ae.sync.grad(loss2, [x2])[0].data)


def test_sync_backward_in_a_thread_has_its_own_track() -> None:
    x, loss = chain(5)
    x2, loss2 = chain(5)
    with ae.profile() as p:
        t = threading.Thread(target=ae.sync.grad, args=(loss2, [x2]), name="side")
        t.start()
        t.join(60)
        ae.sync.grad(loss, [x])
    check_trace(p.events)
    tracks = {track_names(p)[e["tid"]] for e in node_events(p)}
    assert tracks == {"thread side", "thread MainThread"}


def test_export_chrome_trace_writes_trace_event_json(tmp_path: pathlib.Path) -> None:
    with ae.profile() as p:
        x, loss = chain(3)
        ae.sync.backward(loss)
    path = tmp_path / "trace.json"
    p.export_chrome_trace(path)
    doc = json.loads(path.read_text())
    assert doc["traceEvents"] == json.loads(json.dumps(p.events))
    check_trace(doc["traceEvents"])


def test_errors_are_marked() -> None:
    x, loss = chain(3)

    def bad(g: ae.Tensor) -> None:
        raise ValueError("bad hook")

    x2 = x * 1.0
    x2.register_hook(bad)
    with ae.profile() as p:
        with pytest.raises(ae.BackwardError, match="bad hook"):
            ae.sync.backward((x2 * 2).sum())
    check_trace(p.events)
    ((begin, _),) = graph_task_spans(p)
    assert begin["args"]["outcome"] == "error" and "bad hook" in begin["args"]["error"]
    failed = [e for e in node_events(p) if "error" in e["args"]]
    assert [e["name"] for e in failed] == ["MulBackward0"]
    (mark,) = [e for e in p.events if e["ph"] == "i"]
    assert mark["cat"] == "error" and "failed" in mark["name"]


# -- the table -------------------------------------------------------------------------------


def test_table_lists_nodes_by_total_time() -> None:
    with ae.profile() as p:
        x, loss = chain(30)
        ae.sync.grad(loss, [x])
    table = p.table()
    lines = table.splitlines()
    assert lines[0].split()[:5] == ["node", "count", "total", "ms", "%"]
    rows = {line.split()[0]: line.split() for line in lines[2:-2]}
    assert rows["SinBackward0"][1] == "30" and rows["MulBackward0"][1] == "30"
    assert rows["SumBackward0"][1] == "1"
    totals = [float(r[2]) for r in rows.values()]
    assert totals == sorted(totals, reverse=True)
    assert lines[-1].startswith("61 nodes in 1 backward;")
    one = p.table(sort_by="count", row_limit=1).splitlines()
    assert one[2].split()[1] == "30"
    assert "(2 more node types; row_limit=None shows all)" in one
    with pytest.raises(ValueError, match="sort_by must be one of"):
        p.table(sort_by="self")
    with pytest.raises(ValueError, match="row_limit"):
        p.table(row_limit=-1)


# -- async -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_backward_trace(anyio_backend: str) -> None:
    async with ae.profile() as p:
        x, loss = chain(10)
        await ae.grad(loss, [x])
    check_trace(p.events)
    assert forward_flows(p) == 21
    (track,) = {track_names(p)[e["tid"]] for e in node_events(p)}
    assert track.startswith(f"{anyio_backend} task ")
    ((begin, _),) = graph_task_spans(p)
    assert begin["args"]["outcome"] == "ok"
    runs = [
        e for e in p.events if e.get("cat") == "backward" and e["name"].startswith("engine run")
    ]
    assert runs, "the backward's time slices are in its span"


@pytest.mark.anyio
async def test_overlapping_backwards_in_two_tasks(anyio_backend: str) -> None:
    # tiny time slices: the two backwards take turns, slice by slice
    graphs = [chain(200) for _ in range(2)]
    async with ae.profile() as p, ae.Engine(time_slice=1e-5):
        async with anyio.create_task_group() as tg:
            for x, loss in graphs:
                tg.start_soon(ae.grad, loss, [x])
    check_trace(p.events)
    tracks = {e["tid"] for e in node_events(p)}
    assert len(tracks) == 2, "a track per task"
    (a0, a1), (b0, b1) = graph_task_spans(p)
    assert a0["ts"] < b1["ts"] and b0["ts"] < a1["ts"], "the two backwards overlap in time"
    yields = [e for e in p.events if e.get("name") == "yield to the event loop"]
    assert yields


@pytest.mark.anyio
async def test_offloaded_kernels_run_on_thread_tracks(anyio_backend: str) -> None:
    x = ae.tensor(np.linspace(0.1, 1.0, 64), requires_grad=True)
    async with ae.profile() as p, ae.Engine(offload_threshold=32):
        loss = (x.sin() * 2).sum()
        await ae.backward(loss)
    check_trace(p.events)
    offloaded = [e for e in node_events(p) if e["args"]["kernel"] == "offloaded"]
    # the sum's result has one element: its node runs inline
    assert {e["name"] for e in offloaded} == {"SinBackward0", "MulBackward0"}
    kernels = [e for e in p.events if e.get("cat") == "kernel"]
    assert sorted(e["name"] for e in kernels) == sorted(f"{e['name']} kernel" for e in offloaded)
    names = track_names(p)
    assert all(names[e["tid"]].startswith("thread ") for e in kernels)
    assert all(not names[e["tid"]].startswith("thread ") for e in offloaded)
    assert len({e["id"] for e in p.events if e.get("cat") == "offload"}) == len(kernels)
    waits = [e for e in p.events if e.get("name") == "await kernel in a thread"]
    assert len(waits) == len(kernels)


@pytest.mark.anyio
async def test_device_workers_have_their_tracks(anyio_backend: str) -> None:
    x = ae.tensor(np.ones(4), requires_grad=True)
    async with ae.profile() as p, ae.Engine():
        loss = (x.to("sim:0") * 2).sum()
        await ae.backward(loss)
    check_trace(p.events)
    names = track_names(p)
    on_sim = [e for e in node_events(p) if e["args"]["device"] == "sim:0"]
    assert on_sim and all("aengine-worker-sim:0#" in names[e["tid"]] for e in on_sim)


@pytest.mark.anyio
async def test_waits_on_async_hooks_and_backward_functions(anyio_backend: str) -> None:
    class Twice(ae.Function):
        @staticmethod
        def forward(ctx: Any, a: ae.Tensor) -> ae.Tensor:
            return a * 2

        @staticmethod
        async def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            await anyio.sleep(0)
            return g * 2

    async def hook(g: ae.Tensor) -> None:
        await anyio.sleep(0.001)

    x = ae.tensor(np.ones(3), requires_grad=True)
    async with ae.profile() as p:
        y = Twice.apply(x)
        y.register_hook(hook)
        await ae.backward(y.sum())
    check_trace(p.events)
    waits = {e["name"]: e for e in p.events if e.get("cat") == "wait"}
    assert set(waits) == {
        "await test_waits_on_async_hooks_and_backward_functions.<locals>.hook",
        "await the async backward of TwiceBackward",
    }
    node = next(e for e in node_events(p) if e["name"] == "TwiceBackward")
    assert node["args"]["waited_us"] > 0
    for w in waits.values():  # each wait lies inside its node, on its track
        assert w["tid"] == node["tid"]
        assert node["ts"] <= w["ts"] and w["ts"] + w["dur"] <= node["ts"] + node["dur"] + 1e-3
    table = p.table(sort_by="waiting").splitlines()
    assert table[2].split()[0] == "TwiceBackward"


@pytest.mark.anyio
async def test_a_cancelled_backward_is_marked(anyio_backend: str) -> None:
    async def stall(g: ae.Tensor) -> None:
        await anyio.sleep(60)

    x = ae.tensor(np.ones(3), requires_grad=True)
    y = x * 2
    y.register_hook(stall)
    async with ae.profile() as p:
        with anyio.move_on_after(0.05) as scope:
            await ae.backward(y.sum())
    assert scope.cancelled_caught
    check_trace(p.events)
    ((begin, _),) = graph_task_spans(p)
    assert begin["args"]["outcome"] == "cancelled"
    (mark,) = [e for e in p.events if e["ph"] == "i"]
    assert mark["cat"] == "cancel" and mark["name"].endswith("cancelled")
    node = next(e for e in node_events(p) if e["name"] == "MulBackward0")
    assert node["args"]["outcome"] == "cancelled"
    (wait,) = [e for e in p.events if e.get("cat") == "wait"]
    assert wait["args"]["outcome"] == "cancelled"


# -- progress --------------------------------------------------------------------------------


def test_progress_reports_reach_a_callable() -> None:
    reports: list[Progress] = []
    x, loss = chain(50)
    with ae.profile(progress=reports.append, progress_every=1e-9):
        ae.sync.grad(loss, [x])
    assert len(reports) >= 2
    *running, last = reports
    assert last.done and last.nodes_done == last.nodes_total == 101
    assert all(not r.done for r in running)
    assert [r.nodes_done for r in running] == sorted(r.nodes_done for r in running)
    assert str(last).startswith(f"aengine: backward #{last.graph_task} done in ")
    assert " of 101 nodes (" in str(running[-1])


def test_progress_true_prints_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    x, loss = chain(5)
    with ae.profile(progress=True, progress_every=1e-9):
        ae.sync.grad(loss, [x])
    err = capsys.readouterr().err
    assert "aengine: backward #" in err and " done in " in err


def test_short_backwards_report_no_progress() -> None:
    reports: list[object] = []
    x, loss = chain(3)
    with ae.profile(progress=reports.append, progress_every=3600):
        ae.sync.grad(loss, [x])
    assert reports == []


# -- misuse ----------------------------------------------------------------------------------


def test_one_profile_at_a_time_and_once() -> None:
    with ae.profile() as p:
        with pytest.raises(RuntimeError, match="another ae.profile\\(\\) is recording"):
            with ae.profile():
                pass
    assert _trace.active is None
    with pytest.raises(RuntimeError, match="already recorded"):
        with p:
            pass
    with pytest.raises(RuntimeError, match="has not recorded yet"):
        ae.profile().table()


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"progress": "yes"}, TypeError, "progress must be True, False or a callable"),
        ({"progress_every": 0}, ValueError, "progress_every must be a positive number"),
        ({"progress_every": "1"}, TypeError, "progress_every must be a number of seconds"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        ae.profile(**kwargs)


def test_a_profile_observes_every_recorded_op_through_the_cores_counter() -> None:
    """NOTE [Forward ops in a profile]: only core/_graph holds the counter; a profile
    makes it report to its recorder (``observe_sequence``) and sets nothing else:
    no other module's name, no class attribute of GraphTask."""
    holders = [
        name
        for name, m in list(sys.modules.items())
        if name.startswith("aengine") and "next_sequence_nr" in vars(m)
    ]
    assert holders == ["aengine.core._graph"]
    original = _graph.next_sequence_nr
    before = dict(vars(GraphTask))
    x = ae.ones(3, requires_grad=True)
    with ae.profile() as p:
        assert _graph.next_sequence_nr is not original
        y = (x * 2.0).sin()  # two ops of one tensor (record_one)
        z = x + y  # an op of two tensors (record)
    assert _graph.next_sequence_nr is original and dict(vars(GraphTask)) == before
    assert p._rec is not None
    seen = {seq for seq, _, _ in p._rec.forward}
    ops = {y.grad_fn, y.grad_fn.next_functions[0][0], z.grad_fn}
    assert {n.sequence_nr for n in ops} <= seen


# -- nested backwards ------------------------------------------------------------------------


class Inner(ae.Function):
    """A node whose backward runs a backward of its own (a nested graph task)."""

    @staticmethod
    def forward(ctx: Any, a: ae.Tensor) -> ae.Tensor:
        return a * 1.0

    @staticmethod
    def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
        with ae.enable_grad():
            v = ae.tensor(np.ones(3), requires_grad=True)
            (gv,) = ae.sync.grad((v.sin() * 2).sum(), [v])
        return g * gv


def test_a_nested_backward_nests_inside_its_node() -> None:
    x = ae.tensor(np.ones(3), requires_grad=True)
    with ae.profile() as p:
        ae.sync.backward(Inner.apply(x).sum())
    check_trace(p.events)
    spans = {b["name"].split(" #")[0]: b for b, _ in graph_task_spans(p)}
    outer, inner = spans["backward"], spans["nested backward"]
    assert inner["args"]["parent"] == outer["id"] and inner["args"]["depth"] == 1
    node = next(e for e in node_events(p) if e["name"] == "InnerBackward")
    nested = [e for e in node_events(p) if e["args"]["graph_task"] == inner["id"]]
    assert {e["name"] for e in nested} == {"SinBackward0", "MulBackward0", "SumBackward0"}
    for e in nested:  # on the same track, inside the node that ran them
        assert e["tid"] == node["tid"]
        assert node["ts"] <= e["ts"] and e["ts"] + e["dur"] <= node["ts"] + node["dur"]
