"""Grad mode, inference mode and anomaly mode, kept in context variables.

# NOTE [Modes are task-local]
# Each asyncio task / trio task (and each thread) sees its own modes: they live
# in ContextVars, never in thread-locals or globals, because tasks share a
# thread.  anyio copies the context into ``to_thread`` workers, so a kernel run
# in a thread sees the mode of the task that started it.  The engine sets grad
# mode from ``create_graph`` while it runs nodes, not from the caller's mode.

The context managers double as decorators of plain functions, generator
functions, ``async def`` functions and async generators; the mode applies
while the body runs and the caller's mode is restored whenever it suspends.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])

_grad_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aengine_grad_enabled", default=True
)
_inference: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aengine_inference_mode", default=False
)


def is_grad_enabled() -> bool:
    """Return whether operations in the current task record the graph.

    Example::

        >>> import aengine as ae
        >>> with ae.no_grad():
        ...     ae.is_grad_enabled()
        False
    """
    return _grad_enabled.get()


def is_inference_mode_enabled() -> bool:
    """Return whether the current task is inside :class:`inference_mode`."""
    return _inference.get()


class _Mode:
    """Base of the mode context managers: set on enter, restore on exit.

    Subclasses define :meth:`_set`, returning the tokens to reset.
    """

    def __init__(self) -> None:
        self._tokens: list[list[contextvars.Token[bool]]] = []

    def _set(self) -> list[contextvars.Token[bool]]:
        raise NotImplementedError

    def _clone(self) -> _Mode:
        return self.__class__()

    def __enter__(self) -> None:
        self._tokens.append(self._set())

    def __exit__(self, *exc: object) -> None:
        for token in reversed(self._tokens.pop()):
            token.var.reset(token)

    def __call__(self, func: F) -> F:
        return _decorate(self, func)


def _decorate(mode: _Mode, func: F) -> F:
    """Wrap ``func`` so that its body runs under a fresh copy of ``mode``."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def coro_wrapper(*args: Any, **kwargs: Any) -> Any:
            coro = func(*args, **kwargs)
            return await _StepUnderMode(mode, coro)

        return coro_wrapper  # type: ignore[return-value]

    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def agen_wrapper(*args: Any, **kwargs: Any) -> Any:
            agen = func(*args, **kwargs)
            sent: Any = None
            while True:
                try:
                    with mode._clone():
                        step = agen.asend(sent)
                    value = await _StepUnderMode(mode, step)
                except StopAsyncIteration:
                    return
                sent = yield value

        return agen_wrapper  # type: ignore[return-value]

    if inspect.isgeneratorfunction(func):

        @functools.wraps(func)
        def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
            with mode._clone():
                gen = func(*args, **kwargs)
            method, arg = gen.send, None
            while True:
                try:
                    with mode._clone():
                        value = method(arg)
                except StopIteration as stop:
                    return stop.value
                try:
                    arg = yield value
                    method = gen.send
                except GeneratorExit:
                    with mode._clone():
                        gen.close()
                    raise
                except BaseException as exc:  # forwarded into the generator
                    method, arg = gen.throw, exc

        return gen_wrapper  # type: ignore[return-value]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with mode._clone():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


class _StepUnderMode:
    """Awaitable that drives ``coro`` with the mode set around each step.

    The caller's mode is restored whenever the coroutine suspends, so the
    mode never leaks to other code that runs in the same task meanwhile.
    """

    def __init__(self, mode: _Mode, coro: Any) -> None:
        self._mode = mode
        self._coro = coro

    def __await__(self) -> Any:
        coro = self._coro
        method, arg = coro.send, None
        while True:
            try:
                with self._mode._clone():
                    request = method(arg)
            except StopIteration as stop:
                return stop.value
            try:
                arg = yield request
                method = coro.send
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                method, arg = coro.throw, exc


class no_grad(_Mode):
    """Context manager and decorator that disables graph recording.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(2, requires_grad=True)
        >>> with ae.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def _set(self) -> list[contextvars.Token[bool]]:
        return [_grad_enabled.set(False)]


class enable_grad(_Mode):
    """Context manager and decorator that enables graph recording.

    Example::

        >>> import aengine as ae
        >>> with ae.no_grad():
        ...     with ae.enable_grad():
        ...         ae.is_grad_enabled()
        True
    """

    def _set(self) -> list[contextvars.Token[bool]]:
        return [_grad_enabled.set(True)]


class set_grad_enabled(_Mode):
    """Set grad mode on or off.

    Called as a function it takes effect at once (for the current task);
    used as a context manager or decorator it restores the previous mode on
    exit.

    Example::

        >>> import aengine as ae
        >>> with ae.set_grad_enabled(False):
        ...     ae.is_grad_enabled()
        False
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {type(mode).__name__}")
        self.mode = mode
        self._prev = _grad_enabled.get()
        _grad_enabled.set(mode)

    def _clone(self) -> _Mode:
        clone = object.__new__(set_grad_enabled)
        _Mode.__init__(clone)
        clone.mode = self.mode
        return clone

    def _set(self) -> list[contextvars.Token[bool]]:
        return [_grad_enabled.set(self.mode)]

    def __enter__(self) -> None:
        # The constructor already switched the mode; remember what to restore.
        self._tokens.append([])

    def __exit__(self, *exc: object) -> None:
        tokens = self._tokens.pop()
        if tokens:
            for token in reversed(tokens):
                token.var.reset(token)
        else:
            _grad_enabled.set(self._prev)

    def __call__(self, func: F) -> F:
        # Used as a decorator: undo the immediate switch made by __init__.
        _grad_enabled.set(self._prev)
        clone = self._clone()
        clone.__class__ = _SetGradEnabledScoped
        return _decorate(clone, func)


class _SetGradEnabledScoped(set_grad_enabled):
    """``set_grad_enabled`` copy used inside decorators: plain enter/exit."""

    def __enter__(self) -> None:
        self._tokens.append(self._set())

    def __exit__(self, *exc: object) -> None:
        for token in reversed(self._tokens.pop()):
            token.var.reset(token)

    def _clone(self) -> _Mode:
        clone = object.__new__(_SetGradEnabledScoped)
        _Mode.__init__(clone)
        clone.mode = self.mode
        return clone


class inference_mode(_Mode):
    """Context manager and decorator for inference: no graph, no versions.

    Tensors created inside are inference tensors: they can never be saved
    for backward.  ``inference_mode(False)`` inside it turns it off again.

    Example::

        >>> import aengine as ae
        >>> x = ae.ones(2, requires_grad=True)
        >>> with ae.inference_mode():
        ...     y = x * 2
        >>> y.requires_grad, y.is_inference()
        (False, True)
    """

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self.mode = mode

    def _clone(self) -> _Mode:
        return inference_mode(self.mode)

    def _set(self) -> list[contextvars.Token[bool]]:
        if self.mode:
            return [_inference.set(True), _grad_enabled.set(False)]
        return [_inference.set(False)]

    def __call__(self, func: F) -> F:
        if isinstance(func, bool):  # @inference_mode(False) written as a call
            return inference_mode(func)  # type: ignore[return-value]
        return _decorate(self, func)
