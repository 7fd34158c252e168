"""Elementwise functions of one tensor, each with its derivative beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype
from ..tensors._tensor import Tensor
from ._core import (
    ELEMENTWISE,
    TRANSCENDENTAL,
    GradOps,
    Rule,
    as_tensor_arg,
    node_class,
    record_one,
    tie,
    wrap,
)
from ._cpu_kernels import where_zero
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "exp",
    "log",
    "sqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "square",
    "log1p",
    "expm1",
    "abs",
    "sign",
]


def _unary(
    name: str,
    fwd: Any,
    rule: Rule,
    save: str,
    node: str | None = None,
    floating: bool = True,
    cost: int = 1,
    special: bool = False,
    ints: str | None = None,
    doc: str | None = None,
) -> Callable[[Tensor], Tensor]:
    """Define an elementwise op: ``fwd(xp, array)`` and its node rule.

    ``rule(F, g, (v,), node)`` returns ``(grad,)`` where ``v`` is the one
    saved value: the input or the output, as ``save`` says ("none": nothing
    is saved).  The node is named ``node``, by default as PyTorch names
    most: ``ExpBackward0``.  A ``floating`` function of an integer or bool
    tensor gives the default dtype, as PyTorch's (numpy would give float64;
    such tensors never require grad, so nothing is recorded for them).
    ``ints`` says otherwise what an integer or bool tensor gives: "same" (a
    copy of it: floor, trunc of integers), "error" (NotImplementedError, as
    PyTorch's kernels that have no integer version).  ``special``: ``fwd``
    gets the backend's special functions (scipy.special's names) instead of
    ``xp``.  ``cost``: the weight of one element of the rule's kernel
    (``weigh``), where it evaluates a transcendental function.  ``doc``: the
    op's docstring.
    """
    cls = node_class(node or f"{name.capitalize()}Backward0", rule, jvp=ELEMENTWISE)
    save_input = save == "input"
    save_output = save == "output"
    int_mode = ints or ("float" if floating else None)

    def op(x: Tensor) -> Tensor:
        if x.__class__ is not Tensor:
            x = as_tensor_arg(x)
        dev = x._device
        data = x.data
        if int_mode is not None and data.dtype.kind in "biu":
            if int_mode == "float":
                data = data.astype(get_default_dtype())
            elif int_mode == "same":
                return wrap(data.copy(), dev)
            else:
                raise NotImplementedError(
                    f"{name}() is not implemented for {data.dtype} tensors (as in PyTorch); "
                    "convert first: x.to(ae.float32)"
                )
        backend = dev._backend or dev.backend
        out = fwd(backend.special if special else backend.xp, data)
        t = record_one(cls, out, dev, x, 1, None, save_input, save_output)
        if weight and t._fn is not None:  # ``weigh`` inlined (a cheap kernel: one test)
            t._fn.numel *= weight
        return t

    weight = cost if cost != 1 else 0
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc or f"Elementwise ``{name}``, differentiable to any order."
    return op


exp = _unary("exp", lambda xp, a: xp.exp(a), lambda F, g, s, n: (g * s[0],), "output")
log = _unary("log", lambda xp, a: xp.log(a), lambda F, g, s, n: (g / s[0],), "input")
sqrt = _unary("sqrt", lambda xp, a: xp.sqrt(a), lambda F, g, s, n: (g / (2.0 * s[0]),), "output")
sin = _unary(
    "sin",
    lambda xp, a: xp.sin(a),
    lambda F, g, s, n: (g * F.cos(s[0]),),
    "input",
    cost=TRANSCENDENTAL,
)
cos = _unary(
    "cos",
    lambda xp, a: xp.cos(a),
    lambda F, g, s, n: (-g * F.sin(s[0]),),
    "input",
    cost=TRANSCENDENTAL,
)
tanh = _unary(
    "tanh", lambda xp, a: xp.tanh(a), lambda F, g, s, n: (F.tanh_grad(g, s[0]),), "output"
)
sigmoid = _unary(
    "sigmoid",
    lambda xp, a: _sigmoid(xp, a),
    lambda F, g, s, n: (F.sigmoid_grad(g, s[0]),),
    "output",
)


def relu_grad(F: GradOps, g: Any, out: Any) -> Any:
    """relu's gradient from its output: ``g`` where ``out > 0`` (relu, relu_, F.relu).

    Under create_graph it is tied to ``out``, as torch's threshold_backward
    (NOTE [Gradients tied to an input] in _core.py).
    """
    mask = out > 0
    if out.__class__ is not Tensor:  # (NOTE [A branch-free masked gradient])
        r = where_zero(mask, g)
        if r is not None:
            return r
        return F.where(mask, g, 0.0)
    return tie(F.where(mask, g, 0.0), out)


relu = _unary(
    "relu",
    lambda xp, a: xp.maximum(a, 0).astype(a.dtype, copy=False),
    lambda F, g, s, n: (relu_grad(F, g, s[0]),),
    "output",
    floating=False,
)
# PyTorch's square is pow(x, 2): its node is a PowBackward0
square = _unary(
    "square",
    lambda xp, a: a * a,
    lambda F, g, s, n: (g * 2.0 * s[0],),
    "input",
    "PowBackward0",
    floating=False,
)
log1p = _unary(
    "log1p",
    lambda xp, a: xp.log1p(a),
    lambda F, g, s, n: (g / (s[0] + 1.0),),
    "input",
    "Log1PBackward0",
)
expm1 = _unary("expm1", lambda xp, a: xp.expm1(a), lambda F, g, s, n: (g * (s[0] + 1.0),), "output")
abs = _unary(
    "abs", lambda xp, a: xp.abs(a), lambda F, g, s, n: (g * F.sign(s[0]),), "input", floating=False
)


def _sigmoid(xp: Any, a: Any) -> Any:
    # stable for large |a|: exp only of non-positive numbers
    e = xp.exp(-xp.abs(a))
    return xp.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(a.dtype, copy=False)


SignBackward0 = node_class("SignBackward0", lambda F, g, s, n: (g * 0.0,), jvp=ELEMENTWISE)


def sign(x: Tensor) -> Tensor:
    """Elementwise sign (-1, 0 or 1); its gradient is zero."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "sign")
    out = x._device.backend.xp.sign(x.data)
    return record_one(SignBackward0, out, x._device, x)


