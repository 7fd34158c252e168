"""ae.nn.functional activations (gelu, silu, elu, softplus, glu...).

# NOTE [Activation primitives]
# The elementwise activations are primitives: the forward computes on the
# backend's arrays, one node records the rule, written against ``F`` (NOTE
# [Operator rules] in _core.py), so that its derivatives of every order
# follow.  Every rule reads the saved input ``x``; masks (which branch of a
# piecewise function an element is on) are computed on its array, constants
# of the backward, and the branches are picked with ``F.where``.  A branch
# not taken gets a zero gradient from ``where``, so a branch is evaluated only
# where it cannot overflow (elu's ``exp`` of the negative part alone).
#
# ``inplace=True`` (where torch has it) modifies the input as torch does:
# the in-place machinery of _inplace_ops (``check_inplace`` raises for a
# leaf that requires grad, ``snapshot`` keeps the old value for the rule,
# ``commit_inplace`` makes the op the tensor's history), so views and
# version counters behave as for ``relu_``.
#
# softmax, log_softmax and softmin take torch.nn.functional's signature
# (``dim=None`` picks torch's implicit dimension, with its warning) and call
# the reductions of _reduce.py; softsign and glu are compositions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._dtype import get_default_dtype
from ..tensors._tensor import Tensor
from ..tensors._views import check_inplace, commit_inplace, snapshot
from . import _inplace_ops, _reduce, _unary
from ._core import (
    ELEMENTWISE,
    TRANSCENDENTAL,
    GradOps,
    OpNode,
    as_tensor_arg,
    node_class,
    record,
    record_one,
    weigh,
)
from ._cpu_kernels import erf32, fast, gelu32, gelu32_grad, where_zero
from ._join import chunk
from ._shape import _norm_dim
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "softmax",
    "log_softmax",
    "softmin",
    "glu",
    "relu",
    "relu6",
    "leaky_relu",
    "elu",
    "selu",
    "celu",
    "gelu",
    "silu",
    "mish",
    "softplus",
    "softsign",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "logsigmoid",
]

#: the function of an elementwise activation: ``fwd(xp, array, attrs) -> array``
Forward = Callable[[Any, Any, Any], Any]


# -- helpers -------------------------------------------------------------------------------
def _arr(v: Any) -> Any:
    """The backend array of a saved value (an array, or a Tensor under create_graph)."""
    return v.data if v.__class__ is Tensor else v


def _float_input(input: Any, name: str) -> Tensor:
    """``input`` as a Tensor of a floating dtype (torch has no integer kernel for ``name``)."""
    x = input if input.__class__ is Tensor else tensor_input(input, name)
    if x.data.dtype.kind not in "fc":
        raise NotImplementedError(
            f'"{name}" not implemented for {x.data.dtype} tensors (as in PyTorch); '
            "convert the input first with x.to(ae.float32)"
        )
    return x


def _sig(F: GradOps, z: Any, n: OpNode) -> Any:
    """sigmoid(z) in a rule: the stable kernel on arrays, the differentiable op on Tensors."""
    if z.__class__ is Tensor:
        return F.sigmoid(z)
    return _unary._sigmoid(n.dev.backend.xp, z)


# NOTE [Piecewise-linear gradients stay in the graph]
# The first derivative of relu, hardtanh or leaky_relu is ``g`` scaled by a
# constant per piece: ``where(mask, g * a, g * b)``, which does not involve
# ``x``.  torch still records it as a function of ``x`` (ThresholdBackward-
# Backward0...), so that under create_graph the gradient requires grad and its
# own gradient with respect to ``x`` is zero, not an error.  ``_mask_grad``
# does the same: on Tensors it records one node of inputs ``(g, x)`` whose
# rule is ``_mask_grad`` again for ``g`` and zeros for ``x``.
def _mask_grad(F: GradOps, g: Any, x: Any, mask: Any, a: float, b: float, cls: Any) -> Any:
    """``where(mask, g * a, g * b)``, recorded as a function of ``g`` and ``x`` on Tensors."""
    if x.__class__ is not Tensor:
        ga = g * a if a != 1.0 else g
        if not b:  # (NOTE [A branch-free masked gradient])
            r = where_zero(mask, ga)
            if r is not None:
                return r
        return F.where(mask, ga, g * b if b else 0.0)
    if g.__class__ is not Tensor:
        g = as_tensor_arg(g, x)
    xp = g._device.backend.xp
    gd = g.data
    out = xp.where(mask, gd * a if a != 1.0 else gd, gd * b if b else 0.0).astype(gd.dtype)
    return record(cls, out, g._device, (g, x), (x,), attrs=(mask, a, b, cls))


def _mask_grad_rule(F: GradOps, gg: Any, s: Any, n: Any) -> Any:
    mask, a, b, cls = n.attrs
    need = n.needs
    x = s[0]
    return (
        _mask_grad(F, gg, x, mask, a, b, cls) if need[0] else None,
        F.zeros(tuple(gg.shape), gg) if need[1] else None,
    )


def _apply(
    x: Tensor, cls: type[OpNode], fwd: Forward, attrs: Any, inplace: bool, cost: int = 1
) -> Tensor:
    """Run an elementwise activation (NOTE [Activation primitives]), saving its input."""
    dev = x._device
    xp = dev.backend.xp
    if inplace:
        return _apply_(x, cls, fwd, attrs)
    out = fwd(xp, x.data, attrs)
    t = record_one(cls, out, dev, x, 1, attrs, save_input=True)
    return weigh(t, cost) if cost != 1 else t


def _apply_(x: Tensor, cls: type[OpNode], fwd: Forward, attrs: Any) -> Tensor:
    """The in-place form: write the result into ``x`` and make the op its history."""
    rec = check_inplace(x)
    dev = x._device
    out = fwd(dev.backend.xp, x.data, attrs)
    r = None
    if rec:
        snap = snapshot(x, True)  # the rule reads the old value
        r = record(cls, x.data, dev, (snap,), (snap,), attrs=attrs)
    x.data[...] = out
    return commit_inplace(x, r)


# -- erf (gelu's rule needs it differentiable: TensorOps.erf) --------------------------------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

ErfBackward0 = node_class(
    "ErfBackward0",
    lambda F, g, s, n: (g * _TWO_OVER_SQRT_PI * F.exp(-(s[0] * s[0])),),
    jvp=ELEMENTWISE,
)


def _erf(x: Tensor) -> Tensor:
    """The error function, elementwise (the differentiable ``F.erf`` of rules).

    Example::

        >>> import aengine as ae
        >>> from aengine.ops._activation import _erf
        >>> round(_erf(ae.tensor([0.5])).item(), 4)
        0.5205
    """
    if x.__class__ is not Tensor:
        x = tensor_input(x, "erf")
    data = x.data
    if data.dtype.kind in "biu":
        data = data.astype(get_default_dtype())
    out = erf32(data) if fast(data) else x._device.backend.special.erf(data)
    return weigh(record_one(ErfBackward0, out, x._device, x, 1, None, True), TRANSCENDENTAL)


# -- softmax, log_softmax, softmin ---------------------------------------------------------
def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    """torch's implicit dimension of softmax & co when ``dim`` is None (with its warning)."""
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. "
        "Change the call to include dim=X as an argument.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """Softmax along ``dim``: ``exp(x) / sum(exp(x), dim)`` (torch.nn.functional.softmax).

    ``dtype`` converts the input first.  ``dim=None`` picks torch's implicit
    dimension (0 for 0-, 1- and 3-d inputs, else 1) with its deprecation warning.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.softmax(ae.tensor([0.0, 0.0]), dim=0).tolist()
        [0.5, 0.5]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "softmax")
    if dim is None:
        dim = _softmax_dim("softmax", input.data.ndim, _stacklevel)
    return _reduce.softmax(input, dim, dtype)


