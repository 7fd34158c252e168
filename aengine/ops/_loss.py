"""ae.nn.functional losses (cross_entropy, nll_loss, mse_loss...).

# NOTE [Losses]
# torch.nn.functional's losses under their names, signatures, reductions
# ('none' | 'mean' | 'sum', the legacy ``size_average`` / ``reduce`` with
# torch's warning) and errors.  Two are primitives: ``nll_loss`` (one node:
# the gradient scatters ``-weight * g`` into the picked classes, written with
# ``F.scatter_add`` so that it is differentiable again) and the elementwise
# part of ``binary_cross_entropy`` (torch's clamps: log at -100, the
# denominator of the gradient at 1e-12).  The others are compositions of
# differentiable ops: ``cross_entropy`` is ``log_softmax`` then ``nll_loss``
# (plus the label-smoothing term), as torch computes it; mse, l1, smooth_l1,
# huber, kl_div and binary_cross_entropy_with_logits are elementwise
# compositions followed by the reduction.  Their derivatives of every order
# follow from those of their parts.
#
# Class weights (nll_loss, cross_entropy with class indices,
# binary_cross_entropy, binary_cross_entropy_with_logits' weight and
# pos_weight) are constants: as torch, a weight that requires grad is an
# error there.  The element weights of mse, l1 and huber and the class
# weights of cross_entropy with probabilities are differentiable (torch
# computes those with differentiable ops too).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..core._modes import _grad_enabled
from ..tensors._creation import tensor_input
from ..tensors._tensor import Tensor
from . import _activation, _unary
from ._arith import where
from ._core import ELEMENTWISE, GradOps, node_class, record, record_one, tie
from ._index import gather
from ._reduce import log_softmax, mean, sum
from ._shape import reshape, sum_to
from ._table import ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
]

#: torch's names of dtypes, for messages
_TORCH_NAMES = {
    "float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char",
    "int16": "Short", "int32": "Int", "int64": "Long", "uint8": "Byte", "bool": "Bool",
}  # fmt: skip


def _tname(dtype: Any) -> str:
    return _TORCH_NAMES.get(np.dtype(dtype).name, str(dtype))


# -- arguments -------------------------------------------------------------------------------
def _tensor(x: Any, fn: str, arg: str) -> Tensor:
    return x if x.__class__ is Tensor else tensor_input(x, fn, arg)


def _floating(x: Tensor, fn: str) -> None:
    if x.data.dtype.kind not in "fc":
        raise NotImplementedError(
            f'"{fn}" not implemented for {_tname(x.data.dtype)} tensors (as in PyTorch); '
            "convert the input first with x.to(ae.float32)"
        )


def _check_reduction(reduction: str) -> str:
    """``reduction`` when valid (torch's _Reduction.get_enum), else torch's ValueError."""
    if reduction in ("none", "mean", "sum"):
        return reduction
    if reduction == "elementwise_mean":
        warnings.warn(
            "reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
            UserWarning,
            stacklevel=3,
        )
        return "mean"
    raise ValueError(f"{reduction} is not a valid value for reduction: use 'none', 'mean' or 'sum'")


def _legacy(size_average: bool | None, reduce: bool | None) -> str:
    """torch's _Reduction.legacy_get_string: the old flags as a reduction, with its warning."""
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
        UserWarning,
        stacklevel=3,
    )
    return ret


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        return _legacy(size_average, reduce)
    return _check_reduction(reduction)


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return sum(loss)
    return mean(loss)


def _size_warning(input: Tensor, target: Tensor) -> None:
    if input.data.shape != target.data.shape:
        warnings.warn(
            f"Using a target size ({tuple(target.data.shape)}) that is different to the input "
            f"size ({tuple(input.data.shape)}). This will likely lead to incorrect results due "
            "to broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=3,
        )


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``a`` and ``b``, or torch's RuntimeError naming the dimension."""
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        for i in range(1, min(len(a), len(b)) + 1):
            if a[-i] != b[-i] and a[-i] != 1 and b[-i] != 1:
                raise RuntimeError(
                    f"The size of tensor a ({a[-i]}) must match the size of tensor b ({b[-i]}) "
                    f"at non-singleton dimension {max(len(a), len(b)) - i}"
                ) from None
        raise  # pragma: no cover (broadcast_shapes fails only on such a dimension)


def _constant_weight(weight: Any, fn: str, arg: str = "weight") -> Tensor | None:
    """A class weight: no gradient flows to it (torch raises if it requires grad)."""
    if weight is None:
        return None
    w = _tensor(weight, fn, arg)
    if w._rg and _grad_enabled.get():
        raise RuntimeError(
            f"The function '{fn}' is not differentiable with respect to argument '{arg}'. "
            "This input cannot have requires_grad True; pass weight.detach()"
        )
    return w


