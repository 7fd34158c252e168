"""``ae.nn.utils``: gradient clipping and flattening parameters, as torch.nn.utils.

Example::

    >>> import aengine as ae
    >>> w = ae.nn.Parameter(ae.ones(4))
    >>> w.grad = ae.full((4,), 3.0)
    >>> round(float(ae.nn.utils.clip_grad_norm_([w], max_norm=1.0)), 3)
    6.0
    >>> round(float(w.grad.norm()), 3)
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core import no_grad
from ..ops import cat
from ..tensors._creation import tensor as _tensor
from ..tensors._tensor import Tensor
from ..tensors._views import commit_inplace

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "vector_to_parameters",
]


def _params(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _norm(xp: Any, a: Any, p: float) -> Any:
    if p == math.inf:
        return xp.max(xp.abs(a)) if a.size else xp.zeros((), a.dtype)
    if p == -math.inf:
        return xp.min(xp.abs(a)) if a.size else xp.zeros((), a.dtype)
    if p == 2:
        return xp.sqrt(xp.sum(a * a))
    if p == 1:
        return xp.sum(xp.abs(a))
    return xp.sum(xp.abs(a) ** p) ** (1.0 / p)


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients so that their total ``norm_type``-norm is at most ``max_norm``.

    The total norm is the norm of the per-parameter norms, as torch's;
    returns it (before clipping).  ``foreach`` is accepted for torch's
    signature and has no effect.
    """
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    p = float(norm_type)
    if not grads:
        return _tensor(0.0)
    xp = grads[0].device.backend.xp
    norms = xp.stack([_norm(xp, g.data, p) for g in grads])
    total = _norm(xp, norms, p)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0).astype(total.dtype)
    with no_grad():
        for g in grads:
            g.data *= coef
            commit_inplace(g, None)
    return Tensor._make(xp.asarray(total), False, grads[0].device)


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient to [-clip_value, clip_value] in place."""
    v = float(clip_value)
    for p in _params(parameters):
        g = p.grad
        if g is not None:
            xp = g.device.backend.xp
            xp.clip(g.data, -v, v, out=g.data)
            commit_inplace(g, None)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    params = list(parameters)
    if not params:
        raise RuntimeError("parameters_to_vector: expected a non-empty sequence of tensors")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy slices of the 1-D ``vec`` into the parameters, in order (their data is replaced)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vec must be a 1-D tensor, got {vec.ndim}-D")
    params = list(parameters)
    need = sum(p.numel() for p in params)
    if vec.numel() != need:
        raise RuntimeError(f"vec has {vec.numel()} elements, the parameters need {need}")
    host = vec.detach().cpu().numpy()
    pos = 0
    with no_grad():
        for p in params:
            n = p.numel()
            chunk = np.asarray(host[pos : pos + n]).reshape(p.shape)
            p.data[...] = p.device.backend.from_numpy(chunk).astype(p.dtype, copy=False)
            commit_inplace(p, None)
            pos += n
