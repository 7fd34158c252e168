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
import warnings
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ._autograd import _grad, _twins
from .core import GradcheckError
from .core._modes import enable_grad
from .tensors import Tensor, tensor

__all__ = ["gradcheck", "gradgradcheck", "sync_gradcheck", "sync_gradgradcheck"]

Gen = Generator[Any, None, Any]


class _EngineFn:
    """A checked function that itself runs the engine (a generator function)."""

    def __init__(self, fn: Callable[..., Gen]) -> None:
        self.fn = fn


def _as_tuple(x: Any, what: str) -> tuple[Any, ...]:
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (tuple, list)):
        return tuple(x)
    raise TypeError(f"{what} must be a Tensor or a tuple of Tensors, got {type(x).__name__}")


def _to_numpy(t: Tensor) -> np.ndarray:
    return np.asarray(t._device.backend.to_numpy(t.data), dtype=np.float64)


def _call(fn: Any, args: tuple[Any, ...]) -> Gen:
    """The outputs of ``fn(*args)`` as a tuple, computed with grad mode on.

    As PyTorch, every evaluation (the finite differences' too) runs with
    grad mode on, so a ``fn`` that needs it (registers a hook, calls
    ``requires_grad_``, differentiates inside) is checked rather than
    failing; unlike PyTorch, also inside ``no_grad()`` (NOTE [gradcheck]).
    """
    if isinstance(fn, _EngineFn):
        res = yield from fn.fn(*args)
    else:
        with enable_grad():
            res = fn(*args)
    return _as_tuple(res, "the checked function's result")


def _check_inputs(inputs: tuple[Any, ...]) -> list[int]:
    """Positions of the inputs to check, validated as PyTorch's gradcheck does.

    Warns about inputs that are not double precision; raises for an input
    with a dimension of stride 0 (an ``expand``-ed or broadcast array: its
    elements share memory, so one cannot be perturbed alone).
    """
    idx = []
    for i, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t._rg):
            continue
        if t.data.dtype != np.float64 and t.data.dtype.kind != "c":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. Use .double() on the inputs.",
                UserWarning,
                stacklevel=4,
            )
        shape, strides = t.data.shape, t.data.strides  # numpy gives an empty array 0 strides
        if t.data.size and any(st == 0 and n > 1 for st, n in zip(strides, shape, strict=True)):
            raise RuntimeError(
                f"The {i}th input has a dimension with stride 0. gradcheck only supports inputs "
                "that are non-overlapping to be able to compute the numerical gradients "
                "correctly. You should call .contiguous on the input before passing it to "
                "gradcheck."
            )
        idx.append(i)
    if not idx:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True; create them with requires_grad=True"
        )
    return idx


def _differentiable(o: Any) -> bool:
    """Whether the output ``o`` requires grad, as PyTorch's gradcheck asks it.

    A view made before an in-place op gave its base a history requires grad
    through its base; reading its ``grad_fn`` rebuilds its history (NOTE
    [Views and CopySlices] in tensors/_views.py), which ``_rg`` alone misses.
    """
    return isinstance(o, Tensor) and (o._rg or (o.requires_grad and o.grad_fn is not None))


def _values(fn: Any, inputs: tuple[Any, ...], out_idx: list[int]) -> Gen:
    """Float64 copies of the outputs ``out_idx`` (outputs may be views of an input).

    Each with the output's dtype, for the check of ``_same_shape_and_dtype``.
    """
    outs = yield from _call(fn, inputs)
    return [(np.array(_to_numpy(outs[j]), dtype=np.float64), outs[j].dtype) for j in out_idx]


class _PerturbedOutputError(ValueError, AssertionError):
    """The checked function's outputs changed shape or dtype under a perturbation.

    An AssertionError, as PyTorch raises there, and a ValueError, as aengine
    raised before; unlike a bare ``assert`` it is raised under ``python -O``.
    """


def _same_shape_and_dtype(a: Any, b: Any, index: tuple[int, ...], eps: float) -> None:
    """Raise unless two evaluations of the checked function agree in shape and dtype.

    ``a`` and ``b`` are ``(array, dtype)`` pairs of ``_values``.  PyTorch's
    message and type (see ``_PerturbedOutputError``), raised also with
    ``raise_exception=False``, as PyTorch's.
    """
    (arr_a, dt_a), (arr_b, dt_b) = a, b
    if arr_a.shape != arr_b.shape:
        raise _PerturbedOutputError(
            "Expected `func` to return outputs with the same shape when inputs are perturbed "
            f"on index {index} by {eps}, but got: shapes {arr_a.shape} and {arr_b.shape}."
        )
    if dt_a != dt_b:
        raise _PerturbedOutputError(
            "Expected `func` to return outputs with the same dtype when inputs are perturbed "
            f"on index {index} by {eps}, but got: dtypes {dt_a} and {dt_b}."
        )