def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """Log of softmax along ``dim``, computed stably (torch.nn.functional.log_softmax).

    Example::

        >>> import aengine as ae
        >>> x = ae.nn.functional.log_softmax(ae.tensor([0.0, 0.0]), dim=0)
        >>> [round(v, 4) for v in x.tolist()]
        [-0.6931, -0.6931]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "log_softmax")
    if dim is None:
        dim = _softmax_dim("log_softmax", input.data.ndim, _stacklevel)
    return _reduce.log_softmax(input, dim, dtype)


def softmin(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """Softmin along ``dim``: ``softmax(-x, dim)`` (torch.nn.functional.softmin).

    Example::

        >>> import aengine as ae
        >>> y = ae.nn.functional.softmin(ae.tensor([0.0, 1.0]), dim=0)
        >>> [round(v, 4) for v in y.tolist()]
        [0.7311, 0.2689]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "softmin")
    if dim is None:
        dim = _softmax_dim("softmin", input.data.ndim, _stacklevel)
    return _reduce.softmax(-input, dim, dtype)


# -- glu, softsign (compositions) ----------------------------------------------------------
def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: ``a * sigmoid(b)`` for the halves ``a, b`` of ``input`` along ``dim``.

    Example::

        >>> import aengine as ae
        >>> round(ae.nn.functional.glu(ae.tensor([2.0, 0.0])).item(), 4)
        1.0
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "glu")
    if input.data.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _norm_dim(dim, input.data.ndim)
    size = input.data.shape[d]
    if size % 2:
        raise RuntimeError(
            f"Halving dimension must be even, but dimension {d} is size {size}: "
            "glu splits the input in two halves along dim"
        )
    _float_input(input, "glu")
    a, b = chunk(input, 2, d)
    return a * _unary.sigmoid(b)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``, elementwise (torch.nn.functional.softsign).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.softsign(ae.tensor([1.0, -3.0])).tolist()
        [0.5, -0.75]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "softsign")
    return input / (_unary.abs(input) + 1)


