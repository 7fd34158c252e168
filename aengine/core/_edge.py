"""``GradientEdge``: where gradients flow into a node, as ``torch.autograd.graph.GradientEdge``."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["GradientEdge"]


class GradientEdge(NamedTuple):
    """An edge of the graph: input ``output_nr`` of ``node`` (as torch's).

    ``ae.autograd.graph.get_gradient_edge(t)`` gives the edge a tensor's
    gradient flows along; ``ae.grad`` takes edges as ``inputs`` (the
    gradient arriving there) and as ``outputs`` (with ``grad_outputs``):
    a backward split at an edge.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> h = x * 2.0
        >>> edge = ae.autograd.graph.get_gradient_edge(h)
        >>> (gh,) = ae.sync.grad((h * h).sum(), edge, retain_graph=True)
        >>> gh.tolist()
        [4.0, 8.0]
        >>> (gx,) = ae.sync.grad(edge, [x], grad_outputs=[gh])
        >>> gx.tolist()
        [8.0, 16.0]
    """

    node: Any
    output_nr: int
    ownership_token: Any = None
