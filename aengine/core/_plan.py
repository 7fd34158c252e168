"""Backward plans: a flat schedule reused by later backwards of the same graph structure.

# NOTE [Backward plans]
# A training loop or a service records the same graph structure at every
# step.  The general path pays at every backward for a dependency pass (a
# dict entry per node), exec_info, a heap entry per ready node and a dict
# lookup per edge while routing.  A plan does that work once:
#
# * Nodes are numbered in the order the dependency pass meets them
#   (breadth first from the root).  A plan holds, per number, the node's
#   class, ``next_nrs``, ``_special`` and edge targets, and its
#   sequence_nr; the order the hot loop runs the nodes in, simulated once
#   with the very rule of ``GraphTask.run`` (heap by sequence_nr, the "run
#   it next" shortcut, FIFO ties); per position a Step: whether the node
#   was taken from the heap (where the loop checks for an error), whether
#   it runs inline or takes the general path, and which of its edges make
#   an InputBuffer and which add to one (known from the order); and, for
#   grad(), which numbers are captured into which result.  It holds no
#   node, tensor or array: a freed graph is collected as without plans.
#   The cache keeps at most MAX_PLANS plans of MAX_PLAN_NODES nodes in all
#   (least recently used first out).
# * A backward looks its cheap key up (the root's class, depth and slot,
#   the retain_graph and create_graph flags, the inputs asked for, sync or
#   async): a key is remembered; at its BUILD_AT-th sighting the general
#   preparation's results become a plan (``build_steps``, NOTE [When a
#   plan is built]); from the next on, ``match`` (_plan_match.py) walks the graph by the plan's numbering (a list
#   ``extend`` per node, driven by ``map`` in C) and compares whole lists:
#   every edge's target, classes, ``next_nrs``, ``_special``, ``num_outputs``, and the
#   sequence numbers, which must all be one constant apart from the plan's
#   (the heap's order is then the same, and no two numbers are one node).
#   Leaves' accumulators (one sequence number for all) are checked for
#   identity and hooks one by one; under an async driver, that no inline
#   node is one the scheduler would take.  Matching replaces the
#   dependency pass and exec_info; any difference is a miss: the general
#   path runs, and the plan is rebuilt at the key's next sighting; a key
#   that misses ``MAX_MISSES`` times keeps the general path.
# * Only graphs whose general-path nodes never route are planned: off the
#   hot loop there are only leaves' AccumulateGrad nodes without hooks and
#   grad()'s captured nodes that do not run.  Hooks, retained gradients,
#   async backward functions, anomaly mode, a node hook, a profile,
#   grad() of non-leaf tensors (pruning by topological_nr),
#   backward(inputs=...), nodes the scheduler would take (another device,
#   a large kernel) and graphs shallower than MIN_DEPTH keep the general
#   path, which is unchanged.
# * The plan's run (``PlannedRun.run``) is the hot loop with run
#   positions for dicts and heap (nodes and InputBuffers kept in the order
#   they run; a node whose one gradient is the whole buffer of the node
#   run next hands it on without storing it, a ``Step`` of kind NEXT;
#   the nodes between two clock checks run as one stretch, by a function
#   generated for its Steps: NOTE [Plans compiled to code]): the same nodes in the same order, the
#   same ``evaluate`` calls, gradients summed in the same order (the same
#   results bit for bit), the same error handling, and the same clock and
#   error checks (so the async driver yields, and sees cancellation, at
#   the same nodes).  It relies on what ``evaluate`` promises: one
#   gradient per edge.  When the scheduler changes mid-run (a backward
#   moved to or from a compute thread), ``GraphTask._leave_plan`` turns the
#   state into the general path's and the run goes on there.
# * A saved tensor modified in place, a freed graph (backward twice) or a
#   bad gradient raise from ``evaluate`` as on the general path: a plan
#   records structure, never values or versions.
#
# NOTE [When a plan is built]
# A build costs about one backward (Python passes over the graph), and
# once built, matching and the planned run save part of one at every
# step.  It is done by a structure's BUILD_AT-th backward
# (``PLANS.build_at``): a loop's first steps and structures met once or
# twice (a warm-up, an evaluation, a last short batch) keep the general
# path's speed, and the cost falls on structures that keep coming back.
#
# NOTE [Slicing plans]
# Matching a graph against its plan, building a plan and running it are
# parts of a backward like the dependency pass, and keep the event loop's
# promise the same way: each is a generator that ``GraphTask.run`` drives
# within its time slice (``pending``), yielding every BUILD_CHUNK nodes
# where Python runs per node and every SCAN_CHUNK nodes where the work
# runs in C, so that no chunk is more than a small part of a slice; the
# run checks the clock as the general path does.  What a chunk cannot
# split is a dict growing past its size (it rehashes every entry at
# once); the build's one dict of nodes is emptied chunk by chunk.
#
# The garbage collector is the other way to hold the loop: a collection
# walks every tracked object of its generations at once, and collections
# are started by allocations.  A build therefore allocates next to no
# tracked objects: numbers and flags live in arrays (``array``, which the
# collector neither counts nor walks), heap entries are ints, and equal
# Steps are one shared tuple, with routes naming offsets from their own
# position (positions at a node many gradients meet at) so that a
# repeated structure has few distinct Steps.  A build that allocated a
# tuple or two per node (as the first plans did) started a full
# collection of the whole graph in the middle of the backward.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from array import array
from collections import OrderedDict
from collections import deque as drain
from collections.abc import Callable, Generator, Iterator
from operator import attrgetter, is_
from typing import Any

from ._graph import AccumulateGrad, Node
from ._plan_code import (
    ADD,
    ADD_AT,
    GENERAL,
    NEW_ONE,
    NEXT,
    ONE_ROUTE,
    ROUTES,
    Step,
    Stretch,
    code_lists,
    long_codes,
)
from ._running import CLOCK_EVERY

__all__ = ["BackwardPlan", "PlanCache", "PLANS", "build_steps"]

#: how many graph structures keep a plan (least recently used dropped first)
MAX_PLANS = 32
#: a structure's plan is built by its BUILD_AT-th backward (NOTE [When a plan is built])
BUILD_AT = 3
#: misses after which a key keeps the general path for good
MAX_MISSES = 3
#: nodes in all plans together (a plan keeps about 90 bytes per node): the
#: least recently used plans go first beyond it, and a larger graph gets none
MAX_PLAN_NODES = 250_000
#: graphs smaller than this (the root's topological_nr) are not planned:
#: matching and bookkeeping cost about what they would save
MIN_DEPTH = 8
#: nodes handled between two checks of the time slice by a pass over the
#: graph that runs Python per node (a plan's build): small, so that a
#: chunk is a small part of a slice even on a slow, busy machine
BUILD_CHUNK = 64
#: the same for passes that run in C (``map``, list comparisons): each node
#: costs a tenth or less there
SCAN_CHUNK = 1024


class BackwardPlan:
    """The flat schedule of one graph structure (see NOTE [Backward plans]).

    Made empty and filled by ``build_steps``, pass by pass.  What ``match``
    and ``GraphTask._use_plan`` read at every backward is in lists (their
    ints made once); what only the build and ``_leave_plan`` read is in
    arrays (``array('q')``, flags ``array('b')``), which the garbage
    collector neither counts nor walks (NOTE [Slicing plans]).
    """

    __slots__ = (
        "acc",
        "captured",
        "codes",
        "first",
        "flat",
        "hot",
        "hot_idx",
        "in_run",
        "longs",
        "needed",
        "needed_general",
        "nrs",
        "num_outputs",
        "order",
        "ordered",
        "seqs",
        "special",
        "starts",
        "steps",
        "types",
    )

    def __init__(self) -> None:
        #: per node number: its class, next_nrs, ``_special``, forward outputs
        #: (a custom Function's node has its own: an InputBuffer's size)
        self.types: list[type] = []
        self.nrs: list[tuple[int, ...]] = []
        self.special: list[bool] = []
        self.num_outputs: list[int] = []
        #: the edge targets (numbers, _NO_EDGE for none) of every node, in number
        #: order, one flat array: node i's are ``flat[starts[i]:starts[i + 1]]``;
        #: ``first``: the positions in ``flat`` where the numbering first
        #: reaches each node but the root (breadth first)
        self.flat: list[int] = []
        self.starts = array("q", [0])
        self.first: list[int] = []
        #: per node number: whether it runs inline (else the general path runs it)
        self.hot = array("b")
        self.hot_idx: list[int] = []
        #: the AccumulateGrad numbers (hooks and identity checked one by one)
        self.acc = array("q")
        #: every node's sequence_nr; the numbers whose sequence numbers decide
        #: the run's order (compared in the heap: the matched graph's must
        #: differ from them by one constant)
        self.seqs: list[int] = []
        self.ordered = array("q")
        #: node numbers in the order they run, and per position a Step
        self.order: list[int] = []
        self.steps: list[Step] = []
        #: per start position, the compiled stretch of CLOCK_EVERY and of
        #: CLOCK_EVERY + 1 nodes, or None (NOTE [Plans compiled to code])
        self.codes: tuple[list[Stretch | None], list[Stretch | None]] = ([], [])
        #: where no clock is read: the runs of LONG nodes, by start position
        self.longs: dict[int, Stretch] = {}
        #: grad(): (node number, its (slot, result index) pairs) per captured
        #: node; per number whether exec_info calls it ``needed`` (it runs) and
        #: whether it may run (``run_set``: needed or captured; None: all may);
        #: the needed numbers that the general path runs
        self.captured: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()
        self.needed = array("b")
        self.in_run: array[int] | None = None
        self.needed_general: tuple[int, ...] = ()


class PlanCache:
    """The plans by cheap key, least recently used dropped first (bounded)."""

    __slots__ = ("entries", "lock", "nodes")

    def __init__(self) -> None:
        #: key -> [plan or None, misses, sightings without a plan]
        self.entries: OrderedDict[Any, list[Any]] = OrderedDict()
        self.lock = threading.Lock()
        #: the nodes of the plans held (bounded by MAX_PLAN_NODES)
        self.nodes = 0

    def lookup(self, key: Any) -> tuple[BackwardPlan | None, bool]:
        """(the key's plan, whether to build one now: NOTE [When a plan is built])."""
        build_at = PLANS.build_at
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                self.entries[key] = [None, 0, 1]
                if len(self.entries) > MAX_PLANS:
                    self._drop(next(iter(self.entries)))
                return None, build_at <= 1
            self.entries.move_to_end(key)
            if entry[1] >= MAX_MISSES:
                return None, False
            if entry[0] is not None:
                return entry[0], False
            entry[2] += 1
            return None, entry[2] >= build_at

    def store(self, key: Any, plan: BackwardPlan | None) -> None:
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                return
            self._forget(entry)
            if plan is None:  # not plannable (hooks, too large...): counts as a miss
                entry[1] += 1
                entry[2] = PLANS.build_at - 1  # (tried again at the next sighting)
                return
            entry[0] = plan
            self.nodes += len(plan.types)
            while self.nodes > MAX_PLAN_NODES:  # the least recently used plans first
                self._forget(next(e for e in self.entries.values() if e[0] is not None))

    def miss(self, key: Any) -> None:
        """The key's plan did not match: drop it (rebuilt at the next sighting)."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                self._forget(entry)
                entry[1] += 1
                entry[2] = PLANS.build_at - 1  # (rebuilt at the next sighting)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.nodes = 0

    def _forget(self, entry: list[Any]) -> None:
        if entry[0] is not None:
            self.nodes -= len(entry[0].types)
            entry[0] = None

    def _drop(self, key: Any) -> None:
        self._forget(self.entries.pop(key))


class _Switch:
    """Whether backwards use plans (``enabled``), the cache, and counts for tests."""

    __slots__ = ("build_at", "cache", "enabled", "hits", "misses")

    def __init__(self) -> None:
        self.enabled = True
        #: the sighting of a structure (without a plan) whose backward builds
        #: its plan (NOTE [When a plan is built])
        self.build_at = BUILD_AT
        self.cache = PlanCache()
        #: backwards run by a plan, and plans that did not match (approximate
        #: under threads: for tests and bench.profile, never for decisions)
        self.hits = 0
        self.misses = 0


#: whether backwards use plans, and their cache (one per process)
PLANS = _Switch()

_NO_EDGE = -1


def build_steps(
    reached: list[Node],
    deps: dict[Node, int],
    run_set: Any,
    captures: dict[Node, list[tuple[int, int]]] | None,
    needed: Any,
    general: Callable[[Node], bool],
    out: list[BackwardPlan],
) -> Iterator[None]:
    """Build the plan of a prepared graph task's graph, yielding between chunks.

    Appends the plan to ``out``, nothing when the graph cannot have one.
    ``reached`` is the dependency pass's order (the root first), ``deps``
    its counts (before any node ran); ``run_set``, ``captures`` and
    ``needed`` exec_info's.  ``general(node)`` says whether the hot loop
    would hand ``node`` to the general path.  Each pass yields every
    BUILD_CHUNK nodes (SCAN_CHUNK where it runs in C), so that the caller
    can end its time slice there (NOTE [Slicing plans]).
    """
    total = len(reached)
    if total != len(deps) + 1 or total > MAX_PLAN_NODES:
        return  # a node below min_topo (pruned), or too large a graph
    plan = BackwardPlan()
    general_idx: list[int] = []  # (few: leaves' accumulators, captured nodes)
    if not (yield from _placement(plan, reached, captures, needed, general, general_idx)):
        return
    index: dict[Node, int] = {}
    yield from _layout(plan, reached, index)
    targets = yield from _targets(plan, reached, run_set)
    counts = array("q", [0])  # the dependency counts by number (the root has none)
    for a in range(1, total, SCAN_CHUNK):
        counts.extend(map(deps.__getitem__, reached[a : a + SCAN_CHUNK]))
        yield
    popped = array("b")
    fan_in = array("q", counts)  # (_simulate counts them down)
    yield from _simulate(plan, targets, counts, popped)
    yield from _steps(plan, targets, fan_in, popped)
    codes: list[list[Stretch | None]] = []
    yield from code_lists(plan.steps, (CLOCK_EVERY, CLOCK_EVERY + 1), SCAN_CHUNK, codes)
    plan.codes = (codes[0], codes[1])
    yield from long_codes(plan.steps, BUILD_CHUNK, plan.longs)
    plan.captured = tuple(  # (an input that the root does not reach is never captured)
        (index[n], tuple(caps)) for n, caps in (captures or {}).items() if n in index
    )
    yield
    if needed is not None:
        is_needed = plan.needed
        for a in range(0, total, SCAN_CHUNK):
            is_needed.extend(map(needed.__contains__, reached[a : a + SCAN_CHUNK]))
            yield
        plan.needed_general = tuple(i for i in general_idx if is_needed[i])
    for a in range(0, total, SCAN_CHUNK):  # (a large dict's release, sliced too)
        drain(map(index.pop, reached[a : a + SCAN_CHUNK]), maxlen=0)
        yield
    out.append(plan)


def _placement(
    plan: BackwardPlan,
    reached: list[Node],
    captures: dict[Node, list[tuple[int, int]]] | None,
    needed: Any,
    general: Callable[[Node], bool],
    general_idx: list[int],
) -> Generator[None, None, bool]:
    """Which nodes run inline (``plan.hot``); False when the graph cannot be planned.

    Only graphs whose general-path nodes never route are: leaves'
    accumulators without hooks and grad()'s captured nodes that do not run.
    """
    hot, hot_idx = plan.hot, plan.hot_idx
    total = len(reached)
    for a in range(0, total, BUILD_CHUNK):
        for i in range(a, min(a + BUILD_CHUNK, total)):
            n = reached[i]
            if general(n):
                if type(n) is AccumulateGrad:
                    if _has_hooks(n):
                        return False
                elif not (captures and n in captures and n not in needed):
                    return False  # a general-path node that routes: hooks, async Functions
                hot.append(False)
                general_idx.append(i)
            else:
                hot.append(True)
                hot_idx.append(i)
        yield
    return True


def _targets(
    plan: BackwardPlan, reached: list[Node], run_set: Any
) -> Generator[None, None, list[int] | array[int]]:
    """Where each edge sends its gradient: ``plan.flat``, but for grad() not to nodes
    that never run (``plan.in_run``)."""
    if run_set is None:
        return plan.flat
    in_run = plan.in_run = array("b")
    for a in range(0, len(reached), SCAN_CHUNK):
        in_run.extend(map(run_set.__contains__, reached[a : a + SCAN_CHUNK]))
        yield
    in_run.append(False)  # (number _NO_EDGE: no node)
    pruned = array("q")
    for a in range(0, len(plan.flat), SCAN_CHUNK):
        part = plan.flat[a : a + SCAN_CHUNK]
        pruned.extend(map(_if_runs, part, map(in_run.__getitem__, part)))
        yield
    in_run.pop()
    return pruned


def _layout(plan: BackwardPlan, reached: list[Node], index: dict[Node, int]) -> Iterator[None]:
    """The plan's numbering: each node's fields and edge targets (fills ``index`` too)."""
    is_acc = array("b")
    for a in range(0, len(reached), BUILD_CHUNK):
        part = reached[a : a + BUILD_CHUNK]
        index.update(zip(part, range(a, a + len(part))))
        types = list(map(_cls, part))
        plan.types += types
        is_acc.extend(map(is_, types, itertools.repeat(AccumulateGrad)))
        plan.nrs += map(_nrs, part)
        plan.special.extend(map(_special, part))
        plan.num_outputs.extend(map(_num_outputs, part))
        plan.seqs.extend(map(_seq, part))
        yield
    plan.acc = array("q", itertools.compress(range(len(is_acc)), is_acc))
    flat, first, starts = plan.flat, plan.first, plan.starts
    append = flat.append
    for a in range(0, len(reached), BUILD_CHUNK):
        for n in reached[a : a + BUILD_CHUNK]:
            for m in n:
                if m is None:
                    append(_NO_EDGE)
                    continue
                t = index[m]
                if t == len(first) + 1:  # (breadth first: the next number to reach)
                    first.append(len(flat))
                append(t)
            starts.append(len(flat))
        yield


def _if_runs(t: int, runs: int) -> int:
    return t if runs else _NO_EDGE


#: the edges into a node from which the routes that add to its buffer name
#: its position (ADD_AT): a node many gradients meet at (a leaf's
#: accumulator, a weight shared by a graph's branches or an unrolled
#: loop's steps) is one position for all of them, while offsets repeat
#: within a repeated block (a residual's two paths)
FAN_IN_AT = 3


def _steps(
    plan: BackwardPlan, targets: list[int] | array[int], fan_in: array[int], popped: array[int]
) -> Iterator[None]:
    """The Steps of ``plan``'s run: which edge makes a buffer is known from the order.

    Equal steps are one tuple (``shared``), and routes name positions
    relative to their own (but at a node of a large fan-in, FAN_IN_AT): a
    repeated structure (a chain's links, a wide graph's branches, a
    model's layers) has few distinct steps, so that a build allocates few
    objects for the garbage collector to count (NOTE [Slicing plans]).
    """
    order = plan.order
    total = len(order)
    made = bytearray(len(plan.types))
    made[0] = True  # the root's buffer is made by the backward call
    at = array("q", [_NO_EDGE]) * len(plan.types)  # a routed node runs: it has a position
    for a in range(0, total, SCAN_CHUNK):
        for p in range(a, min(a + SCAN_CHUNK, total)):
            at[order[p]] = p
        yield
    distinct: dict[Any, Any] = {}
    shared = distinct.setdefault
    steps: list[Step] = []
    append = steps.append
    hot, starts, nrs, num_outputs = plan.hot, plan.starts, plan.nrs, plan.num_outputs
    for a in range(0, total, BUILD_CHUNK):
        for p in range(a, min(a + BUILD_CHUNK, total)):
            i = order[p]
            pop = popped[p] == 1
            if not hot[i]:
                append(shared((pop, GENERAL, ()), (pop, GENERAL, ())))
                continue
            prog: list[tuple[int, int, int, int]] = []
            start = starts[i]
            node_nrs = nrs[i]
            for k in range(starts[i + 1] - start):
                t = targets[start + k]
                if t == _NO_EDGE:
                    continue
                nr = node_nrs[k]
                if made[t]:
                    if fan_in[t] >= FAN_IN_AT:
                        prog.append((k, at[t], nr, ADD_AT))
                    else:
                        prog.append((k, at[t] - p, nr, ADD))
                else:
                    made[t] = True
                    n = num_outputs[t]  # (a buffer's size)
                    prog.append((k, at[t] - p, nr, NEW_ONE if n == 1 else n))
            step: Step
            if len(prog) == 1 and prog[0][3] == NEW_ONE:
                k, q = prog[0][:2]
                step = (pop, NEXT, k) if q == 1 else (pop, ONE_ROUTE, shared((k, q), (k, q)))
            else:
                routes = tuple(map(shared, prog, prog))
                step = (pop, ROUTES, shared(routes, routes))
            append(shared(step, step))
        yield
    plan.steps = steps


def _has_hooks(acc: Any) -> bool:
    var = acc.variable
    return bool(acc._has_hooks() or var._hooks or var._post_acc_hooks)


def _simulate(
    plan: BackwardPlan, targets: list[int] | array[int], deps: array[int], popped: array[int]
) -> Iterator[None]:
    """The order ``GraphTask.run`` runs the nodes in: its routing rule without the work.

    Sets ``plan.order`` and ``plan.ordered``; ``popped`` receives, per position, whether the node
    was taken from the heap.  Yields every BUILD_CHUNK nodes.  A heap entry
    is one int that orders as the run's (-sequence_nr, FIFO tie) and holds
    the node's number in its low bits: no tuple per entry.
    """
    seqs, starts, hot, in_run = plan.seqs, plan.starts, plan.hot, plan.in_run
    bits = max(len(seqs), 2).bit_length()  # a number and a tie each fit
    mask = (1 << bits) - 1
    heap: list[int] = [-seqs[0] << (2 * bits)]
    tie = itertools.count(1).__next__
    heappop, heappush = heapq.heappop, heapq.heappush
    order = plan.order
    cmp = bytearray(len(seqs))  # the numbers whose sequence numbers are compared
    count = 0
    while heap:
        i: int | None = heappop(heap) & mask
        first = True
        while i is not None:
            order.append(i)
            popped.append(first)
            first = False
            count += 1
            if not count % BUILD_CHUNK:
                yield
            if not hot[i]:
                break  # general path: no routing (see build)
            nxt_run: int | None = None
            for j in range(starts[i], starts[i + 1]):
                t = targets[j]
                if t == _NO_EDGE:
                    continue
                d = deps[t] - 1
                deps[t] = d
                if (in_run is not None and not in_run[t]) or d:
                    continue
                if heap or nxt_run is not None:
                    cmp[t] = True
                if nxt_run is None and (not heap or -(heap[0] >> (2 * bits)) < seqs[t]):
                    nxt_run = t
                else:
                    if nxt_run is not None:
                        cmp[nxt_run] = True
                        if seqs[t] > seqs[nxt_run]:
                            t, nxt_run = nxt_run, t
                    heappush(heap, (-seqs[t] << (2 * bits)) | (tie() << bits) | t)
            i = nxt_run
    if 2 * cmp.count(1) > len(cmp):  # most: match them all, which tells nodes apart too
        cmp = bytearray(b"\x01") * len(cmp)
        cmp[0] = False  # (the root: a GraphRoot is made at backward)
    for i in plan.acc:  # (ACC_SEQ, their class's: the same in every graph)
        cmp[i] = False
    plan.ordered = array("q", itertools.compress(range(len(cmp)), cmp))


_cls = attrgetter("__class__")
_nrs = attrgetter("next_nrs")
_special = attrgetter("_special")
_num_outputs = attrgetter("num_outputs")
_seq = attrgetter("sequence_nr")
_numel = attrgetter("numel")
_dev = attrgetter("dev")
