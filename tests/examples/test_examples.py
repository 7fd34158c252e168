"""The example services in examples/, served by real servers on loopback sockets.

Each example runs in uvicorn (fastapi_service) or hypercorn's trio worker
(trio_service) in a thread of this process, so a test can hold a request's
backward at a gate (a hook on the loss) and see what the server does
meanwhile; each is also started once as a user would, ``python
examples/<name>.py PORT``, in a subprocess.  torch is the oracle of the
gradients.  The docs show the examples verbatim, and a test checks it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.util
import json
import os
import pathlib
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import anyio
import anyio.from_thread
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip
from tests.paths import ROOT

httpx = pytest.importorskip("httpx", reason="the web extra (httpx) is not installed")
pytest.importorskip("fastapi", reason="the web extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the web extra (uvicorn) is not installed")
pytest.importorskip("hypercorn", reason="the web extra (hypercorn) is not installed")

EXAMPLES = ["fastapi_service", "trio_service"]
WAIT = 30.0  # the bound of every wait: generous for a loaded machine


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"example_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wait_for(condition: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        time.sleep(0.005)


# -- servers in a thread ---------------------------------------------------------------------


@contextlib.contextmanager
def uvicorn_in_thread(app: Any) -> Iterator[str]:
    import uvicorn  # the web extra; skipped above when missing

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        ws="none",
        http="h11",
        loop="asyncio",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), "uvicorn started")
        assert server.started, "uvicorn did not start (see the log above)"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(WAIT)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


@contextlib.contextmanager
def hypercorn_trio_in_thread(app: Any) -> Iterator[str]:
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 2
    stop = threading.Event()
    started: queue.Queue[Any] = queue.Queue()

    async def shutdown_trigger() -> None:
        while not stop.is_set():
            await trio.sleep(0.02)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            server = functools.partial(serve, app, config, shutdown_trigger=shutdown_trigger)
            binds = await nursery.start(server)
            started.put(binds[0])

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:
            started.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        url = started.get(timeout=WAIT)
        if isinstance(url, BaseException):
            raise url
        yield url
    finally:
        stop.set()
        thread.join(WAIT)
        assert not thread.is_alive(), "hypercorn did not stop"


class Service:
    """An example module served in a thread, and a client for it."""

    def __init__(self, name: str, module: ModuleType, url: str) -> None:
        self.name, self.mod, self.url = name, module, url
        self.broken: str | None = None
        self.client = httpx.Client(base_url=url, timeout=WAIT)

    def stats(self) -> dict[str, Any]:
        response = self.client.get("/stats")
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def grad(self, x: np.ndarray) -> Any:
        with httpx.Client(base_url=self.url, timeout=WAIT) as client:  # one per thread
            return client.post("/grad", json={"x": x.tolist()})


@pytest.fixture(scope="module", params=EXAMPLES)
def server(request: pytest.FixtureRequest) -> Iterator[Service]:
    module = load(request.param)
    serving = uvicorn_in_thread if request.param == "fastapi_service" else hypercorn_trio_in_thread
    with serving(module.app) as url:
        svc = Service(request.param, module, url)
        try:
            assert svc.client.get("/health").json() == {"ok": True}
            yield svc
        finally:
            svc.client.close()


@pytest.fixture
def service(server: Service) -> Iterator[Service]:
    """The module's server, checked before and after each test: a wedged one fails fast."""
    if server.broken:
        pytest.fail(f"{server.name} stopped answering in an earlier test ({server.broken})")
    yield server
    try:
        healthy = server.client.get("/health", timeout=10).json() == {"ok": True}
    except httpx.TransportError as exc:
        healthy = False
        server.broken = f"/health: {exc!r}"
    if not healthy:
        server.broken = server.broken or "/health did not answer ok"
        pytest.fail(f"{server.name} no longer answers /health after this test")


# -- the oracle ---------------------------------------------------------------------------------


def batch(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 16)).astype(np.float32)


def torch_norm(mod: ModuleType, x: np.ndarray) -> float:
    torch = torch_or_skip()
    params = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in mod.PARAMS]
    w1, b1, w2, b2, w3, b3 = params
    h = torch.tanh(torch.from_numpy(x) @ w1 + b1)
    h = torch.tanh(h @ w2 + b2)
    out = h @ w3 + b3
    grads = torch.autograd.grad((out * out).mean(), params)
    return float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))


def sync_norm(mod: ModuleType, x: np.ndarray) -> float:
    return mod.global_norm(ae.sync.grad(mod.forward(x), mod.PARAMS))  # type: ignore[no-any-return]


# -- holding a backward -------------------------------------------------------------------------


class Gate:
    """A hook on the loss: every backward waits there until the gate opens.

    The backward runs in the request's compute thread (``ae.sync.grad`` inside
    ``engine.run``), so the hook does too; while it waits it asks whether the
    request was cancelled, and returns if so: the Engine then stops the
    backward at its next slice.
    """

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.lock = threading.Lock()
        self.entered = 0
        self.waiting = 0

    def hook(self, grad: Any) -> None:
        with self.lock:
            self.entered += 1
            self.waiting += 1
        try:
            deadline = time.monotonic() + WAIT  # a bound, should the test forget to open it
            while not self.opened.wait(0.005) and time.monotonic() < deadline:
                if request_cancelled():
                    return
        finally:
            with self.lock:
                self.waiting -= 1


