"""Elementwise functions of one tensor beyond _unary.py's: powers and logarithms in other
bases, trigonometric and hyperbolic functions and their inverses, special functions (erf,
lgamma, digamma, polygamma), rounding, nan_to_num, clamp_min / clamp_max / clip, isnan.

Each is a primitive (one node, its rule beside it, written against ``F``: NOTE [Operator
rules] in _core.py), so that derivatives of every order follow.  Special functions come
from the backend (``backend.special``: scipy.special on the cpu, cupyx.scipy.special on
GPUs).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from typing import Any

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype
from ..tensors._tensor import Tensor
from . import _arith
from ._core import ELEMENTWISE, TRANSCENDENTAL, GradOps, node_class, record_one, wrap
from ._cpu_kernels import erf32, fast
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register
from ._unary import INT_TOL, _unary, set_doc, unary_samples

__all__ = [
    "exp2",
    "log2",
    "log10",
    "rsqrt",
    "reciprocal",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "logit",
    "erf",
    "erfc",
    "erfinv",
    "lgamma",
    "digamma",
    "polygamma",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "sgn",
    "nan_to_num",
    "clamp_min",
    "clamp_max",
    "clip",
    "isnan",
    "isinf",
    "isfinite",
]

_T = TRANSCENDENTAL
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0


def _zero_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    """The gradient of a piecewise constant function (floor, sign...): zeros, as PyTorch's."""
    return (F.zeros_like(g),)


# -- powers, logarithms -------------------------------------------------------------------------
exp2 = _unary(
    "exp2", lambda xp, a: xp.exp2(a), lambda F, g, s, n: (g * s[0] * _LN2,), "output", cost=_T
)
log2 = _unary(
    "log2", lambda xp, a: xp.log2(a), lambda F, g, s, n: (g / (s[0] * _LN2),), "input", cost=_T
)
log10 = _unary(
    "log10", lambda xp, a: xp.log10(a), lambda F, g, s, n: (g / (s[0] * _LN10),), "input", cost=_T
)
# PyTorch: -0.5 * grad * result ** 3
rsqrt = _unary(
    "rsqrt",
    lambda xp, a: xp.reciprocal(xp.sqrt(a)),
    lambda F, g, s, n: (g * (s[0] * s[0] * s[0]) * -0.5,),
    "output",
)
reciprocal = _unary(
    "reciprocal",
    lambda xp, a: xp.reciprocal(a),
    lambda F, g, s, n: (-g * (s[0] * s[0]),),
    "output",
)

# -- trigonometric and hyperbolic functions ------------------------------------------------
tan = _unary(
    "tan", lambda xp, a: xp.tan(a), lambda F, g, s, n: (g * (1.0 + s[0] * s[0]),), "output", cost=_T
)
asin = _unary(
    "asin",
    lambda xp, a: xp.arcsin(a),
    lambda F, g, s, n: (g / F.sqrt(1.0 - s[0] * s[0]),),
    "input",
    cost=_T,
)
acos = _unary(
    "acos",
    lambda xp, a: xp.arccos(a),
    lambda F, g, s, n: (-g / F.sqrt(1.0 - s[0] * s[0]),),
    "input",
    cost=_T,
)
atan = _unary(
    "atan",
    lambda xp, a: xp.arctan(a),
    lambda F, g, s, n: (g / (1.0 + s[0] * s[0]),),
    "input",
    cost=_T,
)
sinh = _unary(
    "sinh", lambda xp, a: xp.sinh(a), lambda F, g, s, n: (g * F.cosh(s[0]),), "input", cost=_T
)
cosh = _unary(
    "cosh", lambda xp, a: xp.cosh(a), lambda F, g, s, n: (g * F.sinh(s[0]),), "input", cost=_T
)
asinh = _unary(
    "asinh",
    lambda xp, a: xp.arcsinh(a),
    lambda F, g, s, n: (g / F.sqrt(s[0] * s[0] + 1.0),),
    "input",
    cost=_T,
)
acosh = _unary(
    "acosh",
    lambda xp, a: xp.arccosh(a),
    lambda F, g, s, n: (g / F.sqrt(s[0] * s[0] - 1.0),),
    "input",
    cost=_T,
)
atanh = _unary(
    "atanh",
    lambda xp, a: xp.arctanh(a),
    lambda F, g, s, n: (g / (1.0 - s[0] * s[0]),),
    "input",
    cost=_T,
)


