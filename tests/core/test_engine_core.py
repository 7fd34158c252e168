"""The scheduler with plain calls and no event loop (STYLE rule 3).

Small graphs are made by hand from ``Node`` subclasses whose ``apply``
multiplies plain numpy arrays, so these tests exercise GraphTask alone:
``prepare`` (dependencies, exec_info), ``run`` (ready order, InputBuffer
accumulation, completion), staging and ``commit``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.core import (
    YIELD,
    GraphTask,
    commit,
    compute_dependencies,
    current_graph_task,
    init_to_execute,
)
from aengine.core._general_run import GeneralRun
from aengine.core._graph import ACC_SEQ, AccumulateGrad, GraphRoot, Node


class Scale(Node):
    """Multiplies its gradient by ``k`` for every input; logs its name when run."""

    def __init__(self, name: str, edges: tuple[Any, ...], log: list[str], k: float = 1.0) -> None:
        super().__init__(edges)
        self._name = name
        self.log = log
        self.k = k

    def name(self) -> str:
        return self._name

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        self.log.append(self._name)
        g = grads[0]
        return tuple(None if g is None else g * self.k for _ in self.next_edges)


class Fail(Scale):
    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        self.log.append(self._name)
        raise ValueError("node failed")


class TwoOut(Scale):
    """A node with two forward outputs (two gradient slots)."""

    num_outputs = 2

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        self.log.append(self._name)
        a, b = grads
        total = (0 if a is None else a) + (0 if b is None else 2 * b)
        return tuple(total for _ in self.next_edges)


def leaf(n: int = 1) -> ae.Tensor:
    return ae.zeros(n, dtype=ae.float64, requires_grad=True)


def acc(t: ae.Tensor) -> tuple[AccumulateGrad, int]:
    return (t._grad_accumulator(), 0)


def run_to_end(gt: GraphTask) -> None:
    """Drive ``gt`` with plain calls, as a driver does."""
    while True:
        step = gt.run()
        if step is None:
            return
        assert step is YIELD  # nothing in these graphs suspends


def one(x: float = 1.0) -> np.ndarray:
    return np.array([x])


# ---- dependencies and exec_info --------------------------------------------------------


def test_compute_dependencies_counts_in_edges() -> None:
    log: list[str] = []
    x = leaf()
    a = Scale("a", (acc(x),), log)
    b = Scale("b", (a_edge := (a, 0), acc(x)), log)
    c = Scale("c", ((a, 0), (b, 0), None), log)
    deps = compute_dependencies(c, 0)
    assert deps == {a: 2, b: 1, acc(x)[0]: 2}
    assert a_edge == (a, 0)
    assert c not in deps  # the root has no in-edges


def test_compute_dependencies_prunes_below_min_topological_nr() -> None:
    log: list[str] = []
    x = leaf()
    low = Scale("low", (acc(x),), log)
    mid = Scale("mid", ((low, 0),), log)
    top = Scale("top", ((mid, 0),), log)
    assert (low.topological_nr, mid.topological_nr, top.topological_nr) == (1, 2, 3)
    deps = compute_dependencies(top, mid.topological_nr)
    # mid is counted and low (its child) too, but nothing below low is explored
    assert deps == {mid: 1, low: 1}


def _two_branches() -> tuple[ae.Tensor, ae.Tensor, Scale, Scale, Scale]:
    """Leaves x and y, a = f(x), b = f(y), root = g(a, b)."""
    log: list[str] = []
    x, y = leaf(), leaf()
    a = Scale("a", (acc(x),), log)
    b = Scale("b", (acc(y),), log)
    return x, y, a, b, Scale("root", ((a, 0), (b, 0)), log)


def test_init_to_execute_needed_and_captures() -> None:
    x, y, a, b, root = _two_branches()
    needed, captures = init_to_execute(root, [acc(x)], accumulate=False, min_topo_nr=0)
    assert captures == {acc(x)[0]: [(0, 0)]}
    assert needed == {a, root}  # b does not lead to x
    needed, captures = init_to_execute(root, [acc(x), acc(y)], accumulate=True, min_topo_nr=0)
    assert captures == {}
    assert needed == {a, b, root, acc(x)[0], acc(y)[0]}


def test_exec_info_needs_no_walk_when_every_sink_is_an_output() -> None:
    """NOTE [exec_info without a walk]: all sinks requested -> every node runs."""
    x, y, a, b, root = _two_branches()
    gt = GraphTask(keep_graph=True, create_graph=False)
    gt.prepare([(root, 0)], [np.ones(2)], [acc(x), acc(y), (a, 0)], accumulate=False)
    assert gt.run_set is None  # no pruning: the hot loop skips the membership test
    needed = gt.needed
    assert needed is not None
    assert all(n in needed for n in (a, b, root))
    assert acc(x)[0] not in needed and acc(y)[0] not in needed  # captured, not run
    assert set(gt.captures or {}) == {acc(x)[0], acc(y)[0], a}
    gt = GraphTask(keep_graph=True, create_graph=False)
    gt.prepare([(root, 0)], [np.ones(2)], [acc(x)], accumulate=False)
    assert gt.run_set == {a, root, acc(x)[0]}  # y's accumulator is a sink not asked for


def test_init_to_execute_captures_at_a_nonleaf_prune_below() -> None:
    log: list[str] = []
    x = leaf()
    low = Scale("low", (acc(x),), log)
    mid = Scale("mid", ((low, 0),), log)
    root = Scale("root", ((mid, 0), (low, 0)), log)
    outputs = [(mid, 0)]
    needed, captures = init_to_execute(root, outputs, False, mid.topological_nr)
    assert captures == {mid: [(0, 0)]}
    assert needed == {root}  # mid is captured, not run; low is below the capture


def test_prepare_single_root_is_queued_directly_and_multi_uses_graph_root() -> None:
    log: list[str] = []
    x = leaf()
    a = Scale("a", (acc(x),), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(a, 0)], [one()], None, accumulate=True)
    assert [entry[2] for entry in gt.ready.heap] == [a]
    gt2 = GraphTask(keep_graph=False, create_graph=False)
    gt2.prepare([(a, 0), (a, 0)], [one(), one()], None, accumulate=True)
    (root,) = [entry[2] for entry in gt2.ready.heap]
    assert isinstance(root, GraphRoot) and gt2.dependencies[a] == 2


def test_prepare_with_nothing_to_run_queues_nothing() -> None:
    log: list[str] = []
    x, y = leaf(), leaf()
    a = Scale("a", (acc(x),), log)
    y._grad_accumulator()
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(a, 0)], [one()], [acc(y)], accumulate=False)
    assert gt.ready.heap == [] and gt.not_ready == {}
    run_to_end(gt)
    assert gt.captured == [None] and log == []


# ---- ready order ----------------------------------------------------------------------


def test_ready_order_larger_sequence_nr_first() -> None:
    log: list[str] = []
    x = leaf()
    first = Scale("first", (acc(x),), log)
    second = Scale("second", (acc(x),), log)
    third = Scale("third", (acc(x),), log)
    assert first.sequence_nr < second.sequence_nr < third.sequence_nr
    root = GraphRoot(((second, 0), (first, 0), (third, 0)), [one(), one(), one()])
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.general = GeneralRun(compute_dependencies(root, 0))
    gt.push(root, [None])
    run_to_end(gt)
    assert log == ["third", "second", "first"]


def test_accumulate_grad_runs_as_soon_as_ready() -> None:
    log: list[str] = []
    order: list[str] = []
    x, y = leaf(), leaf()
    a = Scale("a", (acc(x),), log)  # x's accumulator is ready after a
    b = Scale("b", (acc(y),), log)
    c = Scale("c", ((a, 0),), log)  # created after b: runs before b
    root = Scale("root", ((c, 0), (b, 0)), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.node_hook = lambda n: order.append(n.name() if not isinstance(n, AccumulateGrad) else (
        "acc_x" if n.variable is x else "acc_y"))  # fmt: skip
    gt.prepare([(root, 0)], [one()], None, accumulate=True)
    run_to_end(gt)
    # c then b (larger sequence_nr first); y's accumulator, ready after b,
    # runs before a, which has been ready since c ran
    assert order == ["root", "c", "b", "acc_y", "a", "acc_x"]
    assert acc(x)[0].sequence_nr == ACC_SEQ


def test_fifo_among_equal_sequence_nr() -> None:
    log: list[str] = []
    x = leaf()
    n1 = Scale("n1", (acc(x),), log)
    n2 = Scale("n2", (acc(x),), log)
    n2.sequence_nr = n1.sequence_nr
    root = Scale("root", ((n1, 0), (n2, 0)), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(root, 0)], [one()], None, accumulate=True)
    run_to_end(gt)
    assert log == ["root", "n1", "n2"]


def test_diamond_waits_for_all_inputs() -> None:
    log: list[str] = []
    x = leaf()
    bottom = Scale("bottom", (acc(x),), log, k=10.0)
    left = Scale("left", ((bottom, 0),), log, k=2.0)
    right = Scale("right", ((bottom, 0),), log, k=3.0)
    top = Scale("top", ((left, 0), (right, 0)), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(top, 0)], [one()], None, accumulate=True)
    assert gt.dependencies[bottom] == 2
    run_to_end(gt)
    assert log == ["top", "right", "left", "bottom"]
    assert gt.ready.heap == [] and gt.not_ready == {}
    assert not any(gt.dependencies.values())
    np.testing.assert_array_equal(gt.staged[x][0], [50.0])


# ---- InputBuffer --------------------------------------------------------------------


def test_input_buffer_sums_without_mutating_inputs() -> None:
    log: list[str] = []
    x = leaf(2)
    left = Scale("left", (acc(x),), log)
    right = Scale("right", (acc(x),), log)
    g1, g2 = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    root = GraphRoot(((left, 0), (right, 0)), [g1, g2])
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.general = GeneralRun(compute_dependencies(root, 0))
    gt.push(root, [None])
    run_to_end(gt)
    np.testing.assert_array_equal(gt.staged[x][0], [11.0, 22.0])
    np.testing.assert_array_equal(g1, [1.0, 2.0])  # no in-place sum into the incoming grads
    np.testing.assert_array_equal(g2, [10.0, 20.0])


def test_input_buffer_slots_of_a_multi_output_node() -> None:
    log: list[str] = []
    x = leaf()
    two = TwoOut("two", (acc(x),), log)
    root = GraphRoot(((two, 0), (two, 1), (two, 1)), [one(1.0), one(3.0), one(4.0)])
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.general = GeneralRun(compute_dependencies(root, 0))
    gt.push(root, [None])
    run_to_end(gt)
    np.testing.assert_array_equal(gt.staged[x][0], [1.0 + 2 * 7.0])


def test_none_gradients_flow_as_none() -> None:
    log: list[str] = []
    x = leaf()
    a = Scale("a", (acc(x),), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(a, 0)], [None], None, accumulate=True)
    run_to_end(gt)
    assert log == ["a"] and gt.staged == {} and gt.ready.heap == []


# ---- time slices, completion, staging --------------------------------------------------


def test_run_yields_at_the_deadline_and_resumes() -> None:
    log: list[str] = []
    x = leaf()
    node: Node = Scale("n0", (acc(x),), log)
    for i in range(1, 100):
        node = Scale(f"n{i}", ((node, 0),), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(node, 0)], [one()], None, accumulate=True)
    steps = 0
    while (step := gt.run(deadline=0.0)) is not None:
        assert step is YIELD and len(gt.ready.heap) == 1  # the next node, pushed back
        steps += 1
    assert steps >= 3 and len(log) == 100 and gt.ready.heap == [] and gt.not_ready == {}
    assert current_graph_task() is None  # reset after each run


def test_current_graph_task_inside_nodes() -> None:
    seen: list[Any] = []

    class Peek(Scale):
        def apply(self, grads: list[Any], create_graph: bool) -> Any:
            seen.append(current_graph_task())
            return super().apply(grads, create_graph)

    x = leaf()
    p = Peek("peek", (acc(x),), [])
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(p, 0)], [one()], None, accumulate=True)
    run_to_end(gt)
    assert seen == [gt] and current_graph_task() is None


def test_the_runtimes_calls_queue_and_enter_a_task() -> None:
    """The seam the runtime uses (``keep``, ``keep_first``, ``has_ready``, ``as_current``):
    a kept node runs in the task's order; one put back first runs before its equals."""
    log: list[str] = []
    x = leaf()
    n1 = Scale("n1", (acc(x),), log)
    n2 = Scale("n2", (acc(x),), log)
    n2.sequence_nr = n1.sequence_nr
    late = Scale("late", (acc(x),), log)  # the largest sequence_nr: first of all
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.general = GeneralRun(
        compute_dependencies(GraphRoot(((n1, 0), (n2, 0), (late, 0)), [None] * 3), 0)
    )
    assert not gt.has_ready()
    gt.keep(n1, [one()])
    gt.keep(late, [one()])
    gt.keep_first(n2, [one()])  # n2 was taken and put back: before n1, its equal
    assert gt.has_ready()
    run_to_end(gt)
    assert log == ["late", "n2", "n1"] and not gt.has_ready()
    other = GraphTask(keep_graph=False, create_graph=False)
    with gt.as_current():
        assert current_graph_task() is gt
        with other.as_current():
            assert current_graph_task() is other
        assert current_graph_task() is gt
    assert current_graph_task() is None


