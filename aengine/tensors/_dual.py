"""Forward-mode AD's state: the dual level and the tangents tensors carry.

# NOTE [Forward-mode AD]
# As PyTorch's ``torch.autograd.forward_ad``: inside a dual level a tensor
# may carry a tangent (``Tensor._fw``, None for none: a cold field, so a
# tensor without one pays nothing).  Every op whose inputs carry tangents
# gives its result the tangent its JVP rule computes from them (the
# recorders of ``ops/_core.py`` call ``ops/_forward.py``); leaving the level
# drops every tangent made in it.  As PyTorch, one level exists at a time
# (nesting raises) and the level is process-wide, not per task: tangents
# live on tensors, which tasks share.
#
# This module owns the state: whether a level is open (``LEVEL``), the
# tensors given a tangent in it (weakly, to clear them at its exit), and
# whether a JVP rule is being evaluated (``computing``: the rule's own ops
# compute no tangents of their own).  The ops' recorders read a mirror of
# ``LEVEL is not None`` (one global of ``ops/_core.py``) that the listener
# registered here keeps up to date, so their hot path pays one global test
# when no level is open.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

__all__ = [
    "LEVEL",
    "computing",
    "enter_level",
    "exit_level",
    "on_level_change",
    "set_tangent",
]

#: the index of the open dual level, None when none is open (NOTE [Forward-mode AD])
LEVEL: int | None = None

#: the tensors given a tangent at the open level (cleared at its exit)
_duals: list[weakref.ref[Any]] = []

#: called with True / False when a level opens / closes (the recorders' mirror)
_listeners: list[Callable[[bool], None]] = []

#: set while a JVP rule runs: its ops compute no tangents of their own
computing: ContextVar[bool] = ContextVar("aengine_jvp_rule", default=False)


def on_level_change(fn: Callable[[bool], None]) -> None:
    """Register ``fn(open)``, called when a dual level opens or closes."""
    _listeners.append(fn)


def enter_level() -> int:
    """Open the dual level (0); raise if one is open already, as PyTorch."""
    global LEVEL
    if LEVEL is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    LEVEL = 0
    for fn in _listeners:
        fn(True)
    return 0


def exit_level(level: int | None = None) -> None:
    """Close the open dual level: every tangent made in it is dropped."""
    global LEVEL
    if LEVEL is None:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not entered; call "
            "enter_dual_level() (or use `with dual_level():`) first"
        )
    if level is not None and level != LEVEL:
        raise RuntimeError(
            f"Trying to exit a forward AD level that was not the last one that was created "
            f"(given {level}, the open one is {LEVEL})"
        )
    LEVEL = None
    for fn in _listeners:
        fn(False)
    duals = _duals[:]
    _duals.clear()
    for ref in duals:
        t = ref()
        if t is not None:
            t._fw = None


def set_tangent(t: Any, tangent: Any) -> None:
    """Give ``t`` its tangent at the open level (remembered, to drop at the exit)."""
    if t._fw is None:
        _duals.append(weakref.ref(t))
    t._fw = tangent
