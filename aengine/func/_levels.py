"""The active vmap levels and the transforms' state, in context variables.

A level is one active ``vmap`` (NOTE [vmap by physical translation] in
_batched.py); the levels active here are a tuple, outermost first, in a
context variable, as are how many reverse transforms run here and whether the
innermost one records its backward.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Level", "VmapError", "active_levels", "push_level", "GRAD_DEPTH", "CREATE_GRAPH"]


class VmapError(RuntimeError):
    """An op or a use of vmap that aengine cannot batch (names the op and what to do)."""


class Level:
    """One active vmap: its batch size and randomness policy (compared by identity)."""

    __slots__ = ("size", "randomness", "depth")
    _ids = itertools.count()

    def __init__(self, size: int, randomness: str, depth: int) -> None:
        self.size = size
        self.randomness = randomness
        #: 0 for the outermost active vmap, 1 for one inside it...
        self.depth = depth

    def __repr__(self) -> str:
        return f"<vmap level {self.depth}, batch {self.size}>"


_LEVELS: contextvars.ContextVar[tuple[Level, ...]] = contextvars.ContextVar(
    "aengine_vmap_levels", default=()
)


#: how many reverse transforms (grad, vjp, jacrev, jvp) run here: above 0 their backward is
#: recorded (create_graph), for the outer ones to differentiate
GRAD_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("aengine_func_depth", default=0)
#: whether the innermost reverse transform records its backward (an outer one differentiates it)
CREATE_GRAPH: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aengine_func_create_graph", default=False
)


def active_levels() -> tuple[Level, ...]:
    """The active vmap levels here, outermost first."""
    return _LEVELS.get()


@contextmanager
def push_level(size: int, randomness: str) -> Iterator[Level]:
    """Enter a vmap level (the innermost one until the block ends)."""
    levels = _LEVELS.get()
    lvl = Level(size, randomness, len(levels))
    token = _LEVELS.set((*levels, lvl))
    try:
        yield lvl
    finally:
        _LEVELS.reset(token)
