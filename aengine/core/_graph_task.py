"""The state of one backward call, and its transitions: GraphTask.

# NOTE [Scheduler invariants]
# This module never awaits an event loop and imports no async library.  A
# driver (aengine.runtime: a plain loop or an anyio task) calls
# ``GraphTask.run(deadline)``, which executes ready nodes until the ready
# queue is empty (returns None), the time slice is over (returns YIELD), or a
# node needs to wait for something (returns an awaitable: the driver awaits
# it and calls run again).  Every field of a GraphTask changes only through
# the methods of this class.
#
# * ``dependencies[node]`` counts the edges into ``node`` from nodes that
#   will still run; a node is ready when its count reaches zero.  Its
#   gradients wait meanwhile in ``not_ready[node]``, its InputBuffer (one slot
#   per forward output, summed on arrival by ``accumulate``).
# * The ReadyQueue is a heap of NodeTasks ordered by sequence_nr, larger
#   first (nodes created later in forward run earlier in backward), FIFO
#   among equals; AccumulateGrad nodes have the largest sequence_nr and run
#   as soon as they are ready.  A graph task's queue holds only its own
#   nodes, so depth plays no role inside it: nested (reentrant) graph tasks
#   get their own.
# * exec_info (grad() and backward(inputs=...)) is None when everything
#   runs; otherwise ``needed`` holds the nodes to run and ``captures`` maps a
#   node to the (input slot, result index) pairs whose gradients grad()
#   returns (aengine.core._exec_info).
# * Gradients are raw backend arrays unless create_graph, then Tensors.
# * Leaf gradients (AccumulateGrad) and retained non-leaf gradients are
#   staged and committed only when the whole graph task succeeded
#   (aengine.core._commit), so an error or a cancellation leaves every
#   ``.grad`` as it was.
# * A graph whose structure was seen before may run by a backward plan
#   (NOTE [Backward plans] in _plan.py): the planned runner (``planned``,
#   a ``PlannedRun`` of _planned_run.py) keeps these invariants with run
#   positions for the dicts and the heap; ``dependencies`` and
#   ``not_ready`` stay empty unless ``_leave_plan`` hands over mid-run.
# * The task is complete when its queue is empty and no node of it runs
#   elsewhere (a device worker, an awaited hook): the async driver asks its
#   scheduler (``Scheduler.busy``).
"""

from __future__ import annotations

import contextvars
import itertools
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any, Protocol, cast

from . import _trace
from ._errors import AutogradError
from ._exec_info import (
    AllNodesBut,
    count_executed,
    dependency_steps,
    exec_info_steps,
)
from ._general_run import GeneralRun
from ._graph import ACC_SEQ, GraphRoot, Node
from ._node_hooks import Detach
from ._node_path import evaluate_general, run_node, wrap_node_error
from ._outcome import Outcome
from ._plan import MIN_DEPTH, PLANS, BackwardPlan, build_steps
from ._plan_match import match
from ._planned_run import PlannedRun
from ._running import (
    YIELD,
    AsCurrent,
    InputBuffer,
    NodeTask,
    ReadyQueue,
    accumulate,
    current,
    leaves_hot_loop,
    slow_nodes,
)

__all__ = [
    "ACC_SEQ",
    "YIELD",
    "GraphTask",
    "Scheduler",
    "InputBuffer",
    "NodeTask",
    "ReadyQueue",
    "accumulate",
    "current_graph_task",
    "running_node",
    "wrap_node_error",
]

_ids = itertools.count()
#: the current graph task (``_running.current``), which only GraphTasks set
_current = cast("contextvars.ContextVar[GraphTask | None]", current)


#: the graph task whose node is running in this task/thread, if any: the
#: context variable's own ``get`` (no Python frame: every entry point asks)
current_graph_task: Callable[[], GraphTask | None] = _current.get


def running_node() -> Node | None:
    """The node whose backward runs in this task/thread (general path), if any."""
    gt = _current.get()
    return gt.running_node if gt is not None else None


# -- the scheduler --------------------------------------------------------------------------