def request_cancelled() -> bool:
    """In a compute thread of engine.run: whether the awaiting request was cancelled."""
    try:
        anyio.from_thread.check_cancelled()
    except BaseException:  # the backend's cancellation exception
        return True
    return False


@contextlib.contextmanager
def gated(mod: ModuleType) -> Iterator[Gate]:
    gate, forward = Gate(), mod.forward

    def gated_forward(x: np.ndarray) -> Any:
        loss = forward(x)
        loss.register_hook(gate.hook)
        return loss

    setattr(mod, "forward", gated_forward)  # the handler looks it up per request
    try:
        yield gate
    finally:
        gate.opened.set()
        setattr(mod, "forward", forward)


# -- the tests ----------------------------------------------------------------------------------


def test_grad_matches_torch_and_the_sync_api(service: Service) -> None:
    for rows, seed in [(64, 1), (1, 2), (300, 3)]:
        x = batch(rows, seed)
        response = service.grad(x)
        assert response.status_code == 200, response.text
        norm = response.json()["norm"]
        assert norm == pytest.approx(torch_norm(service.mod, x), rel=1e-4)
        assert norm == pytest.approx(sync_norm(service.mod, x), rel=1e-5)
    stats = service.stats()
    assert stats["backwards_done"] >= 3 and stats["requests"]["done"] >= 3
    assert stats["blas_threads"] == 1
    assert all(p.grad is None for p in service.mod.PARAMS)  # ae.grad writes no .grad


def test_concurrent_requests_are_all_right(service: Service) -> None:
    xs = [batch(8 + 8 * i, 100 + i) for i in range(16)]
    before = service.stats()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(service.grad, xs))
    for x, response in zip(xs, responses):
        assert response.status_code == 200, response.text
        assert response.json()["norm"] == pytest.approx(torch_norm(service.mod, x), rel=1e-4)
    after = service.stats()
    assert after["requests"]["done"] - before["requests"]["done"] == 16
    assert after["backwards_done"] - before["backwards_done"] == 16
    assert after["requests"]["inflight"] == 0 and after["backwards_inflight"] == 0


def test_health_answers_while_backwards_are_in_flight(service: Service) -> None:
    xs = [batch(64, 200 + i) for i in range(4)]
    with gated(service.mod) as gate, concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(service.grad, x) for x in xs]
        # each request's compute holds one of the Engine's threads; the others wait for one
        n = min(4, service.mod.app.state.engine.offload_threads)
        wait_for(lambda: gate.waiting == n, f"{n} backwards wait at the gate")
        # the other requests wait for a thread: on a busy machine they may still be on their way
        wait_for(lambda: service.stats()["requests"]["inflight"] == 4, "4 requests in flight")
        started = time.perf_counter()
        assert service.client.get("/health").json() == {"ok": True}
        health_s = time.perf_counter() - started
        stats = service.stats()
        assert stats["requests"]["inflight"] == 4
        assert stats["backwards_inflight"] == n and stats["calls_run"] >= 4
        assert not any(f.done() for f in futures)
        gate.opened.set()
        responses = [f.result(timeout=WAIT) for f in futures]
    for x, response in zip(xs, responses):
        assert response.json()["norm"] == pytest.approx(torch_norm(service.mod, x), rel=1e-4)
    print(f"{service.name}: /health in {health_s * 1e3:.1f} ms with 4 backwards in flight")