def _weighted(
    loss: Tensor, input: Tensor, weight: Any, reduction: str, fn: str, normalize: bool
) -> Tensor:
    """torch's weighted mse/l1/huber: ``loss * weight``, mean by sum(weight) (``normalize``)."""
    w = _tensor(weight, fn, "weight")
    if w.data.shape != input.data.shape:
        raise ValueError(
            f"Weights and input must have the same size (weight {tuple(w.data.shape)}, "
            f"input {tuple(input.data.shape)})."
        )
    out = loss * w
    if reduction == "none":
        return out
    if reduction == "sum":
        return sum(out)
    if reduction == "mean":
        return sum(out) / sum(w) if normalize else mean(out)
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


# -- nll_loss (a primitive) --------------------------------------------------------------------
def _nll_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # the gradient of -w[t] * x[t] (scaled for the reduction): -w/total into the picked class
    shape, cdim, idx, coef = n.attrs
    gx = F.scatter_add(shape, cdim, idx, F.expand_dims(g * coef, cdim))
    return (tie(gx, s[0]),)  # (NOTE [Gradients tied to an input])


def _nll_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # the picked classes' tangents, weighted as the loss (coef), reduced to the result
    _, cdim, idx, coef = attrs
    dev = out._device
    picked = gather(ts[0], cdim, Tensor._make(idx, False, dev))
    picked = reshape(picked, picked.data.shape[:cdim] + picked.data.shape[cdim + 1 :])
    return sum_to(picked * Tensor._make(coef, False, dev), out.data.shape)


NllLossBackward0 = node_class("NllLossBackward0", _nll_rule, jvp=_nll_jvp)
NllLoss2DBackward0 = node_class("NllLoss2DBackward0", _nll_rule, jvp=_nll_jvp)


def _check_nll_shapes(x: Tensor, t: Tensor) -> None:
    xs, ts = x.data.shape, t.data.shape
    if not xs:
        raise ValueError(f"Expected 1 or more dimensions (got {len(xs)})")
    if len(xs) >= 2 and (not ts or ts[0] != xs[0]):
        raise ValueError(
            f"Expected input batch_size ({xs[0]}) to match target batch_size "
            f"({ts[0] if ts else 0})."
        )
    if len(xs) <= 2:
        if len(ts) > 1:
            raise RuntimeError(
                "0D or 1D target tensor expected, multi-target not supported "
                f"(target of shape {tuple(ts)}: class indices, one per sample)"
            )
        return
    want = (xs[0], *xs[2:])
    if len(ts) != len(want):
        raise RuntimeError(f"Expected target size {list(want)}, got {list(ts)}")
    if ts != want:
        raise RuntimeError(
            f"size mismatch (got input: {list(xs)} , target: {list(ts)}): the target of an "
            "input (N, C, d1, ...) has shape (N, d1, ...)"
        )


def _nll_target(t: Tensor) -> None:
    if t.data.dtype.name not in ("int64", "uint8"):
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {_tname(t.data.dtype)}: "
            "class indices are int64 (convert with target.to(ae.int64))"
        )


def _class_weight(w: Tensor | None, x: Tensor, c: int, fn: str) -> Any:
    """The class weights' array (shape (C,)), checked as torch checks them; None without."""
    if w is None:
        return None
    if w.data.size != c:
        raise RuntimeError(
            f"{fn}weight tensor should be defined either for all {c} classes or no classes "
            f"but got weight tensor of shape: {list(w.data.shape)}"
        )
    return w.data.reshape(c)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """The negative log likelihood loss of log-probabilities ``input`` at class indices ``target``.

    ``input`` is (C,), (N, C) or (N, C, d1, ...), ``target`` (), (N,) or
    (N, d1, ...) of int64 class indices; ``weight`` (C,) weighs the classes,
    targets equal to ``ignore_index`` count for nothing, and 'mean' divides by
    the total weight of the counted targets (torch.nn.functional.nll_loss).

    Example::

        >>> import aengine as ae
        >>> logp = ae.tensor([[-1.0, -2.0], [-0.5, -3.0]])
        >>> ae.nn.functional.nll_loss(logp, ae.tensor([1, 0])).item()
        1.25
    """
    x = _tensor(input, "nll_loss", "input")
    t = _tensor(target, "nll_loss", "target")
    red = _reduction(size_average, reduce, reduction)
    w = _constant_weight(weight, "nll_loss_forward")
    if x.data.ndim == 1 and t.data.ndim == 1:  # one sample given as a batch of one target
        x = x.reshape(1, x.data.shape[0])
    _check_nll_shapes(x, t)
    _nll_target(t)
    _floating(x, "nll_loss")
    return _nll(x, t, w, ignore_index, red)


