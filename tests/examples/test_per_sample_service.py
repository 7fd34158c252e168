"""examples/per_sample_service.py served by uvicorn on a loopback socket, checked against torch.func.

The app runs in a real uvicorn (asyncio) in a thread of this process, from a
checkpoint of a randomly initialised model; torch computes the per-sample
gradients of the same weights with torch.func.vmap(grad) and is the oracle
of the losses and the norms.  The app is also started once as a user would,
``python examples/per_sample_service.py PORT``.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.examples.test_examples import WAIT, free_port, load, uvicorn_in_thread, wait_for
from tests.oracle import torch_or_skip
from tests.paths import ROOT

httpx = pytest.importorskip("httpx", reason="the web extra (httpx) is not installed")
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load("per_sample_service")


@pytest.fixture(scope="module")
def checkpoint(mod: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("per_sample") / "cnn.safetensors"
    ae.manual_seed(3)
    ae.save(mod.make_model().state_dict(), path)
    return path


def torch_answer(
    checkpoint: pathlib.Path, images: np.ndarray, labels: np.ndarray
) -> dict[str, Any]:
    torch = torch_or_skip()
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 10),
    )  # fmt: skip
    model.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ae.load(checkpoint).items()})
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p: Any, image: Any, label: Any) -> Any:
        out = torch.func.functional_call(model, p, ((image / 16).reshape(1, 1, 8, 8),))
        return torch.nn.functional.cross_entropy(out, label.reshape(1))

    grads, losses = torch.func.vmap(torch.func.grad_and_value(loss), in_dims=(None, 0, 0))(
        params, torch.tensor(images, dtype=torch.float32), torch.tensor(labels)
    )
    n = len(labels)
    squares = {k: (g.reshape(n, -1) ** 2).sum(1) for k, g in grads.items()}
    return {
        "losses": losses.numpy(),
        "grad_norms": sum(squares.values()).sqrt().numpy(),
        "layer_norms": {k: s.sqrt().numpy() for k, s in squares.items()},
    }


def test_per_sample_norms_match_torch(mod: ModuleType, checkpoint: pathlib.Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 16, (12, 8, 8)).round()
    labels = rng.integers(0, 10, 12)
    want = torch_answer(checkpoint, images, labels)
    with uvicorn_in_thread(mod.create_app(checkpoint)) as url, httpx.Client(timeout=WAIT) as client:
        assert client.get(f"{url}/health").json() == {"ok": True}
        r = client.post(
            f"{url}/per_sample", json={"images": images.tolist(), "labels": labels.tolist()}
        )
        assert r.status_code == 200, r.text
        got = r.json()
        np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got["grad_norms"], want["grad_norms"], rtol=1e-4, atol=1e-5)
        for k, v in want["layer_norms"].items():
            np.testing.assert_allclose(got["layer_norms"][k], v, rtol=1e-4, atol=1e-5)
        # one image alone gets the gradient norm it got in the batch
        r1 = client.post(
            f"{url}/per_sample", json={"images": images[3:4].tolist(), "labels": [int(labels[3])]}
        )
        np.testing.assert_allclose(r1.json()["grad_norms"][0], want["grad_norms"][3], rtol=1e-4)


def test_bad_requests_say_what_to_send(mod: ModuleType, checkpoint: pathlib.Path) -> None:
    with uvicorn_in_thread(mod.create_app(checkpoint)) as url, httpx.Client(timeout=WAIT) as client:
        image = np.zeros((8, 8)).tolist()
        r = client.post(f"{url}/per_sample", json={"images": [image, image], "labels": [1]})
        assert r.status_code == 422
        assert "one label per image" in " ".join(r.json()["detail"])
        r = client.post(f"{url}/per_sample", json={"images": [image], "labels": [10]})
        assert r.status_code == 422
        r = client.post(
            f"{url}/per_sample", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 400


def test_the_example_runs_as_a_script(tmp_path: pathlib.Path) -> None:
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "per_sample_service.py"), str(port)],
        # this checkout's aengine, whatever the environment has installed
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(f"{url}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return proc.poll() is not None

        wait_for(up, "the server answers /health", timeout=60)
        assert proc.poll() is None, (tmp_path / "server.log").read_text()
        image = (np.arange(64).reshape(8, 8) % 17).tolist()
        r = httpx.post(f"{url}/per_sample", json={"images": [image], "labels": [3]}, timeout=WAIT)
        assert r.status_code == 200 and len(r.json()["grad_norms"]) == 1
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT)
        log.close()
