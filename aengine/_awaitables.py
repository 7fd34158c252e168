"""The awaitables of the async entry points: what ``ae.grad(...)`` returns before ``await``.

Split from _autograd.py, which makes them (``_twins``, ``Tensor.backward``).
"""

from __future__ import annotations

import operator
from collections.abc import Coroutine, Generator
from typing import Any

from .core._unawaited import note_dropped

__all__ = ["_DONE", "_AeBackwardCall", "_BackwardCall", "_Call", "_Done", "_new_call"]


class _Call(Coroutine[Any, Any, Any]):
    """What an async entry point returns (``ae.grad(...)`` before ``await``).

    # NOTE [The awaitable of an entry point]
    # ``ae.grad(...)`` and its siblings are plain functions returning this
    # thin wrapper of the call's coroutine, for two PyTorch habits that would
    # otherwise fail silently: it refuses to be a truth value (``if
    # ae.grad(...)``, ``assert ae.gradcheck(...)`` without ``await`` would
    # always pass, a coroutine being truthy), and the function can check, when
    # called, that an event loop runs here (else it raises at once, naming the
    # ``ae.sync`` twin).  It is a ``collections.abc.Coroutine`` (``send``,
    # ``throw``, ``close`` delegate), so ``asyncio.create_task``, anyio's and
    # trio's ``start_soon`` and ``trio.run`` take it as they took the
    # coroutine; one left un-awaited still warns "coroutine ... was never
    # awaited".
    # Its cost is kept to about 1% of ``await ae.grad`` on a 1-node graph
    # (``python -m bench.profile --fixedcost --bytecodes --async``: 19 of
    # 1782 bytecodes under asyncio, 15 of 1745 under trio): the loop test is
    # two reads (NOTE [Is a loop running here]), the generator is made by the
    # entry point and handed to the coroutine, and ``__await__`` runs no
    # Python code: it is a property whose getter (C) returns the coroutine's
    # ``__await__``.
    """

    __slots__ = ("_coro",)

    _coro: Coroutine[Any, Any, Any]

    #: ``self._coro.__await__()``, without a Python frame (see the NOTE)
    __await__ = property(operator.attrgetter("_coro.__await__"))

    def send(self, value: Any) -> Any:
        """Delegated to the call's coroutine (for event loops that drive it as a task)."""
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Delegated to the call's coroutine."""
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        """Delegated to the call's coroutine."""
        self._coro.close()

    def __bool__(self) -> bool:
        self._coro.close()  # it will never run: no "never awaited" warning besides the error
        name = self._name()
        raise TypeError(
            f"ae.{name}(...) returns an awaitable, not its result, and an awaitable has no truth "
            f"value: write `await ae.{name}(...)` in async code, or call ae.sync.{name}(...) in "
            "plain code"
        )

    def __repr__(self) -> str:
        return f"<awaitable ae.{self._name()}(...): await it>"

    def _name(self) -> str:
        """The entry point's public name: its coroutine's qualname (``_async_runner``)."""
        return str(getattr(self._coro, "__qualname__", "backward"))


class _BackwardCall(_Call):
    """The awaitable of a backward in async code (``_call`` says which call it was).

    Dropped before it started, it says so where the gradient is first
    needed (NOTE [A backward never awaited] in core/_unawaited.py).
    """

    __slots__ = ("_awaited",)

    _call = "loss.backward()"

    def __await__(self) -> Generator[Any, None, Any]:
        # ``await call`` may drop the call before its coroutine's first step
        self._awaited = True
        return self._coro.__await__()

    def __del__(self) -> None:
        coro = getattr(self, "_coro", None)
        if coro is None or coro.cr_frame is None or getattr(self, "_awaited", False):
            return
        if not (coro.cr_running or coro.cr_suspended):  # never started
            coro.close()  # our warning instead of Python's "never awaited"
            note_dropped(self._call)


class _AeBackwardCall(_BackwardCall):
    """``ae.backward(...)``'s awaitable."""

    __slots__ = ()

    _call = "ae.backward(...)"


class _Done(Coroutine[Any, Any, None]):
    """What ``tensor.backward()`` returns where no event loop runs: the backward has run.

    Awaiting it does nothing more and gives None, so ``await loss.backward()``
    also works in code that may run with or without a loop; it is falsy, like
    PyTorch's None.
    """

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]

    def send(self, value: Any) -> Any:
        """Finishes at once (the backward already ran)."""
        raise StopIteration

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Raises the exception thrown in, as a finished coroutine does."""
        exc = typ if val is None else val
        if isinstance(exc, type):
            exc = exc()
        raise exc.with_traceback(tb) if tb is not None else exc

    def close(self) -> None:
        """Nothing to close."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return (
            "<tensor.backward() done: it ran at once (no event loop); awaiting this does nothing>"
        )


_DONE = _Done()
_new_call = object.__new__