def test_staging_leaves_grad_untouched_until_commit() -> None:
    log: list[str] = []
    x = leaf(2)
    a = Scale("a", (acc(x),), log, k=3.0)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(a, 0)], [np.array([1.0, 2.0])], None, accumulate=True)
    run_to_end(gt)
    assert x.grad is None and gt.ready.heap == []
    gt.check_complete()
    assert commit(gt) == []
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 6.0])
    assert gt.staged == {}


def test_failing_node_stops_the_task_and_stages_nothing_visible() -> None:
    log: list[str] = []
    x, y = leaf(), leaf()
    bad = Fail("bad", (acc(x),), log)
    good = Scale("good", (acc(y),), log)  # created later: runs first, y is staged
    root = Scale("root", ((bad, 0), (good, 0)), log)
    later = Scale("later", ((root, 0),), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.prepare([(later, 0)], [one()], None, accumulate=True)
    with pytest.raises(ValueError, match="node failed"):
        run_to_end(gt)
    assert log == ["later", "root", "good", "bad"]
    assert isinstance(gt.error, ValueError) and gt.error_node is bad
    assert y in gt.staged and x.grad is None and y.grad is None
    assert gt.run() is None  # a failed task runs nothing more


def test_check_complete_reports_stuck_nodes() -> None:
    log: list[str] = []
    x = leaf()
    a = Scale("a", (acc(x),), log)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.not_ready[a] = [one()]
    with pytest.raises(ae.AutogradError, match="could not compute gradients for some functions"):
        gt.check_complete()


def test_stage_sums_and_commit_accumulates_in_place() -> None:
    x = leaf(2)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.stage(x, np.array([1.0, 1.0]), "leaf")
    gt.stage(x, np.array([2.0, 3.0]), "leaf")
    gt.stage(x, None, "leaf")
    commit(gt)
    g = x.grad
    np.testing.assert_array_equal(g.numpy(), [3.0, 4.0])
    gt.stage(x, np.array([1.0, 1.0]), "leaf")
    commit(gt)
    assert x.grad is g and g._version == 1  # in place, version bumped
    np.testing.assert_array_equal(g.numpy(), [4.0, 5.0])


def test_commit_copies_the_first_gradient() -> None:
    x = leaf(2)
    arr = np.array([1.0, 2.0])
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.stage(x, arr, "leaf")
    commit(gt)
    gt.stage(x, np.array([1.0, 1.0]), "leaf")
    commit(gt)
    np.testing.assert_array_equal(arr, [1.0, 2.0])  # the staged array was not reused


def test_graph_task_ids_increase_by_one_per_backward() -> None:
    # inside a hook the running graph task is visible; ids count backwards
    x = ae.ones(2, requires_grad=True)
    ids: list[int] = []

    def hook(g: Any) -> None:
        gt = current_graph_task()
        assert gt is not None
        ids.append(gt.id)

    x.register_hook(hook)
    for _ in range(3):
        ae.sync.backward((x * 2).sum())
    assert ids[1] == ids[0] + 1 and ids[2] == ids[1] + 1
    assert current_graph_task() is None


@pytest.mark.parametrize("seed", range(5))
def test_init_to_execute_matches_brute_force_on_random_dags(seed: int) -> None:
    rng = np.random.default_rng(seed)
    log: list[str] = []
    leaves = [leaf() for _ in range(4)]
    nodes: list[Node] = [acc(t)[0] for t in leaves]
    for i in range(60):  # each new node points at 1-3 earlier nodes
        k = int(rng.integers(1, 4))
        picks = rng.choice(len(nodes), size=min(k, len(nodes)), replace=False)
        nodes.append(Scale(f"n{i}", tuple((nodes[int(j)], 0) for j in picks), log))
    root = Scale("root", tuple((n, 0) for n in nodes[-5:]), log)

    def reaches(n: Node, targets: set[Node]) -> bool:
        stack, seen = [n], set()
        while stack:
            m = stack.pop()
            for e in m.next_edges:
                if e is not None and e[0] not in seen:
                    if e[0] in targets:
                        return True
                    seen.add(e[0])
                    stack.append(e[0])
        return False

    reachable = set(compute_dependencies(root, 0)) | {root}
    target_sets = [[nodes[int(j)] for j in rng.choice(len(nodes), size=2, replace=False)]]
    target_sets += [[nodes[int(j)] for j in rng.choice(len(nodes), size=2, replace=False)]]
    # every sink among the outputs: NOTE [exec_info without a walk]
    target_sets.append(nodes[:4])
    target_sets.append(nodes[:4] + [nodes[int(rng.integers(4, len(nodes)))]])
    for targets in target_sets:
        outputs = [(t, 0) for t in targets]
        min_topo = min(t.topological_nr for t in targets)
        for accumulate in (False, True):
            needed, captures = init_to_execute(root, outputs, accumulate, min_topo)
            want = {n for n in reachable if reaches(n, set(targets))}
            if accumulate:
                want |= set(targets)
                assert captures == {}
            else:
                assert set(captures) == set(targets)
            assert needed == want


def test_grad_when_every_node_runs_keeps_hooks_and_multi_hooks_as_torch() -> None:
    """NOTE [exec_info without a walk]: hooks of captured leaves still run; torch agrees."""
    torch = pytest.importorskip(
        "torch", reason="torch 2.13.0 (CPU) is not installed: oracle comparison skipped"
    )

    def run(lib: Any, grad: Any) -> tuple[list[Any], list[Any], list[Any]]:
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([0.5, -1.0], dtype=lib.float64, requires_grad=True)
        seen: list[Any] = []
        x.register_hook(lambda g: seen.append(g.tolist()))
        w.register_hook(lambda g: g * 10)  # a captured leaf's hook changes the result
        a, b = x * 2.0, w * 1.0
        multi: list[Any] = []
        register = (
            torch.autograd.graph.register_multi_grad_hook
            if lib is torch
            else ae.register_multi_grad_hook
        )
        register((a, b), lambda gs: multi.append([g is not None for g in gs]))
        y = (a * b).sin().sum()
        gx, gw = grad(y, [x, w])
        return [gx.tolist(), gw.tolist()], seen, multi

    ours = run(ae, ae.sync.grad)
    theirs = run(torch, torch.autograd.grad)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-7)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-7)
    assert ours[2] == theirs[2] == [[True, True]]
