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
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "set_multithreading_enabled",
    "is_multithreading_enabled",
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


#: the variables a mode may change; saved and restored around each step
_MODE_VARS: tuple[contextvars.ContextVar[bool], ...] = (_grad_enabled, _inference)


class _ModeState:
    """The mode of one running generator or coroutine, kept across its suspensions.

    # NOTE [Modes of suspended bodies]
    # A decorated generator or coroutine runs under the mode only while it
    # runs: each step (``send``/``throw``/``close``) enters it and restores
    # the caller's values afterwards.  What the body itself switches (``with
    # ae.enable_grad(): await ...``) is remembered at the suspension and put
    # back at the next step, so the body sees its own mode across ``await``
    # and ``yield`` while the caller (or another task) never sees it.
    """

    __slots__ = ("inner", "mode")

    def __init__(self, mode: _Mode) -> None:
        self.mode = mode
        self.inner: tuple[tuple[contextvars.ContextVar[Any], Any], ...] | None = None

    def enter(self) -> list[contextvars.Token[Any]]:
        if self.inner is None:
            return self.mode._set()
        return [var.set(value) for var, value in self.inner]

    def exit(self, tokens: list[contextvars.Token[Any]]) -> None:
        # the grad-mode variables, plus any other the mode sets (detect_anomaly's)
        own = tuple(t.var for t in tokens if t.var not in _MODE_VARS)
        self.inner = tuple((var, var.get()) for var in (*_MODE_VARS, *own))
        for token in reversed(tokens):
            token.var.reset(token)

    def step(self, method: Callable[..., Any], *args: Any) -> Any:
        """Call ``method(*args)`` (one step of the body) under the body's mode."""
        tokens = self.enter()
        try:
            return method(*args)
        finally:
            self.exit(tokens)


def _decorate(mode: _Mode, func: F) -> F:
    """Wrap ``func`` so that its body runs under ``mode`` (see NOTE [Modes of suspended bodies])."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def coro_wrapper(*args: Any, **kwargs: Any) -> Any:
            state = _ModeState(mode)
            coro = state.step(func, *args, **kwargs)
            return await _StepUnderMode(state, coro)

        return coro_wrapper  # type: ignore[return-value]
    if inspect.isasyncgenfunction(func):
        return _wrap_async_generator(mode, func)
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(mode, func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with mode._clone():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _wrap_async_generator(mode: _Mode, func: F) -> F:
    """``_decorate`` of an async generator function: each step of its body under ``mode``."""

    @functools.wraps(func)
    async def agen_wrapper(*args: Any, **kwargs: Any) -> Any:
        state = _ModeState(mode)
        agen = state.step(func, *args, **kwargs)
        method: Any = agen.asend
        arg: Any = None
        try:
            while True:
                try:
                    value = await _StepUnderMode(state, state.step(method, arg))
                except StopAsyncIteration:
                    return
                try:
                    arg = yield value
                    method = agen.asend
                except GeneratorExit:
                    raise
                except BaseException as exc:  # athrow: forwarded into the body
                    method, arg = agen.athrow, exc
        finally:
            await _StepUnderMode(state, state.step(agen.aclose))

    return agen_wrapper  # type: ignore[return-value]


def _wrap_generator(mode: _Mode, func: F) -> F:
    """``_decorate`` of a generator function: each step of its body under ``mode``."""

    @functools.wraps(func)
    def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
        state = _ModeState(mode)
        gen = state.step(func, *args, **kwargs)
        method, arg = gen.send, None
        while True:
            try:
                value = state.step(method, arg)
            except StopIteration as stop:
                return stop.value
            try:
                arg = yield value
                method = gen.send
            except GeneratorExit:
                state.step(gen.close)
                raise
            except BaseException as exc:  # forwarded into the generator
                method, arg = gen.throw, exc

    return gen_wrapper  # type: ignore[return-value]


class _StepUnderMode:
    """Awaitable that drives ``coro`` with the body's mode set around each step.

    The caller's mode is restored whenever the coroutine suspends, so the
    mode never leaks to other code that runs in the same task meanwhile.
    """

    __slots__ = ("_coro", "_state")

    def __init__(self, state: _ModeState, coro: Any) -> None:
        self._state = state
        self._coro = coro

    def __await__(self) -> Any:
        coro = self._coro
        state = self._state
        if not hasattr(coro, "send"):  # an awaitable that is not a coroutine
            coro = coro.__await__()
        method, arg = coro.send, None
        while True:
            try:
                request = state.step(method, arg)
            except StopIteration as stop:
                return stop.value
            try:
                arg = yield request
                method = coro.send
            except GeneratorExit:
                state.step(coro.close)
                raise
            except BaseException as exc:
                method, arg = coro.throw, exc


class _NoParamMode(_Mode):
    """A mode usable as ``@mode``, ``@mode()`` and ``with mode():``."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        if not callable(orig_func):
            raise TypeError(
                f"{cls.__name__}() takes no arguments, or the function it decorates; "
                f"got {type(orig_func).__name__}"
            )
        return cls()(orig_func)

    def __init__(self, orig_func: Callable[..., Any] | None = None) -> None:
        super().__init__()


