"""Arithmetic: + - * / ** @, neg, maximum, minimum, where, clamp.

Binary ops take Tensors or Python scalars on either side.  A scalar is kept
as a scalar, never wrapped in a tensor: numpy then
promotes it weakly, as PyTorch does.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, cast

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype, promote_types, result_dtype
from ..tensors._tensor import Tensor
from ._compare import operand
from ._core import (
    TRANSCENDENTAL,
    GradOps,
    OpNode,
    as_tensor_arg,
    node_class,
    record,
    record_one,
    same_device,
    weigh,
)

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
AddBackward0 = node_class("AddBackward0", lambda F, g, s, n: (g, g))
# Scalar operand: same name and edges as PyTorch (the scalar's edge is None).
AddScalarBackward = node_class("AddBackward0", lambda F, g, s, n: (g, None))
SubBackward0 = node_class(
    "SubBackward0", lambda F, g, s, n: (g if n.needs[0] else None, -g if n.needs[1] else None)
)
SubScalarBackward = node_class("SubBackward0", lambda F, g, s, n: (g, None))
RsubBackward1 = node_class("RsubBackward1", lambda F, g, s, n: (-g,))


def add(a: Any, other: Any) -> Tensor:
    """``a + other`` with broadcasting.

    Example::

        >>> import aengine as ae
        >>> ae.add(ae.ones(2), 1.5).tolist()
        [2.5, 2.5]
    """
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


def sub(a: Any, other: Any) -> Tensor:
    """``a - other`` with broadcasting."""
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
# ``c`` and an in-place change of ``c`` afterwards does not fail backward
# (div: ``b`` for ``a``'s gradient, both for ``b``'s).  A saved result stays
# whatever needs a gradient, as in PyTorch (pow).  ``record`` saves every
# candidate (it knows ``needs`` only once it built the node); ``keep_saved``
# then drops what the node's ``needs`` do not read (a few attribute reads per
# op, nothing when both inputs need a gradient), and the rule reads its saved
# values by ``needs``.  The in-place ops (mul_, div_) do the same.
def keep_saved(t: Tensor, reads: tuple[tuple[int, ...], tuple[int, ...]]) -> Tensor:
    """Keep in ``t``'s node only the saved values that its needed gradients read.

    ``reads``: the positions (in the saved tuple) that the gradient of the
    first input alone reads, and those the second's alone reads; when both
    inputs need a gradient everything stays (NOTE [What a binary op saves]).
    """
    node = t._fn
    if node is None:
        return t
    fn = cast(OpNode, node)
    need = fn.needs
    if need[0] and need[1]:
        return t
    keep = reads[0] if need[0] else reads[1]
    saved, versions = fn.saved, fn.versions
    if len(keep) == 1:  # kept bare (NOTE [Saved tensors of built-in ops])
        fn.saved = saved[keep[0]]
    else:
        fn.saved = tuple([saved[i] for i in keep])
    fn.versions = tuple([versions[i] for i in keep])
    return t


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


MulBackward0 = node_class("MulBackward0", _mul_rule)
MulScalarBackward = node_class("MulBackward0", lambda F, g, s, n: (g * n.attrs, None))


def mul(a: Any, other: Any) -> Tensor:
    """``a * other`` with broadcasting."""
    if a.__class__ is not Tensor:
        a, other = other, a
        if a.__class__ is not Tensor:
            a = as_tensor_arg(a)
    if other.__class__ is Tensor:
        return keep_saved(_tt(MulBackward0, a, other, a.data * other.data, (a, other)), MUL_READS)
    if other.__class__ is not float and other.__class__ is not int:
        a, other = _operands(a, other)
        if other.__class__ is Tensor:
            return keep_saved(
                _tt(MulBackward0, a, other, a.data * other.data, (a, other)), MUL_READS
            )
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


DivBackward0 = node_class("DivBackward0", _div_rule)
DivScalarBackward = node_class("DivBackward0", lambda F, g, s, n: (g / n.attrs, None))
# PyTorch computes number / x as x.reciprocal() * number: a MulBackward0 whose
# next node is a ReciprocalBackward0; aengine folds both into this one node
RdivBackward1 = node_class("MulBackward0", _rdiv_rule)


def div(a: Any, other: Any) -> Tensor:
    """``a / other`` (true division) with broadcasting."""
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
        return keep_saved(_tt(DivBackward0, a, other, out, (a, other)), DIV_READS)
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


# -- neg ---------------------------------------------------------------------------------
NegBackward0 = node_class("NegBackward0", lambda F, g, s, n: (-g,))


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


PowBackward0 = node_class("PowBackward0", _pow_scalar_rule)
PowBackward1 = node_class("PowBackward1", _pow_rule)
PowBackward2 = node_class("PowBackward2", _rpow_rule)


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


MaximumBackward0 = node_class("MaximumBackward0", _minmax_rule)
MinimumBackward0 = node_class("MinimumBackward0", _minmax_rule)


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


WhereBackward0 = node_class("WhereBackward0", _where_rule)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Pick ``a`` where ``condition`` holds, else ``b`` (broadcasting all three)."""
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


ClampBackward1 = node_class("ClampBackward1", _clamp_rule)


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


ClampBackward0 = node_class("ClampBackward0", _clamp_tensors_rule)


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
