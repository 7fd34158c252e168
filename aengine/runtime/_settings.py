"""Engine settings visible to the current task (set by ``ae.Engine``), and their defaults."""

from __future__ import annotations

import contextvars

__all__ = [
    "DEFAULT_REENTRANT_DEPTH_LIMIT",
    "DEFAULT_TIME_SLICE",
    "reentrant_depth_limit",
    "reentrant_overflow",
    "time_slice",
]

#: seconds a backward runs before it lets other tasks of the event loop run
DEFAULT_TIME_SLICE = 0.001

#: graph tasks nested on one stack before a nested backward moves off it
#: (PyTorch's MAX_DEPTH); see NOTE [Reentrant stacks] in _reentrant.py
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
    """Graph tasks nested on one stack before a nested backward moves off it."""
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
