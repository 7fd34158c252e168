"""What both runners of a graph task share: the step that ends a time slice, the
clock rule, and the current graph task (NOTE [Scheduler invariants] in _graph_task.py)."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._graph_task import GraphTask

__all__ = ["CLOCK_EVERY", "YIELD", "current"]

#: returned by ``GraphTask.run`` when the time slice is over
YIELD = object()

#: the run loop reads the clock when ``count & CLOCK_EVERY`` is 0: every 4th
#: node.  A kernel kept inline is small (NOTE [Kernel offload policy] in the
#: runtime), so a slice overruns by 3 such nodes at most; on small nodes the
#: clock read costs little.
CLOCK_EVERY = 3

#: the graph task whose node runs in this task/thread (``current_graph_task``)
current: contextvars.ContextVar[GraphTask | None] = contextvars.ContextVar(
    "aengine_graph_task", default=None
)
