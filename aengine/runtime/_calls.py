"""``engine.run``: a function in a compute thread, and the sync backwards it runs there.

# NOTE [A backward inside engine.run]
# A service runs the whole compute of a request in one compute thread:
# ``await engine.run(step, x)``, where ``step`` runs the forward, then
# ``ae.sync.grad`` or ``ae.sync.backward`` (no event loop runs in that
# thread), then what uses the gradients (an optimizer step, numpy).  One
# thread hop per request, and none of the request's Python on the loop.  A
# top-level sync backward started by such a call is one of the Engine's
# backwards (``adopting`` finds the call; ``run_sync`` in _drivers.py hands
# the backward to ``Call.backward``):
#
# * counted in ``engine.stats()`` as an awaited one is (done, failed,
#   cancelled, in flight);
# * admitted under ``max_inflight``, in one line with the awaited ones: the
#   call's first backward takes a place, waiting for it on the loop with
#   the call's compute-thread token handed back meanwhile (the backwards
#   holding places then always find a thread: no deadlock); the call keeps
#   its place until it returns, so its later backwards never wait for it;
# * run in slices of the Engine's ``time_slice``; between two the thread
#   asks whether the awaiting task was cancelled
#   (``anyio.from_thread.check_cancelled``).  If it was, the backward stops
#   there, as an awaited one stops at its next slice: the cancellation
#   unwinds ``step`` and is raised in the awaiting task, nothing is
#   committed (``.grad`` as it was), and the nodes that ran are freed
#   (retain_graph=False), a later backward through them saying so;
# * its error raises through ``step`` into the awaiting task, as any
#   exception of the function does.
#
# Everything runs in that thread, hooks included: a hook or an ``async
# def`` backward that awaits something of the app's event loop cannot run
# there (it would run in a loop of its own); such a backward stays on the
# loop (``await ae.grad``).  An explored run (ae.testing) runs the function
# on the loop and adopts nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import sys
import threading
from collections.abc import Callable
from time import perf_counter
from typing import Any, Protocol, TypeVar

import anyio
import anyio.from_thread

from ..core import GraphTask
from ._share import FifoSlots


class Engine(Protocol):
    """What a call sees of its Engine (``ae.Engine``, the one implementation;
    a Protocol so that this module imports nothing of _engine.py)."""

    @property
    def time_slice(self) -> float: ...
    @property
    def _closed(self) -> bool: ...
    @property
    def _admission(self) -> FifoSlots | None: ...
    @property
    def _book(self) -> CallBook: ...
    def _cpu(self) -> anyio.CapacityLimiter: ...
    def _run_limiter(self) -> anyio.CapacityLimiter: ...


__all__ = ["Call", "CallBook", "adopting", "unlimited"]

T = TypeVar("T")

#: the engine.run call whose function runs in this thread (NOTE [A backward inside engine.run])
_call_var: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "aengine_call", default=None
)


def adopting(gt: GraphTask) -> Call | None:
    """The engine.run call that adopts the sync backward ``gt``, or None.

    A top-level backward started in an Engine's compute thread by
    ``engine.run`` (see NOTE [A backward inside engine.run]).
    """
    if gt.depth:
        return None
    call = _call_var.get()
    if call is None or call.engine._closed:
        return None
    return call


def unlimited() -> anyio.CapacityLimiter:
    """A limiter that never makes a call wait (the compute token is taken before)."""
    return anyio.CapacityLimiter(math.inf)


class CallBook:
    """The Engine's counts of the backwards its calls adopted, kept from their threads."""

    __slots__ = ("cancelled", "done", "failed", "lock", "running")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = self.done = self.failed = self.cancelled = 0

    def start(self) -> None:
        with self.lock:
            self.running += 1

    def end(self, exc: BaseException | None) -> None:
        """One ended: done (``exc`` None), cancelled or failed."""
        with self.lock:
            self.running -= 1
            if exc is None:
                self.done += 1
            elif _is_cancellation(exc):
                self.cancelled += 1
            else:
                self.failed += 1

    def cancelled_waiting(self) -> None:
        with self.lock:
            self.cancelled += 1


def _is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is a backend's cancellation (asked in a thread: no library runs here)."""
    if isinstance(exc, asyncio.CancelledError):
        return True
    trio = sys.modules.get("trio")  # loaded if trio runs the awaiting task
    return trio is not None and isinstance(exc, trio.Cancelled)


class Call:
    """One ``engine.run`` call: its compute-thread token, its place, the backwards it runs.

    The token (of the Engine's compute limiter) is borrowed on behalf of this
    object, so a backward of the call can hand it back while it waits for
    admission.  ``token`` and ``place`` change on the loop only.
    """

    __slots__ = ("engine", "place", "token")

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.token = False  # holds a compute-thread token
        self.place = False  # holds a place of max_inflight

    async def run(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        """Run ``fn`` in a compute thread, this call's token held; give token and place back."""
        limiter = self.engine._cpu()
        await limiter.acquire_on_behalf_of(self)
        self.token = True
        try:
            return await anyio.to_thread.run_sync(
                self._in_thread, fn, args, kwargs, limiter=self.engine._run_limiter()
            )
        finally:
            if self.token:
                self.token = False
                limiter.release_on_behalf_of(self)
            if self.place:
                self.place = False
                slots = self.engine._admission
                assert slots is not None
                slots.give()

    def _in_thread(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        token = _call_var.set(self)
        try:
            return fn(*args, **kwargs)
        finally:
            _call_var.reset(token)

    # -- a sync backward adopted by this call (in its thread) ------------------------------------
    def backward(self, gt: GraphTask, body: Callable[[GraphTask, Call], None]) -> None:
        """Run the sync driver's ``body`` for ``gt`` as one of the Engine's backwards."""
        if not self.place and self.engine._admission is not None:
            self._admit()
        book = self.engine._book
        book.start()
        try:
            body(gt, self)
        except BaseException as exc:
            book.end(exc)
            raise
        book.end(None)

    def slice_end(self) -> float:
        """The deadline of the next slice of an adopted backward."""
        return perf_counter() + self.engine.time_slice

    def boundary(self, gt: GraphTask) -> None:
        """Between two slices: stop ``gt`` if the awaiting task was cancelled."""
        try:
            anyio.from_thread.check_cancelled()
        except BaseException as exc:
            gt.fail(None, exc)  # nothing more of it is scheduled
            raise

    def _admit(self) -> None:
        if not anyio.from_thread.run(self._take_place):
            anyio.from_thread.check_cancelled()  # raises the backend's cancellation
            raise RuntimeError("cancelled while waiting for admission")  # pragma: no cover

    async def _take_place(self) -> bool:
        """(on the loop) Wait for a place with the token handed back; False if cancelled."""
        slots = self.engine._admission
        assert slots is not None
        if slots.try_take():
            self.place = True
            return True
        limiter = self.engine._cpu()
        self.token = False
        limiter.release_on_behalf_of(self)
        try:
            await slots.take()
            self.place = True
        except anyio.get_cancelled_exc_class():
            self.engine._book.cancelled_waiting()
            return False
        finally:
            with anyio.CancelScope(shield=True):
                await limiter.acquire_on_behalf_of(self)
            self.token = True
        return True
