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
#   (least recently used first out; a plan costs about 500 bytes a node).
# * A backward looks its cheap key up (the root's class, depth and slot,
#   the retain_graph and create_graph flags, the inputs asked for, sync or
#   async): a key seen once is remembered; at its second sighting the
#   general preparation's results become a plan (``build``); from the
#   third on, ``match`` walks the graph by the plan's numbering (a list
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
# * The plan's run (``GraphTask._run_plan``) is the hot loop with run
#   positions for dicts and heap (nodes and InputBuffers kept in the order
#   they run; a node whose one gradient is the whole buffer of the node
#   run next hands it on without storing it, a ``Step`` of kind NEXT;
#   the nodes between two clock checks run as one stretch without a
#   count): the same nodes in the same order, the
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
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import OrderedDict
from collections import deque as drain
from collections.abc import Iterator
from itertools import islice
from operator import attrgetter, sub
from typing import Any

from ._exec_info import PREPARE_CHUNK
from ._graph import AccumulateGrad, Node

__all__ = ["BackwardPlan", "PlanCache", "PLANS", "build", "match"]

#: how many graph structures keep a plan (least recently used dropped first)
MAX_PLANS = 32
#: misses after which a key keeps the general path for good
MAX_MISSES = 3
#: nodes in all plans together (a plan keeps about 500 bytes per node): the
#: least recently used plans go first beyond it, and a larger graph gets none
MAX_PLAN_NODES = 250_000
#: graphs smaller than this (the root's topological_nr) are not planned:
#: matching and bookkeeping cost about what they would save
MIN_DEPTH = 8


class BackwardPlan:
    """The flat schedule of one graph structure (see NOTE [Backward plans])."""

    __slots__ = (
        "acc",
        "captured",
        "first",
        "flat",
        "hot",
        "hot_idx",
        "in_run",
        "ndisc",
        "needed",
        "needed_general",
        "nrs",
        "num_outputs",
        "order",
        "routes",
        "steps",
        "anchor",
        "seqs",
        "special",
        "types",
    )

    def __init__(self, reached: list[Node], hot: tuple[bool, ...]) -> None:
        index = {n: i for i, n in enumerate(reached)}
        #: per node number: its class, next_nrs, ``_special``, forward outputs
        self.types = [type(n) for n in reached]
        self.nrs = [n.next_nrs for n in reached]
        self.special = [n._special for n in reached]
        #: (a custom Function's node has its own: an InputBuffer's size)
        self.num_outputs = [n.num_outputs for n in reached]
        #: the edge targets (numbers, _NO_EDGE for none) of every node, in number
        #: order, one flat list; ``ndisc[k]``: how many nodes are first reached by
        #: node k's edges, ``first``: their positions in ``flat`` (numbering order)
        flat: list[int] = []
        ndisc: list[int] = []
        first: list[int] = []
        routes: list[tuple[int, ...]] = []
        append = flat.append
        for n in reached:
            d = 0
            start = len(flat)
            for m in n:
                if m is None:
                    append(_NO_EDGE)
                    continue
                t = index[m]
                if t == len(first) + 1:
                    first.append(len(flat))
                    d += 1
                append(t)
            ndisc.append(d)
            routes.append(tuple(flat[start:]))
        self.flat = flat
        self.ndisc = ndisc
        self.first = first
        #: per node number: the numbers its gradients go to (_NO_EDGE: none)
        self.routes: tuple[tuple[int, ...], ...] = tuple(routes)
        self.hot = hot
        self.hot_idx = tuple(i for i, h in enumerate(hot) if h)
        #: the AccumulateGrad numbers (hooks and identity checked one by one)
        self.acc = tuple(i for i, n in enumerate(reached) if type(n) is AccumulateGrad)
        #: every node's sequence_nr: the matched graph's nodes made in forward
        #: (all but the root and the leaves' accumulators, whose is ACC_SEQ)
        #: must differ from them by one constant, the anchor's difference (the
        #: heap's order is the same, and nodes are told apart)
        self.seqs = [n.sequence_nr for n in reached]
        self.anchor = next((i for i in range(1, len(reached)) if i not in self.acc), 0)
        #: node numbers in the order they run, and per position a Step
        self.order: tuple[int, ...] = ()
        self.steps: tuple[Step, ...] = ()
        #: grad(): (node number, its (slot, result index) pairs) per captured node,
        #: the numbers exec_info calls ``needed`` (they run) and those that may
        #: run (``run_set``: needed or captured)
        self.captured: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()
        self.needed: tuple[int, ...] = ()
        self.needed_general: tuple[int, ...] = ()
        self.in_run: tuple[int, ...] = ()