class no_grad(_NoParamMode):
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


class enable_grad(_NoParamMode):
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

    def __new__(cls, mode: Any = True) -> Any:
        if mode is None or isinstance(mode, bool):
            return super().__new__(cls)
        if not callable(mode):
            raise TypeError(
                "inference_mode() takes a bool mode (or decorates a function as "
                f"@inference_mode), got {type(mode).__name__}: use inference_mode(True) or "
                "inference_mode(False)"
            )
        return cls()(mode)  # used as @inference_mode without parentheses

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self.mode = mode

    def _clone(self) -> _Mode:
        return inference_mode(self.mode)

    def _set(self) -> list[contextvars.Token[bool]]:
        # As PyTorch: entering inference mode disables grad mode, and
        # inference_mode(False) enables it again.
        if self.mode:
            return [_inference.set(True), _grad_enabled.set(False)]
        return [_inference.set(False), _grad_enabled.set(True)]

    def __call__(self, func: F) -> F:
        return _decorate(self, func)


# -- anomaly mode ------------------------------------------------------------------------

_anomaly: contextvars.ContextVar[tuple[bool, bool]] = contextvars.ContextVar(
    "aengine_anomaly",
    default=(False, True),  # check_nan on by default, as PyTorch reports
)
#: whether anomaly mode was ever turned on in this process (never reset): until
#: then no context can have it on, and recording an op skips reading ``_anomaly``
anomaly_ever_enabled = False


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on in the current task."""
    return _anomaly.get()[0]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks for NaN in the current task."""
    return _anomaly.get()[1]


class detect_anomaly(_Mode):
    """Context manager and decorator turning anomaly detection on.

    Nodes record the forward traceback that created them; a backward error
    is reported with that traceback, and (with ``check_nan``) a node that
    returns NaN raises an error naming it and the output index.

    Example::

        >>> import aengine as ae, warnings
        >>> with warnings.catch_warnings():  # it warns that it is on
        ...     warnings.simplefilter("ignore")
        ...     with ae.detect_anomaly():
        ...         ae.is_anomaly_enabled()
        True
    """

    def __init__(self, check_nan: bool = True) -> None:
        if check_nan.__class__ is not bool:  # PyTorch raises this TypeError when entered
            raise TypeError(
                f"detect_anomaly(): argument 'check_nan' must be bool, not "
                f"{type(check_nan).__name__}"
            )
        super().__init__()
        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and "
            "should only be enabled for debugging.",
            UserWarning,
            stacklevel=2,
        )

    def _clone(self) -> _Mode:
        clone = object.__new__(detect_anomaly)
        _Mode.__init__(clone)
        clone.check_nan = self.check_nan
        return clone

    def _set(self) -> list[contextvars.Token[Any]]:
        global anomaly_ever_enabled
        anomaly_ever_enabled = True
        return [_anomaly.set((True, self.check_nan))]


