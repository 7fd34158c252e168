"""aengine.asgi.CancelOnDisconnect, driven by a hand-written ASGI server (no sockets).

The real servers (uvicorn, hypercorn) are exercised by tests/test_examples.py.
"""

from __future__ import annotations

import doctest
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import pytest

import aengine as ae
import aengine.asgi
from aengine.asgi import CancelOnDisconnect

pytestmark = pytest.mark.anyio

BODY_END = {"type": "http.request", "body": b"", "more_body": False}
DISCONNECT = {"type": "http.disconnect"}
START = {"type": "http.response.start", "status": 200, "headers": []}
END = {"type": "http.response.body", "body": b"done"}


class FakeServer:
    """The server side of one request: messages pushed by the test, messages sent back."""

    def __init__(self, *messages: dict[str, Any]) -> None:
        self.inbox: deque[dict[str, Any]] = deque(messages)
        self.taken: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.receive_cancelled = False
        self.receive_error: Exception | None = None
        self._wake = anyio.Event()

    def push(self, message: dict[str, Any]) -> None:
        self.inbox.append(message)
        self._wake.set()

    async def receive(self) -> dict[str, Any]:
        try:
            while not self.inbox:
                if self.receive_error is not None:
                    raise self.receive_error
                self._wake = anyio.Event()
                await self._wake.wait()
        except anyio.get_cancelled_exc_class():
            self.receive_cancelled = True
            raise
        message = self.inbox.popleft()
        self.taken.append(message)
        return message

    async def send(self, message: Any) -> None:
        self.sent.append(message)

    async def serve(self, app: Any, scope_type: str = "http") -> None:
        with anyio.fail_after(10):
            await CancelOnDisconnect(app)({"type": scope_type}, self.receive, self.send)


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    with anyio.move_on_after(10):
        while not condition():
            await anyio.sleep(0.001)
        return
    raise AssertionError(f"timed out waiting until {what}")


class Handler:
    """An ASGI app that reads its body, then waits for ``release`` before answering."""

    def __init__(self) -> None:
        self.body = b""
        self.working = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = False
        self.finished = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        more = True
        while more:
            message = await receive()
            self.body += message.get("body", b"")
            more = message.get("more_body", False)
        self.working.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise
        await send(START)
        await send(END)
        self.finished = True


async def test_disconnect_before_response_cancels_the_app() -> None:
    server, app = FakeServer(BODY_END), Handler()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await app.working.wait()
        server.push(DISCONNECT)
    assert app.cancelled and not app.finished
    assert server.sent == []


async def test_a_request_that_completes_is_not_cancelled() -> None:
    server, app = FakeServer(BODY_END), Handler()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await app.working.wait()
        app.release.set()
    assert app.finished and not app.cancelled
    assert server.sent == [START, END]
    # the watcher, waiting in the server's receive, was cancelled when the app returned
    assert server.receive_cancelled


async def test_disconnect_after_the_response_cancels_nothing() -> None:
    server = FakeServer(BODY_END)
    responded, go = anyio.Event(), anyio.Event()
    log = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send(START)
        await send(END)
        responded.set()
        await go.wait()  # work after the response (a background task)
        await anyio.sleep(0.01)
        log.append("after the response")
        assert await receive() == DISCONNECT  # later receives say so, as servers do
        assert await receive() == DISCONNECT

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await responded.wait()
        server.push(DISCONNECT)
        await wait_until(lambda: DISCONNECT in server.taken, "the watcher reads the disconnect")
        go.set()
    assert log == ["after the response"]
    assert server.sent == [START, END]


async def test_body_chunks_pass_through_in_order() -> None:
    chunks = [
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"cd", "more_body": True},
        {"type": "http.request", "body": b"e", "more_body": False},
    ]
    server = FakeServer(*chunks)
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            seen.append(message)
            if not message["more_body"]:
                break
        # after the body, receive() waits (for the disconnect), as a server's does
        with anyio.move_on_after(0.05) as scope_:
            await receive()
        seen.append("waited" if scope_.cancelled_caught else "returned")
        await send(START)
        await send({"type": "http.response.body", "body": b"chunk", "more_body": True})
        await send(END)

    await server.serve(app)
    assert seen[:4] == chunks and all(a is b for a, b in zip(seen, chunks))
    assert seen[4] == "waited"
    assert [m["type"] for m in server.sent] == ["http.response.start"] + ["http.response.body"] * 2


