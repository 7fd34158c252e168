"""Binary elementwise ops beyond the arithmetic of _arith.py (atan2, hypot, lerp...).

Each is a primitive: one node whose rule (written against ``F``, NOTE [Operator
rules] in _core.py) follows PyTorch's derivative formula, so that derivatives of
every order equal PyTorch's.  Operands broadcast; a Python number is a constant
of the dtype it gives with the tensor operand (``tensor_operands``), as PyTorch's
wrapped numbers.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from typing import Any, cast

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype
from ..tensors._tensor import Tensor
from ._arith import (
    binary_samples,
    broadcast_error,
    broadcast_errors,
    check_int_divisor,
    div,
    nonzero_arr,
    promoted,
    tensor_operands,
)
from ._core import ELEMENTWISE, TRANSCENDENTAL, GradOps, Rule, node_class, record, weigh
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register
from ._unary import INT_TOL

__all__ = [
    "floor_divide",
    "remainder",
    "fmod",
    "atan2",
    "hypot",
    "fmax",
    "fmin",
    "logaddexp",
    "logaddexp2",
    "xlogy",
    "lerp",
    "addcmul",
    "addcdiv",
    "copysign",
]


def _cast(t: Tensor, dtype: Any) -> Any:
    d = t.data
    return d if d.dtype == dtype else d.astype(dtype)


def _binary(
    name: str,
    fwd: Any,
    rule: Rule,
    ints: str,
    doc: str,
    save_output: bool = False,
    special: bool = False,
    cost: int = 1,
) -> Callable[[Any, Any], Tensor]:
    """Define a binary elementwise op: ``fwd(xp, a, b)`` on arrays of the result dtype.

    ``rule(F, g, (a, b[, out]), node)`` gives both gradients (None where
    ``node.needs`` says none is wanted); ``save_output`` saves the result
    after the inputs.  ``ints``: what integer operands give: "float" (the
    default float dtype), "keep" (the integer dtype), "divide" (the integer
    dtype, and a zero divisor raises as PyTorch's), "error" (no integer kernel
    in PyTorch: NotImplementedError).  ``special``: ``fwd`` gets the backend's
    special functions instead of ``xp``.
    """
    cls = node_class(f"{name.capitalize()}Backward0", rule, jvp=ELEMENTWISE)

    def op(input: Any, other: Any) -> Tensor:
        ts = tensor_operands(name, (input, other), ("input", "other"))
        a, b = ts
        rd = promoted(ts)
        if rd.kind in "biu":
            if ints == "float":
                rd = get_default_dtype()
            elif ints == "error":
                raise NotImplementedError(
                    f"{name}() is not implemented for {rd} tensors (as in PyTorch); "
                    "convert first: x.to(ae.float32)"
                )
            elif ints == "divide":
                check_int_divisor(name, rd, b)
        backend = a._device.backend
        try:
            out = fwd(backend.special if special else backend.xp, _cast(a, rd), _cast(b, rd))
        except ValueError:
            raise broadcast_error(name, ts) from None
        if out.dtype != rd:
            out = out.astype(rd)
        t = record(cls, out, a._device, (a, b), (a, b), save_output=save_output, bcast=True)
        return weigh(t, cost) if cost != 1 else t

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


# -- the rules (PyTorch's formulas, derivatives.yaml) -------------------------------------------
def _atan2_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    r = g / (a * a + b * b)
    return (r * b if n.needs[0] else None, -r * a if n.needs[1] else None)


def _hypot_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b, out = s
    r = g / out
    return (r * a if n.needs[0] else None, r * b if n.needs[1] else None)


def _fmax_fmin_rule(is_max: bool) -> Rule:
    def rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
        # the input wins ties and where the other is NaN
        a, b = s
        wins = ((a >= b) if is_max else (a <= b)) | (b != b)
        return (
            F.where(wins, g, 0.0) if n.needs[0] else None,
            F.where(wins, 0.0, g) if n.needs[1] else None,
        )

    return rule


def _logaddexp_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    return (
        g / (1.0 + F.exp(b - a)) if n.needs[0] else None,
        g / (1.0 + F.exp(a - b)) if n.needs[1] else None,
    )


def _logaddexp2_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    return (
        g / (1.0 + 2.0 ** (b - a)) if n.needs[0] else None,
        g / (1.0 + 2.0 ** (a - b)) if n.needs[1] else None,
    )


def _xlogy_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    return (
        g * F.where(a != 0, F.log(b), 0.0) if n.needs[0] else None,
        g * a / b if n.needs[1] else None,
    )


def _copysign_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, _b, out = s
    zero = a == 0
    return (
        g * F.where(zero, 0.0, out / F.where(zero, 1.0, a)) if n.needs[0] else None,
        F.zeros_like(g) if n.needs[1] else None,
    )


def _remainder_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    return (g if n.needs[0] else None, -g * F.div_rounded(a, b, "floor") if n.needs[1] else None)


def _fmod_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    return (g if n.needs[0] else None, -g * F.div_rounded(a, b, "trunc") if n.needs[1] else None)


_T = TRANSCENDENTAL

atan2 = _binary(
    "atan2",
    lambda xp, a, b: xp.arctan2(a, b),
    _atan2_rule,
    "float",
    cost=_T,
    doc="""The angle of the point (other, input): arctan(input / other) in the right quadrant.

    Example::

        >>> import aengine as ae
        >>> ae.atan2(ae.tensor([0.0]), ae.tensor([1.0])).tolist()
        [0.0]
    """,
)
hypot = _binary(
    "hypot",
    lambda xp, a, b: xp.hypot(a, b),
    _hypot_rule,
    "error",
    save_output=True,
    doc="""sqrt(input ** 2 + other ** 2) of each pair of elements, without overflow.

    Example::

        >>> import aengine as ae
        >>> ae.hypot(ae.tensor([3.0]), ae.tensor([4.0])).tolist()
        [5.0]
    """,
)
fmax = _binary(
    "fmax",
    lambda xp, a, b: xp.fmax(a, b),
    _fmax_fmin_rule(True),
    "keep",
    doc="""The elementwise maximum, ignoring NaN (a NaN loses to a number).

    The gradient goes to ``input`` where it wins or ties (or ``other`` is
    NaN), to ``other`` elsewhere, as PyTorch's.

    Example::

        >>> import aengine as ae
        >>> ae.fmax(ae.tensor([1.0, float("nan")]), ae.tensor([2.0, 3.0])).tolist()
        [2.0, 3.0]
    """,
)
fmin = _binary(
    "fmin",
    lambda xp, a, b: xp.fmin(a, b),
    _fmax_fmin_rule(False),
    "keep",
    doc="""The elementwise minimum, ignoring NaN (a NaN loses to a number).

    Example::

        >>> import aengine as ae
        >>> ae.fmin(ae.tensor([1.0, float("nan")]), ae.tensor([2.0, 3.0])).tolist()
        [1.0, 3.0]
    """,
)
logaddexp = _binary(
    "logaddexp",
    lambda xp, a, b: xp.logaddexp(a, b),
    _logaddexp_rule,
    "error",
    cost=_T,
    doc="""log(exp(input) + exp(other)) of each pair, computed without overflow.

    Example::

        >>> import aengine as ae
        >>> ae.logaddexp(ae.tensor([0.0]), ae.tensor([0.0])).tolist() == [float(ae.log(ae.tensor(2.0)))]
        True
    """,
)
logaddexp2 = _binary(
    "logaddexp2",
    lambda xp, a, b: xp.logaddexp2(a, b),
    _logaddexp2_rule,
    "error",
    cost=_T,
    doc="""log2(2 ** input + 2 ** other) of each pair, computed without overflow.

    Example::

        >>> import aengine as ae
        >>> ae.logaddexp2(ae.tensor([1.0]), ae.tensor([1.0])).tolist()
        [2.0]
    """,
)
xlogy = _binary(
    "xlogy",
    lambda sp, a, b: sp.xlogy(a, b),
    _xlogy_rule,
    "float",
    special=True,
    cost=_T,
    doc="""input * log(other) of each pair, 0 where input is 0 (unless other is NaN).

    Example::

        >>> import aengine as ae
        >>> ae.xlogy(ae.tensor([0.0, 2.0]), ae.tensor([0.0, 1.0])).tolist()
        [0.0, 0.0]
    """,
)
copysign = _binary(
    "copysign",
    lambda xp, a, b: xp.copysign(a, b),
    _copysign_rule,
    "float",
    save_output=True,
    doc="""The magnitude of ``input`` with the sign of ``other`` (integers give floats).

    The gradient of ``other`` is zero, as PyTorch's.

    Example::

        >>> import aengine as ae
        >>> ae.copysign(ae.tensor([1.5, -2.0]), -1.0).tolist()
        [-1.5, -2.0]
    """,
)
remainder = _binary(
    "remainder",
    lambda xp, a, b: xp.remainder(a, b),
    _remainder_rule,
    "divide",
    doc="""The remainder of input / other with the sign of the divisor (Python's ``%``).

    Example::

        >>> import aengine as ae
        >>> ae.remainder(ae.tensor([-3, 3]), 2).tolist()
        [1, 1]
    """,
)
fmod = _binary(
    "fmod",
    lambda xp, a, b: xp.fmod(a, b),
    _fmod_rule,
    "divide",
    doc="""The remainder of input / other with the sign of the dividend (C's ``fmod``).

    Example::

        >>> import aengine as ae
        >>> ae.fmod(ae.tensor([-3, 3]), 2).tolist()
        [-1, 1]
    """,
)


def floor_divide(input: Any, other: Any) -> Tensor:
    """input / other rounded down: ``div(input, other, rounding_mode="floor")``.

    Integers stay integers.  The gradient is zero (PyTorch defines none and
    raises in backward).

    Example::

        >>> import aengine as ae
        >>> ae.floor_divide(ae.tensor([7, -7]), 2).tolist()
        [3, -4]
    """
    if not isinstance(input, Tensor):
        input = tensor_input(input, "floor_divide")
    return div(input, other, rounding_mode="floor")


# -- lerp, addcmul, addcdiv (three operands) -----------------------------------------------------
def _lerp_scalar_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    w = n.attrs
    return (g * (1.0 - w) if n.needs[0] else None, g * w if n.needs[1] else None)


def _lerp_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, e, w = s
    need = n.needs
    return (
        g * (1.0 - w) if need[0] else None,
        g * w if need[1] else None,
        g * (e - a) if need[2] else None,
    )


LerpBackward0 = node_class("LerpBackward0", _lerp_scalar_rule, jvp=ELEMENTWISE)
LerpBackward1 = node_class("LerpBackward1", _lerp_rule, jvp=ELEMENTWISE)


def _same_float_dtype(name: str, x: Tensor, others: tuple[tuple[str, Tensor], ...]) -> None:
    for arg, t in others:
        if t.data.dtype != x.data.dtype:
            raise RuntimeError(
                f"{name}(): expected dtype {x.data.dtype} for `{arg}` but got dtype "
                f"{t.data.dtype}; convert it first (t.to(x.dtype))"
            )
    if x.data.dtype.kind not in "fc":
        raise NotImplementedError(
            f"{name}() is not implemented for {x.data.dtype} tensors (as in PyTorch); "
            "convert first: x.to(ae.float32)"
        )


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """Linear interpolation input + weight * (end - input); ``weight`` a number or a tensor.

    Computed as PyTorch does (from ``end`` where |weight| >= 0.5, exact at
    weight = 1); operands broadcast and must share one floating dtype.

    Example::

        >>> import aengine as ae
        >>> ae.lerp(ae.tensor([0.0, 1.0]), ae.tensor([10.0, 3.0]), 0.5).tolist()
        [5.0, 2.0]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "lerp")
    e = end if end.__class__ is Tensor else tensor_input(end, "lerp", "end")
    xp = x._device.backend.xp
    if isinstance(weight, Tensor):
        _same_float_dtype("lerp", x, (("end", e), ("weight", weight)))
        ts = tensor_operands("lerp", (x, e, weight), ("input", "end", "weight"))
        w = weight.data
        try:
            d = e.data - x.data
            out = xp.where(xp.abs(w) < 0.5, x.data + w * d, e.data - d * (1.0 - w))
        except ValueError:
            raise broadcast_error("lerp", ts) from None
        return record(LerpBackward1, out, x._device, (x, e, weight), (x, e, weight), bcast=True)
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise TypeError(
            f"lerp(): argument 'weight' must be a number or a Tensor, not {type(weight).__name__}"
        )
    _same_float_dtype("lerp", x, (("end", e),))
    ts = tensor_operands("lerp", (x, e), ("input", "end"))
    w = float(weight)
    try:
        d = e.data - x.data
        out = x.data + w * d if -0.5 < w < 0.5 else e.data - d * (1.0 - w)
    except ValueError:
        raise broadcast_error("lerp", ts) from None
    return record(LerpBackward0, out, x._device, (x, e), attrs=w, bcast=True)


def _addcmul_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    t1, t2 = s
    v = n.attrs
    need = n.needs
    return (
        g if need[0] else None,
        g * t2 * v if need[1] else None,
        g * t1 * v if need[2] else None,
    )


def _addcdiv_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    t1, t2 = s
    v = n.attrs
    need = n.needs
    return (
        g if need[0] else None,
        g * v / t2 if need[1] else None,
        -g * v * t1 / (t2 * t2) if need[2] else None,
    )


AddcmulBackward0 = node_class("AddcmulBackward0", _addcmul_rule, jvp=ELEMENTWISE)
AddcdivBackward0 = node_class("AddcdivBackward0", _addcdiv_rule, jvp=ELEMENTWISE)


def _addc(name: str, cls: Any, input: Any, t1: Any, t2: Any, value: Any) -> Tensor:
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"{name}(): argument 'value' must be a number, not {type(value).__name__}")
    x = input if input.__class__ is Tensor else tensor_input(input, name)
    a = t1 if t1.__class__ is Tensor else tensor_input(t1, name, "tensor1")
    b = t2 if t2.__class__ is Tensor else tensor_input(t2, name, "tensor2")
    ts = [x, a, b]
    tensor_operands(name, (x, a, b), ("input", "tensor1", "tensor2"))  # (one device)
    is_div = name == "addcdiv"
    if is_div and a.data.dtype.kind in "biu" and b.data.dtype.kind in "biu":
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported (as in PyTorch); "
            "use input + value * (tensor1 / tensor2) or convert the tensors to floats"
        )
    rd = promoted(ts)
    if rd.kind in "biu" and not isinstance(value, numbers.Integral):
        value = int(cast(Any, value))  # as PyTorch: the value in the integer dtype
    try:
        if is_div:
            out = _cast(x, rd) + value * _cast(a, rd) / _cast(b, rd)
        else:
            out = _cast(x, rd) + value * _cast(a, rd) * _cast(b, rd)
    except ValueError:
        raise broadcast_error(name, ts) from None
    if out.dtype != rd:
        out = out.astype(rd)
    return record(cls, out, x._device, (x, a, b), (a, b), attrs=value, bcast=True)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
    """input + value * tensor1 * tensor2, elementwise with broadcasting.

    Example::

        >>> import aengine as ae
        >>> ae.addcmul(ae.tensor([1.0]), ae.tensor([2.0]), ae.tensor([3.0]), value=0.5).tolist()
        [4.0]
    """
    return _addc("addcmul", AddcmulBackward0, input, tensor1, tensor2, value)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: float = 1) -> Tensor:
    """input + value * tensor1 / tensor2, elementwise with broadcasting (floats only).

    Example::

        >>> import aengine as ae
        >>> ae.addcdiv(ae.tensor([1.0]), ae.tensor([3.0]), ae.tensor([2.0]), value=2).tolist()
        [4.0]
    """
    return _addc("addcdiv", AddcdivBackward0, input, tensor1, tensor2, value)


