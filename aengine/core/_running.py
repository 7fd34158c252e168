"""What both runners of a graph task share: the step that ends a time slice, the
clock rule, and the current graph task (NOTE [Scheduler invariants] in _graph_task.py)."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

from ._graph import Node

if TYPE_CHECKING:
    from ._graph_task import GraphTask

__all__ = ["CLOCK_EVERY", "YIELD", "InputBuffer", "NodeTask", "accumulate", "current", "new_buffer"]

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


#: the gradients a node received so far, one slot per forward output
InputBuffer = list[Any]
#: an entry of a ReadyQueue: (-sequence_nr, FIFO tie, node, its InputBuffer)
NodeTask = tuple[int, int, Node, InputBuffer]


def accumulate(buf: InputBuffer, nr: int, g: Any) -> None:
    """Add gradient ``g`` into slot ``nr`` of ``buf`` (None means no gradient)."""
    old = buf[nr]
    if old is None:
        buf[nr] = g
    elif g is not None:
        buf[nr] = old + g


def new_buffer(node: Node, nr: int, g: Any) -> InputBuffer:
    """The InputBuffer of ``node`` holding only ``g`` in slot ``nr``."""
    if node.num_outputs == 1:
        return [g]
    buf: InputBuffer = [None] * node.num_outputs
    buf[nr] = g
    return buf