def _nll(x: Tensor, t: Tensor, w: Tensor | None, ignore_index: int, red: str) -> Tensor:
    xd, td = x.data, t.data.astype("int64", copy=False)
    dev = x._device
    xp = dev.backend.xp
    cdim = 0 if xd.ndim == 1 else 1
    c = xd.shape[cdim]
    wd = _class_weight(w, x, c, "")
    if wd is not None and wd.dtype != xd.dtype:
        raise RuntimeError(
            f"expected scalar type {_tname(xd.dtype)} but found {_tname(wd.dtype)}: "
            f"convert weight with weight.to(ae.{xd.dtype.name})"
        )
    valid = td != ignore_index
    bad = valid & ((td < 0) | (td >= c))
    if bad.any():
        raise IndexError(
            f"Target {int(td[bad].ravel()[0])} is out of bounds (the input has {c} classes)."
        )
    safe = xp.where(valid, td, 0)
    idx = xp.expand_dims(safe, cdim)
    picked = xp.take_along_axis(xd, idx, axis=cdim).squeeze(cdim)
    if wd is None:
        wt = valid.astype(xd.dtype)
    else:
        wt = xp.where(valid, wd[safe], 0).astype(xd.dtype, copy=False)
    loss = -(picked * wt)
    if red == "none":
        out, coef = loss, -wt
    elif red == "sum":
        out, coef = loss.sum(), -wt
    else:
        total = wt.sum()
        if total == 0:  # nothing counted (or zero weights): NaN, as torch, without a warning
            out = xp.asarray(xp.nan, dtype=xd.dtype)
            coef = xp.where(valid, -wt * xp.nan, 0).astype(xd.dtype, copy=False)
        else:
            out, coef = loss.sum() / total, -wt / total
    cls = NllLoss2DBackward0 if xd.ndim == 4 else NllLossBackward0
    return record_one(cls, out, dev, x, 1, (xd.shape, cdim, idx, coef), save_input=True)


# -- cross_entropy (composite) -------------------------------------------------------------------
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy of logits ``input`` against class indices or class probabilities ``target``.

    As torch.nn.functional.cross_entropy: ``log_softmax`` over the class
    dimension (1, or 0 for an unbatched (C,) input) then ``nll_loss`` for
    int64 class indices (``weight``, ``ignore_index``), or
    ``-sum(target * log_softmax(input))`` for a floating ``target`` of the
    input's shape; ``label_smoothing`` mixes in the uniform distribution.

    Example::

        >>> import aengine as ae
        >>> logits = ae.tensor([[0.0, 0.0], [0.0, 0.0]])
        >>> round(ae.nn.functional.cross_entropy(logits, ae.tensor([0, 1])).item(), 4)
        0.6931
    """
    x = _tensor(input, "cross_entropy", "input")
    t = _tensor(target, "cross_entropy", "target")
    red = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if x.data.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    _floating(x, "cross_entropy")
    cdim = 0 if x.data.ndim == 1 else 1
    if t.data.dtype.kind in "fc" and t.data.shape == x.data.shape:
        if ignore_index >= 0:
            raise RuntimeError(
                "ignore_index is not supported for floating point target (class probabilities)"
            )
        return _cross_entropy_probs(x, t, weight, red, label_smoothing, cdim)
    w = _constant_weight(weight, "nll_loss_forward")
    if x.data.ndim == 1 and t.data.ndim == 1:
        x = x.reshape(1, x.data.shape[0])
        cdim = 1
    _check_nll_shapes(x, t)
    _nll_target(t)
    if w is not None:
        _class_weight(w, x, x.data.shape[cdim], "cross_entropy: ")
    logp = log_softmax(x, cdim)
    loss = _nll(logp, t, w, ignore_index, red)
    if label_smoothing == 0.0:
        return loss
    smooth = _smooth_term(logp, t, w, ignore_index, red, cdim)
    out: Tensor = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / x.data.shape[cdim])
    return out


def _class_shape(c: int, ndim: int, cdim: int) -> tuple[int, ...]:
    """The shape that puts class weights on the class dimension of an ``ndim``-d input."""
    return (c,) + (1,) * (ndim - cdim - 1)


def _smooth_term(
    logp: Tensor, t: Tensor, w: Tensor | None, ignore_index: int, red: str, cdim: int
) -> Tensor:
    """torch's label-smoothing term of cross_entropy with class indices (before ``ls / C``)."""
    xp = logp._device.backend.xp
    c = logp.data.shape[cdim]
    ignored = t.data == ignore_index
    if w is None:
        smooth = -sum(logp, cdim)
    else:
        wd = w.data.reshape(_class_shape(c, logp.data.ndim, cdim))
        smooth = -sum(logp * wd, cdim)
    if ignored.any():
        smooth = where(ignored, 0.0, smooth)
    if red == "none":
        return smooth
    total = sum(smooth)
    if red == "sum":
        return total
    if w is None:
        denom = float((~ignored).sum())
    else:
        td = xp.where(ignored, 0, t.data.astype("int64"))
        denom = float(xp.where(ignored, 0, w.data.reshape(c)[td]).sum())
    if denom == 0:
        return total * float("nan")
    return total / denom


def _cross_entropy_probs(
    x: Tensor, t: Tensor, weight: Any, red: str, ls: float, cdim: int
) -> Tensor:
    c = x.data.shape[cdim]
    logp = log_softmax(x, cdim)
    if ls > 0.0:
        t = t * (1.0 - ls) + ls / c
    prod = logp * t
    if weight is not None:
        w = _tensor(weight, "cross_entropy", "weight")
        _class_weight(w, x, c, "cross_entropy: ")
        prod = prod * w.reshape(*_class_shape(c, x.data.ndim, cdim))
    loss = -sum(prod, cdim)
    if red == "none":
        return loss
    total = sum(loss)
    if red == "sum":
        return total
    count = x.data.size // c if c else 0
    if count == 0:
        return total * float("nan")
    return total / count


