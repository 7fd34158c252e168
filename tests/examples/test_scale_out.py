"""The explanation service scaled out over processes, on loopback only.

Two ways, the same app (examples/explain_service.py) in each process:

* Ray Serve (examples/serve_ray.py): a local Ray cluster on 127.0.0.1, the
  app deployed as 2 replicas behind Serve's HTTP proxy;
* ``uvicorn --workers 2``: uvicorn's supervisor and two worker processes
  sharing one listening socket.

Each is checked for answers equal to torch's (the twin of
tests/examples/test_explain_service.py) from every process, bad input
answered 422 with what is wrong, and one process killed in the middle of a
concurrent load: the dead process is replaced, and every request is answered,
and answered right, with a request retried only where its connection broke
or the server said the replica had died (a retried request at most, never a
lost or a wrong answer).
"""

from __future__ import annotations

import concurrent.futures
import faulthandler
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.examples.test_examples import WAIT, free_port, load, wait_for
from tests.examples.test_explain_service import CASES, Twin, check
from tests.paths import ROOT
from tests.ray_child import RAY_ENV, run_cases

httpx = pytest.importorskip("httpx", reason="the web extra (httpx) is not installed")
sklearn_datasets = pytest.importorskip("sklearn.datasets", reason="the examples extra")

STARTUP = 180.0  # a cluster's or a worker's start, bounded generously for a loaded machine


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A hung test ends the run with every thread's traceback, not CI's limit."""
    faulthandler.dump_traceback_later(600, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load("explain_service")


@pytest.fixture(scope="module")
def checkpoint(mod: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("scale") / "cnn.safetensors"
    ae.manual_seed(2)
    ae.save(mod.make_model().state_dict(), path)
    return path


@pytest.fixture(scope="module")
def workload(checkpoint: pathlib.Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """64 requests (10 different ones) and torch's answers to them, float64."""
    twin = Twin(checkpoint, "float64")
    rng = np.random.default_rng(3)
    images = np.concatenate(
        [sklearn_datasets.load_digits().images[:3], rng.uniform(0, 16, (2, 8, 8))]
    )
    kinds = [(i % len(CASES), i % len(images)) for i in range(10)]
    answers = {k: twin.explain(images[k[1]], *CASES[k[0]]) for k in kinds}
    bodies, expected = [], []
    for i in range(64):
        c, m = kinds[i % len(kinds)]
        method, steps, target = CASES[c]
        bodies.append(
            {"image": images[m].tolist(), "method": method, "steps": steps, "target": target}
        )
        expected.append(answers[(c, m)])
    return bodies, expected


class Client:
    """Clients that retry a request only where the service lost it.

    A retry is counted when the connection broke (the process serving it
    died) or the answer is a 5xx (Serve's proxy answers 500 for a request
    whose replica died).  A 4xx or a wrong answer is never retried: the test
    sees it.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.local = threading.local()
        self.clients: list[Any] = []
        self.retries = 0
        self.lock = threading.Lock()

    def _client(self) -> Any:
        client = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(base_url=self.url, timeout=WAIT)
            with self.lock:
                self.clients.append(client)
        return client

    def post(self, body: Any) -> Any:
        for _ in range(5):
            try:
                answer = self._client().post("/explain", json=body)
            except httpx.TransportError:
                self.local.client = None  # a new connection, to a live process
            else:
                if answer.status_code < 500:
                    return answer
            with self.lock:
                self.retries += 1
            time.sleep(0.2)
        raise AssertionError(f"5 tries of one request failed; the last: {answer.status_code}")

    def get(self, path: str) -> Any:
        """A GET on a connection of its own: uvicorn's workers each take whole connections."""
        return httpx.get(self.url + path, timeout=WAIT, headers={"connection": "close"})

    def close(self) -> None:
        for client in self.clients:
            client.close()


def load_with_a_kill(
    client: Client, workload: Any, kill: Callable[[], Any], replaced: Callable[[Any], bool]
) -> None:
    """64 requests from 8 threads; the ``kill`` after the 16th answer; all must be right."""
    bodies, expected = workload
    answered = threading.Semaphore(0)

    def one(body: Any) -> Any:
        try:
            return client.post(body)
        finally:
            answered.release()

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(one, body) for body in bodies]
        for _ in range(16):
            assert answered.acquire(timeout=STARTUP), "no answers under load"
        killed = kill()
        answers = [f.result(timeout=STARTUP) for f in futures]
    print(f"killed {killed} after 16 of 64 answers; {client.retries} requests retried")
    for answer, want in zip(answers, expected):
        check(answer, want, "float64")
    # a request is retried only when its process died under it: at most those in flight
    assert client.retries <= 8 + 5, client.retries
    wait_for(lambda: replaced(killed), "the dead process is replaced", timeout=STARTUP)
    check(client.post(bodies[0]), expected[0], "float64")


