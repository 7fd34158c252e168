"""``once_differentiable``: a Function's backward that cannot itself be differentiated."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from .core import AutogradError, Node, gradient_edge
from .core._graph import set_history
from .core._modes import _grad_enabled, no_grad
from .tensors import Tensor

__all__ = ["once_differentiable"]

_T = TypeVar("_T", bound=Callable[..., Any])


class _DelayedError(Node):
    """Node attached to gradients of a once_differentiable backward under create_graph."""

    def __init__(self, edges: tuple[Any, ...], msg: str, n: int) -> None:
        super().__init__(edges)
        self.msg = msg
        self.num_outputs = n

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        raise AutogradError(self.msg)


_ONCE_MSG = "trying to differentiate twice a function that was marked with @once_differentiable"


def once_differentiable(fn: _T) -> _T:
    """Decorate a ``backward`` that cannot itself be differentiated.

    It runs under no_grad; under create_graph its results are attached to a
    node that raises if a higher-order backward reaches it.

    Example::

        >>> import aengine as ae
        >>> class Exp(ae.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         y = x.exp()
        ...         ctx.save_for_backward(y)
        ...         return y
        ...     @staticmethod
        ...     @ae.once_differentiable
        ...     def backward(ctx, g):
        ...         (y,) = ctx.saved_tensors
        ...         return g * y
    """
    if not callable(fn):
        raise TypeError(
            f"once_differentiable expects a callable (a Function's backward), got "
            f"{type(fn).__name__}; use it as a decorator: @ae.once_differentiable"
        )

    def wrap_results(args: tuple[Any, ...], outputs: Any, grad_on: bool) -> Any:
        if not grad_on:
            return outputs
        edges = tuple(gradient_edge(a) for a in args if isinstance(a, Tensor) and a._rg)
        if not edges:
            return outputs
        is_tuple = isinstance(outputs, tuple)
        outs = list(outputs) if is_tuple else [outputs]
        err = _DelayedError(edges, _ONCE_MSG, len(outs))
        for i, o in enumerate(outs):
            if isinstance(o, Tensor):
                t = Tensor._make(o.data, True, o._device)
                set_history(t, err, i)
                outs[i] = t
        return tuple(outs) if is_tuple else outs[0]

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(ctx: Any, *args: Any) -> Any:
            grad_on = _grad_enabled.get()
            with no_grad():
                outputs = await fn(ctx, *args)
            return wrap_results(args, outputs, grad_on)

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        grad_on = _grad_enabled.get()
        with no_grad():
            outputs = fn(ctx, *args)
        return wrap_results(args, outputs, grad_on)

    return wrapper  # type: ignore[return-value]
