"""A backward that runs in a compute thread: heavy work off the event loop in one hop.

# NOTE [A backward in a compute thread]
# Offloading each heavy kernel costs two thread hops per node and leaves the
# bookkeeping between kernels on the event loop: with many requests in
# flight the loop thread became the bottleneck while the compute threads
# idled (concurrent MLP requests run faster with their backwards in threads
# than with their kernels in threads: ``python -m bench.offload``, table
# (c), figures in docs/performance.md).  So when the hot loop meets
# a heavy cpu node of a backward served by an Engine (``offload_backward``,
# default True), the Engine moves the rest of the backward into one of its
# compute threads, if nothing left in it must run on the event loop:
#
# * eligible: a top-level backward, no anomaly mode, no node hook
#   (``on_node``), no profile, at most ``MAX_NODES`` nodes (a long graph
#   of small nodes would hold the GIL in the thread in long pure-Python
#   stretches, delaying the loop thread's own turns), and no node that
#   runs user code that may need the loop: hooks of any kind, retained
#   gradients, ``async def`` backward functions.  A sync custom Function's
#   backward may run in the thread (as PyTorch runs backward functions on
#   its device threads).
# * In the thread the graph task runs with ``IN_THREAD`` as its scheduler:
#   every kernel inline, time slices of ``THREAD_SLICE``; between two of
#   them the owner checks for cancellation on the loop.  A non-cpu node
#   sends the backward back to the loop (``BACK``), which dispatches it
#   to its device queue as usual.  Nothing else touches the graph task
#   meanwhile: its owner awaits the thread, and no device worker holds a
#   node of it (checked before it moves).
# * A backward whose first few nodes (``PEEK`` of them, breadth first from
#   its outputs) include a heavy cpu one starts in the thread at once, with
#   its dependency pass: for the service's MLP that is the whole backward
#   off the loop.  Eligibility is then checked as it runs: a node that runs
#   user code sends the backward back to the loop before it runs (as a
#   non-cpu node does), and so does a graph found to be larger than
#   ``MAX_NODES`` once its dependencies are counted.
# * The loop's share is not held while the thread runs: the loop serves
#   other tasks, and the commit of ``.grad`` and the final callbacks run on
#   the loop as always.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from ..core import AccumulateGrad, GraphTask, Node
from ..tensors import CPU
from ._offload import NEVER

__all__ = [
    "IN_THREAD",
    "TO_THREAD",
    "BACK",
    "MAX_NODES",
    "PEEK",
    "THREAD_SLICE",
    "movable",
    "run_slice",
    "starts_heavy",
]

#: returned by ``Engine.dispatch``: run the rest of this backward in a compute thread
TO_THREAD = object()
#: returned by ``GraphTask.run`` in the thread: a non-cpu node, back to the loop
BACK = object()

#: the most nodes a backward may have to move into a thread
MAX_NODES = 512
#: nodes looked at, from the outputs, for a heavy one that starts a backward in a thread
PEEK = 8
#: seconds a backward runs in the thread before its owner checks for cancellation
THREAD_SLICE = 0.02


class _InThread:
    """The scheduler of a graph task while it runs in a compute thread."""

    __slots__ = ()
    home = CPU
    offload_min = NEVER

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        gt.keep(node, buffer)

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        dev = node.dev
        if (dev is None or dev is CPU) and not _user_code(node):
            return False
        gt.keep(node, buffer)  # the loop runs it, and what follows
        return BACK

    def busy(self, gt: GraphTask) -> bool:
        return False

    def release(self, gt: GraphTask) -> None:
        pass

    async def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        raise AssertionError("a backward in a compute thread runs its kernels inline")


IN_THREAD = _InThread()


class OnLoop:
    """The scheduler of a backward started with multithreading off: cpu nodes stay on the loop.

    NOTE [Multithreading mode] in core/_modes.py.  Every cpu kernel runs
    inline in the awaiting task (``offload_min`` is never reached) and the
    backward never moves into a compute thread; nodes on other devices go to
    the real scheduler (the Engine's device workers, or the lazy one that
    opens an Engine for them).
    """

    __slots__ = ("home", "real")
    offload_min = NEVER

    def __init__(self, real: Any) -> None:
        self.real = real
        self.home = real.home

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        self.real.push(gt, node, buffer)

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        dev = node.dev
        if dev is None or dev is self.home:
            return False
        return self.real.dispatch(gt, node, buffer)

    def busy(self, gt: GraphTask) -> bool:
        return bool(self.real.busy(gt))

    def release(self, gt: GraphTask) -> None:
        self.real.release(gt)

    async def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        with gt.as_current():  # (only reached for a node the real scheduler gave back)
            return node.apply(inputs, gt.create_graph)


def _user_code(node: Node) -> bool:
    """Whether running ``node`` may call user code other than a sync backward function."""
    if not node._special:
        return False
    if type(node) is not AccumulateGrad:
        return True  # hooks, a retained gradient, an async backward function
    return bool(
        node._pre_hooks
        or node._post_hooks
        or node._tensor_pre_hooks
        or node._retains_grad
        or node.variable._hooks
    )


def _loop_bound(gt: GraphTask) -> bool:
    """Whether ``gt`` as a whole must stay on the loop (nested, anomaly, node hook, profile)."""
    return bool(gt.depth or gt.anomaly or gt.node_hook is not None or gt.prof is not None)


def movable(gt: GraphTask) -> bool:
    """Whether the rest of ``gt`` may run in a compute thread (see the NOTE)."""
    if _loop_bound(gt):
        return False
    nodes = gt.graph_nodes()
    if len(nodes) > MAX_NODES:
        return False
    return not any(_user_code(node) for node in nodes)


def starts_heavy(gt: GraphTask, offload_min: int) -> bool:
    """Whether one of the first ``PEEK`` nodes of ``gt`` is a heavy cpu node (see the NOTE)."""
    if _loop_bound(gt):
        return False
    queue: list[Node] = []
    for t in gt.roots:
        fn = getattr(t, "grad_fn", None)
        if fn is not None:
            queue.append(fn)
    seen = 0
    while seen < len(queue) and seen < PEEK:
        node = queue[seen]
        seen += 1
        if node.numel >= offload_min and (node.dev is None or node.dev is CPU):
            return True
        queue.extend(n for n in node if n is not None)
    return False


def run_slice(gt: GraphTask) -> Any:
    """One slice of ``gt`` in the compute thread (the caller set its scheduler)."""
    if gt.pending is None and len(gt.graph_nodes()) > MAX_NODES:
        return BACK  # too large to hold the GIL here in long stretches
    return gt.run(perf_counter() + THREAD_SLICE)
