"""The scheduling core of the backward pass: GraphTask and its ready queue.

# NOTE [Scheduler invariants]
# This module never awaits and imports neither numpy nor anyio.  A driver
# (``_drivers.py``: sync loop or anyio task) calls ``GraphTask.run(deadline)``
# which executes ready nodes until the queue is empty, the time slice is over
# (returns YIELD), or a node needs the general path that may await user code
# (returns the coroutine to await; the driver awaits it and calls run again).
#
# * dependencies[node] counts the edges into ``node`` from nodes that will
#   still run; a node is ready when its count reaches zero.  Its gradients
#   wait meanwhile in not_ready[node] (the InputBuffer, one slot per forward
#   output, summed on arrival).
# * The ready queue is a heap ordered by sequence_nr, larger first (nodes
#   created later in forward run earlier in backward), FIFO among equals;
#   AccumulateGrad nodes have the largest sequence_nr and run as soon as they
#   are ready.  A graph task's CPU queue holds only its own nodes, so depth
#   plays no role inside it: nested (reentrant) graph tasks get their own.
# * exec_info (grad() and backward(inputs=...)) is None when everything runs;
#   otherwise ``needed`` holds the nodes to run and ``captures`` maps a node
#   to the (input slot, result index) pairs whose gradients grad() returns.
# * Gradients are raw backend arrays unless create_graph, then Tensors.
# * Leaf gradients (AccumulateGrad) and retained non-leaf gradients are
#   staged and committed only when the whole graph task succeeded, so an error
#   or a cancellation leaves every ``.grad`` as it was.
# * The task is complete when its heap is empty and no node of it runs
#   elsewhere (a device worker, an awaited hook: the async driver asks the
#   scheduler, ``sched.busy``).
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from ._errors import AutogradError, BackwardError
from ._graph import ACC_SEQ, GraphRoot, Node

__all__ = ["GraphTask", "YIELD", "current_graph_task", "compute_dependencies", "ACC_SEQ"]

YIELD = object()
_evaluate_general: Any = None

_current: contextvars.ContextVar[GraphTask | None] = contextvars.ContextVar(
    "aengine_graph_task", default=None
)
_ids = itertools.count()


def current_graph_task() -> GraphTask | None:
    """The graph task whose node is running in this task/thread, if any."""
    return _current.get()


#: nodes visited between two checks of the time slice while preparing
PREPARE_CHUNK = 512
#: the run loop reads the clock when ``count & CLOCK_EVERY`` is 0: every 4th
#: node.  A kernel kept inline takes up to about 1 ms (NOTE [Kernel offload
#: policy]), so a slice overruns by 3 such nodes at most; on small nodes
#: (2-3 us) the clock read costs about 0.5%.
CLOCK_EVERY = 3


def compute_dependencies(root: Node, min_topo_nr: int) -> dict[Node, int]:
    """Count, for every node reachable from ``root``, its incoming edges.

    Iterative (graphs of millions of nodes); nodes whose topological_nr is
    below ``min_topo_nr`` cannot reach any requested input and are skipped.
    """
    deps: dict[Node, int] = {}
    for _ in _dependency_steps(root, min_topo_nr, deps):
        pass
    return deps


def _dependency_steps(
    root: Node,
    min_topo_nr: int,
    deps: dict[Node, int],
    sinks: list[Node] | None = None,
    order: list[Node] | None = None,
) -> Iterator[None]:
    """compute_dependencies in steps: yields every PREPARE_CHUNK nodes.

    With ``sinks`` (for exec_info) it also collects the nodes that end a path
    without reaching an output for sure: those with no next edges
    (topological_nr 0) and those pruned below ``min_topo_nr`` (NOTE
    [exec_info without a walk]).  ``order`` (empty) receives the root and
    every node visited.
    """
    if order is None:
        order = []
    order.append(root)  # the nodes to visit, appended to while iterated (breadth first)
    get = deps.get
    if not min_topo_nr:  # nothing to prune (backward(), or grad() of leaves): the common case
        push = order.append
    else:

        def push(node: Node) -> None:
            if node.topological_nr >= min_topo_nr:
                order.append(node)
            elif sinks is not None:  # pruned: counted, never visited
                sinks.append(node)

    # One iterator over the growing list (it sees the nodes appended while it
    # runs), consumed in chunks: islice(order, start, stop) would skip
    # ``start`` items again at every chunk.
    visit = iter(order)
    start = 0
    while True:
        for fn in islice(visit, PREPARE_CHUNK):
            for nxt in fn.next_nodes:
                if nxt is None:
                    continue
                c = get(nxt)
                if c is None:
                    deps[nxt] = 1
                    push(nxt)
                else:
                    deps[nxt] = c + 1
        stop = start + PREPARE_CHUNK
        if sinks is not None and not min_topo_nr:
            # the visited nodes without next edges (not the root; when pruning,
            # every visited node is above min_topo_nr > 0)
            sinks += [n for n in order[max(start, 1) : stop] if not n.topological_nr]
        start = stop
        if start >= len(order):
            return
        yield


def init_to_execute(
    root: Node, outputs: list[tuple[Node, int]], accumulate: bool, min_topo_nr: int
) -> tuple[set[Node], dict[Node, list[tuple[int, int]]]]:
    """Mark the nodes on a path from ``root`` to the requested ``outputs``.

    Returns (needed, captures).  For grad() (``accumulate`` False) each output
    edge becomes a capture; for backward(inputs=...) the output nodes are
    needed (they run and accumulate).
    """
    deps: dict[Node, int] = {}
    sinks: list[Node] = []
    for _ in _dependency_steps(root, min_topo_nr, deps, sinks):
        pass
    result: list[Any] = []
    for _ in _exec_info_steps(root, outputs, accumulate, min_topo_nr, deps, sinks, result):
        pass
    needed = result[0]
    if isinstance(needed, AllNodesBut):  # as a set: the reachable nodes (and outputs) in it
        reach = [root, *deps, *(fn for fn, _ in outputs)] if accumulate else [root, *deps]
        needed = {n for n in reach if n in needed}
    return needed, result[1]


def _exec_info_steps(
    root: Node,
    outputs: list[tuple[Node, int]],
    accumulate: bool,
    min_topo_nr: int,
    deps: dict[Node, int],
    sinks: list[Node],
    result: list[Any],
) -> Iterator[None]:
    """init_to_execute in steps (yields every PREPARE_CHUNK nodes).

    Appends ``needed``, ``captures`` and whether every reachable node runs
    (is needed or captured) to ``result`` at the end.

    # NOTE [exec_info without a walk]
    # A node is needed when one of its children is needed or captured.  Every
    # path from the root ends at a sink (a node without next edges,
    # topological_nr 0) or at a node pruned below ``min_topo_nr``, which the
    # dependency pass collected (``sinks``).  When every one of them is an
    # output (grad(loss, params) with every parameter that requires grad
    # among the inputs: the usual case), every node reaches an output, so
    # every reachable node but the capture-only sinks is needed: ``needed``
    # is then an ``AllNodesBut`` those sinks, with no pass over the graph
    # (even building a set of 30,000 nodes takes 2 ms).  Only reachable nodes
    # are asked about, except by count_executed (_multi_hook.py), which
    # counts on ``reached`` when ``run_set`` is None.
    # Otherwise one pass over the reachable nodes in ascending
    # topological_nr decides every node after its children: they are filed
    # by topological_nr (a child's is below its parent's), no sort, and the
    # pass is done in steps, so a large graph never holds the event loop.
    """
    captures: dict[Node, list[tuple[int, int]]] = {}
    marked: set[Node] = set()  # needed or captured
    for idx, (fn, nr) in enumerate(outputs):
        if not accumulate:
            captures.setdefault(fn, []).append((nr, idx))
        marked.add(fn)
    if marked.issuperset(sinks):
        # the root is not needed when it is a sink, only captured (or not asked for)
        skip = set(sinks) if not accumulate else set()
        if not root.topological_nr and not (accumulate and root in marked):
            skip.add(root)
        result += (AllNodesBut(skip), captures, True)
        return
    needed: set[Node] = marked.copy() if accumulate else set()
    levels: dict[int, list[Node]] = {}
    budget = PREPARE_CHUNK
    for fn in deps:
        budget -= 1
        if not budget:
            budget = PREPARE_CHUNK
            yield
        t = fn.topological_nr
        if t >= min_topo_nr:
            level = levels.get(t)
            if level is None:
                levels[t] = [fn]
            else:
                level.append(fn)
    add_needed, add_marked = needed.add, marked.add
    get_level = levels.get
    for t in range(min_topo_nr, root.topological_nr):
        level = get_level(t)
        budget -= 1 if level is None else len(level)
        if budget <= 0:
            budget = PREPARE_CHUNK
            yield
        if level is None:
            continue
        for fn in level:
            for nxt in fn.next_nodes:
                if nxt in marked:  # (None never is)
                    add_needed(fn)
                    add_marked(fn)
                    break
    for nxt in root.next_nodes:  # the root has no in-edges: not filed
        if nxt in marked:
            needed.add(root)
            break
    result += (needed, captures, False)


class _EveryNode:
    """A container holding every node (see GraphTask.run)."""

    __slots__ = ()

    def __contains__(self, node: object) -> bool:
        return True


_EVERY_NODE = _EveryNode()


class AllNodesBut:
    """``needed`` when every reachable node runs: every node but ``skip``.

    See NOTE [exec_info without a walk]; it supports ``in`` only.
    """

    __slots__ = ("skip",)

    def __init__(self, skip: set[Node]) -> None:
        self.skip = skip

    def __contains__(self, node: object) -> bool:
        return node not in self.skip


class GraphTask:
    """The state of one backward call (see NOTE [Scheduler invariants])."""

    __slots__ = (
        "_tie",
        "anomaly",
        "callbacks",
        "captured",
        "captures",
        "checkpoint_valid",
        "children",
        "create_graph",
        "dependencies",
        "depth",
        "done",
        "error",
        "error_node",
        "heap",
        "id",
        "keep_graph",
        "needed",
        "node_hook",
        "not_ready",
        "pending",
        "reached",
        "roots",
        "run_set",
        "running_node",
        "sched",
        "staged",
    )

    def __init__(
        self,
        *,
        keep_graph: bool,
        create_graph: bool,
        depth: int = 0,
        anomaly: bool = False,
    ) -> None:
        self.id = next(_ids)
        self.dependencies: dict[Node, int] = {}
        self.not_ready: dict[Node, list[Any]] = {}
        self.needed: set[Node] | AllNodesBut | None = None
        self.captures: dict[Node, list[tuple[int, int]]] | None = None
        self.captured: list[Any] = []
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.depth = depth
        self.error: BaseException | None = None
        self.heap: list[Any] = []
        self._tie = itertools.count().__next__
        self.staged: dict[Any, list[Any]] = {}
        self.callbacks: list[Callable[[], Any]] = []
        self.anomaly = anomaly
        self.roots: Any = None
        #: optional callable(node) called before each node runs (tests, tracing)
        self.node_hook: Callable[[Node], None] | None = None
        self.done = False
        self.checkpoint_valid = True
        #: nested graph tasks running now (registered by _reentrant.py)
        self.children: list[GraphTask] | None = None
        self.running_node: Node | None = None
        #: needed | captured nodes (grad(), inputs=): the only ones that run
        self.run_set: set[Node] | None = None
        #: the planned preparation not done yet (see plan)
        self.pending: Iterator[None] | None = None
        #: the root and every node the dependency pass visited (count_executed)
        self.reached: list[Node] = []
        self.error_node: Node | None = None
        #: the async driver's scheduler (device queues, offload), None when sync
        self.sched: Any = None

    # -- setup -----------------------------------------------------------------------
    def prepare(
        self,
        root_edges: list[tuple[Node, int]],
        root_grads: list[Any],
        outputs: list[tuple[Node, int]] | None,
        accumulate: bool,
    ) -> None:
        """Build dependencies (and exec_info) and queue the graph root, now."""
        for _ in self._prepare_steps(root_edges, root_grads, outputs, accumulate):
            pass

    def plan(
        self,
        root_edges: list[tuple[Node, int]],
        root_grads: list[Any],
        outputs: list[tuple[Node, int]] | None,
        accumulate: bool,
    ) -> None:
        """Like :meth:`prepare`, but done by ``run`` within its time slices.

        Counting the dependencies of a large graph takes long enough to stall
        an event loop: planned, it is interrupted like node execution.
        """
        self.pending = self._prepare_steps(root_edges, root_grads, outputs, accumulate)

    def _prepare_steps(
        self,
        root_edges: list[tuple[Node, int]],
        root_grads: list[Any],
        outputs: list[tuple[Node, int]] | None,
        accumulate: bool,
    ) -> Iterator[None]:
        if len(root_edges) == 1:
            root: Node = root_edges[0][0]
            buffer: list[Any] = [None] * root.num_outputs
            buffer[root_edges[0][1]] = root_grads[0]
        else:
            root = GraphRoot(tuple(root_edges), root_grads)
            buffer = [None]
        min_topo = 0
        if outputs:
            min_topo = outputs[0][0].topological_nr
            for fn, _ in outputs:
                if fn.topological_nr < min_topo:
                    min_topo = fn.topological_nr
        deps: dict[Node, int] = {}
        self.dependencies = deps
        sinks: list[Node] | None = [] if outputs is not None else None
        yield from _dependency_steps(root, min_topo, deps, sinks, self.reached)
        if outputs is not None:
            assert sinks is not None
            result: list[Any] = []
            yield from _exec_info_steps(root, outputs, accumulate, min_topo, deps, sinks, result)
            needed, captures, every_node_runs = result
            self.needed, self.captures = needed, captures
            if not every_node_runs:  # else run_set None (NOTE [exec_info without a walk])
                self.run_set = needed.union(captures) if captures else needed
            self.captured = [None] * len(outputs)
            self.checkpoint_valid = False
            if root not in needed and root not in captures:
                return  # nothing to run
        self.push(root, buffer)

    def push(self, node: Node, buffer: list[Any]) -> None:
        sched = self.sched
        if sched is not None:  # async: device nodes go to their queue (_scheduler.py)
            sched.push(self, node, buffer)
            return
        heapq.heappush(self.heap, (-node.sequence_nr, self._tie(), node, buffer))

    # -- the hot loop ------------------------------------------------------------------
    def run(self, deadline: float = float("inf")) -> Any:
        """Run ready nodes; return None (drained), YIELD or a coroutine to await."""
        if self.pending is not None:
            for _ in self.pending:
                if time.perf_counter() > deadline:
                    return YIELD
            self.pending = None
        heap = self.heap
        heappop, heappush = heapq.heappop, heapq.heappush
        tie = self._tie
        deps = self.dependencies
        not_ready = self.not_ready
        # Nodes that take the general path though not _special: captured ones
        # (unless all are special anyway: _special is never cleared), or every
        # node when anomaly mode or a node hook is on.
        slow: Any = self.captures or None
        if self.anomaly or self.node_hook is not None:
            slow = _EVERY_NODE
        elif slow is not None and all(n._special for n in slow):
            slow = None
        # grad() / backward(inputs=...): only nodes on a path to an input run
        # (``run_set``); those without captures take the inlined path too.
        run_set = self.run_set
        create_graph = self.create_graph
        release = not self.keep_graph
        perf = time.perf_counter
        count = 0
        token = _current.set(self)
        try:
            while heap:
                if self.error is not None:
                    return None
                count += 1
                if not count & CLOCK_EVERY and perf() > deadline:
                    return YIELD
                _, _, node, buffer = heappop(heap)
                while node is not None:
                    # ---- one node ------------------------------------------------
                    if node._special or (slow is not None and node in slow):
                        res = self._slow(node, buffer)
                        if res is not None:
                            return res
                        break
                    try:
                        outs = node.evaluate(buffer, create_graph, release)
                    except BaseException as exc:
                        self._fail(node, exc)
                        raise
                    # ---- route outputs -------------------------------------------
                    nxt_run = None
                    nxt_buf = None
                    for nxt, nr, g in zip(node.next_nodes, node.next_nrs, outs):
                        if nxt is None:
                            continue
                        d = deps[nxt] - 1
                        deps[nxt] = d
                        if run_set is not None and nxt not in run_set:
                            continue  # pruned: never runs (see exec_info)
                        if d:
                            # not ready yet: keep the gradient in its InputBuffer
                            buf = not_ready.get(nxt)
                            if buf is None:
                                buf = [None] * nxt.num_outputs
                                buf[nr] = g
                                not_ready[nxt] = buf
                            elif buf[nr] is None:
                                buf[nr] = g
                            elif g is not None:
                                buf[nr] = buf[nr] + g
                            continue
                        buf = not_ready.pop(nxt, None) if not_ready else None
                        if buf is None:
                            if nxt.num_outputs == 1:
                                buf = [g]
                            else:
                                buf = [None] * nxt.num_outputs
                                buf[nr] = g
                        elif buf[nr] is None:
                            buf[nr] = g
                        elif g is not None:
                            buf[nr] = buf[nr] + g
                        # Run it directly when it would be popped next anyway.
                        if nxt_run is None and (not heap or -heap[0][0] < nxt.sequence_nr):
                            nxt_run, nxt_buf = nxt, buf
                        else:
                            if nxt_run is not None and nxt.sequence_nr > nxt_run.sequence_nr:
                                heappush(heap, (-nxt_run.sequence_nr, tie(), nxt_run, nxt_buf))
                                nxt_run, nxt_buf = nxt, buf
                            else:
                                heappush(heap, (-nxt.sequence_nr, tie(), nxt, buf))
                    node, buffer = nxt_run, nxt_buf  # type: ignore[assignment]
                    if node is not None:
                        count += 1
                        # error: set by another thread or a parent (L2)
                        if not count & CLOCK_EVERY and (
                            perf() > deadline or self.error is not None
                        ):
                            heappush(heap, (-node.sequence_nr, tie(), node, buffer))
                            return YIELD
            return None
        finally:
            _current.reset(token)

    # -- the general path (hooks, captures, accumulation, async user code) -----------------
    def _slow(self, node: Node, buffer: list[Any]) -> Any:
        global _evaluate_general
        if _evaluate_general is None:  # import cycle: _node_exec needs this module's users
            from ._node_exec import evaluate_general as _evaluate_general
        sched = self.sched
        if sched is not None and node._special:
            # a non-cpu node goes to its device's queue (NOTE [Device queues])
            res = sched.dispatch(self, node, buffer)
            if res is not False:
                return res
        return _evaluate_general(self, node, buffer)

    def route(self, node: Node, outs: Any) -> None:
        """Send a finished node's gradients on to its next nodes."""
        deps = self.dependencies
        not_ready = self.not_ready
        needed = self.needed
        nodes = node.next_nodes
        nrs = node.next_nrs
        for i in range(len(nodes)):
            nxt = nodes[i]
            if nxt is None:
                continue
            nr = nrs[i]
            g = outs[i] if i < len(outs) else None
            d = deps[nxt] - 1
            buf = not_ready.get(nxt)
            if buf is None:
                if needed is not None and nxt not in needed and nxt not in self.captures:  # type: ignore[operator]
                    if d:
                        deps[nxt] = d
                    else:
                        del deps[nxt]
                    continue
                buf = [None] * nxt.num_outputs
                buf[nr] = g
            else:
                old = buf[nr]
                if old is None:
                    buf[nr] = g
                elif g is not None:
                    buf[nr] = old + g
            if d:
                deps[nxt] = d
                not_ready[nxt] = buf
            else:
                del deps[nxt]
                not_ready.pop(nxt, None)
                self.push(nxt, buf)

    def _fail(self, node: Node | None, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
            self.error_node = node
            if self.children:  # nested graph tasks stop too (PyTorch's L2 behaviour)
                stop = AutogradError(
                    f"stopped because the enclosing backward failed: {type(exc).__name__}: {exc}"
                )
                for child in list(self.children):
                    child._fail(None, stop)

    # -- completion ------------------------------------------------------------------------
    def stage(self, key: Any, grad: Any, kind: str) -> None:
        """Stage a gradient for a leaf (``kind`` 'leaf') or retained non-leaf."""
        entry = self.staged.get(key)
        if entry is None:
            self.staged[key] = [grad, kind]
        elif grad is not None:
            entry[0] = grad if entry[0] is None else entry[0] + grad

    def check_complete(self) -> None:
        if self.not_ready and self.needed is None:
            raise AutogradError("could not compute gradients for some functions")


def wrap_node_error(node: Node, exc: BaseException) -> BaseException:
    """The error the caller sees for ``exc`` raised while ``node`` ran."""
    if isinstance(exc, AutogradError) or not isinstance(exc, Exception):
        return exc
    err = BackwardError(
        f"{type(exc).__name__}: {exc} (raised in the backward of {node.name()})",
        node.name(),
        exc,
    )
    err.__cause__ = exc
    return err