# -- relu, relu6, hardtanh -------------------------------------------------------------------
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``, elementwise (torch.nn.functional.relu); ``inplace`` modifies ``input``.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.relu(ae.tensor([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    # the one relu of the operators (ae.relu, Tensor.relu_): torch's F.relu is torch.relu
    return _inplace_ops.relu_(input) if inplace else _unary.relu(input)


def _hardtanh_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    lo, hi = attrs
    return xp.clip(a, lo, hi).astype(a.dtype, copy=False)


def _hardtanh_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # as torch's hardtanh_backward: the gradient passes strictly inside (min_val, max_val)
    lo, hi = n.attrs
    x = s[0]
    xa = _arr(x)
    return (_mask_grad(F, g, x, (xa > lo) & (xa < hi), 1.0, 0.0, HardtanhBackwardBackward0),)


HardtanhBackwardBackward0 = node_class(
    "HardtanhBackwardBackward0", _mask_grad_rule, jvp=ELEMENTWISE
)
HardtanhBackward0 = node_class("HardtanhBackward0", _hardtanh_rule, jvp=ELEMENTWISE)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """Clamp to ``[min_val, max_val]`` (torch.nn.functional.hardtanh); gradient 1 strictly inside.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.hardtanh(ae.tensor([-2.0, 0.5, 3.0])).tolist()
        [-1.0, 0.5, 1.0]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "hardtanh")
    if min_val > max_val:
        raise ValueError(
            f"min_val cannot be greater than max_val (got min_val={min_val}, max_val={max_val})"
        )
    return _apply(input, HardtanhBackward0, _hardtanh_fwd, (min_val, max_val), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``, elementwise (torch.nn.functional.relu6: hardtanh(x, 0, 6)).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.relu6(ae.tensor([-1.0, 3.0, 8.0])).tolist()
        [0.0, 3.0, 6.0]
    """
    if input.__class__ is not Tensor:
        input = tensor_input(input, "relu6")
    return _apply(input, HardtanhBackward0, _hardtanh_fwd, (0.0, 6.0), inplace)


# -- leaky_relu ------------------------------------------------------------------------------
def _leaky_fwd(xp: Any, a: Any, slope: Any) -> Any:
    return xp.where(a > 0, a, a * slope)


LeakyReluBackwardBackward0 = node_class(
    "LeakyReluBackwardBackward0", _mask_grad_rule, jvp=ELEMENTWISE
)
LeakyReluBackward0 = node_class(
    "LeakyReluBackward0",
    lambda F, g, s, n: (
        _mask_grad(F, g, s[0], _arr(s[0]) > 0, 1.0, n.attrs, LeakyReluBackwardBackward0),
    ),
    jvp=ELEMENTWISE,
)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``negative_slope * x`` (torch.nn.functional.leaky_relu).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.leaky_relu(ae.tensor([-2.0, 3.0]), 0.5).tolist()
        [-1.0, 3.0]
    """
    input = _float_input(input, "leaky_relu")
    return _apply(input, LeakyReluBackward0, _leaky_fwd, float(negative_slope), inplace)


# -- elu, selu, celu ---------------------------------------------------------------------------
# attrs: (alpha, scale, input_scale) as torch's elu kernel: scale * x where x > 0,
# else scale * alpha * (exp(x * input_scale) - 1)
def _elu_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    alpha, scale, iscale = attrs
    neg = xp.expm1(xp.minimum(a, 0) * iscale) * (alpha * scale)
    return xp.where(a > 0, a * scale, neg)


def _elu_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    alpha, scale, iscale = n.attrs
    x = s[0]
    pos = _arr(x) > 0
    xneg = F.where(pos, 0.0, x)  # exp of the negative part only (no overflow)
    gneg = g * (alpha * scale * iscale) * F.exp(xneg * iscale)
    return (F.where(pos, g * scale if scale != 1.0 else g, gneg),)


EluBackward0 = node_class("EluBackward0", _elu_rule, jvp=ELEMENTWISE)
CeluBackward0 = node_class("CeluBackward0", _elu_rule, jvp=ELEMENTWISE)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x) - 1)`` (torch.nn.functional.elu).

    Example::

        >>> import aengine as ae
        >>> [round(v, 4) for v in ae.nn.functional.elu(ae.tensor([-1.0, 2.0])).tolist()]
        [-0.6321, 2.0]
    """
    input = _float_input(input, "elu")
    attrs = (float(alpha), 1.0, 1.0)
    return _apply(input, EluBackward0, _elu_fwd, attrs, inplace, TRANSCENDENTAL)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Scaled elu with torch's fixed alpha and scale (torch.nn.functional.selu).

    Example::

        >>> import aengine as ae
        >>> [round(v, 4) for v in ae.nn.functional.selu(ae.tensor([-1.0, 1.0])).tolist()]
        [-1.1113, 1.0507]
    """
    input = _float_input(input, "selu")
    attrs = (_SELU_ALPHA, _SELU_SCALE, 1.0)
    return _apply(input, EluBackward0, _elu_fwd, attrs, inplace, TRANSCENDENTAL)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (torch.nn.functional.celu).

    Example::

        >>> import aengine as ae
        >>> [round(v, 4) for v in ae.nn.functional.celu(ae.tensor([-1.0, 2.0]), 2.0).tolist()]
        [-0.7869, 2.0]
    """
    input = _float_input(input, "celu")
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU; pass a nonzero alpha")
    attrs = (float(alpha), 1.0, 1.0 / alpha)
    return _apply(input, CeluBackward0, _elu_fwd, attrs, inplace, TRANSCENDENTAL)


# -- gelu ------------------------------------------------------------------------------------
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


def _gelu_tanh_inner(xp: Any, x: Any, t: Any) -> Any:
    """``tanh((x + c x^3) k)`` of arrays, in place in ``t`` (which holds x^3, ours to update)."""
    t *= _GELU_C
    t += x
    t *= _GELU_K
    return xp.tanh(t, out=t)


def _gelu_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x = s[0]
    if n.attrs == "tanh":  # torch's GeluBackward0 (approximate='tanh')
        if x.__class__ is Tensor or x.ndim == 0:
            x2 = x * x
            t = F.tanh((x + _GELU_C * x2 * x) * _GELU_K)
            left_d = (t + 1.0) * 0.5
            right_d = x * 0.5 * (1.0 - t * t) * ((x2 * (3.0 * _GELU_C) + 1.0) * _GELU_K)
            return (g * (left_d + right_d),)
        # the same on arrays, in place on the three temporaries owned here
        x2 = x * x
        t = _gelu_tanh_inner(n.dev.backend.xp, x, x2 * x)
        d = t + 1.0
        d *= 0.5  # left_d
        t *= t
        t -= 1.0
        t *= x
        t *= -0.5  # x * 0.5 * (1 - t * t)
        x2 *= 3.0 * _GELU_C
        x2 += 1.0
        x2 *= _GELU_K
        t *= x2  # right_d
        d += t
        d *= g
        return (d,)
    # d gelu = Phi(x) + x * phi(x)
    if x.__class__ is Tensor:  # create_graph: differentiable ops
        cdf = (F.erf(x * _SQRT1_2) + 1.0) * 0.5
        return (g * (cdf + x * (F.exp(x * x * -0.5) * _INV_SQRT_2PI)),)
    if fast(x):  # one float32 kernel (NOTE [A float32 gelu for numpy])
        return (gelu32_grad(x, g),)
    # erf of the backend on arrays (what RawOps.erf is: the array namespace is the
    # installed adapters', which may predate it)
    cdf = (n.dev.backend.special.erf(x * _SQRT1_2) + 1.0) * 0.5
    return (g * (cdf + x * (F.exp(x * x * -0.5) * _INV_SQRT_2PI)),)


GeluBackward0 = node_class("GeluBackward0", _gelu_rule, jvp=ELEMENTWISE)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` (Phi: the normal CDF), or its ``approximate='tanh'`` form (torch's gelu).

    Example::

        >>> import aengine as ae
        >>> round(ae.nn.functional.gelu(ae.tensor([1.0])).item(), 4)
        0.8413
    """
    if not isinstance(approximate, str):
        raise TypeError(
            f"gelu(): argument 'approximate' must be str, not {type(approximate).__name__}"
        )
    if approximate not in ("none", "tanh"):
        raise RuntimeError(
            f"approximate argument must be either none or tanh (got {approximate!r})"
        )
    input = _float_input(input, "gelu")
    dev = input._device
    a = input.data
    if approximate == "tanh":  # torch's formula, on one temporary (in place)
        if a.ndim == 0:
            out = 0.5 * a * (1.0 + dev.backend.xp.tanh(_GELU_K * (a + _GELU_C * a * a * a)))
        else:
            out = _gelu_tanh_inner(dev.backend.xp, a, a * a * a)
            out += 1.0
            out *= a
            out *= 0.5
    elif fast(a):  # one float32 kernel (NOTE [A float32 gelu for numpy])
        out = gelu32(a)
    else:
        out = a * 0.5 * (1.0 + dev.backend.special.erf(a * _SQRT1_2))
    t = record_one(GeluBackward0, out, dev, input, 1, approximate, save_input=True)
    return weigh(t, TRANSCENDENTAL)


# -- silu, mish ------------------------------------------------------------------------------
def _silu_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    return a * _unary._sigmoid(xp, a)


def _silu_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x = s[0]
    sg = _sig(F, x, n)
    return (g * sg * (x * (1.0 - sg) + 1.0),)


SiluBackward0 = node_class("SiluBackward0", _silu_rule, jvp=ELEMENTWISE)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (torch.nn.functional.silu, also called swish).

    Example::

        >>> import aengine as ae
        >>> round(ae.nn.functional.silu(ae.tensor([1.0])).item(), 4)
        0.7311
    """
    input = _float_input(input, "silu")
    return _apply(input, SiluBackward0, _silu_fwd, None, inplace, TRANSCENDENTAL)


def _softplus_arr(xp: Any, z: Any) -> Any:
    """``log(1 + exp(z))`` without overflow."""
    return xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


def _mish_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    return a * xp.tanh(_softplus_arr(xp, a))


def _mish_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x = s[0]
    sp = F.where(_arr(x) > 0, x, 0.0) + F.log1p(F.exp(-F.abs(x)))
    tsp = F.tanh(sp)
    return (g * (tsp + x * _sig(F, x, n) * (1.0 - tsp * tsp)),)


MishBackward0 = node_class("MishBackward0", _mish_rule, jvp=ELEMENTWISE)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))`` (torch.nn.functional.mish).

    Example::

        >>> import aengine as ae
        >>> round(ae.nn.functional.mish(ae.tensor([1.0])).item(), 4)
        0.8651
    """
    input = _float_input(input, "mish")
    return _apply(input, MishBackward0, _mish_fwd, None, inplace, TRANSCENDENTAL)


# -- softplus, logsigmoid --------------------------------------------------------------------
def _softplus_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    beta, threshold = attrs
    z = a * beta
    return xp.where(z > threshold, a, _softplus_arr(xp, z) / beta)


def _softplus_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    beta, threshold = n.attrs
    z = s[0] * beta
    return (F.where(_arr(z) > threshold, g, g * _sig(F, z, n)),)


SoftplusBackward0 = node_class("SoftplusBackward0", _softplus_rule, jvp=ELEMENTWISE)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` where ``beta * x > threshold`` (torch's).

    Example::

        >>> import aengine as ae
        >>> round(ae.nn.functional.softplus(ae.tensor([0.0])).item(), 4)
        0.6931
    """
    input = _float_input(input, "softplus")
    attrs = (float(beta), float(threshold))
    return _apply(input, SoftplusBackward0, _softplus_fwd, attrs, False, TRANSCENDENTAL)


def _logsigmoid_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    return xp.minimum(a, 0) - xp.log1p(xp.exp(-xp.abs(a)))


LogSigmoidBackward0 = node_class(
    "LogSigmoidBackward0", lambda F, g, s, n: (g * _sig(F, -s[0], n),), jvp=ELEMENTWISE
)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed without overflow (torch.nn.functional.logsigmoid).

    Example::

        >>> import aengine as ae
        >>> round(ae.nn.functional.logsigmoid(ae.tensor([0.0])).item(), 4)
        -0.6931
    """
    input = _float_input(input, "logsigmoid")
    return _apply(input, LogSigmoidBackward0, _logsigmoid_fwd, None, False, TRANSCENDENTAL)


# -- hardsigmoid, hardswish ------------------------------------------------------------------
def _hardsigmoid_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    return xp.clip(a + 3.0, 0.0, 6.0) / 6.0


def _hardsigmoid_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x = s[0]
    xa = _arr(x)
    inside = (xa > -3.0) & (xa < 3.0)
    return (_mask_grad(F, g, x, inside, 1.0 / 6.0, 0.0, HardsigmoidBackwardBackward0),)


HardsigmoidBackwardBackward0 = node_class(
    "HardsigmoidBackwardBackward0", _mask_grad_rule, jvp=ELEMENTWISE
)
HardsigmoidBackward0 = node_class("HardsigmoidBackward0", _hardsigmoid_rule, jvp=ELEMENTWISE)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6`` (torch.nn.functional.hardsigmoid).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.hardsigmoid(ae.tensor([-4.0, 0.0, 4.0])).tolist()
        [0.0, 0.5, 1.0]
    """
    input = _float_input(input, "hardsigmoid")
    return _apply(input, HardsigmoidBackward0, _hardsigmoid_fwd, None, inplace)


def _hardswish_fwd(xp: Any, a: Any, attrs: Any) -> Any:
    return a * xp.clip(a + 3.0, 0.0, 6.0) / 6.0


def _hardswish_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's hardswish_backward: 0 up to -3, x / 3 + 1/2 inside, 1 from 3 on
    x = s[0]
    xa = _arr(x)
    inside = F.where(xa < 3.0, g * (x / 3.0 + 0.5), g)
    return (F.where(xa <= -3.0, 0.0, inside),)


HardswishBackward0 = node_class("HardswishBackward0", _hardswish_rule, jvp=ELEMENTWISE)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6`` (torch.nn.functional.hardswish).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.hardswish(ae.tensor([-4.0, 0.0, 4.0])).tolist()
        [-0.0, 0.0, 4.0]
    """
    input = _float_input(input, "hardswish")
    return _apply(input, HardswishBackward0, _hardswish_fwd, None, inplace)


# -- the table ---------------------------------------------------------------------------------
def _basic(m: Maker, low: float = -2.0, high: float = 2.0) -> Iterator[Sample]:
    yield Sample((m.away(3, 4, low=low, high=high),))
    yield Sample((m.away(low=low, high=high),), note="0-d")
    yield Sample((m.arr(0, 3),), note="empty")


def _samples(extra: Callable[[Maker], Iterator[Sample]] | None = None, **kw: float) -> Any:
    def samples(m: Maker) -> Iterator[Sample]:
        yield from _basic(m, **kw)
        if extra is not None:
            yield from extra(m)

    return samples


def _softmax_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),), {"dim": 1})
    yield Sample((m.arr(3, 4),), {"dim": 0})
    yield Sample((m.arr(2, 3, 4),), {"dim": -1})
    yield Sample((m.arr(),), {"dim": 0}, note="0-d")


def _glu_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(4, 3),), {"dim": 0})
    yield Sample((m.arr(2, 6, 2),), {"dim": -2})
    yield Sample((m.arr(0, 2),), note="empty")