class PlanCache:
    """The plans by cheap key, least recently used dropped first (bounded)."""

    __slots__ = ("entries", "lock", "nodes")

    def __init__(self) -> None:
        #: key -> [plan or None (seen once), misses]
        self.entries: OrderedDict[Any, list[Any]] = OrderedDict()
        self.lock = threading.Lock()
        #: the nodes of the plans held (bounded by MAX_PLAN_NODES)
        self.nodes = 0

    def lookup(self, key: Any) -> tuple[BackwardPlan | None, bool]:
        """(the key's plan, whether to build one from this backward's preparation)."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                self.entries[key] = [None, 0]
                if len(self.entries) > MAX_PLANS:
                    self._drop(next(iter(self.entries)))
                return None, False
            self.entries.move_to_end(key)
            if entry[1] >= MAX_MISSES:
                return None, False
            return entry[0], entry[0] is None

    def store(self, key: Any, plan: BackwardPlan | None) -> None:
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                return
            self._forget(entry)
            if plan is None:  # not plannable (hooks, too large...): counts as a miss
                entry[1] += 1
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

    __slots__ = ("cache", "enabled", "hits", "misses")

    def __init__(self) -> None:
        self.enabled = True
        self.cache = PlanCache()
        #: backwards run by a plan, and plans that did not match (approximate
        #: under threads: for tests and bench.profile, never for decisions)
        self.hits = 0
        self.misses = 0


#: whether backwards use plans, and their cache (one per process)
PLANS = _Switch()

_NO_EDGE = -1


def build(
    root: Node,
    reached: list[Node],
    deps: dict[Node, int],
    run_set: Any,
    captures: dict[Node, list[tuple[int, int]]] | None,
    needed: Any,
    general: Any,
) -> BackwardPlan | None:
    """The plan of a prepared graph task's graph, or None when it cannot have one.

    ``reached`` is the dependency pass's order (the root first), ``deps``
    its counts (before any node ran); ``run_set``, ``captures`` and
    ``needed`` exec_info's.  ``general(node)`` says whether the hot loop
    would hand ``node`` to the general path.
    """
    if len(reached) != len(deps) + 1 or len(reached) > MAX_PLAN_NODES:
        return None  # a node below min_topo (pruned), or too large a graph
    hot_list: list[bool] = []
    for n in reached:
        if general(n):
            if type(n) is AccumulateGrad:
                if _has_hooks(n):
                    return None
            elif not (captures and n in captures and n not in needed):
                return None  # a general-path node that routes: hooks, async Functions
            hot_list.append(False)
        else:
            hot_list.append(True)
    plan = BackwardPlan(reached, tuple(hot_list))
    in_run = None if run_set is None else [n in run_set for n in reached]
    if in_run is not None:
        plan.routes = tuple(
            tuple(t if t == _NO_EDGE or in_run[t] else _NO_EDGE for t in r) for r in plan.routes
        )
    counts = [0] + [deps[n] for n in reached[1:]]
    seqs = [n.sequence_nr for n in reached]
    plan.order, popped = _simulate(seqs, plan.routes, plan.hot, counts, in_run)
    plan.steps = _steps(plan, popped)
    index = {n: i for i, n in enumerate(reached)}
    plan.captured = tuple(  # (an input that the root does not reach is never captured)
        (index[n], tuple(caps)) for n, caps in (captures or {}).items() if n in index
    )
    if needed is not None:
        plan.needed = tuple(i for i in range(len(reached)) if reached[i] in needed)
        plan.needed_general = tuple(i for i in plan.needed if not plan.hot[i])
        plan.in_run = tuple(i for i in range(len(reached)) if in_run is None or in_run[i])
    return plan


#: one position of a plan's run: (taken from the heap (the hot loop checks
#: for an error there) rather than run next directly, its kind, its
#: routing).  The run keeps nodes and InputBuffers by position (the node at
#: position p is number ``order[p]``), so gradients go to positions.  Kinds:
#: GENERAL, the general path runs it (no routing); ROUTES, it runs inline
#: and routes by (output index, position, slot, how) per edge that carries
#: a gradient; ONE_ROUTE, it runs inline and its one gradient makes a
#: one-slot buffer, routing (output index, position); NEXT, the same where
#: that buffer's node runs next, routing the output index: the buffer goes
#: straight to it (a chain's every link).
Step = tuple[bool, int, Any]
#: (``GraphTask._run_plan`` tests them as the literals 0, 2 and 3)
GENERAL, ROUTES, ONE_ROUTE, NEXT = 0, 1, 2, 3
#: how a gradient reaches its node's InputBuffer: the first one of a
#: one-slot buffer (NEW_ONE), added to what is there (ADD), or, a number
#: n > 1, the first one of a buffer of n slots (``GraphTask._run_plan``
#: tests them as the literals 0 and -1)
NEW_ONE, ADD = 0, -1


def _steps(plan: BackwardPlan, popped: tuple[bool, ...]) -> tuple[Step, ...]:
    """The Steps of ``plan``'s run: which edge makes a buffer is known from the order."""
    made = [False] * len(plan.types)
    made[0] = True  # the root's buffer is made by the backward call
    at = {i: p for p, i in enumerate(plan.order)}  # a routed node runs: it has a position
    steps: list[Step] = []
    hot, routes, nrs, num_outputs = plan.hot, plan.routes, plan.nrs, plan.num_outputs
    for p, (i, pop) in enumerate(zip(plan.order, popped, strict=True)):
        prog: list[tuple[int, int, int, int]] = []
        if hot[i]:
            k = 0
            for t, nr in zip(routes[i], nrs[i], strict=True):
                if t != _NO_EDGE:
                    if made[t]:
                        prog.append((k, at[t], nr, ADD))
                    else:
                        made[t] = True
                        n = num_outputs[t]  # (a buffer's size)
                        prog.append((k, at[t], nr, NEW_ONE if n == 1 else n))
                k += 1
        if not hot[i]:
            steps.append((pop, GENERAL, ()))
        elif len(prog) == 1 and prog[0][3] == NEW_ONE:
            k, q = prog[0][:2]
            steps.append((pop, NEXT, k) if q == p + 1 else (pop, ONE_ROUTE, (k, q)))
        else:
            steps.append((pop, ROUTES, tuple(prog)))
    return tuple(steps)


