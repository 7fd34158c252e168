"""The Engine settings that apply to a backward, and their defaults.

# NOTE [Which Engine's settings apply]
# A backward uses the settings of the innermost ``async with ae.Engine()``
# block its task runs in (task-local context variables, set on entering the
# block), else those of the Engine serving the event loop (the first Engine
# opened on this loop that is still open: a web server's request handlers
# run in tasks started outside the app's lifespan block, and still get its
# settings), else the defaults.  The loop's Engine is kept in a RunVar made
# when the first Engine opens, so that a program without an Engine never
# pays for looking it up.
"""

from __future__ import annotations

import contextvars
from typing import Any, Protocol

from anyio.lowlevel import RunVar

__all__ = [
    "DEFAULT_REENTRANT_DEPTH_LIMIT",
    "DEFAULT_TIME_SLICE",
    "engines_here",
    "loop_engine",
    "set_loop_engine",
    "reentrant_depth_limit",
    "reentrant_overflow",
    "time_slice",
]

#: seconds a backward runs before it lets other tasks of the event loop run
DEFAULT_TIME_SLICE = 0.001

#: graph tasks nested on one stack before a nested backward moves off it
#: (PyTorch's MAX_DEPTH); see NOTE [Reentrant stacks] in _reentrant.py
DEFAULT_REENTRANT_DEPTH_LIMIT = 60


class EngineSettings(Protocol):
    """What this module reads of an ``ae.Engine``."""

    time_slice: float
    reentrant_depth_limit: int
    reentrant_overflow: str
    _closed: bool


#: the settings of the innermost Engine block of this task (None outside any)
_block: contextvars.ContextVar[Any] = contextvars.ContextVar("aengine_engine_block", default=None)
#: the Engine serving the running loop's backwards (made when the first Engine opens)
_LOOP_ENGINE_VAR: RunVar[Any] | None = None


def loop_engine() -> Any:
    """The open Engine serving this event loop's backwards, or None."""
    if _LOOP_ENGINE_VAR is None:
        return None
    try:
        eng = _LOOP_ENGINE_VAR.get()
    except RuntimeError:  # no event loop
        return None
    if eng is None or eng._closed:
        return None
    return eng


def set_loop_engine(engine: EngineSettings | None) -> None:
    """Make ``engine`` the one serving this event loop (None: no longer any)."""
    global _LOOP_ENGINE_VAR
    if _LOOP_ENGINE_VAR is None:
        _LOOP_ENGINE_VAR = RunVar("aengine_loop_engine", default=None)
    _LOOP_ENGINE_VAR.set(engine)


def settings_here() -> EngineSettings | None:
    """The Engine whose settings apply here (NOTE [Which Engine's settings apply])."""
    eng = _block.get()
    if eng is not None and not eng._closed:
        return eng  # type: ignore[no-any-return]
    return loop_engine()  # type: ignore[no-any-return]


def engines_here(queues: Any) -> tuple[Any, EngineSettings | None]:
    """(the Engine whose queues serve a backward started here, the one whose settings apply).

    ``queues``: the innermost Engine block's of this task (``_engine_var``
    in _engine.py), None outside any; either answer falls back on the
    loop's Engine (NOTE [Which Engine's settings apply]).  One call for
    what the async driver asks of every backward.
    """
    block = _block.get()
    if queues is not None and queues._closed:
        queues = None
    if block is not None and block._closed:
        block = None
    if (queues is None or block is None) and _LOOP_ENGINE_VAR is not None:
        loop = loop_engine()
        return (loop if queues is None else queues), (loop if block is None else block)
    return queues, block


def time_slice() -> float:
    """Seconds an async backward runs before yielding to the event loop."""
    eng = settings_here()
    return DEFAULT_TIME_SLICE if eng is None else eng.time_slice


def reentrant_depth_limit() -> int:
    """Graph tasks nested on one stack before a nested backward moves off it."""
    eng = settings_here()
    return DEFAULT_REENTRANT_DEPTH_LIMIT if eng is None else eng.reentrant_depth_limit


def reentrant_overflow() -> str:
    """Where a nested *async* backward beyond the depth limit runs.

    "thread" (default): a new OS thread with its own event loop, through
    ``anyio.to_thread``; "task": a fresh task of the same loop.  See NOTE
    [Reentrant stacks] in _reentrant.py.
    """
    eng = settings_here()
    return "thread" if eng is None else eng.reentrant_overflow
