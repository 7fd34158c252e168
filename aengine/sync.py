"""Synchronous twins of the engine's entry points: no event loop needed.

``ae.sync.backward`` and ``ae.sync.grad`` take the same parameters and give
the same results as ``await ae.backward`` / ``await ae.grad``; they come from
the same definition (see NOTE [One definition, two drivers] in aengine/_autograd.py);
so do ``ae.sync.gradcheck`` / ``ae.sync.gradgradcheck``, ``ae.sync.functional``
and ``ae.sync.func`` (the function transforms).
Called from inside a running event loop they still work but block it, and
warn; a reentrant call made from a backward function nests without warning.
The awaitable entry points are the other way round: called where no event
loop runs (outside a backward) they raise ``ae.AutogradError`` naming their
``ae.sync`` twin, except ``tensor.backward()``, which then runs at once as
PyTorch's does.

Example::

    >>> import aengine as ae
    >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
    >>> ae.sync.backward((x ** 2).sum())
    >>> x.grad.tolist()
    [2.0, 4.0]
"""

from __future__ import annotations

from ._autograd import sync_backward as backward
from ._autograd import sync_grad as grad
from ._gradcheck import sync_gradcheck as gradcheck
from ._gradcheck import sync_gradgradcheck as gradgradcheck
from .func import sync_func as func
from .functional import sync_functional as functional

__all__ = ["backward", "grad", "functional", "func", "gradcheck", "gradgradcheck"]