# -- mse, l1, smooth_l1, huber (composites) ------------------------------------------------------
def _pair(input: Any, target: Any, fn: str) -> tuple[Tensor, Tensor]:
    x = _tensor(input, fn, "input")
    t = _tensor(target, fn, "target")
    _size_warning(x, t)
    _broadcast_shape(x.data.shape, t.data.shape)
    _floating(x, fn)
    return x, t


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """The mean squared error ``(input - target) ** 2``, reduced (torch.nn.functional.mse_loss).

    With ``weight`` (of the input's shape) the squared errors are weighted
    and 'mean' divides by ``weight.sum()``.

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.mse_loss(ae.tensor([1.0, 2.0]), ae.tensor([0.0, 0.0])).item()
        2.5
    """
    x, t = _pair(input, target, "mse_loss")
    if size_average is not None or reduce is not None:
        reduction = _legacy(size_average, reduce)
    d = x - t
    loss = _unary.square(d)
    if weight is not None:
        return _weighted(loss, x, weight, reduction, "mse_loss", True)
    return _reduce(loss, _check_reduction(reduction))


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """The absolute error ``|input - target|``, reduced (torch.nn.functional.l1_loss).

    Example::

        >>> import aengine as ae
        >>> ae.nn.functional.l1_loss(ae.tensor([1.0, -3.0]), ae.tensor([0.0, 0.0])).item()
        2.0
    """
    x, t = _pair(input, target, "l1_loss")
    if size_average is not None or reduce is not None:
        reduction = _legacy(size_average, reduce)
    loss = _unary.abs(x - t)
    if weight is not None:
        return _weighted(loss, x, weight, reduction, "l1_loss", True)
    return _reduce(loss, _check_reduction(reduction))


