"""ae.nn.functional normalisations, linear layers, embedding, dropout, attention, distances.

# NOTE [Normalisation as one primitive]
# layer_norm, rms_norm, group_norm, batch_norm (training) and instance_norm
# are one primitive, ``_normalize``: it views the input in a shape where the
# statistics are taken over some axes (``nshape``, ``axes``: the trailing
# dims for layer_norm, the channel groups for group_norm, batch and spatial
# dims for batch_norm), normalises (``(x - mean) / sqrt(var + eps)``, or
# ``x / sqrt(mean(x^2) + eps)`` for rms_norm), and scales and shifts by the
# weight and bias viewed in the shape ``pshape`` that broadcasts them over
# the input.  Its one node computes the gradients of the input, the weight
# and the bias; its rule recomputes the statistics from the saved input
# through ``F``, so that under create_graph it is differentiable again
# (second derivatives equal torch's).  batch_norm in eval mode, using the
# running statistics, is an elementwise composite.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..core._modes import no_grad
from ..tensors._creation import generator_rng, tensor_input
from ..tensors._tensor import Tensor
from ._arith import add, clamp, mul, sub, where
from ._core import TENSOR_OPS, GradOps, node_class, record, record_one, same_device, wrap
from ._cpu_kernels import sum_leading, sum_trailing
from ._forward import ForwardUnsupported
from ._index import getitem
from ._inplace_ops import copy_, mul_
from ._linalg import _MACS_PER_ELEMENT, matmul
from ._reduce import softmax
from ._reduce import sum as _sum
from ._scan import norm
from ._shape import broadcast_to, reshape, to, transpose, unsqueeze
from ._table import ErrorCase, Maker, OpInfo, Sample, batching, register
from ._unary import abs as _abs

__all__ = [
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "instance_norm",
    "normalize",
    "linear",
    "bilinear",
    "embedding",
    "one_hot",
    "dropout",
    "scaled_dot_product_attention",
    "cosine_similarity",
    "pairwise_distance",
    "cdist",
]


# -- helpers ---------------------------------------------------------------------------------
def _tensor(x: Any, fn: str, arg: str) -> Tensor:
    return x if x.__class__ is Tensor else tensor_input(x, fn, arg)


def _opt_tensor(x: Any, fn: str, arg: str) -> Tensor | None:
    return None if x is None else _tensor(x, fn, arg)


def _floating(x: Tensor, fn: str) -> None:
    if x.data.dtype.kind != "f":
        raise RuntimeError(
            f"{fn}(): expected a floating point input, got dtype {x.data.dtype}; "
            "convert it with .to(ae.float32)"
        )


def _shape_list(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _broadcast_shape(fn: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``shapes``, or torch's RuntimeError."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(
            f"{fn}(): the shapes {', '.join(_shape_list(s) for s in shapes)} do not broadcast "
            "(the size of each dimension must match or be 1)"
        ) from None


# -- the normalisation primitive (NOTE [Normalisation as one primitive]) ------------------
def _stats(F: GradOps, xv: Any, axes: tuple[int, ...], cnt: float, eps: float, rms: bool) -> Any:
    """``(y, rstd)``: the normalised ``xv`` and 1 / sqrt(var + eps) over ``axes`` (kept)."""
    if rms:
        rstd = 1.0 / F.sqrt(F.sum(xv * xv, axes, True) / cnt + eps)
        return xv * rstd, rstd
    xc = xv - F.sum(xv, axes, True) / cnt
    rstd = 1.0 / F.sqrt(F.sum(xc * xc, axes, True) / cnt + eps)
    return xc * rstd, rstd


def _normalize_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    nshape, axes, eps, rms, pshape, xshape, wshape, bshape, _ = n.attrs
    x = s[0]
    w = s[1] if len(s) > 1 else None
    if x.__class__ is not Tensor:  # a plain backward: the forward's statistics, in place
        return _normalize_grads(n.dev.backend.xp, g, x, w, n.attrs, n.needs)
    need = n.needs
    cnt = float(math.prod(nshape[a] for a in axes))
    y, rstd = _stats(F, F.reshape(x, nshape), axes, cnt, eps, rms)
    gx = gw = gb = None
    if need[0]:
        gy = F.reshape(g * F.reshape(w, pshape) if w is not None else g, nshape)
        proj = y * (F.sum(gy * y, axes, True) / cnt)
        if rms:
            gxv = rstd * (gy - proj)
        else:
            gxv = rstd * (gy - F.sum(gy, axes, True) / cnt - proj)
        gx = F.reshape(gxv, xshape)
    if need[1]:
        gw = F.reshape(F.sum_to(g * F.reshape(y, xshape), pshape), wshape)
    if need[2]:
        gb = F.reshape(F.sum_to(g, pshape), bshape)
    return (gx, gw, gb)


def _per_channel(
    nshape: tuple[int, ...], axes: tuple[int, ...], p: tuple[int, ...], rms: bool
) -> bool:
    """Whether the weight (in shape ``p``) is constant over the statistics' ``axes``.

    batch_norm and instance_norm: statistics over dims of the input as it is
    (``nshape``) other than the channel's, a weight per channel.  The weight
    and the statistics then combine into per-channel coefficients, as torch's
    kernels do (``_channel_grads``, and ``x * scale + shift`` forward).
    """
    return not rms and len(p) == len(nshape) and all(p[i] == 1 for i in axes)


def _sum_to(t: Any, shape: tuple[int, ...]) -> Any:
    """``t`` summed to ``shape`` (leading dims, and dims where ``shape`` has 1): a new array."""
    lead = t.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and t.shape[lead + i] != 1
    )
    if lead and len(dims) == lead:  # a layer norm's weight: over the rows (NOTE [A faster...])
        return sum_leading(t, lead).reshape(shape)
    return t.sum(axis=dims).reshape(shape)  # (a copy even when dims is empty)


def _normalize_grads(xp: Any, g: Any, x: Any, w: Any, attrs: Any, need: Any) -> Any:
    """The rule on arrays, from the forward's mean and rstd (NOTE [Normalisation as one primitive]).

    The rule's formulas in fewer passes: every temporary is owned here and
    updated in place.
    """
    nshape, axes, _, rms, pshape, xshape, wshape, bshape, (mean, rstd) = attrs
    if nshape == xshape and _per_channel(nshape, axes, pshape, rms):
        return _channel_grads(xp, g, x, w, attrs, need)
    cnt = float(math.prod(nshape[a] for a in axes))
    gv = g.reshape(nshape)
    if rms:
        y = x.reshape(nshape) * rstd
    else:
        y = x.reshape(nshape) - mean
        y *= rstd  # the normalised input
    t = xp.multiply(gv, y)
    gw = _sum_to(t.reshape(xshape), pshape).reshape(wshape) if need[1] else None
    gb = _sum_to(g, pshape).reshape(bshape) if need[2] else None
    gx = None
    if need[0]:
        # gx = rstd * (gy - mean(gy) - y * mean(gy * y)) over the axes (no mean(gy) for rms)
        gy = gv
        if w is not None:
            gy = (g * w.reshape(pshape)).reshape(nshape)
            xp.multiply(gy, y, out=t)
        proj = sum_trailing(t, axes, True) / cnt
        mean_gy = None if rms else sum_trailing(gy, axes, True) / cnt
        xp.multiply(y, proj, out=t)
        xp.subtract(gy, t, out=t)
        if mean_gy is not None:
            t -= mean_gy
        t *= rstd
        gx = t.reshape(xshape)
    return (gx, gw, gb)


def _channel_sum(a: Any, axes: tuple[int, ...]) -> Any:
    """``a.sum(axis=axes, keepdims=True)`` over the statistics' axes of a per-channel norm.

    batch_norm's axes (0, 2, 3...): the sum of each (sample, channel) row
    (``sum_trailing``), then over the samples: the order numpy's sum takes.
    """
    nd = a.ndim
    if nd >= 3 and axes == (0, *range(2, nd)) and a.flags.c_contiguous:
        rows = sum_trailing(a.reshape(a.shape[0], a.shape[1], -1), (2,), False)
        return rows.sum(axis=0).reshape((1, a.shape[1]) + (1,) * (nd - 2))
    return sum_trailing(a, axes, True)


def _channel_grads(xp: Any, g: Any, x: Any, w: Any, attrs: Any, need: Any) -> Any:
    """``_normalize_grads`` of batch_norm and instance_norm (``_per_channel``).

    With ``xc = x - mean`` and sums over the axes: ``gb = sum(g)``, ``gw =
    rstd * sum(g xc)``, and ``gx = rstd w (g - mean(g) - xc rstd^2 mean(g xc))``,
    whose small factors are per channel (``gw``, ``gb`` then summed over the
    batch for instance_norm).
    """
    _, axes, _, _, pshape, _, wshape, bshape, (mean, rstd) = attrs
    cnt = float(math.prod(x.shape[a] for a in axes))
    xc = x - mean
    sum_gxc = _channel_sum(xp.multiply(g, xc), axes)
    sum_g = _channel_sum(g, axes)
    gw = _sum_to(sum_gxc * rstd, pshape).reshape(wshape) if need[1] else None
    gb = _sum_to(sum_g, pshape).reshape(bshape) if need[2] else None
    gx = None
    if need[0]:
        xc *= rstd * rstd * (sum_gxc / cnt)
        xc += sum_g / cnt
        gx = xp.subtract(g, xc, out=xc)
        gx *= rstd if w is None else rstd * w.reshape(pshape)
    return (gx, gw, gb)


def _normalize_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # y = (x - mean) rstd: dy = rstd (t - mean(t) - y mean(t y)) (rms: no mean(t)),
    # then the result's y w + b: dy w + y tw + tb
    nshape, axes, eps, rms, pshape, xshape, _, _, _ = attrs
    x, w, _ = ins
    tx, tw, tb = ts
    cnt = float(math.prod(nshape[a] for a in axes))
    y, rstd = _stats(TENSOR_OPS, reshape(x, nshape), axes, cnt, eps, rms)
    total = None
    if tx is not None:
        tv = reshape(tx, nshape)
        inner = tv - y * (_sum(tv * y, axes, True) / cnt)
        if not rms:
            inner = inner - _sum(tv, axes, True) / cnt
        dy = reshape(rstd * inner, xshape)
        total = dy * reshape(w, pshape) if w is not None else dy
    if tw is not None:
        r = reshape(y, xshape) * reshape(tw, pshape)
        total = r if total is None else total + r
    if tb is not None:
        r = reshape(tb, pshape)
        total = r if total is None else total + r
    return total


NativeLayerNormBackward0 = node_class(
    "NativeLayerNormBackward0", _normalize_rule, jvp=_normalize_jvp
)
NativeGroupNormBackward0 = node_class(
    "NativeGroupNormBackward0", _normalize_rule, jvp=_normalize_jvp
)
NativeBatchNormBackward0 = node_class(
    "NativeBatchNormBackward0", _normalize_rule, jvp=_normalize_jvp
)
RmsNormBackward0 = node_class("RmsNormBackward0", _normalize_rule, jvp=_normalize_jvp)


def _normalize(
    cls: Any,
    x: Tensor,
    nshape: tuple[int, ...],
    axes: tuple[int, ...],
    eps: float,
    rms: bool,
    weight: Tensor | None,
    bias: Tensor | None,
    pshape: tuple[int, ...],
) -> tuple[Tensor, Any, Any]:
    """The normalised, scaled and shifted ``x``; also the batch mean and biased variance."""
    xp = x._device.backend.xp
    a = x.data
    av = a.reshape(nshape)
    cnt = math.prod(nshape[i] for i in axes)
    dev = x._device
    for t in (weight, bias):
        if t is not None:
            same_device(x, t)
            if t.data.dtype != a.dtype:
                raise RuntimeError(
                    f"expected the weight and bias to have the input's dtype {a.dtype}, got "
                    f"{t.data.dtype}; convert them with .to({a.dtype})"
                )
    # in place on the one result array (ours); rstd multiplies, as in torch's kernels
    per_channel = nshape == a.shape and _per_channel(nshape, axes, pshape, rms)
    if rms:
        mean = None
        y = av * av
        var = sum_trailing(y, axes, True) / cnt
    else:
        mean = (_channel_sum(av, axes) if per_channel else sum_trailing(av, axes, True)) / cnt
        y = av - mean
        if per_channel:  # (y: not needed after)
            var = _channel_sum(xp.multiply(y, y, out=y), axes) / cnt
        else:
            var = sum_trailing(y * y, axes, True) / cnt
    rstd = 1.0 / xp.sqrt(var + eps)
    w = weight.data.reshape(pshape) if weight is not None else None
    b = bias.data.reshape(pshape) if bias is not None else None
    if per_channel:
        # per channel: x * scale + shift (torch's batch_norm kernel), in y's memory
        assert mean is not None  # (never rms)
        scale = rstd if w is None else rstd * w
        shift = -mean * scale if b is None else b - mean * scale
        out = xp.multiply(av, scale, out=y)
        out += shift
    else:
        y = xp.multiply(av, rstd, out=y) if rms else xp.multiply(y, rstd, out=y)
        out = y.reshape(a.shape)
        if w is not None:
            out *= w
        if b is not None:
            out += b
    out = out.astype(a.dtype, copy=False)
    saved = (x,) if weight is None else (x, weight)
    wshape = weight.data.shape if weight is not None else None
    bshape = bias.data.shape if bias is not None else None
    stats = (mean, rstd)  # for a plain backward (_normalize_grads)
    attrs = (nshape, axes, float(eps), rms, pshape, a.shape, wshape, bshape, stats)
    t = record(cls, out, dev, (x, weight, bias), saved, attrs)
    return t, mean, var


def _eps(eps: Any, fn: str) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"{fn}(): argument 'eps' must be a float, not {type(eps).__name__}")
    return float(eps)


def _normalized_shape(normalized_shape: Any, fn: str) -> tuple[int, ...]:
    if isinstance(normalized_shape, (int, Tensor)):  # torch's F takes no int here
        raise TypeError(
            f"{fn}(): argument 'normalized_shape' must be a tuple of ints, not "
            f"{type(normalized_shape).__name__}; pass ({normalized_shape},)"
        )
    try:
        return tuple(int(s) for s in normalized_shape)
    except TypeError:
        raise TypeError(
            f"{fn}(): argument 'normalized_shape' must be an int or a tuple of ints, not "
            f"{type(normalized_shape).__name__}"
        ) from None


def _check_trailing(x: Tensor, shp: tuple[int, ...], fn: str, star: str) -> None:
    k = len(shp)
    if k == 0 or x.data.ndim < k or tuple(x.data.shape[-k:]) != shp:
        raise RuntimeError(
            f"Given normalized_shape={_shape_list(shp)}, expected input with shape "
            f"[{star}{', '.join(str(s) for s in shp)}], but got input of size"
            f"{_shape_list(x.data.shape)}; {fn}() normalises over the trailing dims"
        )


def _check_param(t: Tensor | None, shape: tuple[int, ...], what: str, shp: tuple[int, ...]) -> None:
    if t is not None and tuple(t.data.shape) != shape:
        raise RuntimeError(
            f"Expected {what} to be of same shape as normalized_shape, but got {what} of shape "
            f"{_shape_list(t.data.shape)} and normalized_shape = {_shape_list(shp)}"
        )


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
) -> Tensor:
    """Layer normalisation over the trailing ``normalized_shape`` dims, then ``* weight + bias``.

    Example::

        >>> import aengine as ae
        >>> y = ae.nn.functional.layer_norm(ae.tensor([[1.0, 3.0]]), (2,))
        >>> [round(v, 3) for v in y[0].tolist()]
        [-1.0, 1.0]
    """
    x = _tensor(input, "layer_norm", "input")
    w = _opt_tensor(weight, "layer_norm", "weight")
    b = _opt_tensor(bias, "layer_norm", "bias")
    shp = _normalized_shape(normalized_shape, "layer_norm")
    _check_trailing(x, shp, "layer_norm", "*, ")
    _check_param(w, shp, "weight", shp)
    _check_param(b, shp, "bias", shp)
    _floating(x, "layer_norm")
    axes = tuple(range(x.data.ndim - len(shp), x.data.ndim))
    cls = NativeLayerNormBackward0
    return _normalize(cls, x, x.data.shape, axes, _eps(eps, "layer_norm"), False, w, b, shp)[0]


def rms_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dims, then ``* weight``.

    ``eps`` None means the machine epsilon of the input's dtype (as torch).

    Example::

        >>> import aengine as ae
        >>> y = ae.nn.functional.rms_norm(ae.tensor([[3.0, 4.0]]), (2,))
        >>> [round(v, 3) for v in y[0].tolist()]
        [0.849, 1.131]
    """
    x = _tensor(input, "rms_norm", "input")
    w = _opt_tensor(weight, "rms_norm", "weight")
    shp = _normalized_shape(normalized_shape, "rms_norm")
    _check_trailing(x, shp, "rms_norm", "*")
    _check_param(w, shp, "weight", shp)
    _floating(x, "rms_norm")
    e = float(np.finfo(x.data.dtype).eps) if eps is None else _eps(eps, "rms_norm")
    axes = tuple(range(x.data.ndim - len(shp), x.data.ndim))
    return _normalize(RmsNormBackward0, x, x.data.shape, axes, e, True, w, None, shp)[0]


