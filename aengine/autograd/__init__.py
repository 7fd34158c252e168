"""``ae.autograd``: autograd's namespaces beyond ``ae.grad`` / ``ae.backward``, as torch's.

``ae.autograd.forward_ad``: forward-mode AD (dual levels, dual tensors).
``ae.autograd.graph``: saved-tensor hooks, gradient edges, version counters.
``ae.autograd.set_multithreading_enabled`` / ``is_multithreading_enabled``:
whether a backward may run nodes in compute threads (NOTE [Multithreading
mode] in core/_modes.py).
"""

from __future__ import annotations

from ..core import is_multithreading_enabled, set_multithreading_enabled
from . import forward_ad, graph

__all__ = ["forward_ad", "graph", "is_multithreading_enabled", "set_multithreading_enabled"]
