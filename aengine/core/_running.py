"""What both runners of a graph task share: the step that ends a time slice, the
clock rule, the current graph task, InputBuffers, the ReadyQueue, the scheduler
they hand nodes to and the rule of where a node runs (NOTE [Scheduler
invariants] in _graph_task.py).

# NOTE [Where a node runs]
# A node runs in a runner's hot loop (apply, release, route: no
# coroutine) unless it takes the general path: hooks, retained gradients,
# grad() captures, anomaly mode, a node hook, a profile (NOTE [Profiling
# seam] in _trace.py), or a node class that always does (AccumulateGrad,
# async custom Functions).  Under an async driver the
# scheduler (a runtime object, NOTE [The scheduler protocol] in
# _graph_task.py) also receives
# every node that is not on its ``home`` device or whose result has at least
# ``offload_min`` elements: the runtime alone decides where those run (a
# device queue, a kernel thread, or here after all).  A sync backward has no
# scheduler: every node runs in this thread.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import operator
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from . import _trace
from ._exec_info import EVERY_NODE
from ._graph import Node

__all__ = [
    "AsCurrent",
    "CLOCK_EVERY",
    "YIELD",
    "InputBuffer",
    "NodeTask",
    "Placement",
    "ReadyQueue",
    "Task",
    "accumulate",
    "current",
    "leaves_hot_loop",
    "new_buffer",
    "slow_nodes",
]

_is_special = operator.attrgetter("_special")

#: returned by ``GraphTask.run`` when the time slice is over
YIELD = object()

#: the run loop reads the clock when ``count & CLOCK_EVERY`` is 0: every 4th
#: node.  A kernel kept inline is small (NOTE [Kernel offload policy] in the
#: runtime), so a slice overruns by 3 such nodes at most; on small nodes the
#: clock read costs little.
CLOCK_EVERY = 3

#: the graph task whose node runs in this task/thread (``current_graph_task``)
current: contextvars.ContextVar[Task | None] = contextvars.ContextVar(
    "aengine_graph_task", default=None
)


#: the gradients a node received so far, one slot per forward output
InputBuffer = list[Any]
#: an entry of a ReadyQueue: (-sequence_nr, FIFO tie, node, its InputBuffer)
NodeTask = tuple[int, int, Node, InputBuffer]


def accumulate(buf: InputBuffer, nr: int, g: Any) -> None:
    """Add gradient ``g`` into slot ``nr`` of ``buf`` (None means no gradient)."""
    old = buf[nr]
    if old is None:
        buf[nr] = g
    elif g is not None:
        buf[nr] = old + g


def new_buffer(node: Node, nr: int, g: Any) -> InputBuffer:
    """The InputBuffer of ``node`` holding only ``g`` in slot ``nr``."""
    if node.num_outputs == 1:
        return [g]
    buf: InputBuffer = [None] * node.num_outputs
    buf[nr] = g
    return buf


class AsCurrent:
    """The context of ``GraphTask.as_current``: ``current`` is the task inside it."""

    __slots__ = ("gt", "token")

    def __init__(self, gt: Task) -> None:
        self.gt = gt

    def __enter__(self) -> Task:
        self.token = current.set(self.gt)
        return self.gt

    def __exit__(self, *exc: object) -> None:
        current.reset(self.token)


# -- the ReadyQueue ---------------------------------------------------------------

#: ties of ``ReadyQueue.push_front``: below every ``push``'s (which count up from 0)
_front_ties = itertools.count(-1, -1)


class ReadyQueue:
    """The nodes of one graph task that are ready to run (see NOTE [Scheduler invariants]).

    ``heap`` holds NodeTasks; ``GraphTask.run`` uses it directly in its hot
    loop, every other caller goes through ``push`` and ``pop``.
    """

    __slots__ = ("heap", "tie")

    def __init__(self) -> None:
        self.heap: list[NodeTask] = []
        self.tie = itertools.count().__next__

    def push(self, node: Node, buffer: InputBuffer) -> None:
        heapq.heappush(self.heap, (-node.sequence_nr, self.tie(), node, buffer))

    def push_front(self, node: Node, buffer: InputBuffer) -> None:
        """Put back a node just popped: it comes first again, before its equals too.

        For a node the runtime held back at a boundary (NOTE [Choice points]
        in aengine/runtime/_choice.py): PyTorch's order inside a graph task
        must not change.  The ties it takes are negative, decreasing.
        """
        heapq.heappush(self.heap, (-node.sequence_nr, next(_front_ties), node, buffer))

    def pop(self) -> tuple[Node, InputBuffer]:
        _, _, node, buffer = heapq.heappop(self.heap)
        return node, buffer

    def __len__(self) -> int:
        return len(self.heap)


# -- what the runners see of a graph task -----------------------------------------------


class Placement(Protocol):
    """What the hot loops read of a scheduler (the ``Scheduler`` of _graph_task.py)."""

    @property
    def home(self) -> Any:
        """The device whose nodes the awaiting task runs itself (cpu)."""

    @property
    def offload_min(self) -> int:
        """A node whose kernel counts at least this many elements is handed on."""


class Task(Protocol):
    """What the runners and the general path of one node read of, and call on, the
    graph task they run: a ``GraphTask``, which changes only through these calls."""

    ready: ReadyQueue
    create_graph: bool
    keep_graph: bool
    anomaly: bool

    @property
    def error(self) -> BaseException | None: ...
    @property
    def sched(self) -> Placement | None: ...
    @property
    def run_set(self) -> set[Node] | None: ...
    @property
    def captures(self) -> dict[Node, list[tuple[int, int]]] | None: ...
    @property
    def needed(self) -> Any: ...  # (a set, an AllNodesBut or None: exec_info's)
    @property
    def node_hook(self) -> Callable[[Node], None] | None: ...
    @property
    def detach(self) -> Any: ...  # (the sync driver's Detach runner, or None)

    def fail(self, node: Node | None, exc: BaseException) -> None: ...
    def push(self, node: Node, buffer: InputBuffer) -> None: ...
    def route(self, node: Node, outs: Any) -> None: ...
    def stage(self, key: Any, grad: Any, kind: str) -> None: ...
    def enter_node(self, node: Node) -> None: ...
    def capture(self, index: int, grad: Any) -> None: ...
    def kernel(self, node: Node, inputs: InputBuffer) -> Awaitable[Any]: ...
    def _general(self, node: Node, buffer: InputBuffer) -> Any: ...


def slow_nodes(gt: Task) -> Any:
    """The nodes of ``gt`` that take the general path though not ``_special`` (None: none).

    Captured ones (unless all are special anyway: ``_special`` is never
    cleared), or every node when anomaly mode, a node hook or a profile is
    on (NOTE [Where a node runs]).
    """
    if gt.anomaly or gt.node_hook is not None or _trace.active is not None:
        return EVERY_NODE
    slow = gt.captures or None
    if slow is not None and all(map(_is_special, slow)):
        return None
    return slow


def leaves_hot_loop(node: Node, slow: Any, sched: Placement | None) -> bool:
    """Whether the hot loop hands ``node`` on (NOTE [Where a node runs]).

    To the general path when it is ``_special`` or among ``slow``
    (``slow_nodes``: captured nodes, or every node under anomaly
    mode, a node hook or a profile); to the scheduler, when there is one,
    when it is off the scheduler's home device or its kernel is heavy
    (``numel`` at least ``offload_min``).  ``GraphTask.run`` inlines this
    test (a call per node would cost there); a plan's build asks it, and
    ``match`` asks its scheduler part over whole lists.
    """
    if node._special or (slow is not None and node in slow):
        return True
    return sched is not None and (
        node.numel >= sched.offload_min or (node.dev is not sched.home and node.dev is not None)
    )