def _channel_param(t: Tensor | None, x: Tensor, what: str) -> None:
    c = x.data.shape[1]
    if t is not None and tuple(t.data.shape) != (c,):
        raise RuntimeError(
            f"Expected {what} to be a vector of size equal to the number of channels in input, "
            f"but got {what} of shape {_shape_list(t.data.shape)} and input of shape "
            f"{_shape_list(x.data.shape)}"
        )


def _channels_input(x: Tensor, fn: str, least: int = 2) -> None:
    if x.data.ndim < least:
        raise ValueError(
            f"{fn}(): expected an input of at least {least} dims (N, C, ...), got "
            f"{x.data.ndim}D of shape {_shape_list(x.data.shape)}"
        )


def _pshape(x: Tensor) -> tuple[int, ...]:
    """The shape that broadcasts a per-channel vector over ``x`` (N, C, ...)."""
    nd: int = x.data.ndim
    return (1, int(x.data.shape[1])) + (1,) * (nd - 2)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
) -> Tensor:
    """Group normalisation: the channels of (N, C, ...) in ``num_groups`` groups, normalised each.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[1.0, 3.0, 0.0, 2.0]])
        >>> [round(v, 3) for v in ae.nn.functional.group_norm(x, 2)[0].tolist()]
        [-1.0, 1.0, -1.0, 1.0]
    """
    x = _tensor(input, "group_norm", "input")
    w = _opt_tensor(weight, "group_norm", "weight")
    b = _opt_tensor(bias, "group_norm", "bias")
    _channels_input(x, "group_norm")
    shape = x.data.shape
    c = shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int):
        raise TypeError(
            f"group_norm(): argument 'num_groups' must be an int, not {type(num_groups).__name__}"
        )
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(
            "Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {_shape_list(shape)} and num_groups={num_groups}"
        )
    _channel_param(w, x, "weight")
    _channel_param(b, x, "bias")
    _floating(x, "group_norm")
    n = shape[0]
    rest = math.prod(shape[1:]) // num_groups
    nshape = (n, num_groups, rest)
    e = _eps(eps, "group_norm")
    return _normalize(NativeGroupNormBackward0, x, nshape, (2,), e, False, w, b, _pshape(x))[0]