# -- the table's entries (NOTE [The operator table]) --------------------------------------------
def _pos(m: Maker, *shape: int) -> Any:
    return m.pos(*shape, low=0.5 if m.floating else 1, high=3.0)


def _fminmax_samples(m: Maker) -> Iterator[Sample]:
    yield from binary_samples(number=None)(m)
    if m.floating:
        a, b = m.arr(6), m.arr(6)
        a[0] = float("nan")
        b[1] = float("nan")
        a[2] = b[2] = float("nan")
        yield Sample((a, b), note="NaN loses")
        a, b = m.arr(4), m.arr(4)
        b[:2] = a[:2]
        yield Sample((a, b), note="ties: the gradient goes to input")


def _lerp_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(3, 4), 0.3))
    yield Sample((m.arr(3, 4), m.arr(4), 0.8), note="weight >= 0.5, broadcast")
    yield Sample((m.arr(3, 4), m.arr(3, 4), m.arr(3, 4, low=-0.5, high=1.5)), note="tensor weight")
    yield Sample((m.arr(3, 1), m.arr(4), m.arr(3, 4)), note="tensor weight, broadcast")
    yield Sample((m.arr(), m.arr(), 1.0), note="0-d, weight 1")


def _lerp_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), m.arr(3).astype("float64"), 0.5), match="expected dtype")
    yield ErrorCase((m.arr(3), m.arr(3), "w"), exc=TypeError, match="weight")


