"""A profile's events in the Trace Event format (Perfetto UI, chrome://tracing).

The recorder keeps tuples while it records (NOTE [What a profile records] in
_recorder.py); they become Trace Event dicts here, only when asked.
"""

from __future__ import annotations

import os
import re
from time import perf_counter
from typing import Any

from ._recorder import _describe, _GraphTaskRecord, _outcome, _Recorder

_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")
#: the width in microseconds of a forward op's mark (an instant: when the node was recorded)
_MARK_US = 1.0

#: a time slice (one ``GraphTask.run`` call), by what it returned
_SLICES = {
    "drained": "engine run (nothing ready)",
    "yield": "engine run (time slice over)",
    "await": "engine run (a node awaits)",
    "error": "engine run (error)",
}


def _us(rec: _Recorder, t: float) -> float:
    return round((t - rec.t0) * 1e6, 3)


def _span(rec: _Recorder, t0: float, t1: float) -> tuple[float, float]:
    ts = _us(rec, t0)
    return ts, max(0.0, round(_us(rec, t1) - ts, 3))


def _nest(events: list[dict[str, Any]]) -> None:
    """Clip complete events that would cross the end of the span enclosing them.

    Spans of one track nest by construction; rounding to nanoseconds, and a
    forward mark recorded just before a node ends (create_graph), could
    still cross by a hair.
    """
    by_tid: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append(e)
    for spans in by_tid.values():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        ends: list[float] = []
        for e in spans:
            while ends and ends[-1] <= e["ts"]:
                ends.pop()
            end = e["ts"] + e["dur"]
            if ends and end > ends[-1]:
                e["dur"] = round(ends[-1] - e["ts"], 3)
                end = ends[-1]
            ends.append(end)


def _trace_events(rec: _Recorder) -> list[dict[str, Any]]:
    """Every event of ``rec``: the tracks' names, the spans, the arrows, the backwards, the marks."""
    pid = os.getpid()
    spans: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
    _node_events(rec, pid, spans, flows)
    spans += _wait_events(rec, pid)
    _kernel_events(rec, pid, spans, flows)
    _nest(spans)
    out = _metadata_events(rec, pid)
    out += spans
    out += flows
    end_all = rec.t1 if rec.t1 is not None else perf_counter()
    for gt_id, g in rec.graph_tasks.items():
        out += _graph_task_events(rec, pid, gt_id, g, end_all)
    out += _instant_events(rec, pid)
    return out


def _complete(
    name: str, cat: str, ts: float, dur: float, pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    """A complete event (``ph`` X): a span on track ``tid``."""
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": ts,
        "dur": dur,
        "pid": pid,
        "tid": tid,
        "args": args,
    }


def _arrow(
    name: str, cat: str, flow: int, pid: int, start: tuple[int, float], end: tuple[int, float]
) -> list[dict[str, Any]]:
    """The two flow events of an arrow from ``start`` to ``end`` (each a track and a time in us)."""
    common = {"name": name, "cat": cat, "id": flow, "pid": pid}
    return [
        {**common, "ph": "s", "ts": start[1], "tid": start[0]},
        {**common, "ph": "f", "bp": "e", "ts": end[1], "tid": end[0]},
    ]


def _metadata_events(rec: _Recorder, pid: int) -> list[dict[str, Any]]:
    """The process's name and each track's name and place."""

    def meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "cat": "__metadata", "ph": "M", "pid": pid, "tid": tid, "args": args}

    out = [meta("process_name", 0, {"name": "aengine"})]
    for tid, name in sorted(rec.names.items()):
        out.append(meta("thread_name", tid, {"name": name}))
        out.append(meta("thread_sort_index", tid, {"sort_index": tid}))
    return out