def _has_hooks(acc: Any) -> bool:
    var = acc.variable
    return bool(
        acc._pre_hooks
        or acc._post_hooks
        or acc._tensor_pre_hooks
        or acc._retains_grad
        or var._hooks
        or var._post_acc_hooks
    )


def _simulate(
    seqs: list[int],
    edges: tuple[tuple[int, ...], ...],
    hot: tuple[bool, ...],
    deps: list[int],
    in_run: list[bool] | None,
) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """The order ``GraphTask.run`` runs the nodes in: its routing rule without the work."""
    heap: list[tuple[int, int, int]] = [(-seqs[0], 0, 0)]
    tie = itertools.count(1).__next__
    heappop, heappush = heapq.heappop, heapq.heappush
    order: list[int] = []
    popped: list[bool] = []
    while heap:
        i: int | None = heappop(heap)[2]
        first = True
        while i is not None:
            order.append(i)
            popped.append(first)
            first = False
            if not hot[i]:
                break  # general path: no routing (see build)
            nxt_run: int | None = None
            for t in edges[i]:
                if t == _NO_EDGE:
                    continue
                d = deps[t] - 1
                deps[t] = d
                if (in_run is not None and not in_run[t]) or d:
                    continue
                if nxt_run is None and (not heap or -heap[0][0] < seqs[t]):
                    nxt_run = t
                elif nxt_run is not None and seqs[t] > seqs[nxt_run]:
                    heappush(heap, (-seqs[nxt_run], tie(), nxt_run))
                    nxt_run = t
                else:
                    heappush(heap, (-seqs[t], tie(), t))
            i = nxt_run
    return tuple(order), tuple(popped)


