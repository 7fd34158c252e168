"""examples/explain_service.py served on loopback sockets, its answers checked against torch.

The app runs in uvicorn (asyncio) and in hypercorn's trio worker, in a thread
of this process, from a checkpoint of a randomly initialised model saved to
a temporary folder (no training); torch runs the same weights (a twin of the
model built here) and is the oracle of the saliency maps, the integrated
gradients and the probabilities.  The app is also started once as a user
would, ``python examples/explain_service.py PORT CHECKPOINT``, and its
training (a missing checkpoint) is checked once.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.examples.test_examples import (
    WAIT,
    free_port,
    hypercorn_trio_in_thread,
    load,
    uvicorn_in_thread,
    wait_for,
)
from tests.oracle import torch_or_skip
from tests.paths import ROOT

httpx = pytest.importorskip("httpx", reason="the web extra (httpx) is not installed")
sklearn_datasets = pytest.importorskip("sklearn.datasets", reason="the examples extra")

TOL = {"float64": {"rtol": 1e-9, "atol": 1e-12}, "float32": {"rtol": 1e-4, "atol": 1e-5}}


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load("explain_service")


@pytest.fixture(scope="module")
def checkpoint(mod: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A randomly initialised model's weights (float32), as the app reads them."""
    path = tmp_path_factory.mktemp("explain") / "cnn.safetensors"
    ae.manual_seed(1)
    ae.save(mod.make_model().state_dict(), path)
    return path


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    """Digits from scikit-learn (pixels 0 to 16), and two random images."""
    rng = np.random.default_rng(0)
    digits = sklearn_datasets.load_digits().images[:6]
    return np.concatenate([digits, rng.uniform(0, 16, (2, 8, 8))])


# -- the oracle ---------------------------------------------------------------------------------


class Twin:
    """The example's CNN in torch, with the checkpoint's weights, in ``dtype``."""

    def __init__(self, checkpoint: pathlib.Path, dtype: str) -> None:
        torch = self.torch = torch_or_skip()
        nn = torch.nn
        self.model = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 2 * 2, 10),
        )
        state = {k: torch.from_numpy(v.numpy()) for k, v in ae.load(checkpoint).items()}
        self.model.load_state_dict(state)
        self.dtype = getattr(torch, dtype)
        self.model.to(self.dtype)

    def logits(self, images: Any) -> Any:
        return self.model((images / 16.0).unsqueeze(1))

    def explain(
        self, image: np.ndarray, method: str, steps: int = 32, target: int | None = None
    ) -> dict[str, Any]:
        """What the service must answer, computed with torch.autograd."""
        torch = self.torch
        x = torch.tensor(image, dtype=self.dtype, requires_grad=True)
        out = self.logits(x[None])[0]
        probabilities = torch.softmax(out, 0).detach().numpy()
        t = int(out.argmax()) if target is None else target
        answer: dict[str, Any] = {"predicted": int(out.argmax()), "target": t, "delta": None}
        if method == "saliency":
            (g,) = torch.autograd.grad(out[t], [x])
            attribution = g.abs().numpy()
        else:  # integrated gradients from 0, midpoint rule
            alphas = (np.arange(steps) + 0.5) / steps
            xs = torch.tensor(alphas[:, None, None] * image, dtype=self.dtype, requires_grad=True)
            (g,) = torch.autograd.grad(self.logits(xs)[:, t].sum(), [xs])
            attribution = image * g.numpy().mean(axis=0)
            with torch.no_grad():
                black = self.logits(torch.zeros(1, 8, 8, dtype=self.dtype))[0, t]
            answer["delta"] = float(attribution.sum() - float(out[t].detach() - black))
        answer.update(probabilities=probabilities, attribution=attribution)
        return answer


def check(answer: Any, expected: dict[str, Any], dtype: str) -> None:
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["predicted"] == expected["predicted"] and got["target"] == expected["target"]
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], **TOL[dtype])
    np.testing.assert_allclose(got["attribution"], expected["attribution"], **TOL[dtype])
    assert np.shape(got["attribution"]) == (8, 8)
    if expected["delta"] is None:
        assert got["delta"] is None and got["steps"] is None
    else:
        assert got["delta"] == pytest.approx(expected["delta"], abs=TOL[dtype]["atol"] * 64)


# -- the servers --------------------------------------------------------------------------------