# -- special functions ----------------------------------------------------------------------
def _erf_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x = s[0]
    if x.__class__ is Tensor or x.ndim == 0:
        return (g * F.exp(-(x * x)) * _TWO_OVER_SQRT_PI,)
    # on arrays: one temporary, owned by this rule, updated in place (5 passes, 1 allocation)
    xp = n.dev.backend.xp
    d = xp.multiply(x, x)
    xp.negative(d, out=d)
    xp.exp(d, out=d)
    d *= _TWO_OVER_SQRT_PI
    d *= g
    return (d,)


erf = _unary(
    "erf",
    lambda sp, a: erf32(a) if fast(a) else sp.erf(a),  # (NOTE [A float32 erf for numpy])
    _erf_rule,
    "input",
    special=True,
    cost=_T,
)
erfc = _unary(
    "erfc",
    lambda sp, a: sp.erfc(a),
    lambda F, g, s, n: (g * F.exp(-(s[0] * s[0])) * -_TWO_OVER_SQRT_PI,),
    "input",
    special=True,
    cost=_T,
)
# d/dx erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x) ** 2), from the saved result
erfinv = _unary(
    "erfinv",
    lambda sp, a: sp.erfinv(a),
    lambda F, g, s, n: (g * F.exp(s[0] * s[0]) * _SQRT_PI_OVER_TWO,),
    "output",
    special=True,
    cost=_T,
)
lgamma = _unary(
    "lgamma",
    lambda sp, a: sp.gammaln(a),
    lambda F, g, s, n: (g * F.digamma(s[0]),),
    "input",
    special=True,
    cost=_T,
)
digamma = _unary(
    "digamma",
    lambda sp, a: sp.digamma(a),
    lambda F, g, s, n: (g * F.polygamma(1, s[0]),),
    "input",
    special=True,
    cost=_T,
)

PolygammaBackward0 = node_class(
    "PolygammaBackward0", lambda F, g, s, n: (g * F.polygamma(n.attrs + 1, s[0]),), jvp=ELEMENTWISE
)


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of digamma at each element (``n`` = 0: digamma itself).

    Example::

        >>> import aengine as ae
        >>> round(ae.polygamma(1, ae.tensor([1.0])).item(), 4)  # pi ** 2 / 6
        1.6449
    """
    if n.__class__ is not int:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"polygamma(): argument 'n' must be an int, not {type(n).__name__}")
        n = int(n)
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n (got n={n})")
    x = input if input.__class__ is Tensor else tensor_input(input, "polygamma")
    dev = x._device
    data = x.data
    if data.dtype.kind in "biu":
        data = data.astype(get_default_dtype())
    out = (dev._backend or dev.backend).raw.polygamma(n, data)
    t = record_one(PolygammaBackward0, out, dev, x, 1, n, save_input=True)
    if t._fn is not None:
        t._fn.numel *= _T
    return t


LogitBackward0 = node_class(
    "LogitBackward0", lambda F, g, s, n: (_logit_grad(F, g, s[0], n.attrs),), jvp=ELEMENTWISE
)


def _logit_grad(F: GradOps, g: Any, x: Any, eps: float | None) -> Any:
    """PyTorch's logit_backward: 0 outside [eps, 1 - eps]; NaN outside [0, 1] without eps."""
    d = g / (x * (1.0 - x))
    if eps is None:
        return F.where((x < 0.0) | (x > 1.0), math.nan, d)
    return F.where((x < eps) | (x > 1.0 - eps), 0.0, d)


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(x / (1 - x)) of each element; with ``eps``, x is clamped to [eps, 1 - eps] first.

    Example::

        >>> import aengine as ae
        >>> ae.logit(ae.tensor([0.5])).tolist()
        [0.0]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "logit")
    if eps is not None and not isinstance(eps, numbers.Real):
        raise TypeError(
            f"logit(): argument 'eps' must be a float or None, not {type(eps).__name__}"
        )
    dev = x._device
    data = x.data
    if data.dtype.kind in "biu":
        data = data.astype(get_default_dtype())
    xp = (dev._backend or dev.backend).xp
    z = data if eps is None else xp.clip(data, eps, 1.0 - eps)
    out = xp.log(z / (1.0 - z))
    if out.dtype != data.dtype:
        out = out.astype(data.dtype)
    eps_attr = None if eps is None else float(eps)
    t = record_one(LogitBackward0, out, dev, x, 1, eps_attr, save_input=True)
    if t._fn is not None:
        t._fn.numel *= _T
    return t


