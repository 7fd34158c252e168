"""What ``ae.profile()`` records: the Recorder the engine reports to, and ``Progress``.

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
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from ..core import YIELD, GraphTask, Node, current_graph_task


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