def set_doc(fn: Any, line: str, call: str, result: str) -> None:
    """Give an op made by a factory its docstring: what it does and a runnable example."""
    fn.__doc__ = (
        f"{line}\n\n    Example::\n\n        >>> import aengine as ae\n"
        f"        >>> {call}\n        {result}\n    "
    )


for _fn, _line, _call, _result in (
    (exp, "The exponential of each element, e ** x.", "ae.exp(ae.tensor([0.0])).tolist()", "[1.0]"),
    (log, "The natural logarithm of each element.", "ae.log(ae.tensor([1.0])).tolist()", "[0.0]"),
    (sqrt, "The square root of each element.", "ae.sqrt(ae.tensor([4.0])).tolist()", "[2.0]"),
    (sin, "The sine of each element (radians).", "ae.sin(ae.tensor([0.0])).tolist()", "[0.0]"),
    (cos, "The cosine of each element (radians).", "ae.cos(ae.tensor([0.0])).tolist()", "[1.0]"),
    (
        tanh,
        "The hyperbolic tangent of each element.",
        "ae.tanh(ae.tensor([0.0])).tolist()",
        "[0.0]",
    ),
    (
        sigmoid,
        "The logistic sigmoid 1 / (1 + exp(-x)) of each element.",
        "ae.sigmoid(ae.tensor([0.0])).tolist()",
        "[0.5]",
    ),
    (
        relu,
        "max(x, 0) of each element; gradient 1 where x > 0, else 0.",
        "ae.relu(ae.tensor([-1.0, 2.0])).tolist()",
        "[0.0, 2.0]",
    ),
    (square, "x * x of each element.", "ae.square(ae.tensor([3.0])).tolist()", "[9.0]"),
    (
        log1p,
        "log(1 + x) of each element, exact for small x.",
        "ae.log1p(ae.tensor([0.0])).tolist()",
        "[0.0]",
    ),
    (
        expm1,
        "exp(x) - 1 of each element, exact for small x.",
        "ae.expm1(ae.tensor([0.0])).tolist()",
        "[0.0]",
    ),
    (
        abs,
        "The absolute value of each element; gradient sign(x) (0 at 0).",
        "ae.abs(ae.tensor([-1.5])).tolist()",
        "[1.5]",
    ),
    (
        sign,
        "The sign of each element (-1, 0 or 1); its gradient is zero.",
        "ae.sign(ae.tensor([-2.0, 0.0, 3.0])).tolist()",
        "[-1.0, 0.0, 1.0]",
    ),
):
    set_doc(_fn, _line, _call, _result)


