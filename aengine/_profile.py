"""``ae.profile()``: what the engine did, as a Chrome/Perfetto trace and a table.

# NOTE [What a profile records]
# Through the seam of aengine/core/_trace.py (NOTE [Profiling seam]), for
# every backward created while the profile records:
#
# * each node: start and end, the graph task, ``sequence_nr``, its device,
#   the task or thread that ran it (a *track*), whether its kernel ran
#   inline or in a kernel thread, the error or cancellation it ended with;
# * the waits inside a node (async hooks, async backward functions, and so
#   nested backwards, offloaded kernels) and in the commit (async
#   post-accumulate hooks, callbacks), on the waiting node's track;
# * offloaded kernels on the track of their thread, with an arrow from the
#   node;
# * each graph task as an async span (overlapping backwards on separate
#   rows), holding its time slices and what came between them (a yield to
#   the event loop, a node awaiting, device workers), with its outcome;
# * each forward op whose node ran in a backward of the profile: a mark
#   where the forward recorded it, with an arrow to its backward node.
#
# Events are kept as tuples while recording and turned into Trace Event
# dicts (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU)
# only when asked: ``events``, ``table()``, ``export_chrome_trace()``.
#
# NOTE [Forward ops in a profile]
# Every node takes its ``sequence_nr`` from one counter,
# ``next_sequence_nr`` of aengine/core/_graph.py, which the forward calls once
# per recorded op (``record`` in aengine/ops/_core.py, through that module).
# While a profile records, ``observe_sequence`` makes the counter report each
# number to the recorder, which notes the time and the track; leaving the
# profile stops it.  The forward pays nothing more when no profile records,
# and no op needs to know about profiling.  A mark is matched to its backward
# node by ``sequence_nr``; marks with none (an AccumulateGrad, or a node
# whose backward ran outside the profile) are left out.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from os import PathLike
from time import perf_counter
from types import TracebackType
from typing import Any

from .core import YIELD, GraphTask, Node, _graph, _trace, current_graph_task

__all__ = ["profile", "Progress"]

_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")
#: the width in microseconds of a forward op's mark (an instant: when the node was recorded)
_MARK_US = 1.0


@dataclass(frozen=True)
class Progress:
    """A progress report of a long backward (``ae.profile(progress=...)``).

    ``graph_task``: the backward's number in the trace; ``depth``: 0, or the
    nesting depth of a backward run inside another's node; ``elapsed``:
    seconds since it began; ``nodes_done`` of ``nodes_total`` (the nodes it
    will run, known once its preparation is done, else None); ``node``: the
    name of the last node that finished; ``done``: True for the last report
    of a backward that reported before.
    """

    graph_task: int
    depth: int
    elapsed: float
    nodes_done: int
    nodes_total: int | None
    node: str | None
    done: bool = False

    def __str__(self) -> str:
        what = "nested backward" if self.depth else "backward"
        total = self.nodes_total
        count = f"{self.nodes_done:,}" + (
            f" of {total:,} nodes ({100 * self.nodes_done / total:.0f}%)" if total else " nodes"
        )
        if self.done:
            return f"aengine: {what} #{self.graph_task} done in {self.elapsed:.1f} s: {count}"
        last = f", last {self.node}" if self.node else ""
        return f"aengine: {what} #{self.graph_task} running {self.elapsed:.1f} s: {count}{last}"


def _print_progress(report: Progress) -> None:
    print(report, file=sys.stderr, flush=True)


class _GraphTaskRecord:
    """What a profile keeps of one graph task."""

    __slots__ = (
        "begin",
        "create_graph",
        "depth",
        "end",
        "error",
        "gaps",
        "keep_graph",
        "last_end",
        "last_result",
        "last_node",
        "next_report",
        "nodes",
        "parent",
        "reported",
        "slices",
        "tid",
        "total",
    )

    def __init__(self, gt: GraphTask, begin: float, tid: int, every: float) -> None:
        parent = current_graph_task()
        self.begin = begin
        self.end: float | None = None
        self.tid = tid
        self.depth = gt.depth
        self.parent = None if parent is None else parent.id
        self.keep_graph = gt.keep_graph
        self.create_graph = gt.create_graph
        self.error: BaseException | None = None
        self.slices: list[tuple[float, float, str]] = []
        self.gaps: list[tuple[float, float, str]] = []
        self.last_end: float | None = None
        self.last_result: str | None = None
        self.last_node: str | None = None
        self.nodes = 0
        self.total: int | None = None
        self.next_report = begin + every
        self.reported = False


#: what the driver did between two time slices, by what the first one returned
_GAPS = {
    "yield": "yield to the event loop",
    "await": "await a node",
    "drained": "wait for device workers",
}


#: a time slice (one ``GraphTask.run`` call), by what it returned
_SLICES = {
    "drained": "engine run (nothing ready)",
    "yield": "engine run (time slice over)",
    "await": "engine run (a node awaits)",
    "error": "engine run (error)",
}


def _current_task() -> Any:
    """The asyncio or trio task running here, else None (plain code, a thread)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        loop = asyncio._get_running_loop()
        if loop is not None:
            return asyncio.current_task(loop)
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_task():
        return trio.lowlevel.current_task()
    return None


