"""The general runner: the seeds' algorithm (NOTE [Scheduler invariants] in _graph_task.py).

Dependency counts, the InputBuffers of nodes not ready yet, and the hot
loop over the task's ready heap: what runs a backward whose structure no
plan knows (and what a planned run hands over to, ``GraphTask._leave_plan``).
This runner holds the counts and the waiting buffers, which change only
through its own methods; the task's state (its ReadyQueue, error, flags)
is the ``GraphTask``'s, read here and changed through its methods.
"""

from __future__ import annotations

import heapq
import time
from typing import Any

from ._graph import Node
from ._running import (
    CLOCK_EVERY,
    YIELD,
    InputBuffer,
    Task,
    accumulate,
    new_buffer,
    slow_nodes,
)
from ._running import current as _current

__all__ = ["GeneralRun"]


class GeneralRun:
    """A graph task's run by the general path (see the module)."""

    __slots__ = ("dependencies", "not_ready")

    def __init__(self, dependencies: dict[Node, int] | None = None) -> None:
        #: node -> the edges into it from nodes that will still run
        self.dependencies: dict[Node, int] = {} if dependencies is None else dependencies
        #: node -> its InputBuffer, while some of its gradients are still to come
        self.not_ready: dict[Node, InputBuffer] = {}

    @classmethod
    def resume(
        cls, dependencies: dict[Node, int], made: list[tuple[Node, InputBuffer]]
    ) -> tuple[GeneralRun, list[tuple[Node, InputBuffer]]]:
        """A runner going on from a planned run's state; the ready nodes with their buffers.

        ``made``: the InputBuffers made so far, with their nodes (run order).
        """
        run = cls(dependencies)
        ready = []
        for node, buf in made:
            if dependencies.get(node, 0):
                run.not_ready[node] = buf
            else:
                ready.append((node, buf))
        return run, ready

    def run(self, gt: Task, deadline: float) -> Any:
        """Run ready nodes of ``gt``; return None (drained), YIELD or an awaitable to await."""
        heap: list[Any] = gt.ready.heap
        heappop, heappush, tie = heapq.heappop, heapq.heappush, gt.ready.tie
        deps, not_ready = self.dependencies, self.not_ready
        slow, sched = slow_nodes(gt), gt.sched  # NOTE [Where a node runs]
        home, offload_min = (None, 0) if sched is None else (sched.home, sched.offload_min)
        other = slow is not None or sched is not None  # one test per node when neither
        # grad() / backward(inputs=...): only nodes on a path to an input run
        # (``run_set``); those without captures take the inlined path too.
        run_set, create_graph, release = gt.run_set, gt.create_graph, not gt.keep_graph
        perf = time.perf_counter
        count = 0
        token = _current.set(gt)
        try:
            while heap:
                if gt.error is not None:
                    return None
                count += 1
                if not count & CLOCK_EVERY and perf() > deadline:
                    return YIELD
                _, _, node, buffer = heappop(heap)
                while node is not None:
                    # ---- one node: ``leaves_hot_loop``, inlined ------------------
                    if node._special or (
                        other
                        and (
                            (slow is not None and node in slow)
                            or (
                                sched is not None
                                and (
                                    node.numel >= offload_min
                                    or (node.dev is not home and node.dev is not None)
                                )
                            )
                        )
                    ):
                        res = gt._general(node, buffer)
                        if res is not None:
                            return res
                        break
                    try:
                        outs = node.evaluate(buffer, create_graph, release)
                    except BaseException as exc:
                        gt.fail(node, exc)
                        raise
                    # ---- route outputs: ``route``, with ``new_buffer`` and
                    # ``accumulate`` inlined (a call per edge costs measurably here)
                    nxt_run = nxt_buf = None
                    for nxt, nr, g in zip(node, node.next_nrs, outs):
                        if nxt is None:
                            continue
                        d = deps[nxt] - 1
                        deps[nxt] = d
                        if run_set is not None and nxt not in run_set:
                            continue  # pruned: never runs (see exec_info)
                        if d:  # not ready yet: the gradient waits in its InputBuffer
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
                        elif nxt_run is not None and nxt.sequence_nr > nxt_run.sequence_nr:
                            heappush(heap, (-nxt_run.sequence_nr, tie(), nxt_run, nxt_buf))
                            nxt_run, nxt_buf = nxt, buf
                        else:
                            heappush(heap, (-nxt.sequence_nr, tie(), nxt, buf))
                    node, buffer = nxt_run, nxt_buf
                    if node is not None:
                        count += 1
                        # the error may be set by another thread or a failing parent
                        if not count & CLOCK_EVERY and (perf() > deadline or gt.error is not None):
                            heappush(heap, (-node.sequence_nr, tie(), node, buffer))
                            return YIELD
            return None
        finally:
            _current.reset(token)

    def route(self, gt: Task, node: Node, outs: Any) -> None:
        """Send a finished node's gradients on to its next nodes (the general path's routing)."""
        deps = self.dependencies
        not_ready = self.not_ready
        run_set = gt.run_set
        nrs = node.next_nrs
        for i in range(len(node)):
            nxt = node[i]
            if nxt is None:
                continue
            g = outs[i] if i < len(outs) else None
            d = deps[nxt] - 1
            deps[nxt] = d
            if run_set is not None and nxt not in run_set:
                continue  # pruned: never runs (see exec_info)
            buf = not_ready.get(nxt)
            if buf is None:
                buf = new_buffer(nxt, nrs[i], g)
            else:
                accumulate(buf, nrs[i], g)
            if d:
                not_ready[nxt] = buf
            else:
                not_ready.pop(nxt, None)
                gt.push(nxt, buf)