def _node_events(
    rec: _Recorder, pid: int, spans: list[dict[str, Any]], flows: list[dict[str, Any]]
) -> None:
    """Each node's span; the mark of the forward op that recorded it, with an arrow to it."""
    forward = {seq: (t, tid) for seq, t, tid in rec.forward}
    for tid, t0, t1, gt_id, name, seq, dev, kernel, err, waited in rec.nodes:
        ts, dur = _span(rec, t0, t1)
        args: dict[str, Any] = {
            "graph_task": gt_id,
            "sequence_nr": seq,
            "device": dev,
            "kernel": kernel,
            "track": rec.names[tid],
        }
        if waited:
            args["waited_us"] = round(waited * 1e6, 3)
        if err is not None:
            args["outcome"] = _outcome(err)
            args["error"] = _describe(err)
        spans.append(_complete(name, "node", ts, dur, pid, tid, args))
        fwd = forward.get(seq)
        if fwd is not None and name != "GraphRoot":
            ft, ftid = fwd
            fts = _us(rec, ft)
            op = _BACKWARD_SUFFIX.sub("", name) or name
            mark_args = {"sequence_nr": seq, "backward": name}
            spans.append(_complete(op, "forward", fts, _MARK_US, pid, ftid, mark_args))
            flow = next(rec.flow_ids)
            flows += _arrow("forward to backward", "autograd", flow, pid, (ftid, fts), (tid, ts))


def _wait_events(rec: _Recorder, pid: int) -> list[dict[str, Any]]:
    """The waits inside nodes and commits, on the waiting track."""
    out = []
    for tid, t0, t1, name, err in rec.waits:
        ts, dur = _span(rec, t0, t1)
        args: dict[str, Any] = {}
        if err is not None:
            args = {"outcome": _outcome(err), "error": _describe(err)}
        out.append(_complete(name, "wait", ts, dur, pid, tid, args))
    return out


def _kernel_events(
    rec: _Recorder, pid: int, spans: list[dict[str, Any]], flows: list[dict[str, Any]]
) -> None:
    """Each offloaded kernel on its thread's track, with an arrow from its node."""
    starts = {flow: (tid, t) for flow, tid, t in rec.offloads}
    for tid, t0, t1, name, flow, err in rec.kernels:
        ts, dur = _span(rec, t0, t1)
        args: dict[str, Any] = {"node": name}
        if err is not None:
            args["error"] = _describe(err)
        spans.append(_complete(f"{name} kernel", "kernel", ts, dur, pid, tid, args))
        start = starts.get(flow)
        if start is not None:
            from_node = (start[0], _us(rec, start[1]))
            flows += _arrow("offload", "offload", flow, pid, from_node, (tid, ts))


def _instant_events(rec: _Recorder, pid: int) -> list[dict[str, Any]]:
    """The marks of the graph tasks' cancellations and errors."""
    return [
        {
            "name": name,
            "cat": "cancel" if name.endswith("cancelled") else "error",
            "ph": "i",
            "s": "t",
            "ts": _us(rec, t),
            "pid": pid,
            "tid": tid,
            "args": args,
        }
        for tid, t, name, args in rec.instants
    ]


def _graph_task_events(
    rec: _Recorder, pid: int, gt_id: int, g: _GraphTaskRecord, end_all: float
) -> list[dict[str, Any]]:
    """The async span of one graph task, with its time slices and gaps nested in it."""
    end = g.end if g.end is not None else end_all
    name = f"{'nested backward' if g.depth else 'backward'} #{gt_id}"
    common = {"cat": "backward", "id": gt_id, "pid": pid, "tid": g.tid}
    args: dict[str, Any] = {
        "graph_task": gt_id,
        "depth": g.depth,
        "parent": g.parent,
        "retain_graph": g.keep_graph,
        "create_graph": g.create_graph,
        "nodes": g.nodes,
        "outcome": _outcome(g.error)
        if g.end is not None
        else "still running when the profile ended",
    }
    if g.error is not None:
        args["error"] = _describe(g.error)
    out = [{**common, "name": name, "ph": "b", "ts": _us(rec, g.begin), "args": args}]
    inner = [(t0, t1, _SLICES[what]) for t0, t1, what in g.slices]
    inner += list(g.gaps)
    for t0, t1, label in sorted(inner):
        t1 = min(t1, end)
        if t0 >= end:
            continue
        out.append({**common, "name": label, "ph": "b", "ts": _us(rec, t0)})
        out.append({**common, "name": label, "ph": "e", "ts": _us(rec, t1)})
    out.append({**common, "name": name, "ph": "e", "ts": _us(rec, end)})
    return out