class Service:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(base_url=url, timeout=WAIT)
        self.clients: list[Any] = []
        self.local = threading.local()

    def explain(self, body: Any) -> Any:
        client = getattr(self.local, "client", None)
        if client is None:  # one per thread, kept: making one costs milliseconds (ssl)
            client = self.local.client = httpx.Client(base_url=self.url, timeout=WAIT)
            self.clients.append(client)
        return client.post("/explain", json=body)

    def close(self) -> None:
        for client in [self.client, *self.clients]:
            client.close()


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def service(request: pytest.FixtureRequest, mod: ModuleType, checkpoint: Any) -> Iterator[Service]:
    """The app in float64, served by uvicorn (asyncio) or hypercorn's trio worker."""
    serving = uvicorn_in_thread if request.param == "asyncio" else hypercorn_trio_in_thread
    with serving(mod.create_app(checkpoint, "float64")) as url:
        svc = Service(url)
        try:
            assert svc.client.get("/health").json() == {"ok": True}
            yield svc
        finally:
            svc.close()


# -- the tests ----------------------------------------------------------------------------------

CASES = [
    ("saliency", 32, None),
    ("saliency", 32, 3),
    ("integrated_gradients", 1, None),
    ("integrated_gradients", 7, None),
    ("integrated_gradients", 32, 9),
]


def test_explanations_match_torch(service: Service, checkpoint: Any, images: np.ndarray) -> None:
    twin = Twin(checkpoint, "float64")
    for i, image in enumerate(images):
        method, steps, target = CASES[i % len(CASES)]
        body = {"image": image.tolist(), "method": method, "steps": steps, "target": target}
        check(service.explain(body), twin.explain(image, method, steps, target), "float64")
    stats = service.client.get("/stats").json()
    # all the work went through engine.run, one backward each, the Engine's own
    assert stats["calls_run"] >= len(images) + 1 and stats["backwards_done"] >= len(images)
    assert stats["backwards_inflight"] == 0 and stats["backwards_failed"] == 0


def test_float32_matches_torch_float32(mod: ModuleType, checkpoint: Any, images: Any) -> None:
    twin = Twin(checkpoint, "float32")
    with uvicorn_in_thread(mod.create_app(checkpoint)) as url:  # float32: the default
        svc = Service(url)
        for method, steps, target in CASES:
            for image in images[:3]:
                body = {"image": image.tolist(), "method": method, "steps": steps, "target": target}
                check(svc.explain(body), twin.explain(image, method, steps, target), "float32")
        svc.close()


def test_integrated_gradients_add_up(service: Service, checkpoint: Any, images: Any) -> None:
    """Completeness: the attributions sum to logit(x) - logit(0), closer with more steps."""
    twin = Twin(checkpoint, "float64")
    torch = twin.torch
    for image in images[:4]:
        body = {"image": image.tolist(), "method": "integrated_gradients", "steps": 256}
        got = service.explain(body).json()
        with torch.no_grad():
            both = twin.logits(torch.tensor(np.stack([image, 0 * image])))[:, got["target"]]
        difference = float(both[0] - both[1])
        total = float(np.sum(got["attribution"]))
        assert total - difference == pytest.approx(got["delta"], abs=1e-12)
        assert abs(got["delta"]) <= 0.02 * abs(difference), (total, difference)


@pytest.fixture(scope="module")
def oracle() -> dict[tuple[int, int], dict[str, Any]]:
    """torch's answers to the load test's requests, shared by the servers."""
    return {}


def test_concurrent_load_every_answer_right_and_health_answers(
    service: Service, checkpoint: Any, images: np.ndarray, oracle: dict[Any, Any]
) -> None:
    twin = Twin(checkpoint, "float64")
    bodies, expected = [], []  # 40 different requests, 96 in all
    for i in range(96):
        method, steps, target = CASES[i % len(CASES)]
        image = images[i % len(images)]
        bodies.append({"image": image.tolist(), "method": method, "steps": steps, "target": target})
        key = (i % len(CASES), i % len(images))
        if key not in oracle:
            oracle[key] = twin.explain(image, method, steps, target)
        expected.append(oracle[key])
    before = service.client.get("/stats").json()
    done = threading.Event()
    health: list[tuple[int, float]] = []

    def poll_health() -> None:
        with httpx.Client(base_url=service.url, timeout=WAIT) as client:
            while not done.is_set() and len(health) < 10_000:
                started = time.perf_counter()
                response = client.get("/health")
                health.append((response.status_code, time.perf_counter() - started))
                time.sleep(0.005)

    poller = threading.Thread(target=poll_health, daemon=True)
    poller.start()
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(service.explain, bodies, timeout=WAIT * 2))
    elapsed = time.perf_counter() - started
    done.set()
    poller.join(WAIT)
    for answer, want in zip(answers, expected):
        check(answer, want, "float64")
    assert health and all(status == 200 for status, _ in health)
    after = service.client.get("/stats").json()
    assert after["explained"] - before["explained"] == 96
    assert after["calls_run"] - before["calls_run"] == 96
    assert after["backwards_done"] - before["backwards_done"] == 96
    worst = max(s for _, s in health)
    print(
        f"96 explanations by 16 clients in {elapsed:.2f} s ({96 / elapsed:.0f}/s); "
        f"/health answered {len(health)} times meanwhile, the slowest in {worst * 1e3:.1f} ms"
    )


