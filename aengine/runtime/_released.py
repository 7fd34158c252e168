"""The graphs freed by a backward that failed or was cancelled part way, and the clear error.

A non-retaining backward frees the saved tensors of each node as it runs
it; one that does not complete leaves its graph half freed.  Its nodes are
remembered here, so that a later backward through them says why it cannot
run (``ERR_CANCELLED_GRAPH``) instead of PyTorch's "backward through the
graph a second time".
"""

from __future__ import annotations

import weakref

from ..core import ERR_BACKWARD_TWICE, AutogradError, GraphTask, Node

__all__ = ["ERR_CANCELLED_GRAPH", "cancelled_graph_error", "mark_released"]

ERR_CANCELLED_GRAPH = (
    "Trying to backward through a graph whose saved tensors were freed by a previous "
    "backward through it that was cancelled or failed part way (retain_graph=False frees "
    "the saved values of every node that already ran). Build the graph again (run the "
    "forward again), or pass retain_graph=True to a backward that may be cancelled or "
    "fail so that the graph can be used again."
)

#: nodes whose saved tensors were freed by a backward that did not complete
_released_by_failure: weakref.WeakSet[Node] = weakref.WeakSet()


def mark_released(gt: GraphTask) -> None:
    """Remember the nodes a failed/cancelled non-retaining backward freed."""
    roots = gt.roots
    if not roots:
        return
    stack: list[Node] = []
    for t in roots:
        fn = getattr(t, "grad_fn", None)
        if fn is not None:
            stack.append(fn)
    seen: set[Node] = set(stack)
    while stack:
        node = stack.pop()
        if getattr(node, "saved", ()) is None:
            _released_by_failure.add(node)
        for nxt in node:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)


def cancelled_graph_error(gt: GraphTask, exc: BaseException) -> BaseException | None:
    """The clear error for a backward through a graph freed by a failed backward."""
    node = gt.error_node
    if (
        node is not None
        and isinstance(exc, AutogradError)
        and str(exc) == ERR_BACKWARD_TWICE
        and node in _released_by_failure
    ):
        return AutogradError(ERR_CANCELLED_GRAPH)
    return None