def _numerical(
    fn: Any,
    inputs: tuple[Any, ...],
    in_idx: list[int],
    outputs: tuple[Any, ...],
    out_idx: list[int],
    eps: float,
) -> Gen:
    """Central-difference Jacobians: ``jac[i][j]`` of shape (numel input i, numel output j)."""
    jac: dict[int, dict[int, np.ndarray]] = {}
    for i in in_idx:
        x = inputs[i]
        orig = x.data
        work = orig.astype(orig.dtype, order="C", copy=True)  # a private copy to perturb
        flat = work.reshape(-1)
        cols: list[list[np.ndarray]] = []
        x.data = work
        try:
            for k in range(flat.size):
                v = flat[k].item()
                flat[k] = v - eps  # minus first, as PyTorch (the order of its message)
                minus = yield from _values(fn, inputs, out_idx)
                flat[k] = v + eps
                plus = yield from _values(fn, inputs, out_idx)
                flat[k] = v
                index = tuple(int(n) for n in np.unravel_index(k, work.shape))
                col = []
                for n, (m, p) in enumerate(zip(minus, plus, strict=True)):
                    _same_shape_and_dtype(m, p, index, eps)
                    out = outputs[out_idx[n]]
                    _same_shape_and_dtype((out.data, out.dtype), p, index, eps)
                    col.append(((p[0] - m[0]) / (2 * eps)).reshape(-1))
                cols.append(col)
        finally:
            x.data = orig
        jac[i] = {
            j: np.stack([c[n] for c in cols]) if cols else np.zeros((0, outputs[j].data.size))
            for n, j in enumerate(out_idx)
        }
    return jac


_FAILED_NONDET = (
    "Backward is not reentrant, i.e., running backward with same input and grad_output "
    "multiple times gives different values, although analytical gradient matches numerical "
    "gradient.The tolerance for nondeterminism was {tol}.\n\nNOTE: If your op relies on "
    "non-deterministic operations, this failure might be expected: call gradcheck / "
    "gradgradcheck with `nondet_tol=<tol>` as a keyword argument."
)


def _analytical(o: Tensor, inputs: tuple[Any, ...], in_idx: list[int], nondet_tol: float) -> Gen:
    """The engine's Jacobians of ``o``, computed twice (as PyTorch): a difference is nondeterminism."""
    first = yield from _jacobian_rows(o, inputs, in_idx)
    again = yield from _jacobian_rows(o, inputs, in_idx)
    for i in in_idx:
        a, b = first[i], again[i]
        if a.size and np.abs(a - b).max() > nondet_tol:  # (NaN differences pass, as PyTorch)
            raise GradcheckError(_FAILED_NONDET.format(tol=nondet_tol))
    return first


def _jacobian_rows(o: Tensor, inputs: tuple[Any, ...], in_idx: list[int]) -> Gen:
    """The Jacobians of ``o`` for the inputs ``in_idx``: one vector-Jacobian product per row."""
    diff_inputs = [inputs[i] for i in in_idx]
    m = o.data.size
    jac = {i: np.zeros((inputs[i].data.size, m)) for i in in_idx}
    for k in range(m):
        onehot = np.zeros(m, dtype=o.data.dtype)
        onehot[k] = 1
        go = tensor(onehot.reshape(o.shape), device=o.device)
        grads = yield from _grad(
            o, diff_inputs, grad_outputs=go, retain_graph=True, allow_unused=True
        )
        for i, g in zip(in_idx, grads, strict=True):
            if g is None:
                continue
            _check_grad(i, g, inputs[i])
            jac[i][:, k] = _to_numpy(g).reshape(-1)
    return jac


def _check_grad(i: int, g: Tensor, x: Tensor) -> None:
    """An input's gradient has its shape and dtype (PyTorch's messages)."""
    if g.shape != x.shape:
        raise GradcheckError(
            f"Gradient has shape mismatch for input {i}: got {g.shape}, expected {x.shape}"
        )
    if g.dtype != x.dtype:
        raise GradcheckError(
            f"Gradient has dtype mismatch for input {i}: got {g.dtype}, expected {x.dtype}"
        )