def _running(t: Any, x: Tensor, what: str, fn: str, scale: int = 1) -> Tensor | None:
    if t is None:
        return None
    r = _tensor(t, fn, what)
    c = x.data.shape[1]
    if r.data.size != c * scale:
        raise RuntimeError(f"{what} should contain {c * scale} elements not {r.data.size}")
    return r


def _eval_norm(
    x: Tensor,
    rm: Tensor,
    rv: Tensor,
    w: Tensor | None,
    b: Tensor | None,
    eps: float,
) -> Tensor:
    """``(x - running_mean) / sqrt(running_var + eps) * weight + bias``, per channel."""
    ps = _pshape(x)
    xp = x._device.backend.xp
    dt = x.data.dtype
    mean = wrap(rm.data.astype(dt).reshape(ps), x._device)
    inv = wrap((1.0 / xp.sqrt(rv.data.astype(dt) + eps)).astype(dt).reshape(ps), x._device)
    out = mul(sub(x, mean), inv)
    if w is not None:
        out = mul(out, reshape(w, ps))
    if b is not None:
        out = add(out, reshape(b, ps))
    return out


def _update(running: Tensor | None, stat: Any, momentum: float) -> None:
    """``running = (1 - momentum) * running + momentum * stat`` in place (version bumped)."""
    if running is None:
        return
    new = (1.0 - momentum) * running.data + momentum * stat.reshape(running.data.shape)
    with no_grad():
        copy_(running, wrap(new.astype(running.data.dtype), running._device))


def _momentum(momentum: Any, fn: str) -> float:
    if isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise TypeError(
            f"{fn}(): argument 'momentum' must be a float, not {type(momentum).__name__}"
        )
    return float(momentum)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-05,
) -> Tensor:
    """Batch normalisation of (N, C, ...) per channel, then ``* weight + bias``.

    In training mode the batch's statistics normalise, and ``running_mean``
    / ``running_var`` (when given) are updated in place as torch does
    (``(1 - momentum) * running + momentum * batch``, the unbiased variance);
    in eval mode the running statistics normalise.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[1.0], [3.0]])
        >>> rm, rv = ae.zeros(1), ae.ones(1)
        >>> y = ae.nn.functional.batch_norm(x, rm, rv, training=True)
        >>> [round(v, 3) for v in y[:, 0].tolist()], [round(v, 3) for v in rm.tolist()]
        ([-1.0, 1.0], [0.2])
    """
    fn = "batch_norm"
    x = _tensor(input, fn, "input")
    w = _opt_tensor(weight, fn, "weight")
    b = _opt_tensor(bias, fn, "bias")
    if x.data.ndim < 2:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [-1, 0], but got 1): "
            f"batch_norm expects an input of (N, C, ...), got {_shape_list(x.data.shape)}"
        )
    rm = _running(running_mean, x, "running_mean", fn)
    rv = _running(running_var, x, "running_var", fn)
    _channel_param(w, x, "weight")
    _channel_param(b, x, "bias")
    _floating(x, fn)
    e = _eps(eps, fn)
    mom = _momentum(momentum, fn)
    if not training:
        if rm is None or rv is None:
            raise RuntimeError(
                f"running_{'mean' if rm is None else 'var'} must be defined in evaluation "
                "mode; pass the running statistics or training=True"
            )
        return _eval_norm(x, rm, rv, w, b, e)
    shape = x.data.shape
    axes = (0, *range(2, x.data.ndim))
    cnt = math.prod(shape[i] for i in axes)
    if cnt <= 1:
        raise ValueError(
            "Expected more than 1 value per channel when training, got input size "
            f"torch.Size({_shape_list(shape)})"
        )
    out, mean, var = _normalize(
        NativeBatchNormBackward0, x, shape, axes, e, False, w, b, _pshape(x)
    )
    _update(rm, mean, mom)
    _update(rv, var * (cnt / (cnt - 1)), mom)
    return out


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-05,
) -> Tensor:
    """Instance normalisation: each (sample, channel) of (N, C, ...) over its spatial dims.

    With ``use_input_stats`` (the default) the running statistics, when
    given, are updated in place with the batch's mean of the instances'
    statistics (as torch); without it they normalise instead.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[[1.0, 3.0]]])
        >>> [round(v, 3) for v in ae.nn.functional.instance_norm(x)[0, 0].tolist()]
        [-1.0, 1.0]
    """
    fn = "instance_norm"
    x = _tensor(input, fn, "input")
    w = _opt_tensor(weight, fn, "weight")
    b = _opt_tensor(bias, fn, "bias")
    _channels_input(x, fn)
    rm = _running(running_mean, x, "running_mean", fn)
    rv = _running(running_var, x, "running_var", fn)
    _channel_param(w, x, "weight")
    _channel_param(b, x, "bias")
    _floating(x, fn)
    e = _eps(eps, fn)
    mom = _momentum(momentum, fn)
    shape = x.data.shape
    if not use_input_stats:
        if rm is None or rv is None:
            raise RuntimeError(
                "Expected running_mean and running_var to be defined when use_input_stats is false"
            )
        return _eval_norm(x, rm, rv, w, b, e)
    axes = tuple(range(2, x.data.ndim))
    cnt = math.prod(shape[2:])
    if cnt <= 1:
        raise ValueError(
            "Expected more than 1 spatial element when training, got input size "
            f"torch.Size({_shape_list(shape)})"
        )
    cls = NativeBatchNormBackward0
    out, mean, var = _normalize(cls, x, shape, axes, e, False, w, b, _pshape(x))
    if rm is not None:
        _update(rm, mean.mean(axis=0), mom)
    if rv is not None:
        _update(rv, (var * (cnt / (cnt - 1))).mean(axis=0), mom)
    return out


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None
) -> Tensor:
    """``input / max(norm(input, p, dim), eps)``: unit ``p``-norm vectors along ``dim``.

    Example::

        >>> import aengine as ae
        >>> y = ae.nn.functional.normalize(ae.tensor([[3.0, 4.0]]))
        >>> [round(v, 4) for v in y[0].tolist()]
        [0.6, 0.8]
    """
    x = _tensor(input, "normalize", "input")
    if out is not None:
        raise NotImplementedError("normalize(): out= is not supported; assign the result instead")
    return x / clamp(norm(x, p, dim, True), min=eps)


