"""``ae.autograd``: autograd's namespaces beyond ``ae.grad`` / ``ae.backward``, as torch's.

``ae.autograd.forward_ad``: forward-mode AD (dual levels, dual tensors).
``ae.autograd.graph``: saved-tensor hooks, gradient edges, version counters.
"""

from __future__ import annotations

from . import forward_ad, graph

__all__ = ["forward_ad", "graph"]