async def test_the_watcher_reads_at_most_one_message_ahead() -> None:
    chunks = [{"type": "http.request", "body": bytes([i]), "more_body": i < 9} for i in range(10)]
    server = FakeServer(*chunks)
    read_one = anyio.Event()
    finish = anyio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        read_one.set()
        await finish.wait()
        for _ in range(9):
            await receive()
        await send(START)
        await send(END)

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await read_one.wait()
        for _ in range(20):
            await anyio.sleep(0)
        # the app holds 1 message, the channel 1, the watcher 1: the server keeps the rest
        assert len(server.taken) <= 3
        finish.set()
    assert len(server.taken) == 10


async def test_streaming_response_is_cancelled_by_a_disconnect() -> None:
    server = FakeServer(BODY_END)
    state = {"chunks": 0, "cancelled": False}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send(START)
        try:
            for i in range(10_000):
                await send({"type": "http.response.body", "body": b"x", "more_body": True})
                state["chunks"] += 1
                await anyio.sleep(0.001)
        except anyio.get_cancelled_exc_class():
            state["cancelled"] = True
            raise

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await wait_until(lambda: state["chunks"] >= 3, "three chunks streamed")
        server.push(DISCONNECT)
    assert state["cancelled"] and 3 <= state["chunks"] < 10_000
    assert all(m.get("more_body", False) for m in server.sent[1:])


async def test_a_disconnect_while_reading_the_body_cancels_the_app() -> None:
    server = FakeServer({"type": "http.request", "body": b"a", "more_body": True})
    app = Handler()
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await wait_until(lambda: app.body == b"a", "the first chunk read")
        server.push(DISCONNECT)
    assert not app.working.is_set() and not app.finished
    assert server.sent == []


@pytest.mark.parametrize("scope_type", ["lifespan", "websocket"])
async def test_other_scopes_pass_through(scope_type: str) -> None:
    server = FakeServer()
    seen = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((scope["type"], receive, send))

    await server.serve(app, scope_type)
    assert seen == [(scope_type, server.receive, server.send)]
    assert server.taken == []  # no watcher read anything


@pytest.mark.parametrize("when", ["before the body", "after the body", "after the response"])
async def test_exceptions_propagate_unchanged(when: str) -> None:
    server = FakeServer(BODY_END)
    error = ValueError("boom")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if when != "before the body":
            await receive()
        if when == "after the response":
            await send(START)
            await send(END)
        raise error

    with pytest.raises(ValueError) as info:
        await server.serve(app)
    assert info.value is error  # the very exception, not an exception group


async def test_an_error_of_the_servers_receive_reaches_the_app() -> None:
    server = FakeServer(BODY_END)
    server.receive_error = ConnectionResetError("the socket broke")
    got = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        try:
            await receive()
        except ConnectionResetError as exc:
            got.append(exc)
            raise

    with pytest.raises(ConnectionResetError, match="the socket broke"):
        await server.serve(app)
    assert got == [server.receive_error]


async def test_the_servers_cancellation_cancels_the_request() -> None:
    server, app = FakeServer(BODY_END), Handler()
    with anyio.move_on_after(0.05) as scope:
        await CancelOnDisconnect(app)({"type": "http"}, server.receive, server.send)
    assert scope.cancelled_caught
    assert app.cancelled and server.receive_cancelled


def test_wraps_only_an_application() -> None:
    with pytest.raises(TypeError, match="wraps an ASGI application"):
        CancelOnDisconnect("app")  # type: ignore[arg-type]