def _run_check(
    fn: Any, inputs: tuple[Any, ...], eps: float, atol: float, rtol: float, nondet_tol: float
) -> Generator[Any, None, bool]:
    """The check itself; raises GradcheckError on the first mismatch (in PyTorch's order)."""
    in_idx = _check_inputs(inputs)
    outputs = yield from _call(fn, inputs)
    out_idx = [j for j, o in enumerate(outputs) if _differentiable(o)]
    if not out_idx:
        every = [j for j, o in enumerate(outputs) if isinstance(o, Tensor)]
        num = yield from _numerical(fn, inputs, in_idx, outputs, every, eps)
        for i in in_idx:
            for j in every:
                if not np.allclose(num[i][j], 0.0, rtol=rtol, atol=atol):
                    raise GradcheckError(
                        f"Numerical gradient for function expected to be zero: output {j} "
                        f"does not require grad yet depends on input {i}"
                    )
        return True
    num = yield from _numerical(fn, inputs, in_idx, outputs, out_idx, eps)
    for j in out_idx:
        ana = yield from _analytical(outputs[j], inputs, in_idx, nondet_tol)
        for i in in_idx:
            a, n = ana[i], num[i][j]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                with np.printoptions(precision=4, suppress=True, threshold=200):
                    raise GradcheckError(
                        f"Jacobian mismatch for output {j} with respect to input {i},\n"
                        f"numerical:{n!r}\nanalytical:{a!r}\n"
                    )
    yield from _check_mul_by_grad_output([outputs[j] for j in out_idx], inputs, in_idx)
    return True


def _check_mul_by_grad_output(
    outs: list[Tensor], inputs: tuple[Any, ...], in_idx: list[int]
) -> Gen:
    """PyTorch's _test_backward_mul_by_grad_output: zero grad_outputs give zero gradients."""
    diff = [inputs[i] for i in in_idx]
    zeros = [tensor(np.zeros(o.shape, dtype=o.data.dtype), device=o.device) for o in outs]
    grads = yield from _grad(outs, diff, grad_outputs=zeros, allow_unused=True)
    for g, x in zip(grads, diff, strict=True):
        if g is None:
            continue
        if not (_to_numpy(g) == 0).all():
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.device != x.device:
            raise GradcheckError("grad is incorrect device")
        if g.shape != x.shape:
            raise GradcheckError("grad is incorrect size")


# NOTE [gradcheck's fast mode]
# As torch's ``fast_mode=True``: instead of whole Jacobians, one number per
# (output j, input i) pair, v_j' J_ji u_i, for random unit vectors u_i (one
# per input) and v_j (one per output) with non-negative entries.  The
# numerical side perturbs input i along u_i once (two evaluations of ``fn``
# per input, whatever its size) and dots the central difference with v_j;
# the analytical side is one backward per output with grad_output v_j (twice,
# for the nondeterminism check), dotted with u_i.  The tolerance ``atol``
# applies to each Jacobian entry in the slow mode, so here it is scaled by
# sum(u_i) * sum(v_j) (v' (atol * ones) u), as torch's.  On a mismatch the
# slow mode's Jacobians are computed for the message, which says whether the
# slow mode would have passed.  The vectors come from a generator of their
# own (fixed seed: a failure reproduces; the user's RNG is not touched).


def _unit_vectors(tensors: list[Any], rng: np.random.Generator) -> list[np.ndarray]:
    """One random unit vector with entries in [0, 1) per tensor, flat, float64."""
    out = []
    for t in tensors:
        vec = rng.random(t.data.size)
        norm = np.linalg.norm(vec)
        out.append(vec / norm if norm else vec)
    return out


def _numerical_jvps(
    fn: Any,
    inputs: tuple[Any, ...],
    in_idx: list[int],
    outputs: tuple[Any, ...],
    out_idx: list[int],
    us: list[np.ndarray],
    eps: float,
) -> Gen:
    """``jvp[i][n]``: the central difference of output ``out_idx[n]`` along ``us`` (flat)."""
    jvps: dict[int, list[np.ndarray]] = {}
    for i, u in zip(in_idx, us, strict=True):
        x = inputs[i]
        orig = x.data
        step = (eps * u).reshape(orig.shape)
        try:
            x.data = (orig - step).astype(orig.dtype, copy=False)
            minus = yield from _values(fn, inputs, out_idx)
            x.data = (orig + step).astype(orig.dtype, copy=False)
            plus = yield from _values(fn, inputs, out_idx)
        finally:
            x.data = orig
        index = tuple(0 for _ in orig.shape)  # the messages name the first element
        cols = []
        for n, (m, p) in enumerate(zip(minus, plus, strict=True)):
            _same_shape_and_dtype(m, p, index, eps)
            out = outputs[out_idx[n]]
            _same_shape_and_dtype((out.data, out.dtype), p, index, eps)
            cols.append(((p[0] - m[0]) / (2 * eps)).reshape(-1))
        jvps[i] = cols
    return jvps