GOOD = [[8.0] * 8] * 8
BAD_BODIES = [
    ({"image": GOOD[:7]}, "image: List should have at least 8 items"),
    ({"image": [*GOOD[:7], [1.0] * 9]}, "image.7"),
    ({"image": [[1.0] * 8] * 7 + [[1.0] * 7]}, "8 rows of 8 numbers"),
    ({"image": [[17.0] * 8] * 8}, "less than or equal to 16"),
    ({"image": [[-0.5] * 8] * 8}, "greater than or equal to 0"),
    ({"image": [["1"] * 8] * 8}, "valid number"),
    ({"image": [[True] * 8] * 8}, "valid number"),
    ({"image": [[None] * 8] * 8}, "valid number"),
    ({"image": [1.0] * 64}, "image: List should have at most 8 items"),
    ({"image": [[1.0] * 64]}, "at most 8 items"),
    ({"image": GOOD, "method": "gradcam"}, "'saliency' or 'integrated_gradients'"),
    ({"image": GOOD, "method": "integrated_gradients", "steps": 0}, "from 1 to 256"),
    ({"image": GOOD, "method": "integrated_gradients", "steps": 257}, "from 1 to 256"),
    ({"image": GOOD, "steps": 2.5}, "steps must be an integer"),
    ({"image": GOOD, "target": 10}, "target must be a class from 0 to 9"),
    ({"image": GOOD, "target": -1}, "target"),
    ({"image": GOOD, "stpes": 3}, "stpes: Extra inputs are not permitted"),
    ({"method": "saliency"}, "image: Field required"),
    ([GOOD], "JSON object"),
    ("image", "JSON object"),
]


@pytest.mark.parametrize("body,says", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_input_is_a_422_that_says_why(service: Service, body: Any, says: str) -> None:
    response = service.client.post("/explain", json=body)
    assert response.status_code == 422, response.text
    assert says in response.text and "detail" in response.json()


@pytest.mark.parametrize(
    "content,status,says",
    [
        (b"{not json", 400, "not JSON"),  # 400, as the other examples (docs/services.md)
        (b"\xff\xfe", 400, "not JSON"),
        (b'{"image": [[NaN' + b", 1" * 7 + b"]]}", 422, "finite number"),  # NaN: not a number
        (b"", 422, "body: Field required"),  # FastAPI reads no body as none
    ],
)
def test_malformed_bodies_say_why(service: Service, content: bytes, status: int, says: str) -> None:
    response = service.client.post(
        "/explain", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == status, response.text
    assert says in response.text
    assert service.client.get("/health").json() == {"ok": True}


# -- as a user runs it --------------------------------------------------------------------------


def test_the_example_runs_as_a_script(
    checkpoint: pathlib.Path, images: np.ndarray, tmp_path: pathlib.Path
) -> None:
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    env = {**os.environ, "EXPLAIN_DTYPE": "float64"}
    script = ROOT / "examples" / "explain_service.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port), str(checkpoint)],
        cwd=tmp_path,
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

            wait_for(healthy, "the example answers /health", timeout=60)
            body = {"image": images[0].tolist(), "method": "integrated_gradients", "steps": 16}
            want = Twin(checkpoint, "float64").explain(images[0], "integrated_gradients", 16)
            check(client.post("/explain", json=body), want, "float64")
    finally:
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        log.close()
    assert not (tmp_path / "digits_cnn.safetensors").exists()  # the checkpoint given was used


def test_a_missing_checkpoint_is_trained_and_saved(mod: ModuleType, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "trained.safetensors"
    model = mod.load_or_train(path)  # about a second
    assert path.exists() and not list(tmp_path.glob("*.partial"))
    digits = sklearn_datasets.load_digits()
    with ae.no_grad():
        guessed = mod.logits(model, ae.tensor(digits.images.astype(np.float32))).numpy()
    assert (guessed.argmax(axis=1) == digits.target).mean() > 0.9
    again = mod.load_or_train(path)  # now read back, not trained again
    for (name, p), q in zip(model.named_parameters(), again.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=name)
        assert not p.requires_grad
