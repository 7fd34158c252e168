"""Kernel offload: running a node's backward kernel in a worker thread.

# NOTE [Kernel offload policy]
# A node whose kernel would block the event loop for long runs through
# ``anyio.to_thread.run_sync`` with the device's ``CapacityLimiter``; small
# kernels run inline on the loop thread.  The decision is made ONCE, when the
# op is recorded (``_ops/_core.record``): a node whose result has at least
# ``offload_threshold()`` elements (default ``DEFAULT_OFFLOAD_MIN_ELEMENTS``)
# is marked ``_special`` and ``_offload = True``, so the hot loop of
# ``GraphTask.run`` pays nothing for the policy: it sends the node down the
# general path (``_node_exec``), which offloads it when the backward is
# driven by an event loop (a sync backward runs it inline).
#
# Measured on the project machine (2 cores, numpy 2.4, float64): a thread hop
# costs 110-135 us (asyncio) / 160-180 us (trio); an elementwise multiply
# takes ~1-2 ns per element (65k elements: 70-130 us), a transcendental with
# its product ~15 ns per element (16k elements: 0.3 ms, 65k: 1 ms), a float32
# matmul of 256x256 ~1 ms.  At 65,536 elements (2**16) the cheapest kernels
# cost about one hop and the expensive ones ten, so below it offloading only
# adds latency, above it the loop would stall for a time slice or more.  The
# size of the result is the measure (a reduction's backward, which expands a
# small gradient, is a cheap broadcast; a matmul with a huge inner dimension
# but a small result is under-estimated: lower the threshold for such
# workloads with ``ae.Engine(offload_threshold=...)`` around the forward).
#
# Only ``node.apply`` runs in the thread (numpy releases the GIL inside its
# kernels, so kernels of different backwards overlap); routing, staging and
# every GraphTask field stay on the loop thread.  The thread gets a copy of
# the caller's contextvars (grad mode, current graph task).  A cancelled
# caller waits for the kernel already running (threads cannot be killed),
# then stops.  BLAS pools are not capped here (threadpoolctl is not a
# dependency): several concurrent matmul kernels want OPENBLAS_NUM_THREADS=1
# (research/measurements.md, "OpenBLAS collapses").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_OFFLOAD_MIN_ELEMENTS", "run_kernel", "stats", "reset_stats"]

#: result size (elements) from which a node's kernel runs in a worker thread
DEFAULT_OFFLOAD_MIN_ELEMENTS = 1 << 16

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
#: optional callable(node) run in the worker thread before each offloaded
#: kernel (tests use it to prove that kernels overlap)
kernel_hook: Callable[[Any], None] | None = None


def reset_stats() -> None:
    """Zero the offload counters."""
    global stats
    stats = _Stats()


def _in_thread(node: Any, inputs: list[Any], create_graph: bool, select: Any) -> Any:
    global _running
    with _lock:
        _running += 1
        st = stats
        st.kernels += 1
        st.threads.add(threading.get_ident())
        if _running > st.max_concurrent:
            st.max_concurrent = _running
    try:
        hook = kernel_hook
        if hook is not None:
            hook(node)
        if select is not None:
            with select():
                return node.apply(inputs, create_graph)
        return node.apply(inputs, create_graph)
    finally:
        with _lock:
            _running -= 1


async def run_kernel(
    node: Any, inputs: list[Any], create_graph: bool, limiter: Any, select: Any = None
) -> Any:
    """``node.apply(inputs, create_graph)`` in a worker thread under ``limiter``.

    ``select`` is an optional context-manager factory entered in the thread
    (the cuda backend selects the node's device there: device selection is
    per thread).
    """
    from anyio import to_thread

    return await to_thread.run_sync(_in_thread, node, inputs, create_graph, select, limiter=limiter)