def _addc_samples(div_: bool) -> Callable[[Maker], Iterator[Sample]]:
    def samples(m: Maker) -> Iterator[Sample]:
        mk = nonzero_arr if div_ else Maker.arr
        yield Sample((m.arr(3, 4), m.arr(3, 4), mk(m, 3, 4)))
        yield Sample((m.arr(3, 4), m.arr(4), mk(m, 3, 1)), {"value": 0.5}, note="value, broadcast")
        yield Sample((m.arr(), m.arr(2), mk(m, 2)), {"value": -2}, note="0-d input")

    return samples


def _addcdiv_errors(m: Maker) -> Iterator[ErrorCase]:
    ints = m.idx(3, high=4) + 1
    yield ErrorCase((ints, ints, ints), match="Integer division")
    yield ErrorCase((m.arr(3), m.arr(3), m.arr(3)), {"value": "v"}, exc=TypeError, match="value")


def _addcmul_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), m.arr(4), m.arr(3)), match="broadcast")
    yield ErrorCase((m.arr(3), m.arr(3), m.arr(3)), {"value": "v"}, exc=TypeError, match="value")


def _int_errors(name: str) -> Callable[[Maker], Iterator[ErrorCase]]:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield from broadcast_errors(name)(m)
        yield ErrorCase((m.idx(3, high=4), m.idx(3, high=4)), exc=NotImplementedError, match=name)

    return errors


