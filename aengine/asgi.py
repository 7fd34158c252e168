"""ASGI glue for services: stop a request's work when its client goes away.

:class:`CancelOnDisconnect` is a pure ASGI middleware (it imports anyio
only, and runs under asyncio and trio servers alike: uvicorn, hypercorn,
...).  Wrap an application with it and a request whose client disconnects
before the response is complete is cancelled: a handler awaiting
``ae.grad(...)`` stops there, the backward stops with it, and no ``.grad``
is written (a cancelled backward commits nothing).

With Starlette or FastAPI::

    from fastapi import FastAPI
    from aengine.asgi import CancelOnDisconnect

    app = FastAPI()
    app.add_middleware(CancelOnDisconnect)

or around any ASGI application: ``app = CancelOnDisconnect(app)``.

Example (a hand-written server: the client goes away while the handler works)::

    >>> import anyio
    >>> from aengine.asgi import CancelOnDisconnect
    >>> log = []
    >>> async def slow_app(scope, receive, send):
    ...     await receive()                         # the request body
    ...     try:
    ...         await anyio.sleep(10)               # stands for `await ae.grad(...)`
    ...     except anyio.get_cancelled_exc_class():
    ...         log.append("cancelled")
    ...         raise
    >>> async def main():
    ...     messages = [{"type": "http.request", "body": b"", "more_body": False},
    ...                 {"type": "http.disconnect"}]
    ...     async def receive():
    ...         await anyio.sleep(0.01)
    ...         return messages.pop(0)
    ...     async def send(message):
    ...         log.append(message["type"])
    ...     with anyio.fail_after(5):
    ...         await CancelOnDisconnect(slow_app)({"type": "http"}, receive, send)
    >>> anyio.run(main)
    >>> log
    ['cancelled']

# NOTE [Cancel on disconnect]
# ASGI tells an application that its client went away only when the
# application calls ``receive()`` and gets ``http.disconnect``.  A handler
# busy in ``await ae.grad(...)`` does not call ``receive()``, so without
# help it runs to the end for nobody.  The middleware therefore reads the
# server's ``receive`` itself, in a watcher task beside the application:
#
# * The application runs in the middleware's own task (not in a child
#   task): its context variables, its exceptions and its cancellation are
#   exactly those it has without the middleware.  Its exceptions are caught
#   inside the task group and raised again after it, so they propagate
#   unchanged, never wrapped in an exception group.
# * The watcher forwards each message to the application through a
#   memory channel that holds ONE message, so it reads at most two messages
#   ahead of the application (one in the channel, one waiting for room),
#   and a large upload keeps the server's flow control.  With the request's
#   last body message in the channel, the watcher is already waiting for
#   the disconnect, whether the application reads its body or not (a GET
#   handler).  A body of several messages that the application never reads
#   hides a disconnect until it reads it.  Reading ahead also answers an
#   ``Expect: 100-continue`` at once.  While the channel has room the
#   watcher puts a message in without a checkpoint and reads on, so a
#   server's ``receive`` that finishes its body stream at once (httpx's
#   ASGITransport) is not left half consumed when the app returns.
# * ``http.disconnect`` before the response is complete cancels the
#   application (a cancel scope around it) and the middleware returns
#   normally: the server has nobody to answer.  The response is complete
#   once the application has *handed* its last message to ``send``: the
#   final ``http.response.body`` (``more_body`` false; the last trailers
#   when the response announced trailers) or ``http.response.pathsend``.
#   After that nothing is cancelled: work after the response (Starlette's
#   background tasks) runs to its end.
# * After the disconnect the channel is closed, and every later
#   ``receive()`` of the application returns ``http.disconnect`` again, as
#   servers do; before it, a ``receive()`` after the body waits.  An error
#   raised by the server's ``receive`` reaches the application from its
#   next ``receive()``.
# * When the application returns, the watcher is cancelled: no task
#   outlives the request.  Scopes other than ``http`` (``websocket``,
#   ``lifespan``) go straight to the application.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import anyio.lowlevel

__all__ = ["CancelOnDisconnect"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_DISCONNECT: dict[str, Any] = {"type": "http.disconnect"}


class CancelOnDisconnect:
    """ASGI middleware: cancel an HTTP request's handler when its client disconnects.

    ``CancelOnDisconnect(app)`` wraps any ASGI application;
    ``app.add_middleware(CancelOnDisconnect)`` adds it to a Starlette or
    FastAPI app.  For each ``http`` request it reads the server's messages
    in a watcher task and passes them on to ``app``; when
    ``http.disconnect`` arrives before the response is complete, ``app``
    is cancelled (``await ae.grad(...)`` in a handler stops, and the
    backward writes no ``.grad``) and the middleware returns.  Once the
    response is complete a disconnect cancels nothing.  ``websocket`` and
    ``lifespan`` scopes pass through untouched.  Exceptions of ``app``
    propagate unchanged.  See NOTE [Cancel on disconnect] in this module.

    Example::

        >>> import anyio
        >>> from aengine.asgi import CancelOnDisconnect
        >>> async def hello(scope, receive, send):
        ...     await receive()
        ...     await send({"type": "http.response.start", "status": 200, "headers": []})
        ...     await send({"type": "http.response.body", "body": b"hi"})
        >>> async def main():
        ...     sent = []
        ...     async def receive():
        ...         return {"type": "http.request", "body": b"", "more_body": False}
        ...     async def send(message):
        ...         sent.append(message)
        ...     await CancelOnDisconnect(hello)({"type": "http"}, receive, send)
        ...     return sent[-1]["body"]
        >>> anyio.run(main)
        b'hi'
    """

    def __init__(self, app: ASGIApp) -> None:
        if not callable(app):
            raise TypeError(
                f"CancelOnDisconnect wraps an ASGI application (an async callable "
                f"app(scope, receive, send)), got {type(app).__name__} {app!r}"
            )
        self.app = app

    def __repr__(self) -> str:
        return f"CancelOnDisconnect({self.app!r})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await _Request(self.app, scope, receive, send).run()


class _Request:
    """One HTTP request under the middleware: the watcher and the app's receive/send."""

    def __init__(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        self.app = app
        self.scope = scope
        self.server_receive = receive
        self.server_send = send
        self.to_app, self.from_server = anyio.create_memory_object_stream[Message](1)
        self.app_scope = anyio.CancelScope()
        self.response_complete = False
        self.trailers = False
        self.receive_error: Exception | None = None

    async def run(self) -> None:
        error: BaseException | None = None
        # both ends closed here too: a watcher cancelled before it started closes nothing
        with self.from_server, self.to_app:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watch)
                with self.app_scope:
                    try:
                        await self.app(self.scope, self.receive, self.send)
                    except anyio.get_cancelled_exc_class():
                        raise
                    except BaseException as exc:  # raised after the task group, unwrapped
                        error = exc
                tg.cancel_scope.cancel()
        if error is not None:
            try:
                raise error
            finally:
                error = None  # no reference cycle through the traceback

    async def watch(self) -> None:
        """Pass the server's messages on; cancel the app on an early disconnect."""
        with self.to_app:
            while True:
                try:
                    message = await self.server_receive()
                except Exception as exc:  # the app meets it at its next receive()
                    self.receive_error = exc
                    return
                if message["type"] == "http.disconnect":
                    if not self.response_complete:
                        self.app_scope.cancel()
                    return
                try:  # no checkpoint while the channel has room: see the NOTE
                    self.to_app.send_nowait(message)
                except anyio.WouldBlock:
                    await self.to_app.send(message)

    async def receive(self) -> Message:
        try:
            return await self.from_server.receive()
        except anyio.EndOfStream:
            if self.receive_error is not None:
                raise self.receive_error from None
            # an app cancelled by the disconnect stops here, never seeing the message
            await anyio.lowlevel.checkpoint()
            return dict(_DISCONNECT)

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.trailers = bool(message.get("trailers", False))
        elif kind in ("http.response.body", "http.response.zerocopysend"):
            if not message.get("more_body", False) and not self.trailers:
                self.response_complete = True
        elif kind == "http.response.trailers":
            if not message.get("more_trailers", False):
                self.response_complete = True
        elif kind == "http.response.pathsend":
            self.response_complete = True
        # marked before the server's send returns: a disconnect seen meanwhile cancels nothing
        await self.server_send(message)
