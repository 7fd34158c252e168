"""Kernel offload: running a node's backward kernel in a worker thread.

# NOTE [Kernel offload policy]
# A node whose kernel would block the event loop for long runs through
# ``anyio.to_thread.run_sync`` with the device's ``CapacityLimiter``; small
# kernels run inline on the loop thread.  The decision is the runtime's,
# made when the node runs: an op's node records the cost of its kernel in
# elements touched (``node.numel``, a fact: its result's size; a matrix
# product's result size times its inner dimension over 16, see
# ``_product`` in aengine/ops/_linalg.py), the scheduler of the backward
# exposes ``offload_min`` (``ae.Engine(offload_threshold=...)``, default
# ``DEFAULT_OFFLOAD_MIN_ELEMENTS``; never with ``offload=False``), and the
# graph task hands nodes at least that costly to it (NOTE [Where a node
# runs] in aengine/core/_graph_task.py).  A sync backward runs every kernel
# inline.
#
# Why 2**19 elements: a hop to a thread and back costs the backward
# about as much as the cheapest float32 kernel of 2**19 elements (a
# product or a sum over a result of that size), and that kernel holds the
# loop for a fraction of a time slice.  Below it a hop costs more than it
# frees the loop for: a small model's awaited backward (float32, width
# 128) took clearly longer than its sync twin while its products hopped,
# and as long once they ran inline.  Above it the hop is a shrinking part
# of the kernel.  What counts is the kernel's time, in elements of a cheap
# kernel: an elementwise node counts its result's size, a product its
# multiply-adds over 16 (``_product`` in aengine/ops/_linalg.py), a rule
# that evaluates a transcendental function (sin, cos, a power, the exp in
# log_softmax's) its result's size times ``TRANSCENDENTAL`` (``weigh`` in
# aengine/ops/_core.py): those cost several times a cheap kernel per
# element (float64 sin the most), so the longest kernel kept inline is
# about as long as under the former threshold of 2**16 unweighted
# elements.  A reduction's backward, which expands a small gradient,
# counts its small result: a cheap broadcast.  The measurements are in
# docs/devices-and-engine.md and docs/performance.md.
#
# Only ``node.apply`` runs in the thread (numpy releases the GIL inside its
# kernels, so kernels of different backwards overlap); routing, staging and
# every GraphTask field stay on the loop thread.  The thread gets a copy of
# the caller's contextvars (grad mode, current graph task).  A cancelled
# caller waits for the kernel already running (threads cannot be killed),
# then stops.  An open Engine caps the BLAS pools (NOTE [BLAS threads] in
# _blas.py): several concurrent matmul kernels want one BLAS thread each.
#
# A GPU (``cuda:N``) is its own executor: a CuPy kernel call only launches
# the kernel on the device's stream, which orders it after the kernels
# launched before it, and returns.  So a costly node of a GPU runs on its
# device's worker with its device selected, never in a thread (the backend's
# ``launches_async``): the hop would only add latency.  Results reach the
# host (``.numpy()``, ``.item()``) through copies that wait for the stream.
#
# NOTE [Nothing of a backward stays in a worker thread]
# anyio's worker thread keeps the function's arguments in its locals until
# a moment after it reported the result to the loop: after the awaiting
# task resumed, maybe after ``anyio.run`` returned.  A graph task passed as
# an argument kept its whole graph (and its error, whose traceback's frames
# hold the graph task again) alive meanwhile: a backward cancelled between
# two of its slices in a compute thread looked leaked to a ``gc.collect()``
# right after the run (``python -m bench.cancel_leak``).  So ``in_thread``
# (_engine.py) hands the thread a ``Box`` holding the graph task, which it
# empties as the call returns (the call cannot be abandoned: the thread is
# done with it by then).  A kernel offloaded on its own (``run_kernel``) is
# handed its node, inputs and graph task the same way, and the thread's copy
# of the awaiting task's context is made with no graph task current (the
# thread makes the box's current while the kernel runs).  What anyio's
# worker still holds in that moment is its own: the cancel scope of the
# awaiting task, whose error's traceback reaches the graph task; with
# ``offload_backward=False`` a ``gc.collect()`` right after ``anyio.run``
# may still find a cancelled backward's graph alive in a few runs of a
# hundred, and a moment later it is gone.
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from typing import Any

from anyio import to_thread

from ..core import _trace
from ..core._running import current

__all__ = ["DEFAULT_OFFLOAD_MIN_ELEMENTS", "NEVER", "run_kernel", "stats", "reset_stats"]

#: result size (elements) from which a node's kernel runs in a worker thread
DEFAULT_OFFLOAD_MIN_ELEMENTS = 1 << 19
#: ``offload_min`` of a scheduler that never offloads
NEVER = sys.maxsize

_lock = threading.Lock()
_running = 0


class _Stats:
    """Counters of offloaded kernels (tests and benchmarks read them)."""

    __slots__ = ("kernels", "max_concurrent", "threads")

    def __init__(self) -> None:
        self.kernels = 0
        self.max_concurrent = 0
        self.threads: set[int] = set()


stats = _Stats()


def reset_stats() -> None:
    """Zero the offload counters."""
    global stats
    stats = _Stats()


class Box:
    """Arguments handed to a worker thread, emptied by the awaiting side when the call returns.

    See NOTE [Nothing of a backward stays in a worker thread].
    """

    __slots__ = ("args",)

    def __init__(self, *args: Any) -> None:
        self.args: tuple[Any, ...] = args

    def call(self, fn: Any) -> Any:
        """``fn(*args)`` (in the worker thread)."""
        return fn(*self.args)

    def empty(self) -> None:
        """Drop the arguments (on the loop, after the call returned)."""
        self.args = ()


def _in_thread(node: Any, inputs: list[Any], create_graph: bool) -> Any:
    global _running
    with _lock:
        _running += 1
        st = stats
        st.kernels += 1
        st.threads.add(threading.get_ident())
        if _running > st.max_concurrent:
            st.max_concurrent = _running
    try:
        return _apply(node, inputs, create_graph)
    finally:
        with _lock:
            _running -= 1


def _apply(node: Any, inputs: list[Any], create_graph: bool) -> Any:
    """The kernel itself, in the worker thread."""
    return node.apply(inputs, create_graph)


def _boxed(box: Box) -> Any:
    """``_in_thread`` of the box's kernel, its graph task current meanwhile (in the worker thread)."""
    gt, node, inputs, create_graph = box.args
    token = current.set(gt)
    try:
        return _in_thread(node, inputs, create_graph)
    finally:
        current.reset(token)


async def run_kernel(node: Any, inputs: list[Any], create_graph: bool, limiter: Any) -> Any:
    """``node.apply(inputs, create_graph)`` in a worker thread under ``limiter``.

    Only the host's kernels come here: a GPU's are launched by its device
    worker (NOTE [Kernel offload policy]).  The thread is handed a Box and a
    copy of this task's context without the graph task in it (NOTE [Nothing
    of a backward stays in a worker thread]).
    """
    rec = _trace.active
    if rec is not None:  # a profile times the kernel (NOTE [Profiling seam])
        run = partial(to_thread.run_sync, limiter=limiter)
        return await rec.offload(node, run, _in_thread, node, inputs, create_graph)
    box = Box(current.get(), node, inputs, create_graph)
    token = current.set(None)
    try:
        return await to_thread.run_sync(_boxed, box, limiter=limiter)
    finally:
        current.reset(token)
        box.empty()
