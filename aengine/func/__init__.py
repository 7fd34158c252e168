"""Function transforms, as ``torch.func``: grad, vjp, jvp, jacrev, jacfwd, hessian, vmap.

``ae.func.grad(f)`` returns a function whose call is awaited (``await
ae.func.grad(f)(x)``), because it runs a backward; ``ae.sync.func.grad(f)``
is its synchronous twin, called directly.  The same holds for every
transform (``vjp``'s ``vjp_fn`` takes the flavour of the ``vjp`` call that
made it).  Transforms compose -- ``ae.func.vmap(ae.func.grad(loss))`` -- and
the outermost one's flavour runs the composition (NOTE [Transforms defined
once, run by either driver] in _transforms.py).  ``functional_call`` runs no
backward: it is the same plain function in both.

Example::

    >>> import aengine as ae
    >>> x = ae.tensor([1.0, 2.0])
    >>> ae.sync.func.grad(lambda t: (t ** 3).sum())(x).tolist()
    [3.0, 12.0]
    >>> ae.sync.func.vmap(lambda t: t.sum())(ae.ones(3, 2)).tolist()
    [2.0, 2.0, 2.0]

See docs/func.md.
"""

from __future__ import annotations

import functools
import sys
import types

from . import _rules  # noqa: F401  (the batching rules' kinds and custom rules)
from ._batched import BatchedTensor, VmapError
from ._functional_call import functional_call
from ._transforms import (
    Transformed,
    _grad_and_value_gen,
    _grad_gen,
    _hessian_gen,
    _jacfwd_gen,
    _jacrev_gen,
    _jvp_gen,
    _vjp_gen,
    make,
)
from ._vmap import _vmap_gen

__all__ = [
    "grad",
    "grad_and_value",
    "vjp",
    "jvp",
    "jacrev",
    "jacfwd",
    "hessian",
    "vmap",
    "functional_call",
    "BatchedTensor",
    "VmapError",
    "Transformed",
]

_GRAD_DOC = """Return a function computing the gradient of ``func`` with respect to ``argnums``.

    As torch.func.grad: ``func`` returns a scalar Tensor (with ``has_aux``,
    a pair ``(scalar, aux)``); ``argnums`` (an int or a tuple of ints) picks
    the positional arguments differentiated, each a Tensor or a nested
    tuple/list/dict of Tensors (a model's parameters dict).  The result has
    their structure (a tuple of them for a tuple ``argnums``); with
    ``has_aux`` it is ``(grads, aux)``.  ``ae.func.grad(f)(x)`` is awaited;
    ``ae.sync.func.grad(f)(x)`` runs at once.

    Example::

        >>> import aengine as ae
        >>> g = ae.sync.func.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))
        >>> [t.tolist() for t in g(ae.tensor([1.0, 2.0]), ae.tensor([3.0, 4.0]))]
        [[3.0, 4.0], [1.0, 2.0]]
"""
_GRAD_AND_VALUE_DOC = """Like ``grad``, and also the value: ``(grads, value)`` (``(grads, (value, aux))`` with has_aux).

    Example::

        >>> import aengine as ae
        >>> g, v = ae.sync.func.grad_and_value(lambda x: (x ** 2).sum())(ae.tensor([3.0]))
        >>> g.tolist(), v.item()
        ([6.0], 9.0)
"""
_VJP_DOC = """Return ``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` gives one gradient per primal.

    As torch.func.vjp (``has_aux=True``: ``(output, vjp_fn, aux)``).  The
    cotangents have the output's structure and shapes; ``vjp_fn`` may be
    called several times.  Async flavour: ``out, vjp_fn = await
    ae.func.vjp(f, x)`` and ``await vjp_fn(ct)``.

    Example::

        >>> import aengine as ae
        >>> out, vjp_fn = ae.sync.func.vjp(lambda x: x * x, ae.tensor([1.0, 2.0]))
        >>> vjp_fn(ae.ones(2))[0].tolist()
        [2.0, 4.0]
"""
_JVP_DOC = """Return ``(func(*primals), J @ tangents)``: a Jacobian-vector product.

    As torch.func.jvp: ``primals`` and ``tangents`` are tuples of the same
    structure and shapes.  Computed today by the double-backward trick (one
    backward for ``J^T u``, one per tangent), in one place that forward-mode
    AD replaces.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, jv = ae.sync.func.jvp(lambda t: t ** 2, (x,), (ae.ones(2),))
        >>> jv.tolist()
        [2.0, 4.0]
"""
_JACREV_DOC = """Return a function computing the Jacobian of ``func`` by reverse mode.

    As torch.func.jacrev: the Jacobian of output ``o`` with respect to input
    ``x`` has shape ``o.shape + x.shape``; outputs and ``argnums`` inputs may
    be nested structures (the result nests outputs outside inputs).  One
    backward per output element, on one retained graph.

    Example::

        >>> import aengine as ae
        >>> ae.sync.func.jacrev(lambda x: x ** 2)(ae.tensor([1.0, 2.0])).tolist()
        [[2.0, 0.0], [0.0, 4.0]]
"""
_JACFWD_DOC = """Return a function computing the Jacobian of ``func`` by forward mode.

    As torch.func.jacfwd (same result layout as ``jacrev``); one JVP per
    input element.

    Example::

        >>> import aengine as ae
        >>> ae.sync.func.jacfwd(lambda x: x ** 2)(ae.tensor([1.0, 2.0])).tolist()
        [[2.0, 0.0], [0.0, 4.0]]
"""
_HESSIAN_DOC = """Return a function computing the Hessian of the scalar ``func``: ``jacfwd(jacrev(func))``.

    Example::

        >>> import aengine as ae
        >>> ae.sync.func.hessian(lambda x: (x ** 3).sum())(ae.tensor([1.0, 2.0])).tolist()
        [[6.0, 0.0], [0.0, 12.0]]
"""
_VMAP_DOC = """Return ``func`` mapped over a dimension of its inputs: vectorized, as torch.func.vmap.

    ``in_dims``: an int (every input), None (not mapped), or a tuple with one
    entry per positional argument (each an int, None, or a structure matching
    that argument); ``out_dims`` likewise for the outputs.  Inside, ``func``
    sees one sample (``x.shape`` is a sample's); ops run their batching rules
    (an op without one raises VmapError naming it).  ``randomness``:
    "error" (random ops raise), "different" (each sample draws its own), or
    "same" (one draw for all).  ``chunk_size`` maps that many samples at a
    time.  Composes with the other transforms: ``vmap(grad(loss), in_dims=
    (None, 0, 0))(params, x, y)`` gives per-sample gradients in one backward.

    Example::

        >>> import aengine as ae
        >>> ae.sync.func.vmap(lambda x, w: (x * w).sum(), in_dims=(0, None))(
        ...     ae.ones(3, 2), ae.tensor([1.0, 2.0])).tolist()
        [3.0, 3.0, 3.0]
"""

