"""What a backward leaves for its end: staged gradients, final callbacks, commit guards.

``Outcome`` is the part of a ``GraphTask`` (its base class) that the end of
a backward reads: the leaf and retained gradients staged while it ran
(committed only when the whole task succeeded, aengine.core._commit), the
callbacks queued for its end (``queue_callback``) and the commit guards
(NOTE [Commit guards]).  Its fields change only through these methods;
``GraphTask.__init__`` sets them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Outcome"]


class Outcome:
    """A graph task's staged gradients, final callbacks and commit guards (see the module)."""

    __slots__ = ("before_commit", "callbacks", "on_finish", "staged")

    #: leaf (or retained tensor) -> [its staged gradient, 'leaf' or 'retain']
    staged: dict[Any, list[Any]]
    #: the final callbacks, run in order after the commit
    callbacks: list[Callable[[], Any]]
    #: NOTE [Commit guards]: awaited before the commit; called at finish
    before_commit: list[Callable[[], Any]] | None
    on_finish: list[Callable[[Any], None]] | None

    def add_callback(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` when this backward completes (``queue_callback``)."""
        self.callbacks.append(fn)

    # NOTE [Commit guards]
    # Code that must see every leaf gradient of a backward before ``.grad``
    # is written (a gradient all-reduce: aengine.distributed) registers
    # ``add_before_commit(fn)``: the async driver awaits ``fn()`` after the
    # last node ran and before the commit, and ``fn`` may replace staged
    # gradients (``restage``); if it raises, nothing is committed.
    # ``add_on_finish(fn)`` calls ``fn(graph_task)`` once when the driver is
    # done with the task, whatever the outcome (``error`` says which), so
    # that such code learns of a failure or a cancellation it never saw.
    def add_before_commit(self, fn: Callable[[], Any]) -> None:
        """Await ``fn()`` before the staged gradients are committed (NOTE [Commit guards])."""
        if self.before_commit is None:
            self.before_commit = []
        self.before_commit.append(fn)

    def take_before_commit(self) -> list[Callable[[], Any]]:
        """The guards to await before the commit (and forgotten here)."""
        guards, self.before_commit = self.before_commit, None
        return guards or []

    def add_on_finish(self, fn: Callable[[Any], None]) -> None:
        """Call ``fn(self)`` when the driver is done with this task (NOTE [Commit guards])."""
        if self.on_finish is None:
            self.on_finish = []
        self.on_finish.append(fn)

    def restage(self, key: Any, grad: Any) -> None:
        """Stage ``grad`` for leaf ``key`` in place of what was staged (a commit guard's result)."""
        entry = self.staged.get(key)
        if entry is None:
            self.staged[key] = [grad, "leaf"]
        else:
            entry[0] = grad

    def stage(self, key: Any, grad: Any, kind: str) -> None:
        """Stage a gradient for a leaf (``kind`` 'leaf') or retained non-leaf ('retain')."""
        entry = self.staged.get(key)
        if entry is None:
            self.staged[key] = [grad, kind]
        elif grad is not None:
            entry[0] = grad if entry[0] is None else entry[0] + grad

    def take_staged(self) -> dict[Any, list[Any]]:
        """The staged gradients, handed to the commit (and forgotten here)."""
        staged, self.staged = self.staged, {}
        return staged
