"""The differentiable ops namespace, ``F`` of gradient rules under create_graph.

# NOTE [Two gradient namespaces]
# A gradient rule is written once against a namespace ``F`` of array
# functions: the backend's raw namespace (``RawOps``, plain arrays) for a
# plain backward, and this one (Tensors recording a graph) under
# create_graph, so that one formula serves every order of derivative.  The
# object lives here, below the ops layer, so that views (``_views.py``) can
# rebuild themselves through it; aengine.ops fills in its functions at import.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TENSOR_OPS"]


class _TensorOps:
    """The ``F`` of rules under create_graph: differentiable aengine ops (filled by aengine.ops)."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"the differentiable ops namespace has no '{name}' (is aengine.ops imported?)"
        )


TENSOR_OPS: Any = _TensorOps()
