"""``ae.autograd``: autograd's namespaces beyond ``ae.grad`` / ``ae.backward``, as torch's.

``ae.autograd.graph``: saved-tensor hooks, gradient edges, version counters.
"""

from __future__ import annotations

from . import graph

__all__ = ["graph"]