def unary_samples(m: Maker) -> Iterator[Sample]:
    """Samples of an elementwise function defined everywhere: a matrix, 0-d, empty."""
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 3),), note="empty")


def positive_samples(m: Maker) -> Iterator[Sample]:
    """Samples of a function defined for positive numbers (log, sqrt)."""
    low = 0.5 if m.floating else 1
    yield Sample((m.pos(3, 4, low=low, high=3.0),))
    yield Sample((m.pos(low=low, high=3.0),), note="0-d")
    yield Sample((m.pos(0, 3, low=low),), note="empty")


def away_samples(m: Maker) -> Iterator[Sample]:
    """Samples of a function with a kink at 0 (abs, relu): away from it."""
    yield Sample((m.away(3, 4),))
    yield Sample((m.away(),), note="0-d")
    yield Sample((m.away(0, 3),), note="empty")


def _not_a_tensor(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(("abc",), exc=TypeError, match="not str")


#: tolerances of ops that compute integer inputs in float32 (the int64 samples)
INT_TOL = {"int64": (1e-6, 1e-6)}
_ZERO2 = "Its second derivative is zero (not compared: torch's first derivative is a ZeroTensor)."


register(
    OpInfo("exp", exp, unary_samples, method=True, dtypes=ALL, tol=INT_TOL, errors=_not_a_tensor),
    OpInfo(
        "log", log, positive_samples, method=True, dtypes=ALL, tol=INT_TOL, errors=_not_a_tensor
    ),
    OpInfo("sqrt", sqrt, positive_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("sin", sin, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("cos", cos, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("tanh", tanh, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("sigmoid", sigmoid, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo(
        "relu",
        relu,
        away_samples,
        method=True,
        dtypes=ALL,
    ),
    OpInfo("square", square, unary_samples, method=True, dtypes=ALL),
    OpInfo("log1p", log1p, positive_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("expm1", expm1, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo(
        "abs",
        abs,
        away_samples,
        method=True,
        dtypes=ALL,
        errors=_not_a_tensor,
        grad2=False,
        notes=_ZERO2,
    ),
    OpInfo("sign", sign, away_samples, method=True, dtypes=ALL, errors=_not_a_tensor),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "exp": "pointwise",
        "log": "pointwise",
        "sqrt": "pointwise",
        "sin": "pointwise",
        "cos": "pointwise",
        "tanh": "pointwise",
        "sigmoid": "pointwise",
        "relu": "pointwise",
        "square": "pointwise",
        "log1p": "pointwise",
        "expm1": "pointwise",
        "abs": "pointwise",
        "sign": "pointwise",
        "nn.functional.tanh": "pointwise",
        "nn.functional.sigmoid": "pointwise",
    }
)
