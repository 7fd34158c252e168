"""Which async library (if any) runs an event loop in the calling thread."""

from __future__ import annotations

__all__ = ["async_library", "loop_running"]


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
