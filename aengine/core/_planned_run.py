"""The planned runner: a graph task's backward run by a plan (NOTE [Backward plans]).

``GraphTask`` keeps the backward's state and decides, when it prepares,
whether a plan runs it (``GraphTask._prepare_steps``: a match).  This
runner holds what only a planned run has, the plan, the graph's nodes by
number and in run order, the InputBuffers by run position, the next
position and the scheduler it was matched under, and runs the hot loop
over them; a graph task asks it for the general path's state when it
leaves the plan.  Its fields change only through its own methods.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

from ._graph import Node
from ._plan import SCAN_CHUNK, BackwardPlan
from ._plan_code import ADD, GENERAL, LONG, NEW_ONE, NEXT, ONE_ROUTE, STOP
from ._running import CLOCK_EVERY, YIELD, InputBuffer, Placement, Task
from ._running import current as _current

__all__ = ["PlannedRun"]

#: the deadline of a run without time slices (a sync backward)
FOREVER = float("inf")


class PlannedRun:
    """A graph task's run by ``plan``, matched against its graph's ``nodes``."""

    __slots__ = ("bufs", "nodes", "order", "plan", "pos", "sched")

    def __init__(
        self,
        plan: BackwardPlan,
        nodes: list[Node],
        order: list[Node],
        buffer: InputBuffer,
        sched: Placement | None,
    ) -> None:
        self.plan = plan
        #: the graph's nodes by number, and in the order they run
        self.nodes = nodes
        self.order = order
        #: the InputBuffers by run position (the root, number 0, runs first)
        self.bufs: list[InputBuffer | None] = [None] * len(order)
        self.bufs[0] = buffer
        #: the next run position
        self.pos = 0
        #: the scheduler it was matched under: another one leaves the plan
        self.sched = sched

    @classmethod
    def start(
        cls,
        plan: BackwardPlan,
        nodes: list[Node],
        buffer: InputBuffer,
        sched: Placement | None,
        out: list[PlannedRun],
    ) -> Iterator[None]:
        """Make the run of ``plan`` over ``nodes`` into ``out``, yielding between chunks."""
        order: list[Node] = []
        numbers = plan.order
        for a in range(0, len(numbers), SCAN_CHUNK):
            order += map(nodes.__getitem__, numbers[a : a + SCAN_CHUNK])
            yield
        out.append(cls(plan, nodes, order, buffer, sched))

    def leave(
        self, needed: bool
    ) -> tuple[dict[Node, int], list[tuple[Node, InputBuffer]], Any, Any]:
        """The general path's state from the position reached (between two nodes).

        Dependency counts over the edges of the nodes still to run; the
        InputBuffers made so far with their nodes, in run order; with
        ``needed`` (grad()), exec_info's ``needed`` and ``run_set`` in full.
        """
        plan, nodes, bufs = self.plan, self.nodes, self.bufs
        ran = set(plan.order[: self.pos])
        deps: dict[Node, int] = {}
        for k, n in enumerate(nodes):
            if k not in ran:
                for m in n:
                    if m is not None:
                        deps[m] = deps.get(m, 0) + 1
        made = [
            (self.order[p], buf) for p in range(self.pos, len(bufs)) if (buf := bufs[p]) is not None
        ]
        needed_set = run_set = None
        if needed:
            needed_set = set(itertools.compress(nodes, plan.needed))
            in_run = plan.in_run
            run_set = set(nodes if in_run is None else itertools.compress(nodes, in_run))
        self.bufs = []
        return deps, made, needed_set, run_set

    def run(self, gt: Task, deadline: float) -> Any:
        """``GraphTask.run`` by the plan: stretches of nodes between two clock checks.

        The hot loop's checks at the same nodes: the clock (and the error)
        before every (CLOCK_EVERY + 1)th node of this call, the error before
        a node taken from the heap.  A stretch runs by its compiled function
        (NOTE [Plans compiled to code]) or, without one, node by node
        (``_loop``).  Without a deadline (a sync backward) no clock is read,
        and runs of LONG nodes are one function each (``_unclocked``).
        """
        if self.pos >= len(self.plan.steps):
            return None  # drained (the driver asks again: ``run`` on an empty queue)
        token = _current.set(gt)
        try:
            if deadline == FOREVER:
                return self._unclocked(gt)
            return self._clocked(gt, deadline)
        finally:
            _current.reset(token)

    def _clocked(self, gt: Task, deadline: float) -> Any:
        """``run`` within a time slice.

        ``buffer`` is not None between two stretches when the last node
        handed the next one its buffer; it goes to ``bufs`` before any return.
        """
        plan = self.plan
        steps, run, bufs = plan.steps, self.order, self.bufs
        pos, end = self.pos, len(steps)
        create_graph, release = gt.create_graph, not gt.keep_graph
        perf = time.perf_counter
        codes, more = plan.codes
        length = CLOCK_EVERY
        buffer: Any = None
        while True:
            stop = pos + length
            if stop > end:
                stop, fn = end, None
            else:
                fn = codes[pos]
            if fn is not None:
                buffer = fn(self, run, bufs, pos, buffer, create_graph, release, gt)
                if buffer is STOP:
                    return None  # (failed: the buffers are not read again)
            else:
                buffer = self._loop(gt, pos, stop, buffer)
                if buffer.__class__ is _Exit:
                    return buffer.result
            pos = stop
            if pos >= end:
                break
            # the clock check, before the node at ``pos``
            length, codes = CLOCK_EVERY + 1, more
            if steps[pos][0]:  # taken from the heap
                if gt.error is not None:
                    return None
                if perf() > deadline:
                    break
            elif perf() > deadline or gt.error is not None:
                break
        return self._pause(pos, buffer)

    def _unclocked(self, gt: Task) -> Any:
        """``run`` without a deadline: where a run of LONG nodes starts (``plan.longs``),
        one function runs them all; the error is checked between two functions."""
        plan = self.plan
        steps, run, bufs, longs = plan.steps, self.order, self.bufs, plan.longs
        pos, end = self.pos, len(steps)
        create_graph, release = gt.create_graph, not gt.keep_graph
        codes, more = plan.codes
        length = CLOCK_EVERY
        buffer: Any = None
        while True:
            fn = longs.get(pos)
            if fn is not None and pos + LONG <= end:
                stop = pos + LONG
            else:
                stop = pos + length
                if stop > end:
                    stop, fn = end, None
                else:
                    fn = codes[pos]
            if fn is not None:
                buffer = fn(self, run, bufs, pos, buffer, create_graph, release, gt)
                if buffer is STOP:
                    return None  # (failed: the buffers are not read again)
            else:
                buffer = self._loop(gt, pos, stop, buffer)
                if buffer.__class__ is _Exit:
                    return buffer.result
            pos = stop
            if pos >= end:
                break
            length, codes = CLOCK_EVERY + 1, more
            if gt.error is not None:  # (set by another thread or a failing parent)
                if steps[pos][0]:
                    return None
                break
        return self._pause(pos, buffer)

    def _pause(self, pos: int, buffer: Any) -> Any:
        """Stop before the node at ``pos`` (its buffer ``buffer`` if handed on); the result."""
        self.pos = pos
        if buffer is not None:  # handed on to the node at ``pos``, which has not run
            self.bufs[pos] = buffer
        return None if pos >= len(self.plan.steps) else YIELD

    def _loop(self, gt: Task, pos: int, stop: int, buffer: Any) -> Any:
        """The nodes at ``pos`` to ``stop`` one by one (a stretch without a function).

        Returns the buffer handed on to the node at ``stop`` (or None), or
        an ``_Exit`` with what ``run`` returns: a general-path node's
        awaitable, or None once an error was recorded.
        """
        steps, run, bufs = self.plan.steps, self.order, self.bufs
        create_graph, release = gt.create_graph, not gt.keep_graph
        for pos in range(pos, stop):  # noqa: B020 (a new position per node)
            popped, kind, prog = steps[pos]
            if popped and gt.error is not None:
                return _Exit(None)
            node = run[pos]
            if buffer is None:  # (else handed on by the node before)
                buffer = bufs[pos]
                bufs[pos] = None
            if kind == GENERAL:
                self.pos = pos + 1
                res = gt._general(node, buffer)
                buffer = None
                if res is not None:
                    return _Exit(res)
                continue
            try:
                outs = node.evaluate(buffer, create_graph, release)
            except BaseException as exc:
                self.pos = pos + 1
                gt.fail(node, exc)
                raise
            buffer = _route(bufs, pos, kind, prog, outs)
        return buffer

    def failed(self, gt: Task, node: Node, exc: BaseException, start: int) -> None:
        """A stretch's node raised ``exc``: record it there (the stretch raises it again)."""
        self.pos = self.order.index(node, start) + 1
        gt.fail(node, exc)