def _piecewise(d: Tensor, cut: float, quad: float, lin: float) -> Tensor:
    """``quad * d**2`` where ``|d| < cut``, else ``lin * (|d| - cut / 2)``."""
    ad = _unary.abs(d)
    inside = ad.data < cut
    out: Tensor = where(inside, d * d * quad, (ad - 0.5 * cut) * lin)
    return out


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - beta / 2`` (d = input - target).

    ``beta=0`` is the l1 loss (torch.nn.functional.smooth_l1_loss).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([0.5, 3.0])
        >>> ae.nn.functional.smooth_l1_loss(x, ae.zeros(2), reduction="sum").item()
        2.625
    """
    x, t = _pair(input, target, "smooth_l1_loss")
    red = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError(
            f"smooth_l1_loss does not support negative values for beta (got {beta})."
        )
    d = x - t
    loss = _unary.abs(d) if beta == 0 else _piecewise(d, beta, 0.5 / beta, 1.0)
    return _reduce(loss, red)


def huber_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - delta / 2)`` (d = input - target).

    With ``weight`` (of the input's shape) the losses are weighted, and 'mean'
    is their plain mean (torch.nn.functional.huber_loss).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([0.5, 3.0])
        >>> ae.nn.functional.huber_loss(x, ae.zeros(2), reduction="sum").item()
        2.625
    """
    x, t = _pair(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError(
            f"huber_loss does not support non-positive values for delta (got {delta})."
        )
    loss = _piecewise(x - t, delta, 0.5, delta)
    if weight is not None:
        return _weighted(loss, x, weight, reduction, "huber_loss", False)
    return _reduce(loss, _check_reduction(reduction))


# -- binary_cross_entropy (elementwise primitive) and with logits (composite) -------------------
_BCE_EPS = 1e-12


def _bce_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    x, t = s
    w = n.attrs
    need = n.needs
    gw = g if w is None else g * w
    gx = gt = None
    if need[0]:  # torch: (x - t) / max((1 - x) x, eps)
        denom = (1.0 - x) * x
        da = denom.data if denom.__class__ is Tensor else denom
        if (da < _BCE_EPS).any():
            denom = F.where(da < _BCE_EPS, _BCE_EPS, denom)
        gx = gw * (x - t) / denom
    if need[1]:  # torch: log(1 - x) - log(x), i.e. -logit(x)
        gt = gw * (F.log1p(-x) - F.log(x))
    return (gx, gt)


BinaryCrossEntropyBackward0 = node_class("BinaryCrossEntropyBackward0", _bce_rule, jvp=ELEMENTWISE)


def _bce_elements(x: Tensor, t: Tensor, w: Any) -> Tensor:
    xp = x._device.backend.xp
    xd, td = x.data, t.data
    quiet = np.errstate(divide="ignore") if xp is np else contextlib.nullcontext()
    with quiet:  # log(0) is -inf, clamped to -100 (as torch), without numpy's warning
        out = (td - 1) * xp.maximum(xp.log1p(-xd), -100.0) - td * xp.maximum(xp.log(xd), -100.0)
    if w is not None:
        out = out * w
    return record(BinaryCrossEntropyBackward0, out, x._device, (x, t), (x, t), attrs=w)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross entropy of probabilities ``input`` against ``target`` (both in [0, 1]).

    ``-weight * (t * log(x) + (1 - t) * log(1 - x))`` with the logs clamped at
    -100, as torch.nn.functional.binary_cross_entropy; differentiable in
    ``input`` and ``target``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([0.5, 0.5])
        >>> round(ae.nn.functional.binary_cross_entropy(x, ae.tensor([1.0, 0.0])).item(), 4)
        0.6931
    """
    x = _tensor(input, "binary_cross_entropy", "input")
    t = _tensor(target, "binary_cross_entropy", "target")
    red = _reduction(size_average, reduce, reduction)
    if t.data.shape != x.data.shape:
        raise ValueError(
            f"Using a target size ({tuple(t.data.shape)}) that is different to the input size "
            f"({tuple(x.data.shape)}) is deprecated. Please ensure they have the same size."
        )
    _floating(x, "binary_cross_entropy")
    if t.data.dtype != x.data.dtype:
        raise RuntimeError(
            f"Found dtype {_tname(t.data.dtype)} but expected {_tname(x.data.dtype)}: "
            f"convert the target with target.to(ae.{x.data.dtype.name})"
        )
    for arr, what in ((x.data, "input"), (t.data, "target")):
        if ((arr < 0) | (arr > 1)).any():
            raise RuntimeError(f"all elements of {what} should be between 0 and 1")
    w = _constant_weight(weight, "binary_cross_entropy")
    wd = None
    if w is not None:
        shape = _broadcast_shape(t.data.shape, w.data.shape)
        if shape != t.data.shape:
            raise RuntimeError(
                f"weight of shape {tuple(w.data.shape)} does not broadcast to the target's "
                f"shape {tuple(t.data.shape)}"
            )
        wd = w._device.backend.xp.broadcast_to(w.data.astype(x.data.dtype, copy=False), shape)
    return _reduce(_bce_elements(x, t, wd), red)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits ``input``.

    ``(1 - t) * x - (1 + (pos_weight - 1) * t) * logsigmoid(x)``, times
    ``weight``, as torch.nn.functional.binary_cross_entropy_with_logits;
    differentiable in ``input`` and ``target``.

    Example::

        >>> import aengine as ae
        >>> f = ae.nn.functional.binary_cross_entropy_with_logits
        >>> round(f(ae.tensor([0.0]), ae.tensor([1.0])).item(), 4)
        0.6931
    """
    fn = "binary_cross_entropy_with_logits"
    x = _tensor(input, fn, "input")
    t = _tensor(target, fn, "target")
    red = _reduction(size_average, reduce, reduction)
    if t.data.shape != x.data.shape:
        raise ValueError(
            f"Target size ({tuple(t.data.shape)}) must be the same as input size "
            f"({tuple(x.data.shape)})"
        )
    _floating(x, fn)
    w = _constant_weight(weight, fn)
    pw = _constant_weight(pos_weight, fn, "pos_weight")
    logsig = _activation.logsigmoid(x)
    if pw is not None:
        _broadcast_shape(t.data.shape, pw.data.shape)
        loss = (1 - t) * x - (t * (pw.data - 1) + 1) * logsig
    else:
        loss = (1 - t) * x - logsig
    if w is not None:
        _broadcast_shape(loss.data.shape, w.data.shape)
        loss = loss * w.data
    return _reduce(loss, red)


# -- kl_div (composite) ------------------------------------------------------------------------
def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """The Kullback-Leibler divergence of ``target`` from the log-probabilities ``input``.

    Pointwise ``target * (log(target) - input)`` (``exp(target) * (target -
    input)`` with ``log_target``); 'batchmean' divides the sum by the batch
    size, 'mean' (torch's default, with its warning) by the number of elements
    (torch.nn.functional.kl_div).

    Example::

        >>> import aengine as ae
        >>> logq = ae.tensor([0.5, 0.5]).log()
        >>> p = ae.tensor([0.5, 0.5])
        >>> ae.nn.functional.kl_div(logq, p, reduction="sum").item()
        0.0
    """
    x = _tensor(input, "kl_div", "input")
    t = _tensor(target, "kl_div", "target")
    if size_average is not None or reduce is not None:
        red = _legacy(size_average, reduce)
    elif reduction == "batchmean":
        red = "batchmean"
    else:
        if reduction == "mean":
            warnings.warn(
                "reduction: 'mean' divides the total loss by both the batch size and the support "
                "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
                "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
                "major release.",
                UserWarning,
                stacklevel=2,
            )
        red = _check_reduction(reduction)
    _broadcast_shape(x.data.shape, t.data.shape)
    _floating(x, "kl_div")
    if log_target:
        loss = _unary.exp(t) * (t - x)
    else:  # xlogy(t, t) - t * x: 0 where t is 0
        zero = t.data == 0
        logt = _unary.log(where(zero, 1.0, t)) if zero.any() else _unary.log(t)
        loss = t * logt - t * x
    if red == "batchmean":
        total = sum(loss)
        return total / x.data.shape[0] if x.data.ndim else total
    return _reduce(loss, red)


# -- the table -----------------------------------------------------------------------------------
def _nll_samples(m: Maker) -> Iterator[Sample]:
    w = m.pos(3)
    yield Sample((m.arr(4, 3), m.idx(4, high=3)))
    yield Sample((m.arr(4, 3), m.idx(4, high=3)), {"reduction": "sum"})
    yield Sample((m.arr(4, 3), m.idx(4, high=3)), {"reduction": "none"})
    yield Sample((m.arr(4, 3), m.idx(4, high=3)), {"weight": w}, note="class weights")
    yield Sample((m.arr(5, 3), np.array([0, -100, 2, 1, -100])), {"weight": w}, note="ignore_index")
    yield Sample(
        (m.arr(4, 3), np.array([0, 1, 2, 1])), {"ignore_index": 1, "reduction": "none"},
        note="ignore_index of a class",
    )  # fmt: skip
    yield Sample((m.arr(2, 3, 4, 2), m.idx(2, 4, 2, high=3)), note="K-dim (N, C, d1, d2)")
    yield Sample(
        (m.arr(2, 3, 5), m.idx(2, 5, high=3)), {"weight": w, "reduction": "none"}, note="K-dim"
    )
    yield Sample((m.arr(3), np.array(1)), note="unbatched")
    yield Sample((m.arr(0, 3), m.idx(0, high=3)), {"reduction": "sum"}, note="empty")


def _nll_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(4, 3)
    yield ErrorCase((x, np.array([0, 3, 1, 2])), exc=IndexError, match="Target 3 is out of bounds")
    yield ErrorCase((x, np.array([0, -1, 1, 2])), exc=IndexError, match="out of bounds")
    yield ErrorCase((x, m.idx(3, high=3)), exc=ValueError, match="to match target batch_size")
    yield ErrorCase((x, m.idx(4, 2, high=3)), exc=RuntimeError, match="0D or 1D target")
    yield ErrorCase((m.arr(2, 3, 4), m.idx(2, 5, high=3)), exc=RuntimeError, match="size mismatch")
    yield ErrorCase(
        (x, np.array([0, 1, 1, 2], dtype=np.int32)), exc=RuntimeError, match="Long or Byte"
    )
    yield ErrorCase((x, m.idx(4, high=3)), {"reduction": "foo"}, exc=ValueError,
                    match="foo is not a valid value for reduction")  # fmt: skip
    yield ErrorCase(
        (x, m.idx(4, high=3)), {"weight": m.pos(4)}, exc=RuntimeError,
        match="weight tensor should be defined either for all 3 classes",
    )  # fmt: skip
    yield ErrorCase((m.arr(), np.array(0)), exc=ValueError, match="Expected 1 or more dimensions")


def _ce_samples(m: Maker) -> Iterator[Sample]:
    w = m.pos(3)
    yield Sample((m.arr(4, 3), m.idx(4, high=3)))
    yield Sample((m.arr(4, 3), m.idx(4, high=3)), {"reduction": "sum"})
    yield Sample((m.arr(4, 3), m.idx(4, high=3)), {"reduction": "none", "weight": w})
    yield Sample((m.arr(5, 3), np.array([0, -100, 2, 1, -100])), {"weight": w}, note="ignore_index")
    yield Sample((m.arr(4, 3), m.idx(4, high=3)), {"label_smoothing": 0.2}, note="smoothing")
    yield Sample(
        (m.arr(5, 3), np.array([0, 1, 2, 1, 0])),
        {"label_smoothing": 0.3, "weight": w, "ignore_index": 1},
        note="smoothing, weights, ignore_index",
    )
    yield Sample(
        (m.arr(5, 3), np.array([0, 1, 2, 1, 0])),
        {"label_smoothing": 0.1, "ignore_index": 2, "reduction": "none"},
    )
    yield Sample(
        (m.arr(2, 3, 4), np.array([[0, 1, 2, 1], [2, 0, 0, 1]])),
        {"label_smoothing": 0.1, "weight": w, "reduction": "sum"},
        note="K-dim, smoothing",
    )
    yield Sample((m.arr(2, 3, 2, 2), m.idx(2, 2, 2, high=3)), note="K-dim")
    yield Sample((m.arr(3), np.array(2)), note="unbatched")
    yield Sample((m.arr(4, 3), m.pos(4, 3, low=0.0, high=1.0)), note="probabilities")
    yield Sample(
        (m.arr(4, 3), m.pos(4, 3, low=0.0, high=1.0)),
        {"label_smoothing": 0.2, "weight": w, "reduction": "sum"},
        note="probabilities, smoothing, weights",
    )
    yield Sample(
        (m.arr(2, 3, 4), m.pos(2, 3, 4, low=0.0, high=1.0)), {"reduction": "none"},
        note="probabilities, K-dim",
    )  # fmt: skip
    yield Sample((m.arr(3), m.pos(3, low=0.0, high=1.0)), note="probabilities, unbatched")


def _ce_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(4, 3)
    yield ErrorCase((x, np.array([0, 3, 1, 2])), exc=IndexError, match="Target 3 is out of bounds")
    yield ErrorCase((x, m.idx(4, high=3)), {"reduction": "foo"}, exc=ValueError,
                    match="foo is not a valid value for reduction")  # fmt: skip
    yield ErrorCase(
        (x, m.idx(4, high=3)), {"label_smoothing": 1.5}, exc=RuntimeError,
        match="label_smoothing must be between 0.0 and 1.0",
    )  # fmt: skip
    yield ErrorCase(
        (x, m.pos(4, 3)), {"ignore_index": 1}, exc=RuntimeError,
        match="ignore_index is not supported for floating point target",
    )  # fmt: skip
    yield ErrorCase((x, m.arr(4, 2)), exc=RuntimeError, match="0D or 1D target")
    yield ErrorCase((x, m.arr(4)), exc=RuntimeError, match="Long or Byte")
    yield ErrorCase(
        (x, m.idx(4, high=3)), {"weight": m.pos(4)}, exc=RuntimeError,
        match="weight tensor should be defined either for all 3 classes",
    )  # fmt: skip


def _regression_samples(extra: dict[str, Any] | None = None) -> Any:
    kw = extra or {}

    def samples(m: Maker) -> Iterator[Sample]:
        yield Sample((m.arr(3, 4), m.arr(3, 4)), dict(kw))
        yield Sample((m.arr(3, 4), m.arr(3, 4)), {"reduction": "sum", **kw})
        yield Sample((m.arr(3, 4), m.arr(3, 4)), {"reduction": "none", **kw})
        yield Sample((m.arr(), m.arr()), dict(kw), note="0-d")
        yield Sample((m.arr(2, 5), m.arr(2, 5)), {"reduction": "sum", **kw})

    return samples


def _smooth_l1_samples(m: Maker) -> Iterator[Sample]:
    yield from _regression_samples()(m)
    yield Sample((m.arr(3, 4), m.arr(3, 4)), {"beta": 0.5, "reduction": "none"}, note="beta")
    yield Sample((m.arr(3, 4), m.arr(3, 4)), {"beta": 2.5}, note="beta")


def _weighted_samples(extra: dict[str, Any] | None = None) -> Any:
    base = _regression_samples(extra)

    def samples(m: Maker) -> Iterator[Sample]:
        yield from base(m)
        kw = extra or {}
        for red in ("mean", "sum", "none"):
            yield Sample(
                (m.arr(3, 4), m.arr(3, 4)), {"weight": m.pos(3, 4), "reduction": red, **kw},
                note="weighted",
            )  # fmt: skip

    return samples


def _regression_errors(**bad: Any) -> Any:
    def errors(m: Maker) -> Iterator[ErrorCase]:
        x, t = m.arr(3, 4), m.arr(3, 4)
        yield ErrorCase((x, t), {"reduction": "foo"}, exc=ValueError,
                        match="foo is not a valid value for reduction")  # fmt: skip
        for k, v in bad.items():
            yield ErrorCase((x, t), {k: v}, exc=RuntimeError, match=f"values for {k}")

    return errors


def _weighted_errors(**bad: Any) -> Any:
    base = _regression_errors(**bad)

    def errors(m: Maker) -> Iterator[ErrorCase]:
        yield from base(m)
        x, t = m.arr(3, 4), m.arr(3, 4)
        yield ErrorCase((x, t), {"weight": m.pos(4)}, exc=ValueError,
                        match="Weights and input must have the same size")  # fmt: skip
        yield ErrorCase((x, t), {"weight": m.pos(3, 4), "reduction": "foo"}, exc=ValueError,
                        match="Invalid reduction mode")  # fmt: skip

    return errors


def _bce_samples(m: Maker) -> Iterator[Sample]:
    def p(*s: int) -> np.ndarray:
        return m.pos(*s, low=0.05, high=0.95)

    yield Sample((p(3, 4), p(3, 4)))
    yield Sample((p(3, 4), p(3, 4)), {"reduction": "sum"})
    yield Sample((p(3, 4), p(3, 4)), {"reduction": "none", "weight": m.pos(4)}, note="weight")
    yield Sample((p(3, 4), p(3, 4)), {"weight": m.pos(3, 1)}, note="weight broadcast")
    yield Sample((p(), p()), note="0-d")
    yield Sample((p(5), p(5)), {"reduction": "sum"}, grad=(0,), note="target constant")


def _bce_errors(m: Maker) -> Iterator[ErrorCase]:
    p = m.pos(3, low=0.1, high=0.9)
    yield ErrorCase((p, m.pos(4, low=0.1, high=0.9)), exc=ValueError,
                    match="different to the input size")  # fmt: skip
    yield ErrorCase((np.array([0.5, 1.5], dtype=m.dtype), np.array([0.5, 0.5], dtype=m.dtype)),
                    exc=RuntimeError, match="all elements of input should be between 0 and 1")  # fmt: skip
    yield ErrorCase((np.array([0.5, 0.5], dtype=m.dtype), np.array([0.5, 1.5], dtype=m.dtype)),
                    exc=RuntimeError, match="all elements of target should be between 0 and 1")  # fmt: skip
    yield ErrorCase((p, p), {"reduction": "foo"}, exc=ValueError,
                    match="foo is not a valid value for reduction")  # fmt: skip
    yield ErrorCase((p, p.astype(np.float64)), exc=RuntimeError, match="Found dtype Double")


def _bcel_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.pos(3, 4, low=0.0, high=1.0)))
    yield Sample((m.arr(3, 4, low=-8.0, high=8.0), m.pos(3, 4, low=0.0, high=1.0)),
                 {"reduction": "sum"})  # fmt: skip
    yield Sample(
        (m.arr(3, 4), m.pos(3, 4, low=0.0, high=1.0)),
        {"reduction": "none", "weight": m.pos(4), "pos_weight": m.pos(4)},
        note="weight, pos_weight",
    )
    yield Sample((m.arr(3, 4), m.pos(3, 4, low=0.0, high=1.0)), {"pos_weight": m.pos(3, 1)})
    yield Sample((m.arr(), m.pos(low=0.0, high=1.0)), note="0-d")


