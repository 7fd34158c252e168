"""Higher-level differentiation: vjp, jvp, jacobian, hessian, vhp, hvp.

The same functions as ``torch.autograd.functional``, with the same
parameters, results and errors (RuntimeError for misuse, as PyTorch's).
``ae.functional.<name>`` returns an awaitable (``await
ae.functional.jacobian(f, x)``; called where no event loop runs it raises
AutogradError naming its twin); ``ae.sync.functional.<name>`` is its
synchronous twin.  Both come from one
generator definition per function that ``yield from``\\ s the engine's
``_grad`` for every backward it needs (NOTE [One definition, two drivers] in
_autograd.py), so a Jacobian of an ``n``-element output is ``n`` engine calls
sharing one retained graph.

``func`` is a plain (sync) function of Tensors returning a Tensor or a tuple
of Tensors; ``inputs`` a Tensor or a tuple of Tensors.  Results mirror the
structure: a single Tensor in, a single Tensor out; a tuple in, a tuple out
(the Jacobian of a tuple-valued function of a tuple is a tuple of tuples,
``J[i][j]`` of shape ``outputs[i].shape + inputs[j].shape``).  Unless
``create_graph=True`` the results are detached.

Example::

    >>> import aengine as ae
    >>> x = ae.tensor([1.0, 2.0])
    >>> ae.sync.functional.jacobian(lambda t: t * t, x).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    >>> out, vjp = ae.sync.functional.vjp(lambda t: (t ** 3).sum(), x)
    >>> vjp.tolist()
    [3.0, 12.0]

# NOTE [Forward-mode by double backward]
# ``jvp`` runs forward-mode AD (NOTE [Forward-mode AD] in tensors/_dual.py):
# one forward that carries the tangents, no engine call.  ``hvp`` is reverse
# over forward: the forward carries ``v`` and records the tangent's graph,
# one backward of the tangent gives ``H v``.  ``jacobian(strategy=
# "forward-mode")`` is one forward per input element.  Where forward mode
# cannot run (an op without a JVP rule, a dual level already open: one level
# at a time), they fall back to the double-backward trick, as
# torch.autograd.functional computes them: with ``u`` a zero Tensor that
# requires grad, ``g(u) = J^T u`` is linear in ``u`` and built with
# create_graph, so ``d<g(u), v>/du = J v``.  Every operator's rule is written
# once for arrays and Tensors (NOTE [Operator rules]), so that works for all
# of them.  ``strict=True`` and ``create_graph=True`` take that path too (their
# checks and which results require grad are the double backward's, as torch's).
"""

from __future__ import annotations

import sys
import types

from ._autograd import _twins
from ._functional._hvp import _hvp, _vhp
from ._functional._jacobian import _hessian, _jacobian
from ._functional._vjp_jvp import _jvp, _vjp

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

# -- the async functions and their sync twins ----------------------------------------------------
vjp, _sync_vjp = _twins(_vjp, "functional")
jvp, _sync_jvp = _twins(_jvp, "functional")
jacobian, _sync_jacobian = _twins(_jacobian, "functional")
hessian, _sync_hessian = _twins(_hessian, "functional")
vhp, _sync_vhp = _twins(_vhp, "functional")
hvp, _sync_hvp = _twins(_hvp, "functional")

