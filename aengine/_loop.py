"""Which async library (if any) runs an event loop in the calling thread."""

from __future__ import annotations

import sys

__all__ = ["async_library", "loop_running", "asyncio_cancelling"]


def async_library() -> str | None:
    """``"asyncio"``, ``"trio"``, ... when an event loop runs in this thread, else None."""
    try:
        import sniffio

        return sniffio.current_async_library()
    except Exception:  # sniffio.AsyncLibraryNotFoundError, or sniffio missing
        return None


def loop_running() -> bool:
    """Whether an async library (asyncio, trio) runs an event loop in this thread."""
    return async_library() is not None


def asyncio_cancelling() -> bool:
    """True when asyncio's ``Task.cancel`` was called on the task running here.

    Cheaper than ``async_library()`` (a hot path: the end of every short
    ``await ae.grad``): without the asyncio module loaded no asyncio loop runs.
    """
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    loop = asyncio._get_running_loop()
    if loop is None:
        return False
    task = asyncio.current_task(loop)
    return task is not None and task.cancelling() > 0