grad, _sync_grad = make("grad", _grad_gen, _GRAD_DOC)
grad_and_value, _sync_grad_and_value = make(
    "grad_and_value", _grad_and_value_gen, _GRAD_AND_VALUE_DOC
)
jacrev, _sync_jacrev = make("jacrev", _jacrev_gen, _JACREV_DOC)
jacfwd, _sync_jacfwd = make("jacfwd", _jacfwd_gen, _JACFWD_DOC)
hessian, _sync_hessian = make("hessian", _hessian_gen, _HESSIAN_DOC)
vmap, _sync_vmap = make("vmap", _vmap_gen, _VMAP_DOC)

vjp = Transformed(functools.partial(_vjp_gen, _sync=False), False, "func.vjp", None)
_sync_vjp = Transformed(functools.partial(_vjp_gen, _sync=True), True, "func.vjp", None)
jvp = Transformed(_jvp_gen, False, "func.jvp", None)
_sync_jvp = Transformed(_jvp_gen, True, "func.jvp", None)
for _t in (vjp, _sync_vjp):
    _t.__doc__ = _VJP_DOC
for _t in (jvp, _sync_jvp):
    _t.__doc__ = _JVP_DOC

#: ``ae.sync.func``: the synchronous twins (same names and parameters)
sync_func = types.ModuleType(
    "aengine.sync.func",
    "Synchronous twins of ae.func: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap, "
    "functional_call.",
)
sync_func.grad = _sync_grad  # type: ignore[attr-defined]
sync_func.grad_and_value = _sync_grad_and_value  # type: ignore[attr-defined]
sync_func.vjp = _sync_vjp  # type: ignore[attr-defined]
sync_func.jvp = _sync_jvp  # type: ignore[attr-defined]
sync_func.jacrev = _sync_jacrev  # type: ignore[attr-defined]
sync_func.jacfwd = _sync_jacfwd  # type: ignore[attr-defined]
sync_func.hessian = _sync_hessian  # type: ignore[attr-defined]
sync_func.vmap = _sync_vmap  # type: ignore[attr-defined]
sync_func.functional_call = functional_call  # type: ignore[attr-defined]
sync_func.__all__ = [n for n in __all__ if n not in ("BatchedTensor", "VmapError", "Transformed")]  # type: ignore[attr-defined]
sys.modules["aengine.sync.func"] = sync_func