def _leaky_extra(m: Maker) -> Iterator[Sample]:
    yield Sample((m.away(3, 4),), {"negative_slope": 0.2})
    yield Sample((m.away(5),), {"negative_slope": -1.5})


def _elu_extra(m: Maker) -> Iterator[Sample]:
    yield Sample((m.away(3, 4),), {"alpha": 0.5})
    yield Sample((m.away(5, low=-4.0, high=4.0),), {"alpha": 2.0})


def _gelu_extra(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4, low=-4.0, high=4.0),), {"approximate": "tanh"})
    yield Sample((m.arr(5, low=-4.0, high=4.0),), {"approximate": "none"})


def _softplus_extra(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),), {"beta": 2.0, "threshold": 1.0}, note="both branches")
    yield Sample((m.arr(6, low=-30.0, high=30.0),), {"beta": 0.5}, note="large inputs")


def _hardtanh_extra(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4, low=-3.0, high=3.0),), {"min_val": -0.5, "max_val": 2.0})


def _wide(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(4, 5, low=-5.0, high=5.0),), note="both sides of +-3")


def _act_errors(name: str, *extra: ErrorCase) -> Callable[[Maker], Iterator[ErrorCase]]:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield ErrorCase(
            (np.array([1, -2], dtype=np.int64),), exc=NotImplementedError, match=name,
            note="integer input",
        )  # fmt: skip
        yield from extra

    return errors


