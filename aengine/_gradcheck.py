"""``gradcheck`` / ``gradgradcheck``: the engine's Jacobians against finite differences.

# NOTE [gradcheck]
# As torch.autograd.gradcheck (its slow, exact mode): for every input that
# requires grad and every differentiable output (one that requires grad),
# the analytical Jacobian is built one output element at a time, each a
# vector-Jacobian product through the engine with a one-hot grad_output, and
# the numerical one by central differences, perturbing each input element by
# +-eps in a private copy of its data.  Jacobians are (input numel, output
# numel) float64 matrices compared with ``allclose(analytical, numerical,
# rtol, atol)``.  Every evaluation of ``fn`` runs with grad mode on, as
# PyTorch's (a ``fn`` that registers a hook is checked, not refused), and
# also inside ``no_grad()`` (where PyTorch would see no differentiable
# output).  As PyTorch, an input with a dimension of stride 0 (``expand``,
# a broadcast array) is refused with RuntimeError, and an output whose shape
# or dtype changes under a perturbation raises, with PyTorch's texts (an
# AssertionError as PyTorch's, that is also a ValueError as aengine's was).  As PyTorch's too, each
# output's Jacobian is computed twice, and two that differ by more than
# ``nondet_tol`` raise "Backward is not reentrant"; after the comparison a
# backward with zero grad_outputs must give exactly zero gradients of the
# inputs' dtype, device and shape ("backward not multiplied by grad_output").
# gradgradcheck runs gradcheck on the function ``(inputs, grad_outputs) ->
# grad(fn(inputs), inputs, grad_outputs, create_graph=True)``, which needs the engine even to be *evaluated*: the
# checked function is therefore a generator like the check itself, and every
# engine call is a ``yield from _grad(...)`` (NOTE [One definition, two
# drivers] in _autograd.py) so that both run under ``await`` and under ``ae.sync``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ._autograd import _grad, _twins
from ._gradcheck_fast import _run_fast_check
from ._gradcheck_jacobians import (
    Gen,
    _as_tuple,
    _check_inputs,
    _differentiable,
    _EngineFn,
    _run_check,
)
from .core import GradcheckError
from .core._modes import enable_grad
from .tensors import Tensor, tensor

__all__ = ["gradcheck", "gradgradcheck", "sync_gradcheck", "sync_gradgradcheck"]


def _check_eps(eps: Any) -> None:
    """The finite-difference step: a positive, finite real number."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a number (e.g. 1e-6), got {type(eps).__name__} {eps!r}")
    if not 0 < float(eps) < math.inf:
        raise ValueError(f"eps must be positive and finite (e.g. 1e-6), got {eps}")


def _check_nondet_tol(tol: Any) -> None:
    """The tolerance for nondeterminism: a non-negative real number (NaN is refused)."""
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise TypeError(f"nondet_tol must be a number (e.g. 1e-10), got {type(tol).__name__}")
    if not float(tol) >= 0:
        raise ValueError(f"nondet_tol must be >= 0, got {tol}")


def _gradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    fast_mode: bool = False,
) -> Generator[Any, None, bool]:
    inputs = _as_tuple(inputs, "inputs")
    _check_eps(eps)
    _check_nondet_tol(nondet_tol)
    check = _run_fast_check if fast_mode else _run_check
    try:
        return (yield from check(fn, inputs, eps, atol, rtol, nondet_tol))
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradgradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    fast_mode: bool = False,
) -> Generator[Any, None, bool]:
    inputs = _as_tuple(inputs, "inputs")
    _check_eps(eps)
    _check_nondet_tol(nondet_tol)
    _check_inputs(inputs)
    check = _run_fast_check if fast_mode else _run_check
    if grad_outputs is None:
        # random grad_outputs (fixed seed: a failure reproduces), checked as inputs too
        with enable_grad():
            outs = _as_tuple(fn(*inputs), "the checked function's result")
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=o.device, requires_grad=True)
            for o in outs
            if _differentiable(o)
        )
    else:
        grad_outputs = _as_tuple(grad_outputs, "grad_outputs")
    n_in = len(inputs)

    def first_grads(*args: Any) -> Gen:
        ins, gos = args[:n_in], args[n_in:]
        with enable_grad():
            res = _as_tuple(fn(*ins), "the checked function's result")
        outs = [o for o in res if _differentiable(o)]
        diff = [t for t in ins if isinstance(t, Tensor) and t._rg]
        if not outs:
            return ()
        grads = yield from _grad(outs, diff, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    try:
        return (
            yield from check(
                _EngineFn(first_grads), inputs + grad_outputs, eps, atol, rtol, nondet_tol
            )
        )
    except GradcheckError:
        if raise_exception:
            raise
        return False


gradcheck, sync_gradcheck = _twins(_gradcheck)
gradgradcheck, sync_gradgradcheck = _twins(_gradgradcheck)

gradcheck.__doc__ = """Check the engine's gradients of ``fn`` against finite differences.

    ``fn(*inputs)`` returns a Tensor or a tuple of Tensors; every input that
    requires grad (use float64) is checked against every output that
    requires grad (see NOTE [gradcheck] in _gradcheck.py).  Returns True, or
    raises :class:`ae.GradcheckError` naming the output and input and showing
    both Jacobians (returns False instead with ``raise_exception=False``).
    As PyTorch's, it also fails a backward that gives different results for
    the same grad_output (by more than ``nondet_tol``) and one whose result
    is not zero for zero grad_outputs.  ``fast_mode=True`` compares one
    random projection ``v' J u`` of each Jacobian instead of the whole
    Jacobian (two evaluations of ``fn`` per input and two backwards per
    output, whatever the sizes), as PyTorch's fast mode; on a failure the
    message also shows the whole Jacobians.  ``ae.sync.gradcheck`` is the
    same without an event loop.

    Example::

        >>> import aengine as ae
        >>> x = ae.randn(3, dtype=ae.float64, requires_grad=True)
        >>> ae.sync.gradcheck(lambda t: (t * t).sum(), (x,))
        True
        >>> ae.sync.gradcheck(lambda t: t.sin(), (x,), fast_mode=True)
        True
"""
gradgradcheck.__doc__ = """Check second derivatives: gradcheck of ``fn``'s vector-Jacobian product.

    The checked function maps ``(inputs, grad_outputs)`` to
    ``grad(fn(*inputs), inputs, grad_outputs, create_graph=True)``; without
    ``grad_outputs`` random ones (fixed seed, requiring grad) are used.
    Same tolerances, results and ``fast_mode`` as :func:`gradcheck`; ``ae.sync.gradgradcheck``
    is the same without an event loop.

    Example::

        >>> import aengine as ae
        >>> x = ae.randn(3, dtype=ae.float64, requires_grad=True)
        >>> ae.sync.gradgradcheck(lambda t: (t ** 3).sum(), (x,))
        True
"""
sync_gradcheck.__doc__ = gradcheck.__doc__
sync_gradgradcheck.__doc__ = gradgradcheck.__doc__
