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
# Why 2**16 elements: a thread hop costs about as much as the cheapest
# elementwise kernel of that size, and an expensive one (a transcendental
# and its product) far more; below it offloading only adds latency,
# above it the loop would stall for a time slice or more (figures in
# docs/engineering-log.md).  The size of the result is the measure of an
# elementwise kernel: a reduction's backward, which expands a small
# gradient, is a cheap broadcast.  A product's result size alone would
# under-estimate it (a 64x512 result of a 512-deep product costs as much as
# a million-element elementwise kernel), hence its own measure.
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
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from typing import Any

from anyio import to_thread

from ..core import _trace

__all__ = ["DEFAULT_OFFLOAD_MIN_ELEMENTS", "NEVER", "run_kernel", "stats", "reset_stats"]

#: result size (elements) from which a node's kernel runs in a worker thread
DEFAULT_OFFLOAD_MIN_ELEMENTS = 1 << 16
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


async def run_kernel(node: Any, inputs: list[Any], create_graph: bool, limiter: Any) -> Any:
    """``node.apply(inputs, create_graph)`` in a worker thread under ``limiter``.

    Only the host's kernels come here: a GPU's are launched by its device
    worker (NOTE [Kernel offload policy]).
    """
    rec = _trace.active
    if rec is not None:  # a profile times the kernel (NOTE [Profiling seam])
        run = partial(to_thread.run_sync, limiter=limiter)
        return await rec.offload(node, run, _in_thread, node, inputs, create_graph)
    return await to_thread.run_sync(_in_thread, node, inputs, create_graph, limiter=limiter)