# -- linear layers ---------------------------------------------------------------------------
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: a linear layer (weight of shape (out, in), or (in,)).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.linear(ae.ones(2, 3), ae.ones(4, 3), ae.zeros(4)).shape
        (2, 4)
    """
    x = _tensor(input, "linear", "input")
    w = _tensor(weight, "linear", "weight")
    b = _opt_tensor(bias, "linear", "bias")
    wd, xd = w.data.ndim, x.data.ndim
    if wd not in (1, 2) or xd == 0:
        raise RuntimeError(
            f"linear(): expected a weight of 1 or 2 dims and an input of at least 1, got "
            f"weight {_shape_list(w.data.shape)} and input {_shape_list(x.data.shape)}"
        )
    k = w.data.shape[-1]
    if x.data.shape[-1] != k:
        rows = math.prod(x.data.shape[:-1])
        cols = w.data.shape[0] if wd == 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.data.shape[-1]} and "
            f"{k}x{cols}); the input's last dim must be the weight's in_features"
        )
    if wd == 2 and xd >= 2 and (b is None or b.data.dtype == x.data.dtype):
        return _linear2(x, w, b)
    out = matmul(x, transpose(w, 0, 1) if wd == 2 else w)
    if b is None:
        return out
    if wd == 1 and b.data.ndim:
        raise RuntimeError("linear(): with a 1-D weight the bias must be 0-d (a number)")
    _check_bias(b, tuple(out.data.shape))
    return add(out, b)


# NOTE [One node for a linear layer]
# ``x @ w.T + b`` as three ops records three nodes (a transpose, a product, an
# add) and gives the weight the transpose of ``x.T @ g``: an F-ordered
# gradient, which ``.grad`` stores in C order (NOTE in core/_commit.py), a
# transposing copy (0.6 ms for 512x512, more than the product).  A 2-D
# weight, an input of 2 or more dims and a bias of the input's dtype record
# one node instead (torch's AddmmBackward0, MmBackward0 without bias), whose
# rule computes the products on the rows of ``x`` and ``g`` flattened to 2-D
# (one BLAS call where a 3-D input made a batch of small products and a sum)
# and the weight's gradient as ``g.T @ x``, in C order.
def _linear_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, w = s[0], s[1]
    need = n.needs
    xshape = tuple(x.shape)
    out_f, in_f = w.shape
    g2 = g if g.ndim == 2 else F.reshape(g, (math.prod(g.shape[:-1]), out_f))
    gx = gw = gb = None
    if need[0]:
        gx = F.matmul(g2, w)
        if len(xshape) != 2:
            gx = F.reshape(gx, xshape)
    if need[1]:
        x2 = x if len(xshape) == 2 else F.reshape(x, (math.prod(xshape[:-1]), in_f))
        gw = F.matmul(F.swapaxes(g2, 0, 1), x2)
    if len(need) > 2 and need[2]:
        gb = F.sum_to(g2, n.attrs) if len(n.attrs) < 2 else F.sum_to(g, n.attrs)
    return (gx, gw, gb)


def _linear_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    x, w = ins[0], ins[1]
    total = None
    if ts[0] is not None:
        total = _linear2(ts[0], w, None)
    if ts[1] is not None:
        r = _linear2(x, ts[1], None)
        total = r if total is None else total + r
    if len(ts) > 2 and ts[2] is not None:
        total = ts[2] if total is None else total + ts[2]
    return total


AddmmBackward0 = node_class("AddmmBackward0", _linear_rule, jvp=_linear_jvp)
_LinearMmBackward0 = node_class("MmBackward0", _linear_rule, jvp=_linear_jvp)


def _linear2(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """``linear`` of a 2-D weight on an input of 2+ dims: one node (NOTE [One node...])."""
    dev = same_device(x, w)
    if x.data.dtype != w.data.dtype:
        matmul(x, transpose(w, 0, 1))  # raises its dtype error
    xa, wa = x.data, w.data
    k = wa.shape[1]
    lead = xa.shape[:-1]
    out = (xa if xa.ndim == 2 else xa.reshape(-1, k)) @ wa.T
    if b is None:
        if xa.ndim != 2:
            out = out.reshape(*lead, wa.shape[0])
        t = record(_LinearMmBackward0, out, dev, (x, w), (x, w))
    else:
        same_device(x, b)
        oshape = (*lead, wa.shape[0])
        _check_bias(b, oshape)
        bshape = tuple(b.data.shape)
        if xa.ndim != 2:
            out = out.reshape(oshape)
        out += b.data
        t = record(AddmmBackward0, out, dev, (x, w, b), (x, w), bshape)
    node = t._fn
    if node is not None and k > _MACS_PER_ELEMENT:
        node.numel = t.data.size * k // _MACS_PER_ELEMENT
    return t


def _check_bias(b: Tensor, oshape: tuple[int, ...]) -> None:
    try:
        fits = tuple(np.broadcast_shapes(oshape, tuple(b.data.shape))) == oshape
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(
            f"linear(): bias of shape {_shape_list(b.data.shape)} does not broadcast to the "
            f"output's shape {_shape_list(oshape)}; it should have out_features elements"
        )


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x1^T A x2 + b`` per output feature: weight (out, in1, in2), inputs (..., in1), (..., in2).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.bilinear(ae.ones(2, 3), ae.ones(2, 4), ae.ones(5, 3, 4)).shape
        (2, 5)
    """
    fn = "bilinear"
    x1 = _tensor(input1, fn, "input1")
    x2 = _tensor(input2, fn, "input2")
    w = _tensor(weight, fn, "weight")
    b = _opt_tensor(bias, fn, "bias")
    s1, s2 = x1.data.shape, x2.data.shape
    if w.data.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D (out, in1, in2), got {w.data.ndim}-D")
    if x1.data.ndim != x2.data.ndim or x1.data.ndim == 0:
        raise RuntimeError(
            f"bilinear(): input dimensions do not match: got {x1.data.ndim} and {x2.data.ndim}"
        )
    for i, (d1, d2) in enumerate(zip(s1[:-1], s2[:-1])):
        if d1 != d2:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {i}: got {d1} and {d2}"
            )
    o, i1, i2 = w.data.shape
    if s1[-1] != i1:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {s1[-1]} but expected {i1}"
        )
    if s2[-1] != i2:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {s2[-1]} but expected {i2}"
        )
    if b is not None and tuple(b.data.shape) != (o,):
        raise RuntimeError(
            f"bilinear(): bias size does not match weight size: got "
            f"{b.data.shape[0] if b.data.ndim == 1 else _shape_list(b.data.shape)} but "
            f"expected {o}"
        )
    wm = reshape(transpose(w, 0, 1), (i1, o * i2))  # (in1, out * in2)
    t = reshape(matmul(x1, wm), (*s1[:-1], o, i2))
    out = _sum(mul(t, unsqueeze(x2, -2)), -1)
    return out if b is None else add(out, b)