# NOTE [The scheduler protocol]
# The core reaches the async runtime only through this Protocol (the
# runtime's Engine, or its lazy stand-in when no Engine is open).  A sync
# backward has no scheduler.  The runtime alone decides where a node runs;
# the core hands it every node that is off ``home`` or whose result has at
# least ``offload_min`` elements (NOTE [Where a node runs]).


class Scheduler(Protocol):
    """The runtime side of an async backward (NOTE [The scheduler protocol])."""

    #: the device whose nodes the awaiting task runs itself (cpu)
    home: Any
    #: a node whose result has at least this many elements is handed to the
    #: scheduler: its kernel may run in a thread (a huge number: never)
    offload_min: int

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        """A node of ``gt`` became ready on the general path: queue it where it runs."""

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        """A node left ``gt``'s hot loop: False to run it there (general path),
        None when taken (a device queue), or an awaitable the driver awaits."""

    def busy(self, gt: GraphTask) -> bool:
        """True while nodes of ``gt`` are queued or running elsewhere."""

    def release(self, gt: GraphTask) -> None:
        """``gt`` ended: drop what is still queued for it."""

    def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Awaitable[Any]:
        """``node.apply(inputs)`` run where heavy kernels run (a thread)."""


# -- GraphTask ------------------------------------------------------------------------------


