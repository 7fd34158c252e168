"""Matching a graph against a backward plan (NOTE [Backward plans] in _plan.py).

A backward whose key has a plan walks its graph by the plan's numbering
and compares it, field by field over whole lists, with what the plan
recorded; any difference is a miss (the general path runs).
"""

from __future__ import annotations

import itertools
from collections import deque as drain
from collections.abc import Generator, Iterator
from itertools import islice
from operator import sub
from typing import Any

from ._graph import Node
from ._plan import (
    BUILD_CHUNK,
    SCAN_CHUNK,
    BackwardPlan,
    _cls,
    _dev,
    _has_hooks,
    _nrs,
    _num_outputs,
    _numel,
    _seq,
    _special,
)

__all__ = ["match"]


def match(
    plan: BackwardPlan,
    root: Node,
    outputs: list[tuple[Node, int]] | None,
    sched: Any,
    result: list[Any],
) -> Iterator[None]:
    """Match ``plan`` against the graph of ``root``, yielding between chunks.

    Appends the graph's nodes by number to ``result`` on a match, nothing
    on a miss.  The walk collects the nodes by the plan's numbering and
    every edge's target (a list ``extend`` per node); the comparisons run
    over whole slices in C (``map``, list equality), which is what makes
    matching cheaper than the dependency pass it replaces.  Every pass
    yields every SCAN_CHUNK nodes (NOTE [Slicing plans]); the first that
    finds a difference ends the match.
    """
    nodes = yield from _walk(plan, root)
    if (
        nodes is not None
        and (yield from _same_fields(plan, nodes))
        and (yield from _free_accumulators(plan, nodes))
        and (sched is None or (yield from _inline(plan, nodes, sched)))
        and (outputs is None or _same_outputs(plan, nodes, outputs))
    ):
        result.extend(nodes)


def _walk(plan: BackwardPlan, root: Node) -> Generator[None, None, list[Node] | None]:
    """The graph's nodes by the plan's numbering, if every edge leads where the plan's does."""
    flat: list[Any] = []
    total = len(plan.types)
    # Each node's edges go to ``flat``; the nodes are read off it at the
    # positions where the plan's numbering first reaches them, lazily, so
    # that each is read once its parent's edges are in (breadth first).
    found = map(flat.__getitem__, plan.first)
    walk = map(flat.extend, itertools.chain((root,), found))  # a node is its next nodes
    for _ in range(0, total, SCAN_CHUNK):
        try:
            drain(islice(walk, SCAN_CHUNK), maxlen=0)
        except (IndexError, TypeError):
            return None  # fewer edges than planned, none where the plan has a node
        yield
    if len(flat) != len(plan.flat):
        return None
    nodes = [root]
    for a in range(0, total, SCAN_CHUNK):
        nodes += map(flat.__getitem__, plan.first[a : a + SCAN_CHUNK])
        yield
    # every edge leads where the plan says (a node, or none: number _NO_EDGE, the last)
    node_at = [*nodes, None].__getitem__
    for a in range(0, len(flat), SCAN_CHUNK):
        b = a + SCAN_CHUNK
        if flat[a:b] != list(map(node_at, plan.flat[a:b])):
            return None
        yield
    return nodes


def _same_fields(plan: BackwardPlan, nodes: list[Node]) -> Generator[None, None, bool]:
    """The same classes and fields, distinct nodes, and the same order in the heap.

    Forward made the nodes whose sequence numbers the heap compares
    (``plan.ordered``) in the same order: theirs are one constant apart
    from the plan's.  The others' numbers decide nothing (a chain's links
    go straight from one to the next), and reading each node's own int
    is the costly part of a pass over the graph: only distinctness is
    checked for them (one node per number), where there are any.
    """
    total = len(nodes)
    ordered, seqs = plan.ordered, plan.seqs
    distinct: set[Node] | None = None
    if len(ordered) < total - len(plan.acc) - 1:
        distinct = set()
    for a in range(0, total, SCAN_CHUNK):
        b = a + SCAN_CHUNK
        part = nodes[a:b]
        if (
            list(map(_cls, part)) != plan.types[a:b]
            or list(map(_nrs, part)) != plan.nrs[a:b]
            or list(map(_special, part)) != plan.special[a:b]
            or list(map(_num_outputs, part)) != plan.num_outputs[a:b]
        ):
            return False
        if distinct is not None:
            distinct.update(part)
        yield
    if distinct is not None and len(distinct) != total:
        return False
    if not ordered:
        return True
    d = nodes[ordered[0]].sequence_nr - seqs[ordered[0]]
    if distinct is None:  # all but the root and the accumulators: by slices
        same = 1 - (nodes[0].sequence_nr - seqs[0] == d)  # (the root's is any)
        for a in range(0, total, SCAN_CHUNK):
            b = a + SCAN_CHUNK
            same += list(map(sub, map(_seq, nodes[a:b]), seqs[a:b])).count(d)
            yield
        # (the accumulators' ACC_SEQ: the same as the plan's, counted when d is 0)
        return same == total - (len(plan.acc) if d else 0)
    for a in range(0, len(ordered), SCAN_CHUNK):
        idx = ordered[a : a + SCAN_CHUNK]
        diffs = list(map(sub, map(_seq, map(nodes.__getitem__, idx)), map(seqs.__getitem__, idx)))
        if diffs.count(d) != len(diffs):
            return False
        yield
    return True


def _free_accumulators(plan: BackwardPlan, nodes: list[Node]) -> Generator[None, None, bool]:
    """The leaves' accumulators are distinct and have no hooks (they run inline)."""
    accs = list(map(nodes.__getitem__, plan.acc))
    if len(set(accs)) != len(accs):
        return False
    for a in range(0, len(accs), BUILD_CHUNK):
        if any(map(_has_hooks, accs[a : a + BUILD_CHUNK])):
            return False
        yield
    return True


def _inline(plan: BackwardPlan, nodes: list[Node], sched: Any) -> Generator[None, None, bool]:
    """Nothing that runs inline is a node the scheduler would take (NOTE [Where a node
    runs]: ``leaves_hot_loop``'s test of the scheduler, over whole lists)."""
    offload_min, devs = sched.offload_min, {sched.home, None}
    hot_idx = plan.hot_idx
    for a in range(0, len(hot_idx), SCAN_CHUNK):
        hot_nodes = list(map(nodes.__getitem__, hot_idx[a : a + SCAN_CHUNK]))
        if max(map(_numel, hot_nodes)) >= offload_min or not set(map(_dev, hot_nodes)) <= devs:
            return False
        yield
    return True


def _same_outputs(plan: BackwardPlan, nodes: list[Node], outputs: list[tuple[Node, int]]) -> bool:
    """Whether grad()'s inputs are captured where the plan captures them, and only there."""
    caps_of = {id(nodes[i]): caps for i, caps in plan.captured}
    found = 0
    for j, (fn, nr) in enumerate(outputs):
        caps = caps_of.get(id(fn))
        if caps is None:
            if fn in nodes:  # (identity: a node equals only itself)
                return False  # reached but not captured in the plan
            continue
        if (nr, j) not in caps:
            return False
        found += 1
    return found == sum(len(c) for _, c in plan.captured)