def _bcel_errors(m: Maker) -> Iterator[ErrorCase]:
    x = m.arr(3)
    yield ErrorCase((x, m.pos(4)), exc=ValueError, match="must be the same as input size")
    yield ErrorCase((x, m.pos(3)), {"reduction": "foo"}, exc=ValueError,
                    match="foo is not a valid value for reduction")  # fmt: skip
    yield ErrorCase((m.arr(3, 4), m.pos(3, 4)), {"pos_weight": m.pos(3)}, exc=RuntimeError,
                    match="must match the size")  # fmt: skip


def _kl_samples(m: Maker) -> Iterator[Sample]:
    def logq(*s: int) -> np.ndarray:
        return np.asarray(np.log(m.pos(*s, low=0.05, high=1.0)))

    yield Sample((logq(3, 4), m.pos(3, 4, low=0.05, high=1.0)), {"reduction": "batchmean"})
    yield Sample((logq(3, 4), m.pos(3, 4, low=0.05, high=1.0)), {"reduction": "sum"})
    yield Sample((logq(3, 4), m.pos(3, 4, low=0.05, high=1.0)), {"reduction": "none"})
    yield Sample(
        (logq(3, 4), m.arr(3, 4, low=-3.0, high=0.0)),
        {"reduction": "batchmean", "log_target": True},
        note="log_target",
    )
    yield Sample((logq(2, 3), np.array([[0.0, 0.5, 0.5], [0.2, 0.0, 0.8]], dtype=m.dtype)),
                 {"reduction": "sum"}, grad=(0,), note="zeros in the target")  # fmt: skip
    yield Sample((logq(), m.pos(low=0.05, high=1.0)), {"reduction": "batchmean"}, note="0-d")


