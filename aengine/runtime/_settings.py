"""Engine settings visible to the current task (filled in by ``ae.Engine``)."""

from __future__ import annotations

import contextvars

from ._drivers import DEFAULT_TIME_SLICE
from ._offload import DEFAULT_OFFLOAD_MIN_ELEMENTS

__all__ = [
    "time_slice",
    "reentrant_depth_limit",
    "reentrant_overflow",
    "offload_threshold",
    "DEFAULT_REENTRANT_DEPTH_LIMIT",
]

#: graph tasks nested on one stack before a nested sync backward moves to a new
#: thread (PyTorch's MAX_DEPTH); see NOTE [Reentrant stacks] in _reentrant.py
DEFAULT_REENTRANT_DEPTH_LIMIT = 60

_time_slice: contextvars.ContextVar[float] = contextvars.ContextVar(
    "aengine_time_slice", default=DEFAULT_TIME_SLICE
)


def time_slice() -> float:
    """Seconds an async backward runs before yielding to the event loop."""
    return _time_slice.get()


_reentrant_depth_limit: contextvars.ContextVar[int] = contextvars.ContextVar(
    "aengine_reentrant_depth_limit", default=DEFAULT_REENTRANT_DEPTH_LIMIT
)


def reentrant_depth_limit() -> int:
    """Graph tasks nested on one stack before a nested sync backward gets a new thread."""
    return _reentrant_depth_limit.get()


_reentrant_overflow: contextvars.ContextVar[str] = contextvars.ContextVar(
    "aengine_reentrant_overflow", default="thread"
)


def reentrant_overflow() -> str:
    """Where a nested *async* backward beyond the depth limit runs.

    "thread" (default): a new OS thread with its own event loop, through
    ``anyio.to_thread``; "task": a fresh task of the same loop.  See NOTE
    [Reentrant stacks] in _reentrant.py.
    """
    return _reentrant_overflow.get()


_offload_min: contextvars.ContextVar[int] = contextvars.ContextVar(
    "aengine_offload_min", default=DEFAULT_OFFLOAD_MIN_ELEMENTS
)


def offload_threshold() -> int:
    """Result size (elements) from which an op recorded now runs its backward in a thread.

    See NOTE [Kernel offload policy] in _offload.py; ``ae.Engine(offload_threshold=...)``
    sets it for the code inside the Engine.
    """
    return _offload_min.get()
