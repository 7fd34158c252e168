"""The seam between the engine and a profiler: the active Recorder, or None.

# NOTE [Profiling seam]
# ``ae.profile()`` (aengine/_profile/) installs a Recorder here; the engine
# asks for it in few places, each outside the per-node hot loop:
#
# * While a profile records, ``active`` here is its recorder: the one
#   switch, which the core reads (``GraphTask.prof`` too; creating a graph
#   task costs nothing more).  Each ``GraphTask.run`` call (a time slice)
#   reads it and, when set, hands the call to ``Recorder.run``, which times it and calls ``run`` again; every
#   node then takes the general path (as under anomaly mode or a node hook:
#   the hot loop itself pays nothing), where ``Recorder.node`` wraps the
#   node's coroutine.  A backward begins, for the profile, at its first
#   time slice.
# * User code that is awaited (async hooks, async backward functions,
#   callbacks) goes through ``Recorder.wait``, and an offloaded kernel through
#   ``Recorder.offload`` (aengine/runtime/_offload.py), which time it on the
#   waiting task and in the kernel's thread.
# * ``GraphTask.finish`` reports the end of the graph task, with its error
#   or cancellation.
#
# The recorder is one per process, not a context variable as task-local
# state is elsewhere: a profile records every backward of the process,
# in every task and thread, as PyTorch's profiler does, and device workers
# and kernel threads do not run in the context of the code that profiles.
# Forward ops are seen through the sequence counter's observer
# (``observe_sequence`` in _graph.py; NOTE [Forward ops in a profile] in
# aengine/_profile/_recorder.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

# GraphTask and Node are ``Any`` here: _graph_task imports this module, and
# the layers contract counts imports made for annotations only too.
GraphTask = Any
Node = Any

__all__ = ["Recorder", "active", "install"]


class Recorder(Protocol):
    """What the engine reports to a profiler (see NOTE [Profiling seam])."""

    def graph_task_end(self, gt: GraphTask) -> None:
        """``gt`` is finished: success, ``gt.error`` set, or cancelled."""

    def run(self, gt: GraphTask, deadline: float) -> Any:
        """One ``gt.run(deadline)`` call, timed: return what it returns."""

    def inside(self, gt: GraphTask) -> bool:
        """True while ``Recorder.run`` runs ``gt`` (its own call of ``gt.run``)."""

    def node(
        self, gt: GraphTask, node: Node, coro: Coroutine[Any, Any, None]
    ) -> Coroutine[Any, Any, None]:
        """``coro`` (``node`` on the general path), timed."""

    def wait(self, awaitable: Awaitable[Any], what: Any = None) -> Awaitable[Any]:
        """``awaitable`` (user code the engine awaits), timed; ``what``: its name, or the
        user's awaitable it runs, named by its ``__qualname__``."""

    def offload(
        self,
        node: Any,
        run: Callable[..., Awaitable[Any]],
        fn: Callable[..., Any],
        *args: Any,
    ) -> Awaitable[Any]:
        """``run(fn, *args)``: ``fn`` in a thread, timed there and on the waiting task."""


#: the recorder of the profile running now (``ae.profile()``), else None
active: Recorder | None = None


def install(recorder: Recorder | None) -> Recorder | None:
    """Make ``recorder`` the active one (None: stop); return the previous one.

    Every graph task reads it here (``GraphTask.prof``): nothing else is set.
    """
    global active
    previous, active = active, recorder
    return previous
