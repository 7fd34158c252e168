"""gradcheck's fast mode: one random projection of each Jacobian (torch's ``fast_mode``)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from ._autograd import _grad
from ._gradcheck_jacobians import (
    _FAILED_NONDET,
    Gen,
    _call,
    _check_grad,
    _check_inputs,
    _check_mul_by_grad_output,
    _differentiable,
    _jacobian_rows,
    _numerical,
    _same_shape_and_dtype,
    _to_numpy,
    _values,
)
from .core import GradcheckError
from .tensors import Tensor, tensor

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
