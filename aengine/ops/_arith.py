"""Arithmetic: + - * / ** @, neg, maximum, minimum, where, clamp.

Binary ops take Tensors or Python scalars on either side.  A scalar is kept
as a scalar, never wrapped in a tensor: numpy then
promotes it weakly, as PyTorch does.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype, promote_types, result_dtype
from ..tensors._tensor import Tensor
from ._compare import operand
from ._core import (
    ELEMENTWISE,
    TRANSCENDENTAL,
    GradOps,
    as_tensor_arg,
    node_class,
    record,
    record_one,
    same_device,
    weigh,
    wrap,
)
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register
from ._unary import unary_samples

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "pow",
    "rsub",
    "rdiv",
    "rpow",
    "maximum",
    "minimum",
    "where",
    "clamp",
]

_SCALARS = (int, float, bool)


def _tt(cls: Any, a: Tensor, b: Tensor, out: Any, saved: tuple[Tensor, ...]) -> Tensor:
    dev = a._device
    if b._device is not dev:
        same_device(a, b)
    ad, bd = a.data, b.data
    if ad.dtype != bd.dtype:
        rd = result_dtype(a, b)
        if out.dtype != rd:
            out = out.astype(rd)
        bcast = True
    else:
        # same dtype and shape: the result has them too (a gradient needs no fixing)
        bcast = ad.shape != bd.shape
    return record(cls, out, dev, (a, b), saved, bcast=bcast)


def _operands(a: Any, b: Any) -> tuple[Tensor, Any]:
    """Normalise so that ``a`` is a Tensor; ``b`` stays a scalar if it is one."""
    if not isinstance(b, (Tensor, *_SCALARS)):
        b = as_tensor_arg(b, a)
    return a, b


def _fix_scalar_dtype(a: Tensor, b: Any, out: Any) -> Any:
    rd = result_dtype(a, b)
    if out.dtype != rd:
        out = out.astype(rd)
    return out


def _true_div_dtype(a: Tensor, b: Any) -> Any:
    """The dtype of ``a / b``: the promoted one, the default dtype for integers (PyTorch)."""
    rd = result_dtype(a, b)
    return rd if rd.kind in "fc" else get_default_dtype()


# -- add / sub ------------------------------------------------------------------------
AddBackward0 = node_class("AddBackward0", lambda F, g, s, n: (g, g), jvp=ELEMENTWISE)
# Scalar operand: same name and edges as PyTorch (the scalar's edge is None).
AddScalarBackward = node_class("AddBackward0", lambda F, g, s, n: (g, None), jvp=ELEMENTWISE)
SubBackward0 = node_class(
    "SubBackward0",
    lambda F, g, s, n: (g if n.needs[0] else None, -g if n.needs[1] else None),
    jvp=ELEMENTWISE,
)
SubScalarBackward = node_class("SubBackward0", lambda F, g, s, n: (g, None), jvp=ELEMENTWISE)
RsubBackward1 = node_class("RsubBackward1", lambda F, g, s, n: (-g,), jvp=ELEMENTWISE)


def add(a: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``a + alpha * other`` with broadcasting.

    Example::

        >>> import aengine as ae
        >>> ae.add(ae.ones(2), 1.5).tolist()
        [2.5, 2.5]
        >>> ae.add(ae.ones(2), ae.ones(2), alpha=2).tolist()
        [3.0, 3.0]
    """
    if alpha.__class__ is not int or alpha != 1:
        return add(a, _scaled(other, alpha, "add"))
    if a.__class__ is not Tensor:
        a, other = other, a
        if a.__class__ is not Tensor:
            a = as_tensor_arg(a)
    if other.__class__ is Tensor:
        return _tt(AddBackward0, a, other, a.data + other.data, ())
    if other.__class__ is not float and other.__class__ is not int:
        a, other = _operands(a, other)
        if other.__class__ is Tensor:
            return _tt(AddBackward0, a, other, a.data + other.data, ())
    out = a.data + other
    bcast = out.dtype != a.data.dtype
    if bcast:
        out = _fix_scalar_dtype(a, other, out)
        bcast = out.dtype != a.data.dtype
    return record_one(AddScalarBackward, out, a._device, a, 2, bcast=bcast)


