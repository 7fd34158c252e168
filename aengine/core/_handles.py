"""Hook handles: what ``register_*hook`` returns, and a tensor's hook on its node.

Shared by the graph's nodes (_graph.py, which re-exports these names) and
the tensors' hooks.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

__all__ = ["RemovableHandle", "add_hook", "TensorPreHook"]


class RemovableHandle:
    """Handle returned by ``register_*hook``; ``handle.remove()`` unregisters.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(2, requires_grad=True)
        >>> h = x.register_hook(lambda g: g * 2)
        >>> h.remove()
    """

    __slots__ = ("_hooks", "_key")
    _ids = itertools.count()

    def __init__(self, hooks: dict[int, Any]) -> None:
        self._hooks: weakref.ref[dict[int, Any]] | dict[int, Any] = hooks
        self._key = next(self._ids)

    @property
    def id(self) -> int:
        return self._key

    def remove(self) -> None:
        """Unregister the hook; removing twice is harmless."""
        self._hooks.pop(self._key, None)  # type: ignore[union-attr]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def add_hook(hooks: dict[int, Any], fn: Any) -> RemovableHandle:
    # Not checked here: as PyTorch, any object registers, and one that is
    # not callable fails when the backward calls it ("'int' object is not
    # callable", raised in the backward of the node).
    handle = RemovableHandle(hooks)
    hooks[handle._key] = fn
    return handle


class TensorPreHook:
    """A hook registered on a tensor: applies to one input slot of its node."""

    __slots__ = ("fn", "output_nr")

    def __init__(self, output_nr: int, fn: Any) -> None:
        self.output_nr = output_nr
        self.fn = fn

    def __call__(self, grad: Any) -> Any:
        return self.fn(grad)