class _Exit:
    """What ``PlannedRun._loop`` returns where ``run`` must return ``result``."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result


def _route(bufs: list[InputBuffer | None], pos: int, kind: int, prog: Any, outs: Any) -> Any:
    """Send the gradients of the node at ``pos`` on; the next node's buffer if handed on.

    ``accumulate`` inlined: the plan knows which gradient makes a buffer
    (a node returns one per edge).
    """
    if kind == NEXT:  # the one gradient, the next node's buffer
        return [outs[prog]]
    if kind == ONE_ROUTE:  # (output index, offset): a new 1-slot buffer
        bufs[pos + prog[1]] = [outs[prog[0]]]
        return None
    for k, t, nr, how in prog:  # (t: the offset of the node routed to)
        g = outs[k]
        if how == NEW_ONE:
            bufs[pos + t] = [g]
        elif how > 0:  # the first of ``how`` slots
            buf = [None] * how
            buf[nr] = g
            bufs[pos + t] = buf
        else:  # ADD, or ADD_AT (t: the position)
            buf = bufs[pos + t if how == ADD else t]
            assert buf is not None  # (made by an earlier node: the plan's order)
            if buf[nr] is None:
                buf[nr] = g
            elif g is not None:
                buf[nr] = buf[nr] + g
    return None