def sub(a: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """``a - alpha * other`` with broadcasting.

    Example::

        >>> import aengine as ae
        >>> ae.sub(ae.ones(2), 0.5).tolist()
        [0.5, 0.5]
    """
    if alpha.__class__ is not int or alpha != 1:
        return sub(a, _scaled(other, alpha, "sub"))
    if a.__class__ is not Tensor:
        return rsub(other, a)
    if other.__class__ is Tensor:
        return _tt(SubBackward0, a, other, a.data - other.data, ())
    if other.__class__ is not float and other.__class__ is not int:
        a, other = _operands(a, other)
        if other.__class__ is Tensor:
            return _tt(SubBackward0, a, other, a.data - other.data, ())
    out = a.data - other
    bcast = out.dtype != a.data.dtype
    if bcast:
        out = _fix_scalar_dtype(a, other, out)
        bcast = out.dtype != a.data.dtype
    return record_one(SubScalarBackward, out, a._device, a, 2, bcast=bcast)


def _scaled(other: Any, alpha: Any, name: str) -> Any:
    """``alpha * other`` for add's and sub's ``alpha`` (a number)."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Number):
        raise TypeError(f"{name}(): argument 'alpha' must be a number, not {type(alpha).__name__}")
    if isinstance(other, Tensor):
        if isinstance(alpha, float) and other.data.dtype.kind in "biu":
            raise RuntimeError(
                f"For integral input tensors, argument alpha must not be a floating point number "
                f"({name}(..., alpha={alpha}))"
            )
        return mul(other, alpha)
    return other * alpha


def rsub(a: Tensor, other: Any) -> Tensor:
    """``other - a`` for a scalar ``other``."""
    if other.__class__ is Tensor or not isinstance(other, _SCALARS):
        return sub(as_tensor_arg(other, a), a)
    out = other - a.data
    bcast = out.dtype != a.data.dtype
    if bcast:
        out = _fix_scalar_dtype(a, other, out)
        bcast = out.dtype != a.data.dtype
    return record(RsubBackward1, out, a._device, (a,), bcast=bcast)


# -- saving only what the needed gradients read --------------------------------------------
# NOTE [What a binary op saves]
# As PyTorch, a binary op saves an operand only when a gradient that is
# needed reads it: ``a * b`` saves ``b`` for ``a``'s gradient and ``a`` for
# ``b``'s, so ``c * ones(3)`` with only ``c`` requiring grad does not save
# ``c``, an in-place change of ``c`` afterwards does not fail backward, and
# a pack hook (``saved_tensors_hooks``, a checkpoint) sees only ``ones(3)``
# (div: ``b`` for ``a``'s gradient, both for ``b``'s).  A saved result stays
# whatever needs a gradient, as in PyTorch (pow).  The op hands ``record``
# every candidate and its node class says what each gradient reads
# (``saved_reads``); ``record``, which knows ``needs`` once it built the
# node, keeps only what they read before it packs anything (one attribute
# read per op that saves several values), and the rule reads its saved
# values by ``needs``.  The in-place ops (mul_, div_) record the same classes.
#: which of the saved (self, other) the gradient of self alone reads, and of other alone
MUL_READS = ((1,), (0,))
DIV_READS = ((1,), (0, 1))


# -- mul / div --------------------------------------------------------------------------
def _mul_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    need = n.needs
    if not need[1]:  # saved: other only
        return (g * s[0], None)
    if not need[0]:  # saved: self only
        return (None, g * s[0])
    a, b = s
    return (g * b, g * a)


def _mul_jvp(ts: Any, ins: Any, out: Tensor, a: Any, s: Any) -> Any:
    ta, tb = ts
    r = ta * ins[1] if ta is not None else None
    if tb is not None:
        r = ins[0] * tb if r is None else r + ins[0] * tb
    return r


def _div_jvp(ts: Any, ins: Any, out: Tensor, a: Any, s: Any) -> Any:
    ta, tb = ts  # (ta - tb out) / b
    if tb is None:
        return ta / ins[1]
    return (ta - tb * out if ta is not None else -(tb * out)) / ins[1]


MulBackward0 = node_class("MulBackward0", _mul_rule, jvp=_mul_jvp)
MulBackward0.saved_reads = MUL_READS
MulScalarBackward = node_class(
    "MulBackward0", lambda F, g, s, n: (g * n.attrs, None), jvp=ELEMENTWISE
)


def mul(a: Any, other: Any) -> Tensor:
    """``a * other`` with broadcasting."""
    if a.__class__ is not Tensor:
        a, other = other, a
        if a.__class__ is not Tensor:
            a = as_tensor_arg(a)
    if other.__class__ is Tensor:
        return _tt(MulBackward0, a, other, a.data * other.data, (a, other))
    if other.__class__ is not float and other.__class__ is not int:
        a, other = _operands(a, other)
        if other.__class__ is Tensor:
            return _tt(MulBackward0, a, other, a.data * other.data, (a, other))
    out = a.data * other
    bcast = out.dtype != a.data.dtype
    if bcast:
        out = _fix_scalar_dtype(a, other, out)
        bcast = out.dtype != a.data.dtype
    return record_one(MulScalarBackward, out, a._device, a, 2, attrs=other, bcast=bcast)


def _div_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    need = n.needs
    if not need[1]:  # saved: other only
        return (g / s[0], None)
    a, b = s
    ga = g / b if need[0] else None
    return (ga, -g * a / (b * b))


def _rdiv_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (a,) = s  # out = c / a ; d/da = -c / a^2
    return (-g * n.attrs / (a * a),)


DivBackward0 = node_class("DivBackward0", _div_rule, jvp=_div_jvp)
DivBackward0.saved_reads = DIV_READS
DivScalarBackward = node_class(
    "DivBackward0", lambda F, g, s, n: (g / n.attrs, None), jvp=ELEMENTWISE
)
# PyTorch computes number / x as x.reciprocal() * number: a MulBackward0 whose
# next node is a ReciprocalBackward0; aengine folds both into this one node
RdivBackward1 = node_class("MulBackward0", _rdiv_rule, jvp=ELEMENTWISE)


def div(a: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """``a / other`` with broadcasting: true division, or rounded as ``rounding_mode`` says.

    ``rounding_mode``: None (true division: integers give the default float
    dtype), "trunc" (toward zero) or "floor" (down; integers stay integers).
    A rounded quotient's gradient is zero, as PyTorch's.

    Example::

        >>> import aengine as ae
        >>> ae.div(ae.tensor([7.0, -7.0]), 2).tolist()
        [3.5, -3.5]
        >>> ae.div(ae.tensor([7, -7]), 2, rounding_mode="floor").tolist()
        [3, -4]
    """
    if rounding_mode is not None:
        return _div_rounded(a, other, rounding_mode)
    if a.__class__ is not Tensor:
        return rdiv(other, a)
    if other.__class__ is not Tensor:
        a, other = _operands(a, other)
    if other.__class__ is Tensor:
        out = a.data / other.data
        if a.data.dtype.kind not in "fc" and other.data.dtype.kind not in "fc":
            out = out.astype(get_default_dtype(), copy=False)  # int / int: the default dtype
            return record(
                DivBackward0, out, same_device(a, other), (a, other), (a, other), bcast=True
            )
        return _tt(DivBackward0, a, other, out, (a, other))
    out = a.data / other
    if out.dtype != a.data.dtype:
        rd = _true_div_dtype(a, other)
        if out.dtype != rd:
            out = out.astype(rd)
    return record(
        DivScalarBackward, out, a._device, (a, other), attrs=other, bcast=out.dtype != a.data.dtype
    )


def rdiv(a: Tensor, other: Any) -> Tensor:
    """``other / a`` for a scalar ``other``."""
    if other.__class__ is Tensor or not isinstance(other, _SCALARS):
        return div(as_tensor_arg(other, a), a)
    out = other / a.data
    if out.dtype != a.data.dtype:
        rd = _true_div_dtype(a, other)
        if out.dtype != rd:
            out = out.astype(rd)
    return record(
        RdivBackward1, out, a._device, (a,), (a,), attrs=other, bcast=out.dtype != a.data.dtype
    )


# -- operands of the elementwise family's ops (rounded div, _binary.py) ----------------------
def tensor_operands(name: str, args: tuple[Any, ...], names: tuple[str, ...]) -> list[Tensor]:
    """The operands of an elementwise op as Tensors on one device.

    A Python number becomes a constant 0-d tensor of the dtype it gives with
    the first tensor operand (PyTorch's wrapped numbers: ``int_tensor * 2.5``
    is float, ``float32_tensor * 2.5`` float32); an array-like a constant
    tensor.  At least one operand must be a Tensor.
    """
    like = None
    for x in args:
        if isinstance(x, Tensor):
            like = x
            break
    if like is None:
        raise TypeError(
            f"{name}(): argument '{names[0]}' must be a Tensor, not {type(args[0]).__name__}"
        )
    out: list[Tensor] = []
    for x, arg in zip(args, names):
        if isinstance(x, Tensor):
            if x._device is not like._device:
                same_device(like, x)
            out.append(x)
            continue
        v = operand(x, like, name, arg)  # a number, or an array (TypeError otherwise)
        if isinstance(v, (bool, int, float)):
            out.append(_tensor_of(like, v, result_dtype(like, v)))
        else:
            out.append(_tensor_of(like, v, None))
    return out


def _tensor_of(like: Tensor, value: Any, dtype: Any) -> Tensor:
    backend = like._device.backend
    return Tensor._make(backend.asarray(value, dtype=dtype), False, like._device)


def promoted(ts: list[Tensor]) -> Any:
    """The result dtype of an elementwise op of ``ts`` (PyTorch's promotion, pairwise)."""
    if len(ts) == 1:
        return ts[0].data.dtype
    rd = result_dtype(ts[0], ts[1])
    for t in ts[2:]:
        rd = promote_types(rd, result_dtype(ts[0], t))
    return rd


def broadcast_error(name: str, ts: list[Tensor]) -> RuntimeError:
    """PyTorch's error for operands whose shapes do not broadcast."""
    shapes = ", ".join(str(tuple(t.shape)) for t in ts)
    return RuntimeError(
        f"{name}(): the shapes of the operands, {shapes}, do not broadcast "
        "(each dimension must match or be 1); reshape or unsqueeze one of them"
    )


def check_int_divisor(name: str, rd: Any, b: Tensor) -> None:
    """Integer division by zero raises, as PyTorch's (numpy would give 0 and a warning)."""
    if rd.kind in "biu" and bool((b.data == 0).any()):
        raise RuntimeError(f"ZeroDivisionError: {name}(): integer division by zero")


def _div_rounded_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    need = n.needs
    return tuple(F.zeros_like(g) if k else None for k in need)


DivBackward2 = node_class("DivBackward2", _div_rounded_rule, jvp=ELEMENTWISE)


def _div_rounded(a: Any, other: Any, mode: Any) -> Tensor:
    if mode != "trunc" and mode != "floor":
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {mode!r}"
        )
    ts = tensor_operands("div", (a, other), ("input", "other"))
    x, y = ts
    rd = promoted(ts)
    check_int_divisor("div", rd, y)
    xd = x.data if x.data.dtype == rd else x.data.astype(rd)
    yd = y.data if y.data.dtype == rd else y.data.astype(rd)
    try:
        out = x._device.backend.raw.div_rounded(xd, yd, mode)
    except ValueError:
        raise broadcast_error("div", ts) from None
    return record(DivBackward2, out, x._device, (x, y), bcast=True)


# -- neg ---------------------------------------------------------------------------------
NegBackward0 = node_class("NegBackward0", lambda F, g, s, n: (-g,), jvp=ELEMENTWISE)


def neg(a: Tensor) -> Tensor:
    """``-a``."""
    if a.__class__ is not Tensor:
        a = tensor_input(a, "neg")
    return record(NegBackward0, -a.data, a._device, (a,))


# -- pow ---------------------------------------------------------------------------------
def _pow_scalar_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (a,) = s
    p = n.attrs
    if p == 0:
        return (g * 0.0 * a,)
    if p == 1:
        return (g,)
    if p == 2:  # one full-size array, not two (2.0 * is exact: same bits)
        return (F.scale_(g * a, 2.0),)
    return (g * p * a ** (p - 1),)


def _pow_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b, out = s
    need = n.needs
    ga = gb = None
    if need[0]:
        # d/da a^b = b * a^(b-1); 0 where b == 0 (PyTorch's where).  The exponent is
        # b - (b != 0): b - 1, but 0 where b == 0, so 0 ** -1 (numpy's divide-by-zero
        # warning) is never computed for 0 ** 0, at no extra op.
        nz = b != 0
        ga = F.where(nz, g * b * a ** (b - nz), 0.0)
    if need[1]:
        # PyTorch's pow_backward_exponent: g * where(a == 0 & b >= 0, 0, out * log(a)),
        # so a zero base with a negative exponent gives -inf (inf * log(0)), not NaN.
        # log(0) = -inf is put in by hand and masked before the product (no warnings).
        zero = a == 0
        flat = zero & (b >= 0)
        log_a = F.where(zero, -math.inf, F.log(F.where(zero, 1.0, a)))
        gb = g * (out * F.where(flat, 0.0, log_a))
    return (ga, gb)


def _rpow_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (out,) = s  # out = c ** a ; d/da = out * log(c)
    c = n.attrs
    if c == 0:
        # PyTorch: 0 where a >= 0, else out * log(0) (-inf for a < 0, NaN for NaN).
        # For c = 0, a >= 0 exactly where out (0 or 1) is finite.
        flat = _arr(out) < math.inf
        return (g * (F.where(flat, 1.0, out) * F.where(flat, 0.0, -math.inf)),)
    return (g * out * math.log(c),)


def _arr(v: Any) -> Any:
    """The backend array of a saved value (an array, or a Tensor under create_graph)."""
    return v.data if v.__class__ is Tensor else v


PowBackward0 = node_class("PowBackward0", _pow_scalar_rule, jvp=ELEMENTWISE)
PowBackward1 = node_class("PowBackward1", _pow_rule, jvp=ELEMENTWISE)
PowBackward2 = node_class("PowBackward2", _rpow_rule, jvp=ELEMENTWISE)


def pow(a: Any, exponent: Any) -> Tensor:
    """``a ** exponent``: a tensor to a scalar or tensor power (or a scalar to a tensor power)."""
    if a.__class__ is not Tensor:
        if isinstance(a, _SCALARS):
            return rpow(exponent, a)
        a = as_tensor_arg(a, exponent if isinstance(exponent, Tensor) else None)
    if exponent.__class__ is not Tensor and not isinstance(exponent, _SCALARS):
        exponent = as_tensor_arg(exponent, a)
    if exponent.__class__ is Tensor:
        out = a.data**exponent.data
        dev = same_device(a, exponent)
        if a.data.dtype != exponent.data.dtype:
            rd = result_dtype(a, exponent)
            if out.dtype != rd:
                out = out.astype(rd)
        # both gradients read both inputs; the result is saved whatever needs a gradient
        # (PyTorch saves a result unconditionally, inputs by the gradients that read them)
        t = record(
            PowBackward1, out, dev, (a, exponent), (a, exponent), save_output=True, bcast=True
        )
        return weigh(t, TRANSCENDENTAL)  # (a power and a log)
    out = a.data**exponent
    bcast = out.dtype != a.data.dtype
    if bcast:
        out = _fix_scalar_dtype(a, exponent, out)
        bcast = out.dtype != a.data.dtype
    t = record(PowBackward0, out, a._device, (a,), (a,), attrs=exponent, bcast=bcast)
    return t if exponent in (0, 1, 2) else weigh(t, TRANSCENDENTAL)  # (a power)


def rpow(a: Tensor, other: Any) -> Tensor:
    """``other ** a`` for a scalar ``other``."""
    out = other**a.data
    bcast = out.dtype != a.data.dtype
    if bcast:
        out = _fix_scalar_dtype(a, other, out)
        bcast = out.dtype != a.data.dtype
    return record(PowBackward2, out, a._device, (a,), attrs=other, save_output=True, bcast=bcast)


# -- maximum / minimum / where / clamp ---------------------------------------------------------
def _minmax_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    need = n.needs
    # PyTorch's formula: equal inputs share the gradient evenly, the losing input gets 0,
    # and where one is NaN (neither wins nor ties) both get the whole gradient.
    shared = F.where(a == b, g * 0.5, g)
    a_loses, b_loses = (a < b, a > b) if n.attrs else (a > b, a < b)
    ga = F.where(a_loses, 0.0, shared) if need[0] else None
    gb = F.where(b_loses, 0.0, shared) if need[1] else None
    return (ga, gb)


MaximumBackward0 = node_class("MaximumBackward0", _minmax_rule, jvp=ELEMENTWISE)
MinimumBackward0 = node_class("MinimumBackward0", _minmax_rule, jvp=ELEMENTWISE)


def _minmax(cls: Any, a: Any, b: Any, is_max: bool) -> Tensor:
    a = as_tensor_arg(a, b if isinstance(b, Tensor) else None)
    b = as_tensor_arg(b, a)
    xp = a._device.backend.xp
    out = xp.maximum(a.data, b.data) if is_max else xp.minimum(a.data, b.data)
    dev = same_device(a, b)
    if a.data.dtype != b.data.dtype:
        rd = result_dtype(a, b)
        if out.dtype != rd:
            out = out.astype(rd)
    return record(cls, out, dev, (a, b), (a, b), attrs=is_max, bcast=True)


def maximum(a: Any, other: Any) -> Tensor:
    """Elementwise maximum; ties share the gradient equally (as PyTorch)."""
    return _minmax(MaximumBackward0, a, other, True)


def minimum(a: Any, other: Any) -> Tensor:
    """Elementwise minimum; ties share the gradient equally (as PyTorch)."""
    return _minmax(MinimumBackward0, a, other, False)


def _where_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    cond = n.attrs
    need = n.needs
    return (
        F.where(cond, g, 0.0) if need[0] else None,
        F.where(cond, 0.0, g) if need[1] else None,
    )


WhereBackward0 = node_class("WhereBackward0", _where_rule, jvp=ELEMENTWISE)


class _Missing:
    """The default of where's ``input`` and ``other``: not given (None is an operand error)."""

    def __repr__(self) -> str:
        return "<not given>"


_MISSING: Any = _Missing()


def where(condition: Any, input: Any = _MISSING, other: Any = _MISSING) -> Any:
    """Pick ``input`` where ``condition`` holds, else ``other`` (broadcasting all three).

    With ``condition`` alone: the indices of its nonzero elements, a tuple of
    one int64 tensor per dimension (as ``torch.nonzero(as_tuple=True)``).
    The gradient of ``input`` is ``g`` where the condition holds, of
    ``other`` where it does not.

    Example::

        >>> import aengine as ae
        >>> c = ae.tensor([True, False, True])
        >>> ae.where(c, ae.tensor([1.0, 2.0, 3.0]), 0.0).tolist()
        [1.0, 0.0, 3.0]
        >>> [t.tolist() for t in ae.where(c)]
        [[0, 2]]
    """
    if input is _MISSING or other is _MISSING:
        if input is _MISSING and other is _MISSING:
            return _nonzero_tuple(condition)
        raise TypeError(
            "where() takes a condition alone, or a condition, an input and an other; "
            f"'{'input' if input is _MISSING else 'other'}' is missing"
        )
    a, b = input, other
    cond = condition.data if isinstance(condition, Tensor) else condition
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    if like is None:
        like = as_tensor_arg(a)
    xp = like._device.backend.xp
    cond = xp.asarray(cond)
    if cond.dtype.kind != "b":  # as PyTorch: no implicit truth value of numbers
        raise TypeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{cond.dtype}; compare first (ae.where(x > 0, a, b)) or convert (x.to(dtype=ae.bool_))"
        )
    ta = a if isinstance(a, Tensor) else None
    tb = b if isinstance(b, Tensor) else None
    av = a.data if ta is not None else operand(a, like, "where", "input")
    bv = b.data if tb is not None else operand(b, like, "where", "other")
    out = xp.where(cond, av, bv)
    if ta is not None and tb is not None:
        same_device(ta, tb)
        if ta.data.dtype != tb.data.dtype:
            rd = result_dtype(ta, tb)
            if out.dtype != rd:
                out = out.astype(rd)
    elif ta is not None or tb is not None:
        t = ta if ta is not None else tb
        other = b if ta is not None else a
        assert t is not None
        rd = result_dtype(t, other)
        if out.dtype != rd:
            out = out.astype(rd)
    inputs = (ta if ta is not None else None, tb if tb is not None else None)
    return record(WhereBackward0, out, like._device, inputs, attrs=cond, bcast=True)


