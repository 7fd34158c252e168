"""exec_info and the dependency pass: which nodes a backward runs, and how many edges reach each.

Both are iterative (graphs of millions of nodes must not hit the recursion
limit) and done in steps of ``PREPARE_CHUNK`` nodes, so that a GraphTask can
interleave them with its time slices (``GraphTask.plan``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from itertools import islice
from operator import attrgetter, not_
from typing import Any

from ._graph import Node

__all__ = [
    "PREPARE_CHUNK",
    "AllNodesBut",
    "EVERY_NODE",
    "count_executed",
    "compute_dependencies",
    "dependency_steps",
    "exec_info_steps",
    "init_to_execute",
]

#: nodes visited between two checks of the time slice while preparing
PREPARE_CHUNK = 512

_topo = attrgetter("topological_nr")


def compute_dependencies(root: Node, min_topo_nr: int) -> dict[Node, int]:
    """Count, for every node reachable from ``root``, its incoming edges.

    Iterative (graphs of millions of nodes); nodes whose topological_nr is
    below ``min_topo_nr`` cannot reach any requested input and are skipped.
    """
    deps: dict[Node, int] = {}
    for _ in dependency_steps(root, min_topo_nr, deps):
        pass
    return deps


def dependency_steps(
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
            for nxt in fn:
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
            part = order[max(start, 1) : stop]
            sinks += itertools.compress(part, map(not_, map(_topo, part)))  # (in C)
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
    for _ in dependency_steps(root, min_topo_nr, deps, sinks):
        pass
    result: list[Any] = []
    for _ in exec_info_steps(root, outputs, accumulate, min_topo_nr, deps, sinks, result):
        pass
    needed = result[0]
    if isinstance(needed, AllNodesBut):  # as a set: the reachable nodes (and outputs) in it
        reach = [root, *deps, *(fn for fn, _ in outputs)] if accumulate else [root, *deps]
        needed = {n for n in reach if n in needed}
    return needed, result[1]


# NOTE [exec_info without a walk]
# A node is needed when one of its children is needed or captured.  Every
# path from the root ends at a sink (a node without next edges,
# topological_nr 0) or at a node pruned below ``min_topo_nr``, which the
# dependency pass collected (``sinks``).  When every one of them is an
# output (grad(loss, params) with every parameter that requires grad
# among the inputs: the usual case), every node reaches an output, so
# every reachable node but the capture-only sinks is needed: ``needed``
# is then an ``AllNodesBut`` those sinks, with no pass over the graph
# (even building a set of a large graph's nodes costs measurably).  Only
# reachable nodes are asked about, except by count_executed
# (aengine/_hooks.py), which counts on ``reached`` when ``run_set`` is
# None.
# Otherwise one pass over the reachable nodes in ascending
# topological_nr decides every node after its children: they are filed
# by topological_nr (a child's is below its parent's), no sort, and the
# pass is done in steps, so a large graph never holds the event loop.


def exec_info_steps(
    root: Node,
    outputs: list[tuple[Node, int]],
    accumulate: bool,
    min_topo_nr: int,
    deps: dict[Node, int],
    sinks: list[Node],
    result: list[Any],
) -> Iterator[None]:
    """init_to_execute in steps (yields every PREPARE_CHUNK nodes; NOTE [exec_info without a walk]).

    Appends ``needed``, ``captures`` and whether every reachable node runs
    (is needed or captured) to ``result`` at the end.
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
    add_needed, add_marked, get_level = needed.add, marked.add, levels.get
    for t in range(min_topo_nr, root.topological_nr):
        level = get_level(t)
        budget -= 1 if level is None else len(level)
        if budget <= 0:
            budget = PREPARE_CHUNK
            yield
        if level is None:
            continue
        for fn in level:
            for nxt in fn:
                if nxt in marked:  # (None never is)
                    add_needed(fn)
                    add_marked(fn)
                    break
    if not marked.isdisjoint(root):  # the root has no in-edges: not filed
        needed.add(root)
    result += (needed, captures, False)


class _EveryNode:
    """A container holding every node (see GraphTask.run)."""

    __slots__ = ()

    def __contains__(self, node: object) -> bool:
        return True


EVERY_NODE = _EveryNode()


class AllNodesBut:
    """``needed`` when every reachable node runs: every node but ``skip``.

    See NOTE [exec_info without a walk]; it supports ``in`` only.
    """

    __slots__ = ("skip",)

    def __init__(self, skip: set[Node]) -> None:
        self.skip = skip

    def __contains__(self, node: object) -> bool:
        return node not in self.skip


def count_executed(
    nodes: list[Node],
    run_set: set[Node] | None,
    deps: dict[Node, int],
    reached: list[Node],
    needed: Any,
    captures: dict[Node, list[tuple[int, int]]] | None,
) -> int:
    """How many of ``nodes`` a graph task runs (or runs the tensor hooks of).

    Static: a node already queued on a device worker counts (NOTE
    [Multi-grad hooks] in aengine/_hooks.py).  The task's ``run_set``,
    dependency counts, ``reached`` nodes (the root first) and exec_info.
    """
    if run_set is not None:  # grad() / inputs= with pruning: these run if reached
        # (an input that the root does not reach is in run_set, but never runs:
        # PyTorch's _will_engine_execute_node asks nodes_in_graph too; every
        # reached node but the root has a dependency count)
        root = reached[0] if reached else None
        return sum(node in run_set and (node in deps or node is root) for node in nodes)
    seen = set(reached)  # every node reached runs (captured ones: their hooks)
    skip = needed.skip if isinstance(needed, AllNodesBut) else ()
    caps = captures or ()
    return sum(node in seen and (node not in skip or node in caps) for node in nodes)