vjp.__doc__ = """Return ``(func(*inputs), v^T J)``: a vector-Jacobian product.

    ``v`` has the shape of the output(s) (optional for a single-element
    output); the product has the shape of the inputs.  ``strict=True`` raises
    when an output does not depend on an input (instead of returning zeros);
    ``create_graph=True`` makes both results differentiable.

    Example::

        >>> import aengine as ae, anyio
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, g = anyio.run(ae.functional.vjp, lambda t: t * t, x, ae.ones(2))
        >>> g.tolist()
        [2.0, 4.0]
"""
jvp.__doc__ = """Return ``(func(*inputs), J v)``: a Jacobian-vector product.

    ``v`` has the shape of the input(s) (optional for a single-element
    input); the product has the shape of the outputs.  Computed by
    forward-mode AD: one forward carrying the tangents, no backward (the
    double-backward trick of torch.autograd.functional where an op has no
    JVP rule, inside an open dual level, with ``strict=True`` or
    ``create_graph=True``).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, jv = ae.sync.functional.jvp(lambda t: t * t, x, ae.ones(2))
        >>> jv.tolist()
        [2.0, 4.0]
"""
jacobian.__doc__ = """Return the Jacobian of ``func`` at ``inputs``.

    For one input and one output a Tensor of shape ``output.shape +
    input.shape``; a tuple per tuple level otherwise (``J[i][j]`` for output i
    and input j).  Reverse mode: one engine call per output element, on one
    retained graph.  ``strategy="forward-mode"`` (with ``vectorize=True``,
    as torch requires) computes it by columns: one forward-mode pass per
    input element, better where outputs outnumber inputs.  ``vectorize=True``
    gives the same result by the same per-row (per-column) computation
    (nothing batches the rows yet); as in torch it cannot be combined with
    ``strict=True``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> ae.sync.functional.jacobian(lambda t: t.sum() * t, x).tolist()
        [[4.0, 1.0], [2.0, 5.0]]
"""
hessian.__doc__ = """Return the Hessian of the scalar function ``func`` at ``inputs``.

    A Tensor of shape ``input.shape + input.shape`` for one input; for a tuple
    of inputs a tuple of tuples ``H[i][j]``.  Computed as the Jacobian of the
    (differentiable) Jacobian.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> ae.sync.functional.hessian(lambda t: (t ** 3).sum(), x).tolist()
        [[6.0, 0.0], [0.0, 12.0]]
"""
vhp.__doc__ = """Return ``(func(*inputs), v^T H)`` for a scalar function ``func``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, r = ae.sync.functional.vhp(lambda t: (t ** 3).sum(), x, ae.ones(2))
        >>> r.tolist()
        [6.0, 12.0]
"""
hvp.__doc__ = """Return ``(func(*inputs), H v)`` for a scalar function ``func``.

    Reverse over forward: one forward carrying ``v`` (forward-mode AD) and
    one backward of the tangent (the double-backward trick, three engine
    calls, where forward mode cannot run, with ``strict=True`` or
    ``create_graph=True``); equal to
    ``vhp`` for functions with a symmetric Hessian.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, r = ae.sync.functional.hvp(lambda t: (t ** 3).sum(), x, ae.ones(2))
        >>> r.tolist()
        [6.0, 12.0]
"""
for _a, _s in (
    (vjp, _sync_vjp),
    (jvp, _sync_jvp),
    (jacobian, _sync_jacobian),
    (hessian, _sync_hessian),
    (vhp, _sync_vhp),
    (hvp, _sync_hvp),
):
    _s.__doc__ = _a.__doc__
    _a.__module__ = "aengine.functional"
    _s.__module__ = "aengine.sync.functional"

#: ``ae.sync.functional``: the synchronous twins (same names and parameters).
sync_functional = types.ModuleType(
    "aengine.sync.functional",
    "Synchronous twins of ae.functional: vjp, jvp, jacobian, hessian, vhp, hvp.",
)
sync_functional.vjp = _sync_vjp  # type: ignore[attr-defined]
sync_functional.jvp = _sync_jvp  # type: ignore[attr-defined]
sync_functional.jacobian = _sync_jacobian  # type: ignore[attr-defined]
sync_functional.hessian = _sync_hessian  # type: ignore[attr-defined]
sync_functional.vhp = _sync_vhp  # type: ignore[attr-defined]
sync_functional.hvp = _sync_hvp  # type: ignore[attr-defined]
sync_functional.__all__ = list(__all__)  # type: ignore[attr-defined]
sys.modules["aengine.sync.functional"] = sync_functional
