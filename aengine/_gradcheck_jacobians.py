"""Whole Jacobians, numerical and analytical, and the check that compares them (slow mode).

What ``gradcheck`` does: NOTE [gradcheck] in _gradcheck.py.  The fast mode
(_gradcheck_fast.py) shares the evaluation of ``fn``, the perturbation checks
and the zero-grad_output check.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ._autograd import _grad
from .core import GradcheckError
from .core._modes import enable_grad
from .tensors import Tensor, tensor

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
    failing; unlike PyTorch, also inside ``no_grad()`` (NOTE [gradcheck] in
    _gradcheck.py).
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