def _kl_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 2), m.pos(3)), {"reduction": "sum"}, exc=RuntimeError,
                    match="must match the size")  # fmt: skip
    yield ErrorCase((m.arr(3), m.pos(3)), {"reduction": "foo"}, exc=ValueError,
                    match="foo is not a valid value for reduction")  # fmt: skip


_NF = "nn.functional."
_SUM_TOL = {"float32": (1e-4, 1e-5)}

register(
    OpInfo(_NF + "nll_loss", nll_loss, _nll_samples, errors=_nll_errors),
    OpInfo(_NF + "cross_entropy", cross_entropy, _ce_samples, errors=_ce_errors),
    OpInfo(_NF + "mse_loss", mse_loss, _weighted_samples(), errors=_weighted_errors()),
    OpInfo(
        _NF + "l1_loss",
        l1_loss,
        _weighted_samples(),
        errors=_weighted_errors(),
        grad2=False,
        notes="Its second derivative is zero, as torch's (a ZeroTensor there, which the table's "
        "tests cannot read: tests/ops/test_nn_functional.py checks it).",
    ),
    OpInfo(
        _NF + "smooth_l1_loss",
        smooth_l1_loss,
        _smooth_l1_samples,
        errors=_regression_errors(beta=-1.0),
    ),
    OpInfo(
        _NF + "huber_loss",
        huber_loss,
        _weighted_samples({"delta": 0.7}),
        errors=_weighted_errors(delta=0.0),
    ),
    OpInfo(
        _NF + "binary_cross_entropy",
        binary_cross_entropy,
        _bce_samples,
        errors=_bce_errors,
    ),
    OpInfo(
        _NF + "binary_cross_entropy_with_logits",
        binary_cross_entropy_with_logits,
        _bcel_samples,
        errors=_bcel_errors,
    ),
    OpInfo(
        _NF + "kl_div",
        kl_div,
        _kl_samples,
        errors=_kl_errors,
        notes="Where the target is 0 (log_target=False) its gradient is -input "
        "(torch's is NaN there: the derivative of xlogy(t, t) at 0).",
    ),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "nn.functional.nll_loss": "custom",
        "nn.functional.cross_entropy": "custom",
        "nn.functional.mse_loss": "loss",
        "nn.functional.l1_loss": "loss",
        "nn.functional.smooth_l1_loss": "loss",
        "nn.functional.huber_loss": "loss",
        "nn.functional.binary_cross_entropy": "loss",
        "nn.functional.binary_cross_entropy_with_logits": "loss",
        "nn.functional.kl_div": "loss",
    }
)