def _softmax_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4),), {"dim": 2}, exc=IndexError, match="Dimension out of range")


def _glu_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 5),), exc=RuntimeError, match="Halving dimension must be even")
    yield ErrorCase((m.arr(),), exc=RuntimeError, match="does not support scalars")
    yield ErrorCase((m.arr(3, 4),), {"dim": 2}, exc=IndexError, match="out of range")


def _hardtanh_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(
        (m.arr(3),), {"min_val": 2.0, "max_val": 1.0}, exc=ValueError,
        match="min_val cannot be greater than max_val",
    )  # fmt: skip


_NF = "nn.functional."
#: an op of integer inputs with a float32 result: float32's tolerance
_INT_TO_FLOAT = {"int64": (1e-6, 1e-7)}

register(
    OpInfo(_NF + "softmax", softmax, _softmax_samples, errors=_softmax_errors),
    OpInfo(_NF + "log_softmax", log_softmax, _softmax_samples, errors=_softmax_errors),
    OpInfo(_NF + "softmin", softmin, _softmax_samples, errors=_softmax_errors),
    OpInfo(_NF + "glu", glu, _glu_samples, errors=_glu_errors),
    OpInfo(
        _NF + "relu",
        relu,
        _samples(),
        dtypes=ALL,
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "relu6",
        relu6,
        _samples(_wide),
        dtypes=ALL,
        notes="A hardtanh(x, 0, 6) (HardtanhBackward0), as torch's; inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "hardtanh",
        hardtanh,
        _samples(_hardtanh_extra),
        dtypes=ALL,
        errors=_hardtanh_errors,
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "leaky_relu",
        leaky_relu,
        _samples(_leaky_extra),
        errors=_act_errors("leaky_relu"),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "elu",
        elu,
        _samples(_elu_extra),
        errors=_act_errors("elu"),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "selu",
        selu,
        _samples(),
        errors=_act_errors("selu"),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "celu",
        celu,
        _samples(_elu_extra),
        errors=_act_errors(
            "celu",
            ErrorCase((np.ones(3),), {"alpha": 0.0}, exc=RuntimeError, match="alpha cannot be 0"),
        ),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "gelu",
        gelu,
        _samples(_gelu_extra, low=-4.0, high=4.0),
        errors=_act_errors(
            "gelu",
            ErrorCase(
                (np.ones(3),),
                {"approximate": "foo"},
                exc=RuntimeError,
                match="approximate argument must be either none or tanh",
            ),
        ),
    ),
    OpInfo(
        _NF + "silu",
        silu,
        _samples(low=-4.0, high=4.0),
        errors=_act_errors("silu"),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "mish",
        mish,
        _samples(low=-4.0, high=4.0),
        errors=_act_errors("mish"),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(_NF + "softplus", softplus, _samples(_softplus_extra), errors=_act_errors("softplus")),
    OpInfo(_NF + "softsign", softsign, _samples(), dtypes=ALL, tol=_INT_TO_FLOAT),
    OpInfo(
        _NF + "hardsigmoid",
        hardsigmoid,
        _samples(_wide),
        errors=_act_errors("hardsigmoid"),
        grad2=False,
        notes="inplace=True modifies the input.  Its second derivative is 0 (torch raises: "
        "the derivative of hardsigmoid_backward is not implemented there).",
    ),
    OpInfo(
        _NF + "hardswish",
        hardswish,
        _samples(_wide),
        errors=_act_errors("hardswish"),
        notes="inplace=True modifies the input.",
    ),
    OpInfo(
        _NF + "logsigmoid",
        logsigmoid,
        _samples(low=-6.0, high=6.0),
        errors=_act_errors("logsigmoid"),
    ),
    OpInfo(_NF + "tanh", _unary.tanh, _samples(), dtypes=ALL, tol=_INT_TO_FLOAT),
    OpInfo(_NF + "sigmoid", _unary.sigmoid, _samples(), dtypes=ALL, tol=_INT_TO_FLOAT),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "nn.functional.softmax": "dim:dim=0",
        "nn.functional.log_softmax": "dim:dim=0",
        "nn.functional.softmin": "dim:dim=0",
        "nn.functional.glu": "dim:dim",
        "nn.functional.relu": "pointwise",
        "nn.functional.relu6": "pointwise",
        "nn.functional.hardtanh": "pointwise",
        "nn.functional.leaky_relu": "pointwise",
        "nn.functional.elu": "pointwise",
        "nn.functional.selu": "pointwise",
        "nn.functional.celu": "pointwise",
        "nn.functional.gelu": "pointwise",
        "nn.functional.silu": "pointwise",
        "nn.functional.mish": "pointwise",
        "nn.functional.softplus": "pointwise",
        "nn.functional.softsign": "pointwise",
        "nn.functional.hardsigmoid": "pointwise",
        "nn.functional.hardswish": "pointwise",
        "nn.functional.logsigmoid": "pointwise",
    }
)