# -- embedding, one_hot ------------------------------------------------------------------------
def _embedding_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    idx, keep, scale, vshape = n.attrs
    g2 = F.reshape(g, (-1, vshape[1]))
    if keep is not None:
        g2 = F.getitem(g2, keep)
    if scale is not None:
        g2 = g2 * scale
    return (F.index_add(vshape, (idx,), g2, False),)


def _embedding_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    idx, keep, _, _ = attrs
    if keep is not None:  # (the indices of padding_idx are not kept on the node)
        raise ForwardUnsupported(
            "Trying to use forward AD with embedding with padding_idx that does not support "
            "it because it has not been implemented yet; use reverse mode (ae.grad)"
        )
    return reshape(getitem(ts[0], (idx,)), out.data.shape)


EmbeddingBackward0 = node_class("EmbeddingBackward0", _embedding_rule, jvp=_embedding_jvp)


def _index_tensor(t: Tensor, fn: str) -> None:
    if t.data.dtype.kind not in "iu":
        raise RuntimeError(
            f"Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {t.data.dtype} instead (while checking arguments for "
            f"{fn}); convert it with .to(ae.int64)"
        )


def _renorm(w: Tensor, idx: Any, max_norm: float, norm_type: float) -> None:
    """torch's embedding_renorm_: rows of ``w`` used by ``idx`` scaled to norm <= max_norm."""
    xp = w._device.backend.xp
    rows = xp.unique(idx)
    if rows.size == 0:
        return
    new = w.data.copy()
    sel = new[rows]
    if norm_type == math.inf:
        nrm = xp.abs(sel).max(axis=1)
    else:
        nrm = (xp.abs(sel) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
    factor = xp.where(nrm > max_norm, max_norm / (nrm + 1e-7), 1.0)
    new[rows] = (sel * factor[:, None]).astype(new.dtype)
    with no_grad():
        copy_(w, wrap(new, w._device))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) at the integer ``input``: shape ``input.shape + (dim,)``.

    ``padding_idx``'s row gets no gradient; ``max_norm`` renormalises the
    rows used in place first (as torch); ``scale_grad_by_freq`` divides
    each row's gradient by its count in ``input``.  ``sparse`` gradients
    are not supported.

    Example::

        >>> import aengine as ae
        >>> w = ae.tensor([[0.0, 1.0], [2.0, 3.0]])
        >>> ae.nn.functional.embedding(ae.tensor([1, 1, 0]), w).tolist()
        [[2.0, 3.0], [2.0, 3.0], [0.0, 1.0]]
    """
    fn = "embedding"
    idx_t = _tensor(input, fn, "input")
    w = _tensor(weight, fn, "weight")
    _index_tensor(idx_t, fn)
    if w.data.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got a {w.data.ndim}-D tensor")
    if sparse:
        raise NotImplementedError("embedding(): sparse gradients are not supported; sparse=False")
    same_device(idx_t, w)
    v, d = w.data.shape
    if padding_idx is not None:
        if padding_idx >= 0:
            if padding_idx >= v:
                raise AssertionError("Padding_idx must be within num_embeddings")
        else:
            if padding_idx < -v:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = v + padding_idx
    xp = w._device.backend.xp
    idx = idx_t.data.astype(np.int64, copy=False)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= v):
        raise IndexError(
            f"index out of range in self: embedding indices must be in [0, {v}), got values in "
            f"[{int(idx.min())}, {int(idx.max())}]"
        )
    if max_norm is not None:
        _renorm(w, idx, float(max_norm), float(norm_type))
    out = xp.take(w.data, idx, axis=0)
    flat = idx.reshape(-1)
    keep = None
    if padding_idx is not None:
        keep = xp.nonzero(flat != padding_idx)[0]
        flat = flat[keep]
    scale = None
    if scale_grad_by_freq and flat.size:
        counts = xp.bincount(flat, minlength=v)
        scale = (1.0 / counts[flat]).astype(w.data.dtype).reshape(-1, 1)
    return record_one(EmbeddingBackward0, out, w._device, w, 1, (flat, keep, scale, (v, d)))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """One-hot encoding of an int64 tensor: shape ``tensor.shape + (num_classes,)``, int64.

    ``num_classes=-1`` takes one more than the largest value.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.one_hot(ae.tensor([0, 2])).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    t = _tensor(tensor, "one_hot", "tensor")
    a = t.data
    if a.dtype != np.int64:
        raise RuntimeError(
            "one_hot is only applicable to index tensor of type LongTensor; got "
            f"{a.dtype}, convert it with .to(ae.int64)"
        )
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise TypeError(
            f"one_hot(): argument 'num_classes' must be an int, not {type(num_classes).__name__}"
        )
    if num_classes == -1:
        if a.size == 0:
            raise RuntimeError(
                "Can not infer total number of classes from empty tensor; pass num_classes"
            )
        num_classes = int(a.max()) + 1
    if a.size and int(a.min()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if a.size and int(a.max()) >= num_classes:
        raise RuntimeError(
            f"Class values must be smaller than num_classes. (got {int(a.max())} for "
            f"num_classes={num_classes})"
        )
    xp = t._device.backend.xp
    out = (a[..., None] == xp.arange(num_classes)).astype(np.int64)
    return wrap(out, t._device)


# -- dropout -----------------------------------------------------------------------------------
def _check_p(p: Any, fn: str) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{fn} probability has to be between 0 and 1, but got {p}")
    return float(p)


def _keep_mask(x: Tensor, p: float) -> Tensor:
    """A constant tensor like ``x``: ``1 / (1 - p)`` with probability ``1 - p``, else 0.

    Drawn from aengine's default generator (``ae.manual_seed`` makes it reproducible).
    """
    shape = x.data.shape
    dt = x.data.dtype
    if p >= 1.0:
        host = np.zeros(shape, dtype=dt)
    else:
        keep = generator_rng(None).random(shape) >= p
        host = (keep * (1.0 / (1.0 - p))).astype(dt)
    return wrap(x._device.backend.from_numpy(host), x._device)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training).

    Not training, or ``p == 0``: ``input`` itself.  The mask comes from
    aengine's default generator (reproducible under ``ae.manual_seed``);
    the gradient is the mask times the scale.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(4)
        >>> ae.nn.functional.dropout(x, 0.5, training=False) is x
        True
    """
    x = _tensor(input, "dropout", "input")
    q = _check_p(p, "dropout")
    if not training or q == 0.0:
        return x
    _floating(x, "dropout")
    mask = _keep_mask(x, q)
    if inplace:
        return mul_(x, mask)
    return mul(x, mask)


# -- attention --------------------------------------------------------------------------------
def _repeat_heads(t: Tensor, r: int) -> Tensor:
    """``t.repeat_interleave(r, dim=-3)`` (grouped-query attention's key/value heads)."""
    s = t.data.shape
    e = broadcast_to(unsqueeze(t, -3), (*s[:-2], r, *s[-2:]))
    return reshape(e, (*s[:-3], s[-3] * r, *s[-2:]))


def _attn_bias(
    mask: Any, is_causal: bool, q: Tensor, big: tuple[int, ...], lq: int, sk: int
) -> Tensor | None:
    """The additive mask of attention (a constant for bool and causal masks), or None."""
    fn = "scaled_dot_product_attention"
    xp = q._device.backend.xp
    dt = q.data.dtype
    if is_causal:
        if mask is not None:
            raise RuntimeError(
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                "is_causal=True; pass one or the other"
            )
        keep = xp.tril(xp.ones((lq, sk), dtype=bool))
        return wrap(xp.where(keep, 0.0, -xp.inf).astype(dt), q._device)
    if mask is None:
        return None
    m = _tensor(mask, fn, "attn_mask")
    same_device(q, m)
    if _broadcast_shape(fn, big, tuple(m.data.shape)) != big:
        raise RuntimeError(
            f"{fn}(): attn_mask of shape {_shape_list(m.data.shape)} does not broadcast to the "
            f"attention weights' shape {_shape_list(big)}"
        )
    if m.data.dtype == np.bool_:
        return wrap(xp.where(m.data, 0.0, -xp.inf).astype(dt), q._device)
    if m.data.dtype.kind != "f":
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {m.data.dtype} and query.dtype: {dt} instead."
        )
    return m if m.data.dtype == dt else to(m, dtype=dt)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` over (..., L, E), (..., S, E), (..., S, Ev).

    As torch's math path: ``scale`` defaults to ``1 / sqrt(E)``; a bool
    ``attn_mask`` keeps where True, a float one is added; ``is_causal``
    keeps the lower triangle; rows masked entirely give zeros;
    ``dropout_p > 0`` drops attention weights with aengine's generator;
    ``enable_gqa`` repeats the key/value heads (dim -3) to the query's.

    Example::

        >>> import aengine as ae
        >>> q = k = v = ae.ones(2, 3, 4)
        >>> ae.nn.functional.scaled_dot_product_attention(q, k, v).shape
        (2, 3, 4)
    """
    fn = "scaled_dot_product_attention"
    q = _tensor(query, fn, "query")
    k = _tensor(key, fn, "key")
    v = _tensor(value, fn, "value")
    if min(q.data.ndim, k.data.ndim, v.data.ndim) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be at least 2 dimensional, but got "
            f"query.dim: {q.data.ndim} key.dim: {k.data.ndim} and value.dim: {v.data.ndim} "
            "instead."
        )
    dts = (q.data.dtype, k.data.dtype, v.data.dtype)
    if dts[0] != dts[1] or dts[0] != dts[2]:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{dts[0]} key.dtype: {dts[1]} and value.dtype: {dts[2]} instead."
        )
    _floating(q, fn)
    same_device(q, k)
    same_device(q, v)
    lq, e = q.data.shape[-2:]
    sk, ek = k.data.shape[-2:]
    if ek != e:
        raise RuntimeError(
            f"{fn}(): query and key must have the same embedding dim (last), got {e} and {ek}"
        )
    if v.data.shape[-2] != sk:
        raise RuntimeError(
            f"{fn}(): key and value must have the same sequence length (dim -2), got {sk} and "
            f"{v.data.shape[-2]}"
        )
    if enable_gqa and min(q.data.ndim, k.data.ndim, v.data.ndim) >= 3:
        hq = q.data.shape[-3]
        for name, t in (("key", k), ("value", v)):
            h = t.data.shape[-3]
            if h != hq and (h == 0 or hq % h):
                raise RuntimeError(
                    f"{fn}(): with enable_gqa the query's heads ({hq}) must be a multiple of the "
                    f"{name}'s ({h})"
                )
        if k.data.shape[-3] != hq:
            k = _repeat_heads(k, hq // k.data.shape[-3])
        if v.data.shape[-3] != hq:
            v = _repeat_heads(v, hq // v.data.shape[-3])
    batch = _broadcast_shape(fn, q.data.shape[:-2], k.data.shape[:-2], v.data.shape[:-2])
    bias = _attn_bias(attn_mask, is_causal, q, (*batch, lq, sk), lq, sk)
    sc = 1.0 / math.sqrt(e) if scale is None else float(scale)
    sf = math.sqrt(builtins.abs(sc))
    attn = matmul(mul(q, -sf if sc < 0 else sf), transpose(mul(k, sf), -2, -1))
    xp = q._device.backend.xp
    # torch's _safe_softmax: a row masked entirely (all -inf) gives zeros, not NaN.  No
    # mask, or the causal one (which keeps each row's first key), masks no row unless a
    # score is -inf: then the check on every row (a reduction over short rows) is skipped
    may_mask = not (bias is None or is_causal) or bool(xp.isneginf(attn.data).any())
    if bias is not None:
        attn = add(attn, bias)
    full = xp.all(attn.data == -xp.inf, axis=-1, keepdims=True) if may_mask else None
    masked = full is not None and bool(full.any())
    if masked:
        attn = where(full, 0.0, attn)
    w = softmax(attn, -1)
    if masked:
        w = where(full, 0.0, w)
    if dropout_p:
        w = mul(w, _keep_mask(w, _check_p(dropout_p, "dropout")))
    return matmul(w, v)


# -- distances -------------------------------------------------------------------------------
def _unclamped_grad_max(t: Tensor, eps: float) -> Tensor:
    """``max(t, eps)`` in value with ``t``'s gradient (torch's clamp_min_ under no_grad)."""
    xp = t._device.backend.xp
    shift = (xp.maximum(t.data, eps) - t.data).astype(t.data.dtype)
    return add(t, wrap(shift, t._device))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-08) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcasting them).

    As torch: each is divided by its norm clamped below at ``eps`` (the clamp
    takes no part in the gradient), then the products are summed.

    Example::

        >>> import aengine as ae
        >>> a = ae.tensor([[1.0, 0.0]]); b = ae.tensor([[1.0, 1.0]])
        >>> round(ae.nn.functional.cosine_similarity(a, b).item(), 4)
        0.7071
    """
    fn = "cosine_similarity"
    a = _tensor(x1, fn, "x1")
    b = _tensor(x2, fn, "x2")
    shape = _broadcast_shape(fn, tuple(a.data.shape), tuple(b.data.shape))
    if tuple(a.data.shape) != shape:
        a = broadcast_to(a, shape)
    if tuple(b.data.shape) != shape:
        b = broadcast_to(b, shape)
    n1 = _unclamped_grad_max(norm(a, 2, dim, True), eps)
    n2 = _unclamped_grad_max(norm(b, 2, dim, True), eps)
    return _sum(mul(a / n1, b / n2), dim)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-06, keepdim: bool = False
) -> Tensor:
    """``p``-norm of ``x1 - x2 + eps`` along the last dim (broadcasting them).

    Example::

        >>> import aengine as ae
        >>> d = ae.nn.functional.pairwise_distance(ae.tensor([[0.0, 0.0]]), ae.tensor([[3.0, 4.0]]))
        >>> round(d.item(), 4)
        5.0
    """
    fn = "pairwise_distance"
    a = _tensor(x1, fn, "x1")
    b = _tensor(x2, fn, "x2")
    _broadcast_shape(fn, tuple(a.data.shape), tuple(b.data.shape))
    nd = builtins.max(a.data.ndim, b.data.ndim)
    diff = add(sub(a, b), eps)
    return norm(diff, p, nd - 1 if nd else None, keepdim)


_CDIST_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def cdist(
    x1: Tensor,
    x2: Tensor,
    p: float = 2.0,
    compute_mode: str = "use_mm_for_euclid_dist_if_necessary",
) -> Tensor:
    """``p``-norm distances between the rows of (..., P, M) and (..., R, M): shape (..., P, R).

    Computed from the differences whatever ``compute_mode`` (exact; torch's
    matrix-product path for p=2 rounds differently).

    Example::

        >>> import aengine as ae
        >>> ae.cdist(ae.tensor([[0.0, 0.0]]), ae.tensor([[3.0, 4.0], [0.0, 1.0]])).tolist()
        [[5.0, 1.0]]
    """
    fn = "cdist"
    a = _tensor(x1, fn, "x1")
    b = _tensor(x2, fn, "x2")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, t in (("X1", a), ("X2", b)):
        if t.data.ndim < 2:
            raise RuntimeError(
                f"cdist only supports at least 2D tensors, {name} got: {t.data.ndim}D"
            )
    if a.data.shape[-1] != b.data.shape[-1]:
        raise RuntimeError(
            "X1 and X2 must have the same number of columns. X1: "
            f"{a.data.shape[-1]} X2: {b.data.shape[-1]}"
        )
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    _floating(a, fn)
    same_device(a, b)
    _broadcast_shape(fn, tuple(a.data.shape[:-2]), tuple(b.data.shape[:-2]))
    diff = sub(unsqueeze(a, -2), unsqueeze(b, -3))  # (..., P, R, M)
    if p == 0:  # the number of differing coordinates: gradient 0
        count = (diff.data != 0).sum(axis=-1).astype(diff.data.dtype)
        return add(_sum(mul(diff, 0.0), -1), wrap(count, diff._device))
    if p >= 1:
        return norm(diff, p, -1)
    return _sum(_abs(diff) ** p, -1) ** (1.0 / p)


# -- the table ---------------------------------------------------------------------------------
_LOOSE32 = {"float32": (1e-3, 1e-4)}


def _layer_norm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), (4,), m.arr(4), m.arr(4)))
    yield Sample((m.arr(2, 3, 4), (3, 4), m.arr(3, 4), m.arr(3, 4)), {"eps": 1e-3})
    yield Sample((m.arr(3, 5), [5]), note="no weight nor bias")
    # (weight or bias alone: torch's second derivative raises; tests/ops/test_norm_table.py)
    yield Sample((m.arr(2, 3), (3,), m.arr(3), m.arr(3)))


def _layer_norm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 4), (3,)), exc=RuntimeError, match="normalized_shape")
    yield ErrorCase((m.arr(2, 4), (4,), m.arr(3)), exc=RuntimeError, match="weight")
    yield ErrorCase((m.arr(2, 4), 4), exc=TypeError, match="tuple of ints")


def _rms_norm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), (4,), m.arr(4)))
    yield Sample((m.arr(3, 5), (5,)), note="no weight, default eps")
    yield Sample((m.arr(2, 3, 4), (3, 4), m.arr(3, 4)), {"eps": 1e-3})


def _rms_norm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 4), (3,)), exc=RuntimeError, match="normalized_shape")
    yield ErrorCase((m.arr(2, 4), (4,), m.arr(2)), exc=RuntimeError, match="weight")


def _group_norm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 4, 3), 2, m.arr(4), m.arr(4)))
    yield Sample((m.arr(2, 6), 3), note="2-D input, no affine")
    yield Sample((m.arr(2, 4, 2, 2), 4, m.arr(4), m.arr(4)), {"eps": 1e-3}, note="4-D")
    yield Sample((m.arr(3, 4, 5), 1, m.arr(4)), note="one group, weight only")


def _group_norm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 4), 2), exc=RuntimeError, match="divisible by num_groups")
    yield ErrorCase((m.arr(2, 4, 3), 2, m.arr(3)), exc=RuntimeError, match="weight")


def _batch_norm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(4, 3), None, None, m.arr(3), m.arr(3), True), note="training, no stats")
    yield Sample(
        (m.arr(4, 3, 2), m.arr(3), m.pos(3), m.arr(3), m.arr(3), True, 0.2),
        grad=(0, 3, 4),
        note="training, updating running stats",
    )
    yield Sample(
        (m.arr(4, 3, 2), m.arr(3), m.pos(3), m.arr(3), m.arr(3), False),
        grad=(0, 3, 4),
        note="eval: the running stats normalise",
    )
    yield Sample((m.arr(3, 2, 2, 2), None, None, None, None, True), {"eps": 1e-3}, note="4-D")
    # (eval without a weight: the input's gradient is constant, torch's records a graph anyway)
    yield Sample((m.arr(2, 3, 4), m.arr(3), m.pos(3), m.arr(3)), grad=(0, 3), note="eval")


def _batch_norm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(4, 3), None, None), exc=RuntimeError, match="running_mean")
    yield ErrorCase(
        (m.arr(4, 3), m.arr(4), m.pos(4), None, None, True), exc=RuntimeError, match="3 elements"
    )
    yield ErrorCase(
        (m.arr(1, 3), None, None, None, None, True), exc=ValueError, match="more than 1 value"
    )


def _instance_norm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4),))
    yield Sample((m.arr(2, 3, 4), None, None, m.arr(3), m.arr(3)), note="affine")
    yield Sample(
        (m.arr(2, 3, 2, 2), m.arr(3), m.pos(3), m.arr(3), m.arr(3), True, 0.3),
        grad=(0, 3, 4),
        note="updating running stats",
    )
    yield Sample(
        (m.arr(2, 3, 4), m.arr(3), m.pos(3), m.arr(3), m.arr(3), False),
        grad=(0, 3, 4),
        note="use_input_stats=False: the running stats normalise",
    )


def _instance_norm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 1),), exc=ValueError, match="more than 1 spatial element")
    yield ErrorCase((m.arr(2, 3, 4), None, None, m.arr(2)), exc=RuntimeError, match="weight")


def _normalize_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),))
    yield Sample((m.away(3, 4), 1.0, 0), note="p=1 along dim 0")
    yield Sample((m.arr(2, 3, 4), 3.0, -1))
    yield Sample((m.arr(2, 3),), {"p": math.inf, "dim": 1, "eps": 1e-6})


def _normalize_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), exc=IndexError, match="Dimension out of range")


def _linear_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), m.arr(4, 3), m.arr(4)))
    yield Sample((m.arr(2, 5, 3), m.arr(4, 3)), note="batched, no bias")
    yield Sample((m.arr(2, 5, 3), m.arr(4, 3), m.arr(4)), note="batched")
    yield Sample((m.arr(3, 2).T, m.arr(4, 3), m.arr(1, 4)), note="transposed input, 2-D bias")
    yield Sample((m.arr(3), m.arr(4, 3), m.arr(4)), note="1-D input")
    yield Sample((m.arr(2, 3), m.arr(3)), note="1-D weight")


def _linear_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), m.arr(4, 5)), exc=RuntimeError, match="cannot be multiplied")
    yield ErrorCase((m.arr(2, 3), m.arr(4, 3), m.arr(3)), exc=RuntimeError, match="bias")


def _bilinear_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), m.arr(2, 4), m.arr(5, 3, 4), m.arr(5)))
    yield Sample((m.arr(2, 2, 3), m.arr(2, 2, 4), m.arr(5, 3, 4)), note="batched, no bias")
    yield Sample((m.arr(3), m.arr(4), m.arr(2, 3, 4), m.arr(2)), note="1-D inputs")


def _bilinear_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(
        (m.arr(2, 3), m.arr(3, 4), m.arr(5, 3, 4)), exc=RuntimeError, match="batch dimensions"
    )
    yield ErrorCase((m.arr(2, 3), m.arr(2, 4), m.arr(5, 3, 3)), exc=RuntimeError, match="input2")


def _embedding_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.idx(2, 3, high=5), m.arr(5, 4)))
    yield Sample((m.idx(7, high=5), m.arr(5, 3)), {"padding_idx": 1}, note="padding_idx")
    yield Sample((m.idx(7, high=4), m.arr(4, 3)), {"padding_idx": -1}, note="negative padding")
    yield Sample((m.idx(3, 3, high=4), m.arr(4, 2)), {"scale_grad_by_freq": True})
    yield Sample((m.idx(4, high=5), m.arr(5, 4)), {"max_norm": 1.5}, note="renorm in place")
    yield Sample((m.idx(0, high=3), m.arr(3, 2)), note="no index")


def _embedding_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((np.array([0, 5]), m.arr(5, 2)), exc=IndexError, match="index out of range")
    yield ErrorCase((np.array([-1]), m.arr(5, 2)), exc=IndexError, match="index out of range")
    yield ErrorCase((m.arr(3), m.arr(5, 2)), exc=RuntimeError, match="indices")
    yield ErrorCase(
        (np.array([1]), m.arr(4, 2)), {"padding_idx": 4}, exc=AssertionError, match="Padding_idx"
    )


def _one_hot_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.idx(2, 3, high=4),))
    yield Sample((m.idx(5, high=3), 6))
    yield Sample((m.idx(0, high=3), 3), note="empty, num_classes given")
    yield Sample((np.array(2),), note="0-d")


def _one_hot_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((np.array([-1, 2]),), exc=RuntimeError, match="non-negative")
    yield ErrorCase((np.array([1, 2]), 2), exc=RuntimeError, match="smaller than num_classes")
    yield ErrorCase((np.zeros(0, dtype=np.int64),), exc=RuntimeError, match="empty tensor")
    yield ErrorCase((np.array([1.0]),), exc=RuntimeError, match="LongTensor")


def _dropout_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4),))
    yield Sample((m.arr(3, 4), 0.2))
    yield Sample((m.arr(3, 4), 0.5, False), note="not training: identity")
    yield Sample((m.arr(5),), {"p": 0.0}, note="p=0: identity")
    yield Sample((m.arr(5),), {"p": 1.0}, note="p=1: zeros")


def _dropout_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), 1.5), exc=ValueError, match="between 0 and 1")
    yield ErrorCase((m.arr(3), -0.1), exc=ValueError, match="between 0 and 1")


def _sdpa_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), m.arr(2, 5, 4), m.arr(2, 5, 6)))
    yield Sample(
        (m.arr(2, 3, 4), m.arr(2, 5, 4), m.arr(2, 5, 6)),
        {"attn_mask": m.mask(3, 5) | (np.arange(5) == 0)},
        note="bool mask",
    )
    full = np.ones((3, 5), dtype=bool)
    full[1] = False
    yield Sample(
        (m.arr(2, 3, 4), m.arr(2, 5, 4), m.arr(2, 5, 6)),
        {"attn_mask": full},
        note="a row masked entirely gives zeros",
    )
    yield Sample(
        (m.arr(2, 3, 4), m.arr(2, 5, 4), m.arr(2, 5, 6), m.arr(3, 5)), note="float mask (grad)"
    )
    yield Sample(
        (m.arr(1, 2, 4, 3), m.arr(1, 2, 4, 3), m.arr(1, 2, 4, 3)),
        {"is_causal": True},
        note="causal",
    )
    yield Sample((m.arr(2, 3, 4), m.arr(2, 5, 4), m.arr(2, 5, 6)), {"scale": 0.3})
    yield Sample(
        (m.arr(1, 4, 3, 2), m.arr(1, 2, 5, 2), m.arr(1, 2, 5, 2)),
        {"enable_gqa": True},
        note="grouped-query attention",
    )
    yield Sample((m.arr(2, 3, 4), m.arr(5, 4), m.arr(5, 6)), note="batch dims broadcast")


def _sdpa_errors(m: Maker) -> Iterator[ErrorCase]:
    q = m.arr(2, 3, 4)
    yield ErrorCase((q, m.arr(2, 5, 3), m.arr(2, 5, 6)), exc=RuntimeError, match="embedding dim")
    yield ErrorCase((q, m.arr(2, 5, 4), m.arr(2, 6, 6)), exc=RuntimeError, match="sequence length")
    yield ErrorCase((m.arr(4), m.arr(5, 4), m.arr(5, 6)), exc=RuntimeError, match="2 dimensional")
    yield ErrorCase((q, m.arr(3, 5, 4), m.arr(3, 5, 6)), exc=RuntimeError, match="do not broadcast")
    yield ErrorCase(
        (q, m.arr(2, 5, 4), m.arr(2, 5, 6)),
        {"attn_mask": np.ones((3, 5), dtype=bool), "is_causal": True},
        exc=RuntimeError,
        match="is_causal",
    )
    yield ErrorCase(
        (q, m.arr(2, 5, 4), m.arr(2, 5, 6)),
        {"attn_mask": np.ones((3, 5), dtype=np.int64)},
        exc=RuntimeError,
        match="attn_mask dtype",
    )


def _torch_sdpa(torch: Any) -> Any:
    """torch's scaled_dot_product_attention on its math path (the reference semantics)."""
    # torch is optional: imported only by the tests that compare with it
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def run(*args: Any, **kwargs: Any) -> Any:
        with sdpa_kernel(SDPBackend.MATH):
            return torch.nn.functional.scaled_dot_product_attention(*args, **kwargs)

    return run


def _cosine_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(3, 4)))
    yield Sample((m.arr(2, 3, 4), m.arr(3, 4)), {"dim": -1}, note="broadcast")
    yield Sample((m.arr(4), m.arr(4)), {"dim": 0})
    yield Sample((m.arr(3, 1), m.arr(1, 4)), {"eps": 1e-6}, note="both broadcast")


def _cosine_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), m.arr(2, 4)), exc=RuntimeError, match="do not broadcast")
    yield ErrorCase((m.arr(3), m.arr(3)), exc=IndexError, match="Dimension out of range")


def _pairwise_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(3, 4)))
    # (p=1: torch's second derivative is a ZeroTensor the tests cannot read: test_norm_table.py)
    yield Sample((m.arr(3, 4), m.arr(4)), {"p": 3.0, "keepdim": True}, note="broadcast")
    yield Sample((m.arr(2, 3, 4), m.arr(2, 3, 4)), {"eps": 0.0})
    yield Sample((m.arr(5), m.arr(5)), note="1-D")


def _pairwise_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), m.arr(2, 4)), exc=RuntimeError, match="do not broadcast")


def _cdist_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 2), m.arr(4, 2)))
    yield Sample((m.arr(3, 3), m.arr(4, 3), 1.0), note="p=1")
    yield Sample((m.arr(3, 3), m.arr(2, 3)), {"p": 3.0})
    yield Sample((m.arr(3, 3), m.arr(2, 3)), {"p": math.inf})
    yield Sample((m.arr(3, 3), m.arr(2, 3)), {"p": 0.5})
    yield Sample((m.arr(3, 3), m.arr(2, 3)), {"p": 0.0}, note="p=0: counts, no gradient")
    yield Sample((m.arr(2, 3, 2), m.arr(2, 4, 2)), note="batched")
    yield Sample(
        (m.arr(2, 1, 3, 2), m.arr(4, 2, 2)),
        {"compute_mode": "donot_use_mm_for_euclid_dist"},
        note="batch dims broadcast",
    )


def _cdist_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), m.arr(3, 3)), exc=RuntimeError, match="at least 2D")
    yield ErrorCase((m.arr(3, 2), m.arr(3, 3)), exc=RuntimeError, match="number of columns")
    yield ErrorCase((m.arr(3, 2), m.arr(3, 2), -1.0), exc=RuntimeError, match="non-negative")
    yield ErrorCase(
        (m.arr(3, 2), m.arr(3, 2)), {"compute_mode": "x"}, exc=ValueError, match="compute_mode"
    )
    yield ErrorCase((m.arr(2, 3, 2), m.arr(3, 3, 2)), exc=RuntimeError, match="broadcast")


_NF = "nn.functional."

register(
    OpInfo(_NF + "layer_norm", layer_norm, _layer_norm_samples, errors=_layer_norm_errors,
           tol=_LOOSE32),
    OpInfo(_NF + "rms_norm", rms_norm, _rms_norm_samples, errors=_rms_norm_errors, tol=_LOOSE32),
    OpInfo(_NF + "group_norm", group_norm, _group_norm_samples, errors=_group_norm_errors,
           tol=_LOOSE32),
    OpInfo(_NF + "batch_norm", batch_norm, _batch_norm_samples, errors=_batch_norm_errors,
           tol=_LOOSE32),
    OpInfo(_NF + "instance_norm", instance_norm, _instance_norm_samples,
           errors=_instance_norm_errors, tol=_LOOSE32),
    OpInfo(_NF + "normalize", normalize, _normalize_samples, errors=_normalize_errors),
    OpInfo(_NF + "linear", linear, _linear_samples, errors=_linear_errors),
    OpInfo(_NF + "bilinear", bilinear, _bilinear_samples, errors=_bilinear_errors),
    OpInfo(_NF + "embedding", embedding, _embedding_samples, errors=_embedding_errors),
    OpInfo(_NF + "one_hot", one_hot, _one_hot_samples, dtypes=("int64",), grad=False,
           errors=_one_hot_errors),
    OpInfo(_NF + "dropout", dropout, _dropout_samples, random=True, errors=_dropout_errors,
           notes="The mask comes from aengine's generator: only shapes are compared with torch."),
    OpInfo(_NF + "scaled_dot_product_attention", scaled_dot_product_attention, _sdpa_samples,
           torch=_torch_sdpa, errors=_sdpa_errors, tol=_LOOSE32,
           notes="torch's math path; dropout_p > 0 draws from aengine's generator."),
    OpInfo(_NF + "cosine_similarity", cosine_similarity, _cosine_samples, errors=_cosine_errors),
    OpInfo(_NF + "pairwise_distance", pairwise_distance, _pairwise_samples,
           errors=_pairwise_errors),
    OpInfo("cdist", cdist, _cdist_samples, grad2=False, errors=_cdist_errors,
           notes="Always computed from the differences (exact), whatever compute_mode. "
           "Differentiable twice, where torch's first derivative is not."),
)  # fmt: skip

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "nn.functional.layer_norm": "leading:-1",
        "nn.functional.rms_norm": "leading:-1",
        "nn.functional.normalize": "dim:dim",
        "nn.functional.linear": "custom",
        "nn.functional.embedding": "leading:-1",
        "nn.functional.one_hot": "leading:-1",
        "nn.functional.dropout": "custom",
        "nn.functional.cosine_similarity": "custom",
        "nn.functional.pairwise_distance": "pointwise",
        "nn.functional.scaled_dot_product_attention": "pointwise",
    }
)