# -- rounding -----------------------------------------------------------------------------------
floor = _unary(
    "floor", lambda xp, a: xp.floor(a), _zero_rule, "none", ints="same", node="FloorBackward0"
)
ceil = _unary(
    "ceil", lambda xp, a: xp.ceil(a), _zero_rule, "none", ints="same", node="CeilBackward0"
)
trunc = _unary(
    "trunc", lambda xp, a: xp.trunc(a), _zero_rule, "none", ints="same", node="TruncBackward0"
)
frac = _unary("frac", lambda xp, a: a - xp.trunc(a), lambda F, g, s, n: (g,), "none", ints="error")
sgn = _unary("sgn", lambda xp, a: xp.sign(a), _zero_rule, "none", floating=False)

RoundBackward0 = node_class("RoundBackward0", _zero_rule, jvp=ELEMENTWISE)
RoundBackward1 = node_class("RoundBackward1", _zero_rule, jvp=ELEMENTWISE)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Round each element to the nearest integer (``decimals``: to that many decimal places).

    Halves round to even, as PyTorch's; the gradient is zero.

    Example::

        >>> import aengine as ae
        >>> ae.round(ae.tensor([0.5, 1.5, 2.71828]), decimals=0).tolist()
        [0.0, 2.0, 3.0]
        >>> ae.round(ae.tensor([2.71828]), decimals=2).tolist()[0] == float(ae.tensor(2.72))
        True
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "round")
    if decimals.__class__ is not int:
        if isinstance(decimals, bool) or not isinstance(decimals, numbers.Integral):
            raise TypeError(
                f"round(): argument 'decimals' must be an int, not {type(decimals).__name__}"
            )
        decimals = int(decimals)
    dev = x._device
    data = x.data
    if data.dtype.kind in "biu":
        if decimals:
            raise NotImplementedError(
                f"round() with decimals is not implemented for {data.dtype} tensors "
                "(as in PyTorch); convert first: x.to(ae.float32)"
            )
        return wrap(data.copy(), dev)
    xp = (dev._backend or dev.backend).xp
    if decimals == 0:
        return record_one(RoundBackward0, xp.rint(data), dev, x)
    out = xp.round(data, decimals)
    return record_one(RoundBackward1, out, dev, x)


# -- nan_to_num, isnan, isinf, isfinite -----------------------------------------------------------
NanToNumBackward0 = node_class(
    "NanToNumBackward0",
    lambda F, g, s, n: (F.where(F.abs(s[0]) < math.inf, g, 0.0),),
    jvp=ELEMENTWISE,
)


def _number_or_none(value: Any, fn: str, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{fn}(): argument '{name}' must be a float or None, not {type(value).__name__}"
        )
    return float(value)


def nan_to_num(
    input: Tensor,
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
) -> Tensor:
    """Replace NaN by ``nan``, +inf by ``posinf``, -inf by ``neginf`` (default: the dtype's extremes).

    The gradient passes where the input is finite and is zero elsewhere.

    Example::

        >>> import aengine as ae
        >>> ae.nan_to_num(ae.tensor([float("nan"), 1.0, float("-inf")]), neginf=-9.0).tolist()
        [0.0, 1.0, -9.0]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "nan_to_num")
    nan_v = _number_or_none(nan, "nan_to_num", "nan")
    pos = _number_or_none(posinf, "nan_to_num", "posinf")
    neg = _number_or_none(neginf, "nan_to_num", "neginf")
    dev = x._device
    data = x.data
    if data.dtype.kind in "biu":
        return wrap(data.copy(), dev)
    xp = (dev._backend or dev.backend).xp
    out = xp.nan_to_num(data, nan=0.0 if nan_v is None else nan_v, posinf=pos, neginf=neg)
    return record_one(NanToNumBackward0, out, dev, x, save_input=True)


def isnan(input: Tensor) -> Tensor:
    """True where an element is NaN (a bool tensor, no gradient).

    Example::

        >>> import aengine as ae
        >>> ae.isnan(ae.tensor([1.0, float("nan")])).tolist()
        [False, True]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "isnan")
    return wrap(x._device.backend.xp.isnan(x.data), x._device)