def _analytical_vjps(
    o: Tensor, v: np.ndarray, inputs: tuple[Any, ...], in_idx: list[int], nondet_tol: float
) -> Gen:
    """``v' J`` of ``o`` for each input ``in_idx`` (flat), computed twice as the slow mode."""
    go = tensor(v.reshape(o.shape).astype(o.data.dtype), device=o.device)
    diff = [inputs[i] for i in in_idx]
    results = []
    for _ in range(2):
        grads = yield from _grad(o, diff, grad_outputs=go, retain_graph=True, allow_unused=True)
        row = {}
        for i, g in zip(in_idx, grads, strict=True):
            if g is None:
                row[i] = np.zeros(inputs[i].data.size)
                continue
            _check_grad(i, g, inputs[i])
            row[i] = _to_numpy(g).reshape(-1)
        results.append(row)
    first, again = results
    for i in in_idx:
        if first[i].size and np.abs(first[i] - again[i]).max() > nondet_tol:
            raise GradcheckError(_FAILED_NONDET.format(tol=nondet_tol))
    return first


_FAST_FAIL_SLOW_OK = (
    "Fast gradcheck failed but element-wise differences are small: the check might have "
    "passed in the slow mode. Call gradcheck / gradgradcheck with `fast_mode=False` to "
    "compare whole Jacobians."
)


def _slow_jacobians_message(
    fn: Any,
    inputs: tuple[Any, ...],
    outputs: tuple[Any, ...],
    i: int,
    j: int,
    eps: float,
    atol: float,
    rtol: float,
) -> Gen:
    """The slow mode's Jacobians of one (output, input) pair, for a fast mode failure."""
    num = yield from _numerical(fn, inputs, [i], outputs, [j], eps)
    ana = yield from _jacobian_rows(outputs[j], inputs, [i])
    n, a = num[i][j], ana[i]
    worst = float(np.abs(n - a).max()) if n.size else 0.0
    with np.printoptions(precision=4, suppress=True, threshold=200):
        msg = (
            "\nThe quantities above are computed in fast mode (one random projection of each "
            "Jacobian). Below, the Jacobians are computed in slow mode:\n\n"
            f"Numerical:\n {n!r}\nAnalytical:\n{a!r}\n\n"
            f"The max per-element difference (slow mode) is: {worst}.\n"
        )
    if np.allclose(a, n, rtol=rtol, atol=atol):
        msg += _FAST_FAIL_SLOW_OK
    return msg


def _run_fast_check(
    fn: Any, inputs: tuple[Any, ...], eps: float, atol: float, rtol: float, nondet_tol: float
) -> Generator[Any, None, bool]:
    """The check in fast mode (NOTE [gradcheck's fast mode]); raises GradcheckError."""
    in_idx = _check_inputs(inputs)
    outputs = yield from _call(fn, inputs)
    out_idx = [j for j, o in enumerate(outputs) if _differentiable(o)]
    rng = np.random.default_rng(0)
    us = _unit_vectors([inputs[i] for i in in_idx], rng)
    if not out_idx:
        every = [j for j, o in enumerate(outputs) if isinstance(o, Tensor)]
        jvps = yield from _numerical_jvps(fn, inputs, in_idx, outputs, every, us, eps)
        for cols in jvps.values():
            for col in cols:
                if col.size and np.abs(col).max() > nondet_tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    vs = _unit_vectors([outputs[j] for j in out_idx], rng)
    jvps = yield from _numerical_jvps(fn, inputs, in_idx, outputs, out_idx, us, eps)
    for n_out, (j, v) in enumerate(zip(out_idx, vs, strict=True)):
        vjps = yield from _analytical_vjps(outputs[j], v, inputs, in_idx, nondet_tol)
        for i, u in zip(in_idx, us, strict=True):
            a = float(vjps[i] @ u)
            n = float(v @ jvps[i][n_out])
            tol = atol * float(u.sum()) * float(v.sum())
            if not np.isclose(a, n, rtol=rtol, atol=tol):
                msg = yield from _slow_jacobians_message(fn, inputs, outputs, i, j, eps, atol, rtol)
                raise GradcheckError(
                    f"Jacobian mismatch for output {j} with respect to input {i},\n"
                    f"numerical:{n!r}\nanalytical:{a!r}\n" + msg
                )
    yield from _check_mul_by_grad_output([outputs[j] for j in out_idx], inputs, in_idx)
    return True


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