def match(
    plan: BackwardPlan,
    root: Node,
    outputs: list[tuple[Node, int]] | None,
    sched: Any,
    result: list[Any],
) -> Iterator[None]:
    """Match ``plan`` against the graph of ``root``, in steps of PREPARE_CHUNK nodes.

    Appends the graph's nodes by number to ``result`` on a match, nothing
    on a miss.  The walk collects the nodes by the plan's numbering and
    every edge's target (a list ``extend`` per node); the comparisons run
    over whole lists in C (``map``, list equality), which is what makes
    matching cheaper than the dependency pass it replaces.
    """
    flat: list[Any] = []
    extend = flat.extend
    total = len(plan.types)
    # The walk: each node's edges go to ``flat``; the nodes are read off it at
    # the positions where the plan's numbering first reaches them, lazily, so
    # that each is read once its parent's edges are in (breadth first).
    found = map(flat.__getitem__, plan.first)
    walk = map(extend, itertools.chain((root,), found))  # a node is its next nodes
    done = 0
    while done < total:
        try:
            drain(islice(walk, PREPARE_CHUNK), maxlen=0)
        except (IndexError, TypeError):
            return  # fewer edges than planned, none where the plan has a node
        done += PREPARE_CHUNK
        if done < total:
            yield
    nodes = [root]
    nodes += map(flat.__getitem__, plan.first)
    if len(nodes) != total or len(flat) != len(plan.flat):
        return
    # every edge leads where the plan says (a node, or none)
    nodes.append(None)  # type: ignore[arg-type]  # (number _NO_EDGE: no node)
    same = flat == list(map(nodes.__getitem__, plan.flat))
    nodes.pop()
    if not same:
        return
    if (
        list(map(_cls, nodes)) != plan.types
        or list(map(_nrs, nodes)) != plan.nrs
        or list(map(_special, nodes)) != plan.special
        or list(map(_num_outputs, nodes)) != plan.num_outputs
    ):
        return
    # forward made the nodes in the same order (the heap's order; two nodes
    # with one sequence_nr are one node): one constant apart from the plan's
    diffs = list(map(sub, map(_seq, nodes), plan.seqs))
    d = diffs[0] = diffs[plan.anchor]  # the root (a GraphRoot is made at backward)
    if diffs.count(d) != total - (len(plan.acc) if d else 0):
        return
    accs = [nodes[i] for i in plan.acc]
    if len(set(accs)) != len(accs) or any(map(_has_hooks, accs)):
        return
    if sched is not None:  # nothing the scheduler would take (NOTE [Where a node runs])
        hot_nodes = list(map(nodes.__getitem__, plan.hot_idx))
        if hot_nodes and (
            max(map(_numel, hot_nodes)) >= sched.offload_min
            or not set(map(_dev, hot_nodes)) <= {sched.home, None}
        ):
            return
    if outputs is not None and not _same_outputs(plan, nodes, outputs):
        return
    result.extend(nodes)


_cls = attrgetter("__class__")
_nrs = attrgetter("next_nrs")
_special = attrgetter("_special")
_num_outputs = attrgetter("num_outputs")
_seq = attrgetter("sequence_nr")
_numel = attrgetter("numel")
_dev = attrgetter("dev")


def _same_outputs(plan: BackwardPlan, nodes: list[Node], outputs: list[tuple[Node, int]]) -> bool:
    """Whether grad()'s inputs are captured where the plan captures them, and only there."""
    caps_of = {id(nodes[i]): caps for i, caps in plan.captured}
    found = 0
    for j, (fn, nr) in enumerate(outputs):
        caps = caps_of.get(id(fn))
        if caps is None:
            if any(fn is m for m in nodes):
                return False  # reached but not captured in the plan
            continue
        if (nr, j) not in caps:
            return False
        found += 1
    return found == sum(len(c) for _, c in plan.captured)
