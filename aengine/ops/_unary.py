"""Elementwise functions of one tensor, each with its derivative beside it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype
from ..tensors._tensor import Tensor
from ._core import TRANSCENDENTAL, Rule, as_tensor_arg, node_class, record_one
from ._table import Maker, OpInfo, Sample, register

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
) -> Callable[[Tensor], Tensor]:
    """Define an elementwise op: ``fwd(xp, array)`` and its node rule.

    ``rule(F, g, (v,), node)`` returns ``(grad,)`` where ``v`` is the one
    saved value: the input or the output, as ``save`` says.  The node is
    named ``node``, by default as PyTorch names most: ``ExpBackward0``.
    A ``floating`` function of an integer or bool tensor gives the default
    dtype, as PyTorch's (numpy would give float64; such tensors never
    require grad, so nothing is recorded for them).  ``cost``: the weight
    of one element of the rule's kernel (``weigh``), where it evaluates a
    transcendental function.
    """
    cls = node_class(node or f"{name.capitalize()}Backward0", rule)
    save_input = save == "input"

    def op(x: Tensor) -> Tensor:
        if x.__class__ is not Tensor:
            x = as_tensor_arg(x)
        dev = x._device
        data = x.data
        if floating and data.dtype.kind in "biu":
            data = data.astype(get_default_dtype())
        out = fwd((dev._backend or dev.backend).xp, data)
        t = record_one(cls, out, dev, x, 1, None, save_input, not save_input)
        if weight and t._fn is not None:  # ``weigh`` inlined (a cheap kernel: one test)
            t._fn.numel *= weight
        return t

    weight = cost if cost != 1 else 0
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}``, differentiable to any order."
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
relu = _unary(
    "relu",
    lambda xp, a: xp.maximum(a, 0).astype(a.dtype, copy=False),
    lambda F, g, s, n: (F.where(s[0] > 0, g, 0.0),),
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


SignBackward0 = node_class("SignBackward0", lambda F, g, s, n: (g * 0.0,))


def sign(x: Tensor) -> Tensor:
    """Elementwise sign (-1, 0 or 1); its gradient is zero."""
    if x.__class__ is not Tensor:
        x = tensor_input(x, "sign")
    out = x._device.backend.xp.sign(x.data)
    return record_one(SignBackward0, out, x._device, x)


def _unary_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 3),), note="empty")


register(
    OpInfo("exp", exp, _unary_samples, method=True),
)