def _nonzero_tuple(condition: Any) -> tuple[Tensor, ...]:
    """``where(condition)``: the indices of the nonzero elements, one tensor per dimension."""
    c = (
        condition
        if condition.__class__ is Tensor
        else tensor_input(condition, "where", "condition")
    )
    xp = c._device.backend.xp
    data = c.data
    if data.ndim == 0:
        data = data.reshape(1)
    return tuple(wrap(i.astype(xp.int64, copy=False), c._device) for i in xp.nonzero(data))


def _clamp_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (a,) = s
    lo, hi = n.attrs
    mask = None
    if lo is not None:
        mask = a >= lo
    if hi is not None:
        m2 = a <= hi
        mask = m2 if mask is None else (mask & m2)
    return (F.where(mask, g, 0.0),)


ClampBackward1 = node_class("ClampBackward1", _clamp_rule, jvp=ELEMENTWISE)


def _clamp_bound(value: Any, name: str) -> None:
    """A bound of clamp that is not a Tensor: None or a real number (as PyTorch's)."""
    if value is None or value.__class__ is float or value.__class__ is int:
        return
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"clamp(): argument '{name}' must be a real number or a Tensor, not "
            f"{type(value).__name__}"
        )


def _clamp_tensors_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # PyTorch's clamp_backward_min_max: the input's gradient where min <= x <= max; a
    # bound's where it binds (max wins where min > max, as the result is max there)
    has_lo, has_hi = n.attrs
    x = s[0]
    lo = s[1] if has_lo else None
    hi = s[-1] if has_hi else None
    need = n.needs
    gx = glo = ghi = None
    if lo is not None and hi is not None:
        if need[0]:
            gx = F.where((x >= lo) & (x <= hi), g, 0.0)
        if need[1]:
            glo = F.where((x < lo) & (lo < hi), g, 0.0)
        if need[2]:
            ghi = F.where((x > hi) | (hi < lo), g, 0.0)
    elif lo is not None:
        gx = F.where(x >= lo, g, 0.0) if need[0] else None
        glo = F.where(x < lo, g, 0.0) if need[1] else None
    else:
        gx = F.where(x <= hi, g, 0.0) if need[0] else None
        ghi = F.where(x > hi, g, 0.0) if need[2] else None
    return (gx, glo, ghi)


