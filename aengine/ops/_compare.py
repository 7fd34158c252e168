"""Comparisons and logical ops: bool tensors, never part of the graph."""

from __future__ import annotations

from typing import Any

from ..tensors._tensor import Tensor
from ._core import wrap

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"]


def _v(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _cmp(name: str, fn: Any) -> Any:
    def op(a: Any, b: Any) -> Tensor:
        t = a if isinstance(a, Tensor) else b
        return wrap(fn(_v(a), _v(b)), t._device)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}`` comparison: a bool tensor without gradient."
    return op


eq = _cmp("eq", lambda a, b: a == b)
ne = _cmp("ne", lambda a, b: a != b)
lt = _cmp("lt", lambda a, b: a < b)
le = _cmp("le", lambda a, b: a <= b)
gt = _cmp("gt", lambda a, b: a > b)
ge = _cmp("ge", lambda a, b: a >= b)
logical_and = _cmp("logical_and", lambda a, b: (a != 0) & (b != 0))
logical_or = _cmp("logical_or", lambda a, b: (a != 0) | (b != 0))


def logical_not(a: Tensor) -> Tensor:
    """Elementwise logical not: a bool tensor."""
    return wrap(a._device.backend.xp.logical_not(a.data), a._device)