class GraphTask(Outcome):
    """The state of one backward call (see NOTE [Scheduler invariants]).

    What it leaves for its end (staged gradients, final callbacks, commit
    guards) is ``Outcome``'s (_outcome.py).
    """

    __slots__ = (
        "anomaly",
        "captured",
        "captures",
        "checkpoint_valid",
        "children",
        "create_graph",
        "depth",
        "detach",
        "done",
        "error",
        "error_node",
        "general",
        "id",
        "keep_graph",
        "needed",
        "node_hook",
        "pending",
        "planned",
        "ready",
        "reached",
        "roots",
        "run_set",
        "running_node",
        "sched",
    )

    @property
    def dependencies(self) -> dict[Node, int]:
        """The general runner's dependency counts (NOTE [Scheduler invariants])."""
        return self.general.dependencies

    @property
    def not_ready(self) -> dict[Node, InputBuffer]:
        """The general runner's InputBuffers of nodes not ready yet."""
        return self.general.not_ready

    @property
    def prof(self) -> _trace.Recorder | None:
        """The profile recording now, if any (NOTE [Profiling seam]: one per process)."""
        return _trace.active

    def __init__(
        self,
        *,
        keep_graph: bool,
        create_graph: bool,
        depth: int = 0,
        anomaly: bool = False,
        checkpoint_valid: bool = True,
    ) -> None:
        self.id = next(_ids)
        #: the general runner: dependency counts and waiting InputBuffers
        #: (_general_run.py); a planned run (``planned``) hands over to it
        self.general = GeneralRun()
        self.needed: set[Node] | AllNodesBut | None = None
        self.captures: dict[Node, list[tuple[int, int]]] | None = None
        self.captured: list[Any] = []
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.depth = depth
        self.error: BaseException | None = None
        self.ready = ReadyQueue()
        # Outcome's fields (no call of its own: a frame less per backward)
        self.staged: dict[Any, list[Any]] = {}
        self.callbacks: list[Callable[[], Any]] = []
        self.before_commit: list[Callable[[], Any]] | None = None
        self.on_finish: list[Callable[[Any], None]] | None = None
        self.anomaly = anomaly
        self.roots: tuple[Any, ...] = ()
        #: optional callable(node) called before each node runs (tests, tracing)
        self.node_hook: Callable[[Node], None] | None = None
        self.done = False
        #: False under grad() / inputs= or inside such a backward (ae.checkpoint)
        self.checkpoint_valid = checkpoint_valid
        #: nested graph tasks running now (``adopt``)
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
        self.sched: Scheduler | None = None
        #: the planned runner, when a backward plan runs this task (NOTE
        #: [Backward plans] in _plan.py; _planned_run.py), else None
        self.planned: PlannedRun | None = None
        #: runs async user code to completion where no event loop runs (sync driver)
        self.detach: Detach | None = None

    # -- set-up (by the entry points and the drivers) ----------------------------------------
    def plan(
        self,
        roots: tuple[Any, ...],
        root_edges: list[tuple[Node, int]],
        root_grads: list[Any],
        outputs: list[tuple[Node, int]] | None,
        accumulate: bool,
    ) -> None:
        """Plan the dependency pass (and exec_info) and queuing the graph root.

        ``run`` does the work within its time slices: counting the
        dependencies of a large graph takes long enough to stall an event loop.
        ``roots`` are the output tensors (for the error of a freed graph).
        """
        self.roots = roots
        self.pending = self._prepare_steps(root_edges, root_grads, outputs, accumulate)

    def prepare(
        self,
        root_edges: list[tuple[Node, int]],
        root_grads: list[Any],
        outputs: list[tuple[Node, int]] | None,
        accumulate: bool,
    ) -> None:
        """Like :meth:`plan`, done now."""
        for _ in self._prepare_steps(root_edges, root_grads, outputs, accumulate):
            pass

    def attach(
        self,
        sched: Scheduler | None,
        detach: Detach | None = None,
        node_hook: Callable[[Node], None] | None = None,
    ) -> None:
        """Set by the driver before it runs the task: its scheduler, detached runner, node hook."""
        self.sched = sched
        self.detach = detach
        if node_hook is not None and self.node_hook is None:
            self.node_hook = node_hook

    def _prepare_steps(
        self,
        root_edges: list[tuple[Node, int]],
        root_grads: list[Any],
        outputs: list[tuple[Node, int]] | None,
        accumulate: bool,
    ) -> Iterator[None]:
        if len(root_edges) == 1:
            root: Node = root_edges[0][0]
            buffer: InputBuffer = [None] * root.num_outputs
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
        key = None
        if (
            root.topological_nr >= MIN_DEPTH  # small graphs: not worth it (a test, no call)
            and PLANS.enabled
            and not min_topo
            and (outputs is None or not accumulate)
        ):
            key = self._plan_key(root, root_edges, outputs)
        build_plan = False
        if key is not None:
            build_plan = yield from self._try_plan(key, root, buffer, outputs)
            if self.planned is not None:
                return  # a plan runs it
        sinks: list[Node] | None = [] if outputs is not None else None
        deps = self.general.dependencies
        yield from dependency_steps(root, min_topo, deps, sinks, self.reached)
        if outputs is not None:
            assert sinks is not None
            result: list[Any] = []
            yield from exec_info_steps(root, outputs, accumulate, min_topo, deps, sinks, result)
            needed, captures, every_node_runs = result
            self.needed, self.captures = needed, captures
            if not every_node_runs:  # else run_set None (NOTE [exec_info without a walk])
                self.run_set = needed.union(captures) if captures else needed
            self.captured = [None] * len(outputs)
            self.checkpoint_valid = False
            if root not in needed and root not in captures:
                return  # nothing to run
        if build_plan:
            built: list[BackwardPlan] = []
            yield from self._build_plan(built)
            PLANS.cache.store(key, built[0] if built else None)
        # the root goes to this task's own queue; the hot loop hands it to the
        # scheduler if it runs elsewhere (NOTE [Where a node runs])
        self.ready.push(root, buffer)

    # -- backward plans (NOTE [Backward plans] in _plan.py) ------------------------------------
    def _plan_key(
        self,
        root: Node,
        root_edges: list[tuple[Node, int]],
        outputs: list[tuple[Node, int]] | None,
    ) -> Any:
        """The cheap key of this backward's plan, or None when it takes none."""
        if self.anomaly or self.node_hook is not None or _trace.active is not None:
            return None
        return (
            type(root),
            root.topological_nr,
            root.next_nrs,
            root_edges[0][1] if len(root_edges) == 1 else -1,
            None if outputs is None else tuple(nr for _, nr in outputs),
            self.keep_graph,
            self.create_graph,
            self.sched is None,
        )

    def _try_plan(
        self,
        key: Any,
        root: Node,
        buffer: InputBuffer,
        outputs: list[tuple[Node, int]] | None,
    ) -> Generator[None, None, bool]:
        """Run by the key's plan if the graph matches it; whether to build one now."""
        plan, build_plan = PLANS.cache.lookup(key)
        if plan is None:
            return build_plan
        nodes: list[Node] = []
        sched = self.sched  # (the one matched against: _run_plan checks it)
        yield from match(plan, root, outputs, sched, nodes)
        if nodes:
            PLANS.hits += 1
            yield from self._use_plan(plan, nodes, buffer, outputs, sched)
        else:
            PLANS.misses += 1
            PLANS.cache.miss(key)
        return False

    def _build_plan(self, out: list[BackwardPlan]) -> Iterator[None]:
        """Build the plan of this task's prepared graph (before any node ran) into ``out``."""
        slow, sched = slow_nodes(self), self.sched
        return build_steps(
            self.reached,
            self.dependencies,
            self.run_set,
            self.captures,
            self.needed,
            lambda node: leaves_hot_loop(node, slow, sched),
            out,
        )

    def _use_plan(
        self,
        plan: BackwardPlan,
        nodes: list[Node],
        buffer: InputBuffer,
        outputs: list[tuple[Node, int]] | None,
        sched: Scheduler | None,
    ) -> Iterator[None]:
        """Run by ``plan``, matched against this graph's ``nodes`` under ``sched``.

        Yields between chunks; a scheduler changed meanwhile makes the run
        leave the plan at once (``_run_plan``).
        """
        runs: list[PlannedRun] = []
        yield from PlannedRun.start(plan, nodes, buffer, sched, runs)
        self.planned = runs[0]
        self.reached = nodes
        if outputs is not None:  # grad(): exec_info, for the general-path nodes only
            self.needed = {nodes[i] for i in plan.needed_general}
            self.captures = {nodes[i]: list(caps) for i, caps in plan.captured}
            self.captured = [None] * len(outputs)
            self.checkpoint_valid = False

    def graph_nodes(self) -> list[Node] | dict[Node, int]:
        """The nodes of this task's graph found so far (the root aside when unplanned)."""
        planned = self.planned
        return planned.nodes if planned is not None else self.dependencies

    def _leave_plan(self) -> None:
        """Go on by the general path from where the plan's run is (between two nodes).

        The general path's state at this point: dependency counts over the
        edges of the nodes still to run, their InputBuffers, the ready ones
        queued, and grad()'s exec_info in full.
        """
        planned = self.planned
        assert planned is not None
        deps, made, needed, run_set = planned.leave(self.needed is not None)
        if needed is not None:
            self.needed, self.run_set = needed, run_set
        self.general, ready = GeneralRun.resume(deps, made)
        for n, buf in ready:  # (in run order)
            self.ready.push(n, buf)
        self.planned = None

    def _run_plan(self, deadline: float) -> Any:
        """``run`` by the planned runner, unless the scheduler changed meanwhile."""
        planned = self.planned
        assert planned is not None
        if planned.sched is not self.sched and planned.pos < len(planned.plan.steps):
            # another scheduler (a compute thread's, the loop's) decides anew
            # where nodes run: the general path asks it node by node
            self._leave_plan()
            return self.run(deadline)
        return planned.run(self, deadline)

    # -- the runtime's calls (NOTE [The scheduler protocol]) ----------------------------------
    # The runtime reaches a task's ReadyQueue and the current graph task only
    # through these.
    def keep(self, node: Node, buffer: InputBuffer) -> None:
        """Queue ``node`` on this task's own ReadyQueue: the scheduler leaves it to this task."""
        self.ready.push(node, buffer)

    def keep_first(self, node: Node, buffer: InputBuffer) -> None:
        """Put back a node just taken from this task's queue: it runs next, as it would have.

        For a node the runtime held back at a boundary (NOTE [Choice points]
        in aengine/runtime/_choice.py).
        """
        self.ready.push_front(node, buffer)

    def has_ready(self) -> bool:
        """Whether nodes wait in this task's own ReadyQueue."""
        return bool(self.ready.heap)

    def as_current(self) -> AsCurrent:
        """``with gt.as_current():`` this is the current graph task inside the block.

        For the runtime, around what runs on behalf of this task outside
        ``run`` (an awaited kernel, hook or nested backward, a device
        worker's node, the final callbacks): ``current_graph_task`` and
        ``queue_callback`` see it there.
        """
        return AsCurrent(self)

    # -- transitions ---------------------------------------------------------------------------
    def push(self, node: Node, buffer: InputBuffer) -> None:
        """Queue a node that became ready (through the scheduler when there is one)."""
        sched = self.sched
        if sched is not None:  # async: device nodes go to their queue
            sched.push(self, node, buffer)
            return
        self.ready.push(node, buffer)

    def fail(self, node: Node | None, exc: BaseException) -> None:
        """Record the first error (``node``: where it was raised); stop nested graph tasks."""
        if self.error is None:
            self.error = exc
            self.error_node = node
            if self.children:  # nested graph tasks stop too, as in PyTorch
                stop = AutogradError(
                    f"stopped because the enclosing backward failed: {type(exc).__name__}: {exc}"
                )
                for child in list(self.children):
                    child.fail(None, stop)

    def finish(self) -> None:
        """The driver is done with this task (success, error or cancellation)."""
        self.done = True
        prof = _trace.active
        if prof is not None:
            prof.graph_task_end(self)
        on_finish, self.on_finish = self.on_finish, None
        if on_finish:
            for fn in on_finish:
                fn(self)

    def adopt(self, child: GraphTask) -> None:
        """Register a nested graph task: this one's failure stops it."""
        if self.children is None:
            self.children = []
        self.children.append(child)
        if self.error is not None:
            child.fail(None, self.error)

    def disown(self, child: GraphTask) -> None:
        """The nested graph task ended."""
        children = self.children
        if children is not None and child in children:
            children.remove(child)

    def count_executed(self, nodes: list[Node]) -> int:
        """How many of ``nodes`` this task runs (or runs the tensor hooks of: _exec_info.py)."""
        return count_executed(
            nodes, self.run_set, self.dependencies, self.reached, self.needed, self.captures
        )

    def check_complete(self) -> None:
        if self.error is not None:
            raise self.error
        if self.general.not_ready and self.needed is None:
            raise AutogradError("could not compute gradients for some functions")

    # -- the hot loop ------------------------------------------------------------------------
    def run(self, deadline: float = float("inf")) -> Any:
        """Run ready nodes; return None (drained), YIELD or an awaitable to await.

        The preparation first (``pending``, within the time slices), then
        the runner it chose: the planned one, or the general one.
        """
        prof = _trace.active
        if prof is not None and not prof.inside(self):
            return prof.run(self, deadline)  # timed; it calls run again
        if self.pending is not None:
            for _ in self.pending:
                if time.perf_counter() > deadline:
                    return YIELD
            self.pending = None
        if self.planned is not None:
            return self._run_plan(deadline)
        return self.general.run(self, deadline)

    def _general(self, node: Node, buffer: InputBuffer) -> Any:
        """A node that leaves the hot loop: to the scheduler, else the general path."""
        sched = self.sched
        if sched is not None:
            res = sched.dispatch(self, node, buffer)
            if res is not False:
                return res
        return evaluate_general(self, node, buffer)

    def run_node(self, node: Node, buffer: InputBuffer) -> Awaitable[Any] | None:
        """Run one node for a device worker: None when it finished, else an awaitable."""
        return run_node(self, node, buffer)

    def route(self, node: Node, outs: Any) -> None:
        """Send a finished node's gradients on (the general runner's routing)."""
        self.general.route(self, node, outs)

    def kernel(self, node: Node, inputs: InputBuffer) -> Awaitable[Any]:
        """``node.apply(inputs)`` where the scheduler runs heavy kernels (a thread)."""
        assert self.sched is not None  # (only a heavy node of an async backward comes here)
        return self.sched.kernel(self, node, inputs)

    def enter_node(self, node: Node) -> None:
        """``node`` runs now (``running_node``: for hooks and errors)."""
        self.running_node = node

    def capture(self, index: int, grad: Any) -> None:
        """grad()'s result ``index`` is ``grad``."""
        self.captured[index] = grad
