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

from collections.abc import Iterable

from ..core import no_grad
from ..ops import cat, clamp, stack
from ..ops._reduce import vector_norm
from ..ops._special import isfinite
from ..tensors._creation import tensor as _tensor
from ..tensors._tensor import Tensor

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "parameters_to_vector",
    "vector_to_parameters",
]


def _params(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


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
    if not grads:
        return _tensor(0.0)
    p = float(norm_type)
    with no_grad():
        total = vector_norm(stack([vector_norm(g, p) for g in grads]), p)
        if error_if_nonfinite and not bool(isfinite(total)):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is "
                "non-finite, so it cannot be clipped. To disable this error and scale the "
                "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        coef = clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef)
    return total


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient to [-clip_value, clip_value] in place."""
    v = float(clip_value)
    with no_grad():
        for p in _params(parameters):
            if p.grad is not None:
                p.grad.clamp_(-v, v)


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
    pos = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[pos : pos + n].reshape(p.shape))
            pos += n