def answers_from_every_process(client: Client, workload: Any, processes: int) -> set[int]:
    """Correct answers, and the /stats of each process seen (its pid) until all are."""
    bodies, expected = workload
    for body, want in zip(bodies[:10], expected[:10]):
        check(client.post(body), want, "float64")
    seen: set[int] = set()
    deadline = time.monotonic() + STARTUP
    while len(seen) < processes:
        assert time.monotonic() < deadline, f"only processes {seen} answered"
        seen.add(client.get("/stats").json()["pid"])
    return seen


def bad_input_is_422(client: Client) -> None:
    answer = client._client().post("/explain", json={"image": [[1.0] * 8] * 7})
    assert answer.status_code == 422 and "8 rows of 8 numbers" in answer.text
    answer = client._client().post("/explain", json={"image": [[8.0] * 8] * 8, "target": 10})
    assert answer.status_code == 422 and "target must be a class" in answer.text


# -- Ray Serve ------------------------------------------------------------------------------------


def test_serve_example_runs_as_a_script(
    checkpoint: pathlib.Path, workload: Any, tmp_path: pathlib.Path
) -> None:
    """``python examples/serve_ray.py PORT CHECKPOINT`` as a user runs it; Ctrl-C stops it.

    First in the module: the script starts a cluster of its own, before the
    fixture below starts the tests' one.
    """
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (aengine[ray])")
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    env = {
        **os.environ,
        **RAY_ENV,
        "EXPLAIN_DTYPE": "float64",
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
    }
    script = ROOT / "examples" / "serve_ray.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port), str(checkpoint), "--replicas", "1"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        client = Client(f"http://127.0.0.1:{port}")

        def healthy() -> bool:
            text = (tmp_path / "server.log").read_text()
            assert proc.poll() is None, text
            return "serving on" in text

        wait_for(healthy, "the Serve example says it serves", timeout=STARTUP)
        assert client.get("/health").json() == {"ok": True}
        bodies, expected = workload
        check(client.post(bodies[1]), expected[1], "float64")
        client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            # Serve's shutdown stops its replicas and proxy gracefully: seconds
            # alone, over a minute on a 2-core machine kept busy beside it
            proc.wait(STARTUP)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        log.close()
    assert proc.returncode == 0, (tmp_path / "server.log").read_text()[-3000:]


def test_serve_cases_pass_in_a_driver_process_of_their_own() -> None:
    """The 2-replica cases (ray_serve_cases.py) call ``ray.init()`` in the test
    process: they run in one of their own (see NOTE [Ray's driver in a process
    of its own] in tests/ray_child.py)."""
    run_cases("tests/examples/ray_serve_cases.py")


# -- uvicorn --workers 2 ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def uvicorn_workers(
    checkpoint: pathlib.Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``uvicorn --workers 2`` serving the example app (float64), as the docs say to run it."""
    port = free_port()
    logs = tmp_path_factory.mktemp("uvicorn")
    log = (logs / "server.log").open("w")
    env = {**os.environ, "EXPLAIN_CHECKPOINT": str(checkpoint), "EXPLAIN_DTYPE": "float64"}
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT / "examples"),
            "explain_service:app", "--host", "127.0.0.1", "--port", str(port),
            "--workers", "2", "--log-level", "warning",
        ],
        cwd=logs,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=WAIT) as client:

            def healthy() -> bool:
                assert proc.poll() is None, (logs / "server.log").read_text()
                try:
                    return client.get("/health").json() == {"ok": True}
                except httpx.TransportError:
                    return False

            wait_for(healthy, "uvicorn's workers answer /health", timeout=STARTUP)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)  # uvicorn's supervisor stops its workers
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        log.close()


def test_uvicorn_workers_answer_as_torch_and_bad_input_is_422(
    uvicorn_workers: str, workload: Any
) -> None:
    client = Client(uvicorn_workers)
    try:
        assert len(answers_from_every_process(client, workload, 2)) == 2
        bad_input_is_422(client)
    finally:
        client.close()
    assert client.retries == 0


def test_uvicorn_worker_killed_under_load_loses_no_request(
    uvicorn_workers: str, workload: Any
) -> None:
    client = Client(uvicorn_workers)
    pids = answers_from_every_process(client, workload, 2)

    def kill() -> int:
        pid = min(pids)
        os.kill(pid, signal.SIGKILL)
        return pid

    def replaced(pid: int) -> bool:
        seen = {client.get("/stats").json()["pid"] for _ in range(8)}
        return pid not in seen and len(seen) == 2

    try:
        load_with_a_kill(client, workload, kill, replaced)
    finally:
        client.close()
