"""Engine settings visible to the current task (filled in by ``ae.Engine``)."""

from __future__ import annotations

import contextvars

from ._drivers import DEFAULT_TIME_SLICE

__all__ = ["time_slice"]

_time_slice: contextvars.ContextVar[float] = contextvars.ContextVar(
    "aengine_time_slice", default=DEFAULT_TIME_SLICE
)


def time_slice() -> float:
    """Seconds an async backward runs before yielding to the event loop."""
    return _time_slice.get()