ClampBackward0 = node_class("ClampBackward0", _clamp_tensors_rule, jvp=ELEMENTWISE)


def _clamp_tensors(a: Tensor, lo: Any, hi: Any) -> Tensor:
    """clamp with a tensor bound (numbers become constants): one node, as PyTorch's."""
    bounds = [
        None if v is None else v if isinstance(v, Tensor) else as_tensor_arg(v, a) for v in (lo, hi)
    ]
    tensors = [a] + [b for b in bounds if b is not None]
    dev = a._device
    rd: Any = None
    for b in tensors[1:]:
        same_device(a, b)
        r = result_dtype(a, b)
        rd = r if rd is None else promote_types(rd, r)
    xp = dev.backend.xp
    out = a.data
    tlo, thi = bounds
    if tlo is not None:
        out = xp.maximum(out, tlo.data)
    if thi is not None:
        out = xp.minimum(out, thi.data)
    if out.dtype != rd:
        out = out.astype(rd)
    elif out is a.data:
        out = out.copy()
    return record(
        ClampBackward0,
        out,
        dev,
        (a, tlo, thi),
        tuple(tensors),
        attrs=(tlo is not None, thi is not None),
        bcast=True,
    )


def clamp(a: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Limit values to [min, max] (either may be None, a number or a tensor).

    The gradient is 1 where min <= x <= max, else 0; tensor bounds get it where
    they bind (as PyTorch's: ``max`` wins where ``min > max``).

    Example::

        >>> import aengine as ae
        >>> ae.clamp(ae.tensor([-2.0, 0.5, 3.0]), min=-1.0, max=1.0).tolist()
        [-1.0, 0.5, 1.0]
    """
    if a.__class__ is not Tensor:
        a = tensor_input(a, "clamp")
    if min is None and max is None:
        raise ValueError("clamp needs at least one of min or max")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensors(a, min, max)
    _clamp_bound(min, "min")
    _clamp_bound(max, "max")
    xp = a._device.backend.xp
    data = a.data
    if data.dtype.kind in "biu":
        # an integer tensor with a float bound gives the default float dtype (PyTorch)
        for bound in (min, max):
            if bound is not None and not isinstance(bound, numbers.Integral):
                data = data.astype(get_default_dtype())
                break
    out = xp.clip(data, min, max)
    if out.dtype != data.dtype:
        out = out.astype(data.dtype)
    return record(ClampBackward1, out, a._device, (a,), (a,), attrs=(min, max))


# -- the table's entries (NOTE [The operator table]) --------------------------------------------
def nonzero_arr(m: Maker, *shape: int) -> Any:
    """A divisor: floats at least 0.2 from 0, integers in {-3..-1, 1..3}."""
    if m.floating:
        return m.away(*shape, low=-2.0, high=2.0, gap=0.3)
    mag = m.rng.integers(1, 4, size=shape)
    sign = np.where(m.rng.integers(0, 2, size=shape) == 0, -1, 1)
    return np.asarray(mag * sign).astype(m.dtype)


def binary_samples(
    make_a: Callable[..., Any] | None = None,
    make_b: Callable[..., Any] | None = None,
    number: float | None = 0.75,
    number_first: bool = False,
    int_number: int = 2,
) -> Callable[[Maker], Iterator[Sample]]:
    """Samples of a binary elementwise op: same shapes, broadcasting, 0-d, empty, numbers.

    ``make_a(m, *shape)``, ``make_b``: the operands' arrays (default ``m.arr``);
    ``number``: the Python number given as ``other`` (floats; ``int_number`` in
    the integer samples; None: no such sample); ``number_first``: also as
    ``input``.
    """

    def samples(m: Maker) -> Iterator[Sample]:
        ma = make_a or Maker.arr
        mb = make_b or Maker.arr
        yield Sample((ma(m, 3, 4), mb(m, 3, 4)))
        yield Sample((ma(m, 3, 4), mb(m, 4)), note="broadcast")
        yield Sample((ma(m, 3, 1), mb(m, 1, 4)), note="broadcast both")
        yield Sample((ma(m), mb(m, 2, 3)), note="0-d and 2-d")
        yield Sample((ma(m, 0, 3), mb(m, 3)), note="empty")
        num = number if m.floating else int_number
        if number is not None:
            yield Sample((ma(m, 2, 3), num), note="tensor and number")
            if number_first:
                yield Sample((num, mb(m, 2, 3)), note="number and tensor")

    return samples


def broadcast_errors(name: str) -> Callable[[Maker], Iterator[ErrorCase]]:
    """Bad calls of a binary op: shapes that do not broadcast, a str operand."""

    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield ErrorCase(
            (m.arr(2, 3), m.arr(4)),
            exc=RuntimeError if name not in _VALUE_ERROR_OPS else ValueError,
            match="broadcast",
            torch_same=name not in _VALUE_ERROR_OPS,
            note="aengine raises ValueError (numpy's) here; torch RuntimeError"
            if name in _VALUE_ERROR_OPS
            else "",
        )
        yield ErrorCase((m.arr(2, 3), "a"), exc=TypeError, match="str 'a'")

    return errors


#: the existing ops whose shape errors are numpy's ValueError (their hot paths stay as they are)
_VALUE_ERROR_OPS = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "where"}


def _pow_samples(m: Maker) -> Iterator[Sample]:
    if m.floating:
        yield Sample((m.pos(3, 4), m.arr(3, 4)), note="tensor exponent")
        yield Sample((m.pos(3, 4), m.arr(4)), note="tensor exponent, broadcast")
        yield Sample((m.pos(3, 4), 3), note="integer exponent")
        yield Sample((m.arr(3, 4), 2), note="square")
        yield Sample((m.pos(3, 4), -1.5), note="negative exponent")
        yield Sample((m.pos(3, 4), 0.5), note="fractional exponent")
        yield Sample((1.7, m.arr(3, 4)), note="number base")
        yield Sample((m.pos(), m.arr(2, 3)), note="0-d base")
    else:
        yield Sample((m.arr(3, 4, low=0, high=4), m.arr(3, 4, low=0, high=3)))
        yield Sample((m.arr(3, 4, low=-3, high=4), 3), note="integer exponent")
        yield Sample((m.arr(3, 4, low=0, high=4), 0.5), note="float exponent: floats")


def _minmax_samples(m: Maker) -> Iterator[Sample]:
    yield from binary_samples(number=None)(m)
    if m.floating:
        a = m.arr(6)
        b = m.arr(6)
        b[:2] = a[:2]
        yield Sample((a, b), note="ties share the gradient")


def _where_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.mask(3, 4), m.arr(3, 4), m.arr(3, 4)))
    yield Sample((m.mask(3, 1), m.arr(4), m.arr(3, 4)), note="broadcast")
    yield Sample((m.mask(3, 4), m.arr(3, 4), 0.5 if m.floating else 2), note="number other")
    yield Sample((m.mask(3, 4), -1.5 if m.floating else -1, m.arr(3, 4)), note="number input")
    yield Sample((m.mask(3, 4),), note="condition alone: indices")
    yield Sample((m.arr(2, 3, low=0, high=2).astype(np.int64),), note="integers alone: nonzero")


def _where_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(
        (m.arr(3), m.arr(3), m.arr(3)),
        exc=TypeError,
        match="boolean",
        torch_same=False,
        note="torch raises RuntimeError for a condition that is not bool",
    )
    yield ErrorCase((m.mask(3), m.arr(3)), exc=TypeError, match="other")


def _clamp_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    if not m.floating:
        yield Sample((x, -1, 1))
        yield Sample((x,), {"min": 0.5}, note="a float bound of an int tensor: floats")
        yield Sample((x, m.arr(4), m.arr(3, 1, low=1, high=3)), note="tensor bounds")
        return
    yield Sample((x, -0.5, 0.5))
    yield Sample((x,), {"min": -0.3}, note="min only")
    yield Sample((x,), {"max": 0.3}, note="max only")
    lo = m.arr(4, low=-1.5, high=-0.2)
    hi = m.arr(3, 1, low=0.2, high=1.5)
    yield Sample((x, lo, hi), note="tensor bounds, broadcast")
    yield Sample((x,), {"min": m.arr(4)}, note="tensor min only (not differentiable here)")
    yield Sample((x, m.arr(3, 4), m.arr(3, 4)), note="tensor bounds, some min > max")
    yield Sample((x, lo, None), note="tensor min, None max")
    yield Sample((x, None, hi), note="None min, tensor max")
    yield Sample((m.arr(), -0.5, 0.5), note="0-d")


def _clamp_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(
        (m.arr(3),),
        exc=ValueError,
        match="at least one of min or max",
        torch_same=False,
        note="torch raises RuntimeError",
    )
    yield ErrorCase((m.arr(3), "a"), exc=TypeError, match="min")


def _div_samples(m: Maker) -> Iterator[Sample]:
    yield from binary_samples(make_b=nonzero_arr, number=-1.25, number_first=True)(m)
    for mode in ("trunc", "floor"):
        yield Sample((m.arr(3, 4, low=-5, high=5), nonzero_arr(m, 4)), {"rounding_mode": mode})
        yield Sample((m.arr(3, 4, low=-5, high=5), -2), {"rounding_mode": mode}, note="number")
    yield Sample((m.arr(3, 4), nonzero_arr(m, 3, 4)), {"rounding_mode": None}, note="None: true")


def _div_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from broadcast_errors("div")(m)
    yield ErrorCase((m.arr(3), m.arr(3)), {"rounding_mode": "round"}, match="rounding_mode")


def _add_samples(m: Maker) -> Iterator[Sample]:
    yield from binary_samples(number_first=True)(m)
    yield Sample((m.arr(3, 4), m.arr(4)), {"alpha": 2}, note="alpha")
    if m.floating:
        yield Sample((m.arr(3, 4), m.arr(3, 4)), {"alpha": -0.5}, note="float alpha")


def _add_errors(name: str) -> Callable[[Maker], Iterator[ErrorCase]]:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield from broadcast_errors(name)(m)
        yield ErrorCase((m.arr(3), m.arr(3)), {"alpha": "x"}, exc=TypeError, match="alpha")

    return errors


_TIES = "Ties share the gradient equally, as torch's."

register(
    OpInfo("add", add, _add_samples, method=True, dtypes=ALL, errors=_add_errors("add")),
    OpInfo("sub", sub, _add_samples, method=True, dtypes=ALL, errors=_add_errors("sub")),
    OpInfo(
        "mul",
        mul,
        binary_samples(number_first=True),
        method=True,
        dtypes=ALL,
        errors=broadcast_errors("mul"),
    ),
    OpInfo("div", div, _div_samples, method=True, dtypes=ALL, errors=_div_errors),
    OpInfo("pow", pow, _pow_samples, method=True, dtypes=ALL, errors=broadcast_errors("pow")),
    OpInfo("neg", neg, unary_samples, method=True, dtypes=ALL),
    OpInfo(
        "maximum",
        maximum,
        _minmax_samples,
        method=True,
        dtypes=ALL,
        errors=broadcast_errors("maximum"),
        notes=_TIES,
    ),
    OpInfo(
        "minimum",
        minimum,
        _minmax_samples,
        method=True,
        dtypes=ALL,
        errors=broadcast_errors("minimum"),
        notes=_TIES,
    ),
    OpInfo(
        "where",
        where,
        _where_samples,
        dtypes=ALL,
        errors=_where_errors,
        notes="No Tensor method from the table (torch's x.where(condition, y) puts x first).",
    ),
    OpInfo("clamp", clamp, _clamp_samples, method=True, dtypes=ALL, errors=_clamp_errors),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "add": "pointwise",
        "sub": "pointwise",
        "mul": "pointwise",
        "div": "pointwise",
        "pow": "pointwise",
        "neg": "pointwise",
        "maximum": "pointwise",
        "minimum": "pointwise",
        "where": "pointwise",
        "clamp": "pointwise",
    }
)