def isinf(input: Tensor) -> Tensor:
    """True where an element is +inf or -inf (a bool tensor, no gradient).

    Example::

        >>> import aengine as ae
        >>> ae.isinf(ae.tensor([1.0, float("-inf")])).tolist()
        [False, True]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "isinf")
    return wrap(x._device.backend.xp.isinf(x.data), x._device)


def isfinite(input: Tensor) -> Tensor:
    """True where an element is neither NaN nor infinite (a bool tensor, no gradient).

    Example::

        >>> import aengine as ae
        >>> ae.isfinite(ae.tensor([1.0, float("inf"), float("nan")])).tolist()
        [True, False, False]
    """
    x = input if input.__class__ is Tensor else tensor_input(input, "isfinite")
    return wrap(x._device.backend.xp.isfinite(x.data), x._device)


# -- clamp_min, clamp_max, clip -----------------------------------------------------------------
def clamp_min(input: Tensor, min: Any) -> Tensor:
    """Limit each element to at least ``min`` (a number or a tensor): ``clamp(input, min=min)``.

    Example::

        >>> import aengine as ae
        >>> ae.clamp_min(ae.tensor([-1.0, 2.0]), 0.0).tolist()
        [0.0, 2.0]
    """
    if min is None:
        raise TypeError("clamp_min(): argument 'min' must be a number or a Tensor, not None")
    return _arith.clamp(input, min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """Limit each element to at most ``max`` (a number or a tensor): ``clamp(input, max=max)``.

    Example::

        >>> import aengine as ae
        >>> ae.clamp_max(ae.tensor([-1.0, 2.0]), 0.0).tolist()
        [-1.0, 0.0]
    """
    if max is None:
        raise TypeError("clamp_max(): argument 'max' must be a number or a Tensor, not None")
    return _arith.clamp(input, max=max)


def clip(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Limit each element to [min, max]: the same as ``clamp`` (bounds: numbers or tensors).

    Example::

        >>> import aengine as ae
        >>> ae.clip(ae.tensor([-2.0, 0.5, 3.0]), -1.0, 1.0).tolist()
        [-1.0, 0.5, 1.0]
    """
    return _arith.clamp(input, min, max)


