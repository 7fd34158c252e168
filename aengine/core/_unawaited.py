"""A backward dropped without ``await``, reported where its result is first needed.

# NOTE [A backward never awaited]
# Inside async code ``loss.backward()`` (and ``ae.backward(...)``) returns an
# awaitable that runs the backward only when awaited.  A PyTorch habit,
# ``loss.backward()`` as a statement, drops it un-run: no gradient is
# computed, and Python's "coroutine was never awaited" warning comes
# whenever the object is collected, far from the cause.  So the awaitable
# of those two entry points notes, when it is dropped before it started,
# which call it was, in the context (task) that dropped it (a contextvar:
# other tasks are not affected), and warns there; the first read of a
# tensor's ``.grad`` in that task (which an optimizer's ``step()`` does)
# raises an AutogradError naming ``await loss.backward()``, once.  Until a
# backward was ever dropped, the ``.grad`` getter pays one module-global
# read.
"""

from __future__ import annotations

import contextvars
import warnings

from ._errors import AutogradError

__all__ = ["ever_dropped", "note_dropped", "raise_if_dropped"]

#: whether any backward was ever dropped un-awaited in this process (never reset)
ever_dropped = False

_dropped: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aengine_dropped_backward", default=None
)


def _advice(call: str) -> str:
    return (
        f"`{call}` was called in async code without `await`: it returns an awaitable that "
        f"runs the backward only when awaited, so no gradient was computed. Write "
        f"`await {call}`"
    )


def note_dropped(call: str) -> None:
    """Record that ``call`` was dropped before it started, and warn (NOTE above)."""
    global ever_dropped
    ever_dropped = True
    _dropped.set(call)
    warnings.warn(_advice(call), RuntimeWarning, stacklevel=2)


def raise_if_dropped() -> None:
    """Raise (once) if a backward was dropped un-awaited in this task (NOTE above)."""
    call = _dropped.get()
    if call is not None:
        _dropped.set(None)
        raise AutogradError(f".grad was read after a backward that never ran: {_advice(call)}")