async def test_a_cancelled_backward_leaves_grad_untouched() -> None:
    """The point of it all: the client goes, the backward stops, ``.grad`` stays None."""
    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    state: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        loss = x.to("sim:0")
        for _ in range(20):  # 20 nodes of 50 ms each on sim:0
            loss = loss * 1.5
        try:
            await loss.sum().backward()
        except anyio.get_cancelled_exc_class():
            state["cancelled"] = True
            raise
        await send(START)
        await send(END)

    backward_running = anyio.Event()
    async with ae.Engine(sim_latency=0.05, on_node=lambda node, where: backward_running.set()):
        server = FakeServer(BODY_END)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, app)
            await backward_running.wait()
            server.push(DISCONNECT)
        assert state == {"cancelled": True}
        assert x.grad is None and server.sent == []

        # the same request left alone writes the gradient: the check above can fail
        quick = FakeServer(BODY_END)
        with anyio.fail_after(30):
            await quick.serve(app)
        assert quick.sent == [START, END]
    assert x.grad is not None
    assert x.grad.tolist() == pytest.approx([1.5**20] * 3)


async def test_starlette_app_with_the_middleware() -> None:
    starlette = pytest.importorskip("starlette.applications")
    from starlette.background import BackgroundTask
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    log: list[str] = []
    release = anyio.Event()
    working = anyio.Event()

    async def after() -> None:
        await anyio.sleep(0.02)
        log.append("background task done")

    async def slow(request: Any) -> Any:
        body = await request.json()
        working.set()
        try:
            await release.wait()
        except anyio.get_cancelled_exc_class():
            log.append("cancelled")
            raise
        return JSONResponse({"got": body}, background=BackgroundTask(after))

    app = starlette.Starlette(routes=[Route("/", slow, methods=["POST"])])
    app.add_middleware(CancelOnDisconnect)

    async def call(server: FakeServer) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json")],
            "server": ("127.0.0.1", 80),
            "client": ("127.0.0.1", 1234),
        }
        with anyio.fail_after(10):
            await app(scope, server.receive, server.send)

    # the client goes away: the handler is cancelled, nothing is sent
    gone = FakeServer({"type": "http.request", "body": b"[1, 2]", "more_body": False})
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, gone)
        await working.wait()
        gone.push(DISCONNECT)
    assert log == ["cancelled"] and gone.sent == []

    # the client stays, and leaves right after the response: the background task runs
    release.set()
    stays = FakeServer({"type": "http.request", "body": b"[1, 2]", "more_body": False})
    send = stays.send

    async def send_then_leave(message: Any) -> None:
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            stays.push(DISCONNECT)

    stays.send = send_then_leave  # type: ignore[method-assign]
    await call(stays)
    assert stays.sent[0]["status"] == 200
    assert stays.sent[1]["body"] == b'{"got":[1,2]}'
    assert log == ["cancelled", "background task done"]


@pytest.mark.parametrize("trailers_sent", [False, True])
async def test_a_response_with_trailers_completes_with_its_last_trailers(
    trailers_sent: bool,
) -> None:
    server = FakeServer(BODY_END)
    ready, state = anyio.Event(), {"cancelled": False}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({**START, "trailers": True})
        await send(END)  # the body is done, the response is not
        if trailers_sent:
            await send({"type": "http.response.trailers", "headers": [], "more_trailers": False})
        ready.set()
        try:
            await anyio.sleep(0.05)
        except anyio.get_cancelled_exc_class():
            state["cancelled"] = True
            raise

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, app)
        await ready.wait()
        server.push(DISCONNECT)
    assert state["cancelled"] is not trailers_sent


async def test_httpx_asgi_transport_gets_its_body_stream_consumed() -> None:
    """httpx's in-process transport: no half-read body stream is left to the GC (trio warns)."""
    httpx = pytest.importorskip("httpx")
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def hello(request: Any) -> Any:
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/", hello, methods=["GET", "POST"])])
    app.add_middleware(CancelOnDisconnect)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for _ in range(3):
            assert (await client.get("/")).json() == {"ok": True}
            assert (await client.post("/", content=b"unread")).json() == {"ok": True}


def test_docstring_examples() -> None:
    result = doctest.testmod(aengine.asgi, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 2 and result.failed == 0