def _int_zero_division(name: str) -> Callable[[Maker], Iterator[ErrorCase]]:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield from broadcast_errors(name)(m)
        yield ErrorCase(
            (m.idx(3, high=4), m.idx(3, high=1)),
            match="ZeroDivisionError",
            note="integer division by zero",
        )

    return errors


_REM = binary_samples(make_a=lambda m, *s: m.arr(*s, low=-5, high=5), make_b=nonzero_arr)

register(
    OpInfo(
        "floor_divide",
        floor_divide,
        binary_samples(make_b=nonzero_arr, number=-1.5),
        method=True,
        dtypes=ALL,
        grad=False,
        errors=_int_zero_division("floor_divide"),
        notes="Its gradient is zero (torch's backward raises: not implemented).",
    ),
    OpInfo(
        "remainder",
        remainder,
        _REM,
        method=True,
        dtypes=ALL,
        errors=_int_zero_division("remainder"),
    ),
    OpInfo("fmod", fmod, _REM, method=True, dtypes=ALL, errors=_int_zero_division("fmod")),
    OpInfo(
        "atan2",
        atan2,
        binary_samples(make_b=nonzero_arr, number=None),
        method=True,
        dtypes=ALL,
        tol=INT_TOL,
        errors=broadcast_errors("atan2"),
    ),
    OpInfo(
        "hypot",
        hypot,
        binary_samples(make_a=nonzero_arr, number=None),
        method=True,
        errors=_int_errors("hypot"),
    ),
    OpInfo(
        "fmax", fmax, _fminmax_samples, method=True, dtypes=ALL, errors=broadcast_errors("fmax")
    ),
    OpInfo(
        "fmin", fmin, _fminmax_samples, method=True, dtypes=ALL, errors=broadcast_errors("fmin")
    ),
    OpInfo(
        "logaddexp",
        logaddexp,
        binary_samples(number=None),
        method=True,
        errors=_int_errors("logaddexp"),
    ),
    OpInfo(
        "logaddexp2",
        logaddexp2,
        binary_samples(number=None),
        method=True,
        errors=_int_errors("logaddexp2"),
    ),
    OpInfo(
        "xlogy",
        xlogy,
        binary_samples(make_a=nonzero_arr, make_b=_pos, number=2.5, number_first=True),
        method=True,
        dtypes=ALL,
        tol=INT_TOL,
        errors=broadcast_errors("xlogy"),
    ),
    OpInfo(
        "copysign",
        copysign,
        binary_samples(make_a=nonzero_arr, make_b=nonzero_arr, number=-1.0),
        method=True,
        dtypes=ALL,
        errors=broadcast_errors("copysign"),
    ),
    OpInfo("lerp", lerp, _lerp_samples, method=True, errors=_lerp_errors),
    OpInfo(
        "addcmul",
        addcmul,
        _addc_samples(False),
        method=True,
        dtypes=ALL,
        errors=_addcmul_errors,
    ),
    OpInfo("addcdiv", addcdiv, _addc_samples(True), method=True, errors=_addcdiv_errors),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "floor_divide": "pointwise",
        "remainder": "pointwise",
        "fmod": "pointwise",
        "atan2": "pointwise",
        "hypot": "pointwise",
        "fmax": "pointwise",
        "fmin": "pointwise",
        "logaddexp": "pointwise",
        "logaddexp2": "pointwise",
        "xlogy": "pointwise",
        "copysign": "pointwise",
        "lerp": "pointwise",
        "addcmul": "pointwise",
        "addcdiv": "pointwise",
    }
)