def _outcome(exc: BaseException | None) -> str:
    """'ok', 'cancelled' (an event loop's cancellation), 'error' or the interrupt's name."""
    if exc is None:
        return "ok"
    if isinstance(exc, Exception):
        return "error"
    name = type(exc).__name__
    if name in ("CancelledError", "Cancelled"):
        return "cancelled"
    return name  # KeyboardInterrupt, SystemExit, GeneratorExit


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _wait_name(what: Any) -> str:
    if isinstance(what, str):
        return what
    name = getattr(what, "__qualname__", None)
    if not isinstance(name, str):
        name = type(what).__name__
    return f"await {name}"


class _Recorder:
    """The Recorder of aengine.core._trace for one ``ae.profile()`` (NOTE [What a profile records])."""

    def __init__(self, progress: Callable[[Progress], Any] | None, every: float) -> None:
        self.t0 = perf_counter()
        self.t1: float | None = None
        self.progress = progress
        self.every = every
        self.lock = threading.Lock()
        #: track key (thread id, task or None) -> tid; tid -> its name
        self.tracks: dict[tuple[int, Any], int] = {}
        self.names: dict[int, str] = {}
        #: [tid, start, end, graph task, name, sequence_nr, device, kernel, error, waited]
        self.nodes: list[list[Any]] = []
        #: (tid, start, end, name, error)
        self.waits: list[tuple[int, float, float, str, BaseException | None]] = []
        #: (tid, start, end, node name, flow id, error)
        self.kernels: list[tuple[int, float, float, str, int, BaseException | None]] = []
        #: (flow id, tid, time): where an arrow to a kernel starts
        self.offloads: list[tuple[int, int, float]] = []
        #: (sequence_nr, time, tid) of each node the forward recorded
        self.forward: list[tuple[int, float, int]] = []
        #: (tid, time, name, args): cancellations and errors of graph tasks
        self.instants: list[tuple[int, float, str, dict[str, Any]]] = []
        self.graph_tasks: dict[int, _GraphTaskRecord] = {}
        self.flow_ids = itertools.count(1)
        self.running: set[int] = set()  # graph tasks inside ``run``
        self.stacks: dict[int, list[list[Any]]] = {}  # open nodes per track

    # -- tracks --------------------------------------------------------------------------------
    def track(self) -> int:
        """The tid of the task or thread running here (a new track on first sight)."""
        key = (threading.get_ident(), _current_task())
        tid = self.tracks.get(key)
        if tid is None:
            tid = self._new_track(key)
        return tid

    def _new_track(self, key: tuple[int, Any]) -> int:
        thread = threading.current_thread().name
        task = key[1]
        if task is None:
            name = f"thread {thread}"
        elif hasattr(task, "get_name"):  # asyncio
            name = f"asyncio task {task.get_name()}"
        else:
            name = f"trio task {getattr(task, 'name', task)}"
        if task is not None and thread != "MainThread":
            name += f" (thread {thread})"
        with self.lock:
            tid = self.tracks.get(key)
            if tid is None:
                tid = self.tracks[key] = len(self.names) + 1
                self.names[tid] = name
        return tid

    # -- the Recorder protocol (aengine.core._trace) -----------------------------------------
    def graph_task_end(self, gt: GraphTask) -> None:
        g = self.graph_tasks.get(gt.id)
        if g is None or g.end is not None:
            return
        g.end = now = perf_counter()
        g.error = gt.error
        outcome = _outcome(gt.error)
        if outcome != "ok":
            assert gt.error is not None
            args: dict[str, Any] = {"graph_task": gt.id, "error": _describe(gt.error)}
            if gt.error_node is not None:
                args["node"] = gt.error_node.name()
            what = "cancelled" if outcome == "cancelled" else f"failed ({outcome})"
            self.instants.append((self.track(), now, f"backward #{gt.id} {what}", args))
        if g.reported and self.progress is not None:
            self.progress(self._report(gt, g, now, done=True))

    def inside(self, gt: GraphTask) -> bool:
        return gt.id in self.running

    def run(self, gt: GraphTask, deadline: float) -> Any:
        t0 = perf_counter()
        g = self.graph_tasks.get(gt.id)
        if g is None:  # its first time slice: the backward begins
            g = self.graph_tasks[gt.id] = _GraphTaskRecord(gt, t0, self.track(), self.every)
        elif g.last_end is not None and g.last_result in _GAPS:
            g.gaps.append((g.last_end, t0, _GAPS[g.last_result]))
        self.running.add(gt.id)
        result: str = "error"
        try:
            res = gt.run(deadline)
            result = "drained" if res is None else "yield" if res is YIELD else "await"
            return res
        finally:
            self.running.discard(gt.id)
            if self.t1 is None:
                t1 = perf_counter()
                g.slices.append((t0, t1, result))
                g.last_end, g.last_result = t1, result

    async def node(self, gt: GraphTask, node: Node, coro: Coroutine[Any, Any, None]) -> None:
        if self.t1 is not None:  # the profile ended while this backward ran
            await coro
            return
        tid = self.track()
        dev = node.dev
        rec: list[Any] = [tid, perf_counter(), 0.0, gt.id, node.name(), node.sequence_nr]
        rec += ["cpu" if dev is None else str(dev), "inline", None, 0.0]
        stack = self.stacks.setdefault(tid, [])
        stack.append(rec)
        try:
            await coro
        except BaseException as exc:
            rec[8] = exc
            raise
        finally:
            rec[2] = now = perf_counter()
            if stack and stack[-1] is rec:
                stack.pop()
            else:  # closed out of order (a coroutine collected late)
                stack[:] = [r for r in stack if r is not rec]
            self.nodes.append(rec)
            g = self.graph_tasks.get(gt.id)
            if g is not None:
                g.nodes += 1
                g.last_node = rec[4]
                if self.progress is not None and now >= g.next_report:
                    self._progress(gt, g, now)

    async def wait(self, awaitable: Awaitable[Any], what: Any = None) -> Any:
        name = _wait_name(awaitable if what is None else what)
        tid = self.track()
        t0 = perf_counter()
        err: BaseException | None = None
        try:
            return await awaitable
        except BaseException as exc:
            err = exc
            raise
        finally:
            self._waited(tid, t0, name, err)

    async def offload(
        self, node: Any, run: Callable[..., Awaitable[Any]], fn: Callable[..., Any], *args: Any
    ) -> Any:
        tid = self.track()
        t0 = perf_counter()
        flow = next(self.flow_ids)
        self.offloads.append((flow, tid, t0))
        stack = self.stacks.get(tid)
        if stack:
            stack[-1][7] = "offloaded"
        name = node.name()

        def in_thread(*a: Any) -> Any:
            ktid = self.track()
            k0 = perf_counter()
            kerr: BaseException | None = None
            try:
                return fn(*a)
            except BaseException as exc:
                kerr = exc
                raise
            finally:
                self.kernels.append((ktid, k0, perf_counter(), name, flow, kerr))

        err: BaseException | None = None
        try:
            return await run(in_thread, *args)
        except BaseException as exc:
            err = exc
            raise
        finally:
            self._waited(tid, t0, "await kernel in a thread", err)

    def forward_op(self, seq: int) -> None:
        if self.t1 is None:
            self.forward.append((seq, perf_counter(), self.track()))

    # -- helpers ----------------------------------------------------------------------------
    def _waited(self, tid: int, t0: float, name: str, err: BaseException | None) -> None:
        t1 = perf_counter()
        self.waits.append((tid, t0, t1, name, err))
        stack = self.stacks.get(tid)
        if stack:
            stack[-1][9] += t1 - t0

    @staticmethod
    def _total(gt: GraphTask) -> int:
        """The nodes ``gt`` runs: those reached, less those pruned or only captured."""
        run_set, needed = gt.run_set, gt.needed
        if run_set is None and needed is None:
            return len(gt.reached)
        return sum(
            1
            for n in gt.reached
            if (run_set is None or n in run_set) and (needed is None or n in needed)
        )

    def _report(self, gt: GraphTask, g: _GraphTaskRecord, now: float, done: bool) -> Progress:
        if g.total is None and gt.pending is None:  # prepared: the nodes to run are known
            g.total = self._total(gt)
        return Progress(gt.id, g.depth, now - g.begin, g.nodes, g.total, g.last_node, done)

    def _progress(self, gt: GraphTask, g: _GraphTaskRecord, now: float) -> None:
        g.next_report = now + self.every
        g.reported = True
        assert self.progress is not None
        self.progress(self._report(gt, g, now, done=False))