def post_and_hang_up(url: str, body: bytes, gate: Gate) -> None:
    """A client that sends its request, then goes away while its backward runs."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        head = (
            f"POST /grad HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        wait_for(lambda: gate.waiting == 1, "the backward waits at the gate")


def test_a_client_that_goes_away_cancels_its_backward(service: Service) -> None:
    body = json.dumps({"x": batch(64, 7).tolist()}).encode()
    before = service.stats()
    with gated(service.mod) as gate:
        post_and_hang_up(service.url, body, gate)
        # the gate stays closed: only a cancellation ends that backward
        wait_for(lambda: gate.waiting == 0, "the server cancels the backward")
        after: dict[str, Any] = {}

        def settled() -> bool:
            after.update(service.stats())
            return after["requests"]["inflight"] == 0 and after["backwards_inflight"] == 0

        wait_for(settled, "the cancelled request has unwound")
        assert gate.entered == 1 and not gate.opened.is_set()
    assert after["requests"]["cancelled"] == before["requests"]["cancelled"] + 1
    assert after["requests"]["done"] == before["requests"]["done"]
    assert after["backwards_cancelled"] == before["backwards_cancelled"] + 1
    assert all(p.grad is None for p in service.mod.PARAMS)
    # and the server keeps serving
    x = batch(64, 8)
    assert service.grad(x).json()["norm"] == pytest.approx(torch_norm(service.mod, x), rel=1e-4)


def test_a_handler_timeout_answers_504_and_changes_nothing(service: Service) -> None:
    params = [p.detach().numpy().copy() for p in service.mod.PARAMS]
    before = service.stats()
    state = service.mod.app.state
    timeout = state.grad_timeout
    state.grad_timeout = 0.2
    try:
        with gated(service.mod) as gate:
            response = service.grad(batch(64, 9))
            assert gate.entered == 1 and gate.waiting == 0 and not gate.opened.is_set()
    finally:
        state.grad_timeout = timeout
    assert response.status_code == 504
    assert "took more than 0.2 s (GRAD_TIMEOUT)" in response.json()["detail"]
    after = service.stats()
    assert after["requests"]["timed_out"] == before["requests"]["timed_out"] + 1
    assert after["backwards_cancelled"] == before["backwards_cancelled"] + 1
    assert after["requests"]["done"] == before["requests"]["done"]
    assert after["backwards_inflight"] == 0
    for p, saved in zip(service.mod.PARAMS, params):
        assert p.grad is None
        np.testing.assert_array_equal(p.detach().numpy(), saved)
    x = batch(64, 10)
    assert service.grad(x).json()["norm"] == pytest.approx(torch_norm(service.mod, x), rel=1e-4)


ROW = [0.5] * 16
BAD_BODIES = [
    ({"x": [[0.5] * 15]}, "16 numbers"),
    ({"x": [ROW, [0.5] * 17]}, "row 1"),
    ({"x": []}, "rows"),
    ({"x": [ROW] * 4097}, "4096"),
    ({"x": [["a"] * 16]}, "number"),
    ({"x": [[True] * 16]}, "number"),
    ({"x": [[None] * 16]}, "number"),
    ({"x": [[1e300] * 16]}, "magnitude"),
    ({"x": ROW}, ""),
    ({"y": [ROW]}, ""),
    ([ROW], ""),
    ("x", ""),
]


@pytest.mark.parametrize("body,says", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_input_is_a_422_that_says_why(service: Service, body: Any, says: str) -> None:
    response = service.client.post("/grad", json=body)
    assert response.status_code == 422, response.text
    assert says in response.text and "detail" in response.json()


@pytest.mark.parametrize(
    "content,status",
    [
        (b"{not json", 400),  # not JSON: 400, from either example (docs/services.md)
        (b"\xff\xfe", 400),
        (b'{"x": [[NaN' + b", 1.0" * 15 + b"]]}", 422),  # JSON, but NaN is not a number
        (b"", (400, 422)),  # FastAPI reads no body as {}: a missing x
    ],
)
def test_malformed_bodies_are_a_4xx(service: Service, content: bytes, status: Any) -> None:
    response = service.client.post(
        "/grad", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code in (status if isinstance(status, tuple) else (status,)), (
        response.text
    )
    assert "detail" in response.json()
    assert service.client.get("/health").json() == {"ok": True}


# -- as a user runs them ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_example_runs_as_a_script(name: str, tmp_path: pathlib.Path) -> None:
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    # the aengine of this tree, whatever the environment has installed
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "GRAD_TIMEOUT": "60", "PYTHONPATH": path}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / f"{name}.py"), str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as client:

            def healthy() -> bool:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                try:
                    return client.get("/health").json() == {"ok": True}
                except httpx.TransportError:
                    return False

            wait_for(healthy, f"{name} answers /health", timeout=60)
            x = batch(64, 11)
            response = client.post("/grad", json={"x": x.tolist()})
            assert response.status_code == 200, response.text
            assert response.json()["norm"] == pytest.approx(torch_norm(load(name), x), rel=1e-4)
            stats = client.get("/stats").json()
            assert stats["backwards_done"] == 1 and stats["requests"]["done"] == 1
            assert {"backwards_cancelled", "worst_loop_lag", "queue_depth"} <= set(stats)
    finally:
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        log.close()


# -- the docs show the examples as they are -----------------------------------------------------

VERBATIM = re.compile(r"^<!-- verbatim: (\S+) -->\n```python\n(.*?)^```", re.S | re.M)
SHOWN = {
    "services.md": {"examples/fastapi_service.py", "examples/trio_service.py"},
    "devices-and-engine.md": {"examples/fastapi_service.py"},
    "testing.md": {"examples/lost_update.py"},
}


@pytest.mark.parametrize("page", sorted(SHOWN))
def test_the_docs_show_the_examples_verbatim(page: str) -> None:
    text = (ROOT / "docs" / page).read_text()
    shown = VERBATIM.findall(text)
    assert {path for path, _ in shown} >= SHOWN[page], f"docs/{page} lacks an example"
    for path, block in shown:
        assert block == (ROOT / path).read_text(), (
            f"docs/{page} shows an old {path}: paste the file's content into the block"
        )
    # no unmarked copy of an example (a block that serves an app) on the page
    for block in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M):
        if re.search(r"^app = ", block, re.M):
            assert any(block == b for _, b in shown), f"docs/{page}: an unmarked service block"
