"""Forward-mode AD, as ``torch.autograd.forward_ad``.

Inside a dual level, a tensor made with :func:`make_dual` carries a tangent;
every op computes its result's tangent from its inputs' (a Jacobian-vector
product, one op at a time, beside the forward); :func:`unpack_dual` reads it.

    >>> import aengine as ae
    >>> import aengine.autograd.forward_ad as fwAD
    >>> x = ae.tensor([0.0, 1.0])
    >>> with fwAD.dual_level():
    ...     y = ae.sin(fwAD.make_dual(x, ae.ones(2))) * 2.0
    ...     fwAD.unpack_dual(y).tangent.tolist()
    [2.0, 1.0806045532226562]

See docs/forward-ad.md (NOTE [Forward-mode AD] in aengine/tensors/_dual.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

from ..ops import _forward  # noqa: F401  (installs forward mode's recorders)
from ..ops._shape import view
from ..tensors import _dual
from ..tensors._tensor import Tensor

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class UnpackedDualTensor(NamedTuple):
    """What :func:`unpack_dual` returns: the primal and the tangent (None for none)."""

    primal: Tensor
    tangent: Tensor | None


def enter_dual_level() -> int:
    """Open a forward AD level and return its index (0).

    As PyTorch, one level at a time: opening a second raises RuntimeError.

        >>> import aengine.autograd.forward_ad as fwAD
        >>> level = fwAD.enter_dual_level()
        >>> fwAD.exit_dual_level(level=level)
    """
    return _dual.enter_level()


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the open forward AD level: every tangent made in it is dropped.

    >>> import aengine.autograd.forward_ad as fwAD
    >>> fwAD.exit_dual_level(level=fwAD.enter_dual_level())
    """
    _dual.exit_level(level)


def _check_level(level: int | None, what: str) -> None:
    if level is not None and level != _dual.LEVEL:
        raise RuntimeError(f"Invalid level given to {what}")


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A tensor aliasing ``tensor`` (a view: gradients flow back) carrying ``tangent``.

    ``tangent`` is kept as it is (not copied); it must have ``tensor``'s
    shape, and both must be floating point.  Differentiable in reverse mode.

        >>> import aengine as ae
        >>> import aengine.autograd.forward_ad as fwAD
        >>> with fwAD.dual_level():
        ...     d = fwAD.make_dual(ae.tensor([1.0]), ae.tensor([2.0]))
        ...     (d * d).tolist(), fwAD.unpack_dual(d * d).tangent.tolist()
        ([1.0], [4.0])
    """
    if _dual.LEVEL is None:
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    _check_level(level, "_make_dual")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError(
            f"make_dual() takes two Tensors (the primal and its tangent), not "
            f"{type(tensor).__name__} and {type(tangent).__name__}"
        )
    if tensor.data.dtype.kind not in "fc":
        raise ValueError(
            f"Expected primal to be floating point or complex, but got: {tensor.dtype}"
        )
    if tangent.data.dtype.kind not in "fc":
        raise ValueError(
            f"Expected tangent to be floating point or complex, but got: {tangent.dtype}"
        )
    if tensor._fw is not None:
        raise RuntimeError(
            f"Making a dual Tensor based on a Tensor that already has a forward gradient at "
            f"the same level {_dual.LEVEL} is not supported."
        )
    if tangent.data.shape != tensor.data.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}."
        )
    if tangent._device is not tensor._device:
        raise RuntimeError(
            f"Trying to set a forward gradient on {tensor._device} from a tangent on "
            f"{tangent._device}; move the tangent with .to(device) first"
        )
    token = _dual.computing.set(True)
    try:
        out = view(tensor, tensor.data.shape)
    finally:
        _dual.computing.reset(token)
    _dual.set_tangent(out, tangent)
    return out


def unpack_dual(tensor: Any, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``: its value (a view) and its tangent (None: none).

    Outside a level the tangent is None and the primal ``tensor`` itself.

        >>> import aengine as ae
        >>> import aengine.autograd.forward_ad as fwAD
        >>> fwAD.unpack_dual(ae.tensor([1.0])).tangent is None
        True
    """
    if _dual.LEVEL is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    _check_level(level, "_fw_primal")
    tangent = tensor._fw
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    token = _dual.computing.set(True)
    try:
        primal = view(tensor, tensor.data.shape)
    finally:
        _dual.computing.reset(token)
    return UnpackedDualTensor(primal, tangent)


class dual_level:
    """Context manager (and decorator) of a forward AD level, as torch's.

    >>> import aengine as ae
    >>> import aengine.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     out = ae.exp(fwAD.make_dual(ae.tensor([0.0]), ae.tensor([3.0])))
    ...     tangent = fwAD.unpack_dual(out).tangent
    >>> tangent.tolist(), fwAD.unpack_dual(out).tangent
    ([3.0], None)
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        exit_dual_level()

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