# -- export ------------------------------------------------------------------------------------


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
    pid = os.getpid()

    def meta(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "cat": "__metadata", "ph": "M", "pid": pid, "tid": tid, "args": args}

    out = [meta("process_name", 0, {"name": "aengine"})]
    for tid, name in sorted(rec.names.items()):
        out.append(meta("thread_name", tid, {"name": name}))
        out.append(meta("thread_sort_index", tid, {"sort_index": tid}))
    spans: list[dict[str, Any]] = []
    flows: list[dict[str, Any]] = []
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
        spans.append(
            {
                "name": name,
                "cat": "node",
                "ph": "X",
                "ts": ts,
                "dur": dur,
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )
        fwd = forward.get(seq)
        if fwd is not None and name != "GraphRoot":
            ft, ftid = fwd
            fts = _us(rec, ft)
            op = _BACKWARD_SUFFIX.sub("", name) or name
            flow = next(rec.flow_ids)
            spans.append(
                {
                    "name": op,
                    "cat": "forward",
                    "ph": "X",
                    "ts": fts,
                    "dur": _MARK_US,
                    "pid": pid,
                    "tid": ftid,
                    "args": {"sequence_nr": seq, "backward": name},
                }
            )
            common = {"name": "forward to backward", "cat": "autograd", "id": flow, "pid": pid}
            flows.append({**common, "ph": "s", "ts": fts, "tid": ftid})
            flows.append({**common, "ph": "f", "bp": "e", "ts": ts, "tid": tid})
    for tid, t0, t1, name, err in rec.waits:
        ts, dur = _span(rec, t0, t1)
        wargs: dict[str, Any] = {}
        if err is not None:
            wargs = {"outcome": _outcome(err), "error": _describe(err)}
        spans.append(
            {
                "name": name,
                "cat": "wait",
                "ph": "X",
                "ts": ts,
                "dur": dur,
                "pid": pid,
                "tid": tid,
                "args": wargs,
            }
        )
    starts = {flow: (tid, t) for flow, tid, t in rec.offloads}
    for tid, t0, t1, name, flow, err in rec.kernels:
        ts, dur = _span(rec, t0, t1)
        kargs: dict[str, Any] = {"node": name}
        if err is not None:
            kargs["error"] = _describe(err)
        spans.append(
            {
                "name": f"{name} kernel",
                "cat": "kernel",
                "ph": "X",
                "ts": ts,
                "dur": dur,
                "pid": pid,
                "tid": tid,
                "args": kargs,
            }
        )
        start = starts.get(flow)
        if start is not None:
            common = {"name": "offload", "cat": "offload", "id": flow, "pid": pid}
            flows.append({**common, "ph": "s", "ts": _us(rec, start[1]), "tid": start[0]})
            flows.append({**common, "ph": "f", "bp": "e", "ts": ts, "tid": tid})
    _nest(spans)
    out += spans
    out += flows
    end_all = rec.t1 if rec.t1 is not None else perf_counter()
    for gt_id, g in rec.graph_tasks.items():
        out += _graph_task_events(rec, pid, gt_id, g, end_all)
    for tid, t, name, args in rec.instants:
        cat = "cancel" if name.endswith("cancelled") else "error"
        out.append(
            {
                "name": name,
                "cat": cat,
                "ph": "i",
                "s": "t",
                "ts": _us(rec, t),
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )
    return out


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


# -- the table ------------------------------------------------------------------------------

_SORT_KEYS = ("total", "count", "avg", "max", "waiting")


def _table(rec: _Recorder, sort_by: str, row_limit: int | None) -> str:
    rows: dict[str, list[Any]] = {}  # name -> [count, total, min, max, waiting, offloaded, errors]
    for _, t0, t1, _, name, _, _, kernel, err, waited in rec.nodes:
        d = t1 - t0
        r = rows.get(name)
        if r is None:
            r = rows[name] = [0, 0.0, d, d, 0.0, 0, 0]
        r[0] += 1
        r[1] += d
        r[2] = min(r[2], d)
        r[3] = max(r[3], d)
        r[4] += waited
        r[5] += kernel == "offloaded"
        r[6] += err is not None
    key = {
        "total": lambda kv: kv[1][1],
        "count": lambda kv: kv[1][0],
        "avg": lambda kv: kv[1][1] / kv[1][0],
        "max": lambda kv: kv[1][3],
        "waiting": lambda kv: kv[1][4],
    }[sort_by]
    ordered = sorted(rows.items(), key=key, reverse=True)
    shown = ordered if row_limit is None else ordered[:row_limit]
    node_time = sum(r[1] for r in rows.values())
    end = rec.t1 if rec.t1 is not None else perf_counter()
    header = [
        "node",
        "count",
        "total ms",
        "% nodes",
        "avg us",
        "min us",
        "max us",
        "waiting ms",
        "offloaded",
        "errors",
    ]
    body = [
        [
            name,
            f"{r[0]:,}",
            f"{r[1] * 1e3:.3f}",
            f"{100 * r[1] / node_time:.1f}" if node_time else "-",
            f"{r[1] / r[0] * 1e6:.1f}",
            f"{r[2] * 1e6:.1f}",
            f"{r[3] * 1e6:.1f}",
            f"{r[4] * 1e3:.3f}",
            f"{r[5]:,}",
            f"{r[6]:,}",
        ]
        for name, r in shown
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    sep = "  ".join("-" * w for w in widths)

    def line(row: list[str]) -> str:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        return "  ".join(cells).rstrip()

    lines = [line(header), sep, *(line(r) for r in body), sep]
    if len(shown) < len(ordered):
        lines.append(f"({len(ordered) - len(shown)} more node types; row_limit=None shows all)")
    n_gt = len(rec.graph_tasks)
    lines.append(
        f"{len(rec.nodes):,} nodes in {n_gt} backward{'s' if n_gt != 1 else ''}; "
        f"node time {node_time * 1e3:.3f} ms; profile {(end - rec.t0) * 1e3:.3f} ms"
    )
    return "\n".join(lines)


class profile:
    """Record what the engine does: nodes, waits, kernels, backwards; a trace and a table.

    Use it as ``with ae.profile() as p:`` or ``async with ae.profile() as p:``
    around code that runs backwards (``ae.sync`` or awaited, in any task or
    thread of the process).  While it records, every node takes the engine's
    general path and is timed, so a profiled backward runs slower; with no
    profile recording, the engine pays nothing for it.  One profile records at
    a time.

    * ``p.export_chrome_trace(path)`` writes a Trace Event JSON file: open it
      in the Perfetto UI (https://ui.perfetto.dev) or ``chrome://tracing``.
      A row per task and per thread that ran nodes, an async row per
      backward (overlapping backwards side by side) with its time slices and
      yields, arrows from each forward op to its backward node and from a
      node to its offloaded kernel, cancellations and errors marked.
    * ``p.events``: the same events, a list of dicts.
    * ``p.table()``: the nodes by total time (count, average, waits...).

    ``progress=True`` prints a line to stderr every ``progress_every``
    seconds (1.0) of each backward that runs that long (and a last one when
    it ends); a callable receives each report instead (its fields: ``graph_task``,
    ``depth``, ``elapsed``, ``nodes_done``, ``nodes_total``, ``node``, ``done``; its
    ``str()`` is the line printed).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> with ae.profile() as p:
        ...     (gx,) = ae.sync.grad((x.sin() * 2).sum(), [x])
        >>> sorted({e["name"] for e in p.events if e.get("cat") == "node"})
        ['MulBackward0', 'SinBackward0', 'SumBackward0']
        >>> print(p.table().splitlines()[-1])  # doctest: +ELLIPSIS
        3 nodes in 1 backward; node time ... ms; profile ... ms
        >>> p.export_chrome_trace("trace.json")  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        progress: bool | Callable[[Progress], Any] = False,
        progress_every: float = 1.0,
    ) -> None:
        if isinstance(progress_every, bool) or not isinstance(progress_every, int | float):
            raise TypeError(
                f"progress_every must be a number of seconds, got {type(progress_every).__name__} "
                f"{progress_every!r}"
            )
        if not progress_every > 0:
            raise ValueError(
                f"progress_every must be a positive number of seconds, got {progress_every}"
            )
        if progress is True:
            report: Callable[[Progress], Any] | None = _print_progress
        elif progress is False or progress is None:
            report = None
        elif callable(progress):
            report = progress
        else:
            raise TypeError(
                "progress must be True, False or a callable(report), got "
                f"{type(progress).__name__} {progress!r}"
            )
        self._report = report
        self._every = float(progress_every)
        self._rec: _Recorder | None = None
        self._events: list[dict[str, Any]] | None = None

    # -- recording ------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        if self._rec is not None:
            raise RuntimeError("this ae.profile() already recorded; create a new ae.profile()")
        if _trace.active is not None:
            raise RuntimeError(
                "another ae.profile() is recording in this process; one records at a time "
                "(it sees every backward of the process): leave it first"
            )
        rec = self._rec = _Recorder(self._report, self._every)
        _graph.observe_sequence(rec.forward_op)
        _trace.install(rec)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        rec = self._rec
        if rec is None or rec.t1 is not None:
            return
        rec.t1 = perf_counter()
        _trace.install(None)
        _graph.observe_sequence(None)
        rec.tracks.clear()  # the tasks themselves (names are kept)

    async def __aenter__(self) -> profile:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- results ------------------------------------------------------------------------------
    def _recorder(self) -> _Recorder:
        if self._rec is None:
            raise RuntimeError(
                "this ae.profile() has not recorded yet: use it as `with ae.profile() as p:` "
                "around the code to profile, then read p.events / p.table()"
            )
        return self._rec

    @property
    def events(self) -> list[dict[str, Any]]:
        """The recorded events as Trace Event dicts (``ph``, ``name``, ``ts`` in us...)."""
        rec = self._recorder()
        if rec.t1 is None:  # still recording: a snapshot
            return _trace_events(rec)
        if self._events is None:
            self._events = _trace_events(rec)
        return self._events

    def table(self, sort_by: str = "total", row_limit: int | None = 20) -> str:
        """The nodes by name: count, total/average/min/max time, waits, offloads, errors.

        ``sort_by``: "total" (default), "count", "avg", "max" or "waiting";
        ``row_limit``: the number of rows (None: all).
        """
        if sort_by not in _SORT_KEYS:
            raise ValueError(
                f"sort_by must be one of {', '.join(map(repr, _SORT_KEYS))}; got {sort_by!r}"
            )
        if row_limit is not None and (
            isinstance(row_limit, bool) or not isinstance(row_limit, int) or row_limit < 0
        ):
            raise ValueError(f"row_limit must be a number of rows >= 0 or None, got {row_limit!r}")
        return _table(self._recorder(), sort_by, row_limit)

    def export_chrome_trace(self, path: str | PathLike[str]) -> None:
        """Write the events to ``path`` as Trace Event JSON (Perfetto UI, chrome://tracing)."""
        doc = {
            "traceEvents": self.events,
            "displayTimeUnit": "ms",
            "otherData": {"producer": "aengine.profile"},
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