for _fn, _line, _call, _result in (
    (exp2, "2 to the power of each element.", "ae.exp2(ae.tensor([3.0])).tolist()", "[8.0]"),
    (log2, "The base-2 logarithm of each element.", "ae.log2(ae.tensor([8.0])).tolist()", "[3.0]"),
    (
        log10,
        "The base-10 logarithm of each element.",
        "ae.log10(ae.tensor([1.0])).tolist()",
        "[0.0]",
    ),
    (rsqrt, "1 / sqrt(x) of each element.", "ae.rsqrt(ae.tensor([4.0])).tolist()", "[0.5]"),
    (
        reciprocal,
        "1 / x of each element (integers give the default float dtype).",
        "ae.reciprocal(ae.tensor([4.0])).tolist()",
        "[0.25]",
    ),
    (tan, "The tangent of each element (radians).", "ae.tan(ae.tensor([0.0])).tolist()", "[0.0]"),
    (asin, "The arcsine of each element.", "ae.asin(ae.tensor([0.0])).tolist()", "[0.0]"),
    (acos, "The arccosine of each element.", "ae.acos(ae.tensor([1.0])).tolist()", "[0.0]"),
    (atan, "The arctangent of each element.", "ae.atan(ae.tensor([0.0])).tolist()", "[0.0]"),
    (sinh, "The hyperbolic sine of each element.", "ae.sinh(ae.tensor([0.0])).tolist()", "[0.0]"),
    (
        cosh,
        "The hyperbolic cosine of each element.",
        "ae.cosh(ae.tensor([0.0])).tolist()",
        "[1.0]",
    ),
    (
        asinh,
        "The inverse hyperbolic sine of each element.",
        "ae.asinh(ae.tensor([0.0])).tolist()",
        "[0.0]",
    ),
    (
        acosh,
        "The inverse hyperbolic cosine of each element (x >= 1).",
        "ae.acosh(ae.tensor([1.0])).tolist()",
        "[0.0]",
    ),
    (
        atanh,
        "The inverse hyperbolic tangent of each element (|x| < 1).",
        "ae.atanh(ae.tensor([0.0])).tolist()",
        "[0.0]",
    ),
    (erf, "The error function of each element.", "ae.erf(ae.tensor([0.0])).tolist()", "[0.0]"),
    (
        erfc,
        "The complementary error function 1 - erf(x) of each element.",
        "ae.erfc(ae.tensor([0.0])).tolist()",
        "[1.0]",
    ),
    (
        erfinv,
        "The inverse error function of each element (in (-1, 1)).",
        "ae.erfinv(ae.tensor([0.0])).tolist()",
        "[0.0]",
    ),
    (
        lgamma,
        "log |Gamma(x)| of each element.",
        "ae.lgamma(ae.tensor([1.0, 2.0])).tolist()",
        "[0.0, 0.0]",
    ),
    (
        digamma,
        "The digamma function (the derivative of lgamma) of each element.",
        "round(ae.digamma(ae.tensor([1.0])).item(), 4)  # minus Euler's constant",
        "-0.5772",
    ),
    (
        floor,
        "The largest integer <= x, of each element (integers: unchanged); zero gradient.",
        "ae.floor(ae.tensor([-1.5, 1.5])).tolist()",
        "[-2.0, 1.0]",
    ),
    (
        ceil,
        "The smallest integer >= x, of each element (integers: unchanged); zero gradient.",
        "ae.ceil(ae.tensor([-1.5, 1.5])).tolist()",
        "[-1.0, 2.0]",
    ),
    (
        trunc,
        "Each element rounded toward zero (integers: unchanged); zero gradient.",
        "ae.trunc(ae.tensor([-1.5, 1.5])).tolist()",
        "[-1.0, 1.0]",
    ),
    (
        frac,
        "The fractional part x - trunc(x) of each element; gradient 1.",
        "ae.frac(ae.tensor([-1.5, 2.25])).tolist()",
        "[-0.5, 0.25]",
    ),
    (
        sgn,
        "The sign of each element (for real tensors as sign); zero gradient.",
        "ae.sgn(ae.tensor([-2.0, 0.0, 3.0])).tolist()",
        "[-1.0, 0.0, 1.0]",
    ),
):
    set_doc(_fn, _line, _call, _result)
    _fn.__module__ = __name__  # (made by _unary's factory: the reference names this module)


# -- the table's entries -----------------------------------------------------------------------
def _in(low: float, high: float, int_low: int | None = None, int_high: int | None = None) -> Any:
    """Samples of a function defined on [low, high) (integers: on [int_low, int_high))."""

    def samples(m: Maker) -> Iterator[Sample]:
        lo, hi = (low, high) if m.floating else (int_low, int_high)
        assert lo is not None and hi is not None
        yield Sample((m.arr(3, 4, low=lo, high=hi),))
        yield Sample((m.arr(low=lo, high=hi),), note="0-d")
        yield Sample((m.arr(0, 3, low=lo, high=hi),), note="empty")

    return samples


def _rounding_samples(m: Maker) -> Iterator[Sample]:
    # away from the jumps at integers and halves (finite differences cross none)
    base = m.arr(3, 4, low=-3.0, high=3.0)
    if m.floating:
        base = (m.rng.integers(-3, 3, size=(3, 4)) + m.rng.uniform(0.1, 0.4, size=(3, 4))).astype(
            m.dtype
        )
    yield Sample((base,))
    yield Sample((base[0:1, 0].reshape(()),), note="0-d")
    yield Sample((m.arr(0, 3),), note="empty")