class set_detect_anomaly:
    """Turn anomaly detection on or off (as :class:`detect_anomaly`, but either way).

    Called as a function it takes effect at once (for the current task);
    used as a context manager it restores the previous setting on exit.
    Unlike ``detect_anomaly()`` it does not warn, as PyTorch's.

    Example::

        >>> import aengine as ae
        >>> with ae.set_detect_anomaly(True, check_nan=False):
        ...     ae.is_anomaly_enabled(), ae.is_anomaly_check_nan_enabled()
        (True, False)
        >>> ae.is_anomaly_enabled()
        False
    """

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        global anomaly_ever_enabled
        for name, value in (("mode", mode), ("check_nan", check_nan)):
            if value.__class__ is not bool:
                raise TypeError(
                    f"set_detect_anomaly(): argument '{name}' must be bool, not "
                    f"{type(value).__name__}"
                )
        self.mode = mode
        self.check_nan = check_nan
        self._prev = _anomaly.get()
        if mode:
            anomaly_ever_enabled = True
        _anomaly.set((mode, check_nan))

    def __enter__(self) -> None:
        """Nothing more: the constructor switched it; the exit restores the previous one."""

    def __exit__(self, *exc: object) -> None:
        _anomaly.set(self._prev)


# NOTE [Multithreading mode]
# PyTorch's ``set_multithreading_enabled(False)`` makes a backward run every
# node in the calling thread instead of its device threads.  aengine's
# threads are the compute threads of kernel offload and of a backward moved
# off the loop (NOTE [Kernel offload policy], NOTE [A backward in a compute
# thread]): with the mode off, an awaited backward started in this task runs
# all its cpu nodes on the loop, in the awaiting task (the driver reads the
# mode once, when it attaches the backward's scheduler).  Device nodes still
# go to their device workers, which are tasks of the same loop, not threads.
# A sync backward already runs everything in the calling thread.  The mode is
# task-local, as the other modes (NOTE [Modes are task-local]); a new OS
# thread starts with it on, as in PyTorch.
_multithreading: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aengine_multithreading_enabled", default=True
)


def is_multithreading_enabled() -> bool:
    """Return whether a backward started in this task may run nodes in compute threads.

    See :class:`set_multithreading_enabled`.

    Example::

        >>> import aengine as ae
        >>> ae.autograd.is_multithreading_enabled()
        True
    """
    return _multithreading.get()


class set_multithreading_enabled:
    """Let backwards use compute threads (the default), or keep them on the loop.

    With ``False``, an awaited backward started in the current task runs all
    its cpu nodes in that task: no kernel runs in a compute thread and the
    backward never moves into one (``ae.Engine(offload=...,
    offload_backward=...)`` are not consulted).  Called as a function it takes
    effect at once (for the current task); used as a context manager it
    restores the previous setting on exit, as PyTorch's
    ``torch.autograd.set_multithreading_enabled``.

    Example::

        >>> import aengine as ae
        >>> with ae.autograd.set_multithreading_enabled(False):
        ...     ae.autograd.is_multithreading_enabled()
        False
        >>> ae.autograd.is_multithreading_enabled()
        True
    """

    def __init__(self, mode: bool) -> None:
        if mode.__class__ is not bool:
            raise TypeError(
                "set_multithreading_enabled(): argument 'enabled' (position 1) must be bool, "
                f"not {type(mode).__name__}"
            )
        self.mode = mode
        self._prev = _multithreading.get()
        _multithreading.set(mode)

    def __enter__(self) -> None:
        """Nothing more: the constructor switched it; the exit restores the previous one."""

    def __exit__(self, *exc: object) -> None:
        _multithreading.set(self._prev)
