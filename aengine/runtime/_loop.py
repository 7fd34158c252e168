"""Which async library (if any) runs an event loop in the calling thread.

# NOTE [Detecting the event loop]
# sniffio answers (a dependency of ours: anyio no longer requires it, and
# without it every answer was None, even inside asyncio).  Asked where no
# loop runs, ``sniffio.current_async_library`` raises, and the exception
# cost 3.3 us, a tenth of a small ``ae.sync.grad``, which asks every call:
# so the cases where no loop can run are answered first, from what sniffio
# itself reads (the name trio and others set, and asyncio's running loop).
"""

from __future__ import annotations

import sys

import sniffio

__all__ = ["async_library", "loop_running", "asyncio_cancelling"]


def async_library() -> str | None:
    """``"asyncio"``, ``"trio"``, ... when an event loop runs in this thread, else None."""
    name = sniffio.thread_local.name or sniffio.current_async_library_cvar.get()
    if name is not None:
        return name
    asyncio = sys.modules.get("asyncio")
    if asyncio is None or asyncio._get_running_loop() is None:
        return None  # no loop in this thread: sniffio would raise
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:  # a loop, but outside any task (a callback)
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