def _round_samples(m: Maker) -> Iterator[Sample]:
    yield from _rounding_samples(m)
    if m.floating:
        halves = (m.rng.integers(-4, 4, size=8) + 0.5).astype(m.dtype)
        yield Sample((halves,), note="halves round to even")
        x = m.arr(2, 5, low=-50.0, high=50.0)
        yield Sample((x,), {"decimals": 2}, note="decimals")
        yield Sample((x,), {"decimals": -1}, note="negative decimals")


def _round_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), {"decimals": 1.5}, exc=TypeError, match="decimals")


def _logit_samples(m: Maker) -> Iterator[Sample]:
    if not m.floating:
        yield Sample((m.arr(4, low=0, high=2),), {"eps": 0.25}, note="integers (0 and 1)")
        return
    yield Sample((m.arr(3, 4, low=0.05, high=0.95),))
    yield Sample((m.arr(3, 4, low=0.05, high=0.95),), {"eps": 0.2}, note="eps clamps")
    yield Sample((m.arr(low=0.1, high=0.9),), note="0-d")


def _polygamma_samples(m: Maker) -> Iterator[Sample]:
    lo, hi = (0.5, 3.0) if m.floating else (1, 4)
    x = m.arr(3, 4, low=lo, high=hi)
    yield Sample((1, x), grad=(1,))
    yield Sample((0, x), grad=(1,), note="n = 0: digamma")
    yield Sample((2, m.arr(5, low=lo, high=hi)), grad=(1,))


def _polygamma_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((-1, m.arr(3)), exc=RuntimeError, match="negative n")
    yield ErrorCase((1.5, m.arr(3)), exc=TypeError, match="'n' must be an int")


def _nan_to_num_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    if m.floating:
        x[0, 1] = float("nan")
        x[1, 2] = float("inf")
        x[2, 0] = -float("inf")
    yield Sample((x,))
    yield Sample((x,), {"nan": 1.5, "posinf": 9.0, "neginf": -9.0}, note="replacements")
    yield Sample((x,), {"posinf": 3.0}, note="one replacement")
    yield Sample((m.arr(),), note="0-d")


def _nan_to_num_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), {"nan": "zero"}, exc=TypeError, match="'nan' must be a float")


def _frac_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.idx(3, high=5),), exc=NotImplementedError, match="frac")


def _is_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    if m.floating:
        x[0, 1] = float("nan")
        x[1, 2] = float("inf")
        x[2, 0] = -float("inf")
    yield Sample((x,))
    yield Sample((m.arr(),), note="0-d")
    yield Sample((m.arr(0, 2),), note="empty")


def _clamp_one_samples(bound: str) -> Any:
    def samples(m: Maker) -> Iterator[Sample]:
        x = m.arr(3, 4)
        yield Sample((x, 0.5 if m.floating else 1))
        yield Sample((x, m.arr(4, low=-1.0, high=1.0)), note="tensor bound, broadcast")
        if m.floating:
            yield Sample((x, m.float_arr(3, 1)), note="tensor bound, differentiable")

    return samples


def _clip_samples(m: Maker) -> Iterator[Sample]:
    x = m.arr(3, 4)
    if m.floating:
        yield Sample((x, -0.5, 0.5))
        yield Sample((x,), {"min": -0.3}, note="min only")
        yield Sample((x, m.arr(4, low=-1.5, high=-0.2), m.arr(3, 1, low=0.2, high=1.5)))
    else:
        yield Sample((x, -1, 1))
        yield Sample((x,), {"max": 0.5}, note="a float bound of an int tensor: floats")


def _clamp_one_errors(name: str) -> Any:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield ErrorCase(
            (m.arr(3), None),
            exc=TypeError,
            match=name,
            torch_same=False,
            note="torch takes None and fails later, in the kernel",
        )

    return errors


_NOT_SMOOTH = "rounding is piecewise constant: finite differences do not apply at the samples"

register(
    OpInfo("exp2", exp2, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("log2", log2, _in(0.5, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("log10", log10, _in(0.5, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("rsqrt", rsqrt, _in(0.5, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("reciprocal", reciprocal, _in(0.5, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("tan", tan, _in(-1.2, 1.2, -1, 2), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("asin", asin, _in(-0.9, 0.9, 0, 1), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("acos", acos, _in(-0.9, 0.9, 0, 1), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("atan", atan, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("sinh", sinh, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("cosh", cosh, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("asinh", asinh, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("acosh", acosh, _in(1.2, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("atanh", atanh, _in(-0.9, 0.9, 0, 1), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("logit", logit, _logit_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("erf", erf, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("erfc", erfc, unary_samples, method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("erfinv", erfinv, _in(-0.9, 0.9, 0, 1), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("lgamma", lgamma, _in(0.5, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo("digamma", digamma, _in(0.5, 3.0, 1, 5), method=True, dtypes=ALL, tol=INT_TOL),
    OpInfo(
        "polygamma",
        polygamma,
        _polygamma_samples,
        dtypes=ALL,
        tol=INT_TOL,
        errors=_polygamma_errors,
        notes="No Tensor method here (torch's x.polygamma(n) puts n second).",
    ),
    OpInfo(
        "floor",
        floor,
        _rounding_samples,
        method=True,
        dtypes=ALL,
        gradcheck=False,
        notes=_NOT_SMOOTH,
    ),
    OpInfo(
        "ceil", ceil, _rounding_samples, method=True, dtypes=ALL, gradcheck=False, notes=_NOT_SMOOTH
    ),
    OpInfo(
        "trunc",
        trunc,
        _rounding_samples,
        method=True,
        dtypes=ALL,
        gradcheck=False,
        notes=_NOT_SMOOTH,
    ),
    OpInfo(
        "round",
        round,
        _round_samples,
        method=True,
        dtypes=ALL,
        gradcheck=False,
        errors=_round_errors,
        notes=_NOT_SMOOTH,
    ),
    OpInfo("frac", frac, _rounding_samples, method=True, errors=_frac_errors),
    OpInfo(
        "sgn",
        sgn,
        _rounding_samples,
        method=True,
        dtypes=ALL,
        gradcheck=False,
        torch=lambda t: t.sign,
        notes="Compared with torch.sign, which torch.sgn equals on real tensors (torch's "
        "gradient of sgn is a ZeroTensor, which the tests cannot read).",
    ),
    OpInfo(
        "nan_to_num",
        nan_to_num,
        _nan_to_num_samples,
        method=True,
        dtypes=ALL,
        errors=_nan_to_num_errors,
    ),
    OpInfo(
        "clamp_min",
        clamp_min,
        _clamp_one_samples("min"),
        method=True,
        dtypes=ALL,
        errors=_clamp_one_errors("min"),
    ),
    OpInfo(
        "clamp_max",
        clamp_max,
        _clamp_one_samples("max"),
        method=True,
        dtypes=ALL,
        errors=_clamp_one_errors("max"),
    ),
    OpInfo("clip", clip, _clip_samples, method=True, dtypes=ALL),
    OpInfo("isnan", isnan, _is_samples, method=True, dtypes=ALL, grad=False),
    OpInfo("isinf", isinf, _is_samples, method=True, dtypes=ALL, grad=False),
    OpInfo("isfinite", isfinite, _is_samples, method=True, dtypes=ALL, grad=False),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "exp2": "pointwise",
        "log2": "pointwise",
        "log10": "pointwise",
        "rsqrt": "pointwise",
        "reciprocal": "pointwise",
        "tan": "pointwise",
        "asin": "pointwise",
        "acos": "pointwise",
        "atan": "pointwise",
        "sinh": "pointwise",
        "cosh": "pointwise",
        "asinh": "pointwise",
        "acosh": "pointwise",
        "atanh": "pointwise",
        "logit": "pointwise",
        "erf": "pointwise",
        "erfc": "pointwise",
        "erfinv": "pointwise",
        "lgamma": "pointwise",
        "digamma": "pointwise",
        "polygamma": "pointwise",
        "floor": "pointwise",
        "ceil": "pointwise",
        "trunc": "pointwise",
        "round": "pointwise",
        "frac": "pointwise",
        "sgn": "pointwise",
        "nan_to_num": "pointwise",
        "clamp_min": "pointwise",
        "clamp_max": "pointwise",
        "clip": "pointwise",
        "isnan": "pointwise",
        "isinf": "pointwise",
        "isfinite": "pointwise",
    }
)
