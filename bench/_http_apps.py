"""The servers of the ``service`` workload (bench/http_service.py), as uvicorn factories.

Each factory returns an ASGI app serving the same contract:

- ``POST /grad`` with JSON ``{"x": [[...16 floats] x 64]}``: the forward of an
  MLP 16 -> 512 -> 512 -> 512 (float32, tanh after the hidden layers), the
  loss ``(out * out).mean()``, its gradient w.r.t. the 6 parameters, and the
  answer ``{"norm": float}`` (the gradients' global L2 norm);
- ``GET /health`` -> ``{"ok": true}``; ``GET /stats`` -> the server's counters.

``aengine_example`` serves the FastAPI example (examples/fastapi_service.py)
unchanged; ``torch_handler`` calls torch in the request handler (on the event
loop); ``torch_threads`` calls it through ``anyio.to_thread.run_sync``;
``numpy_threads`` is the floor: the whole request written by hand in numpy,
run through ``anyio.to_thread.run_sync``.  Every
app is wrapped in ``LagProbe``, which measures the event loop's lateness the
same way in every server and answers ``GET /_bench/lag`` (NOTE [Loop lag of a
server]).

    python -m uvicorn --app-dir . --factory bench._http_apps:torch_threads
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "LagProbe",
    "aengine_example",
    "torch_handler",
    "torch_threads",
    "numpy_threads",
    "init_params",
    "torch_norm",
    "BATCH",
    "SIZES",
    "EXAMPLE",
    "THREADS_ENV",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the example app served as the aengine system
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fastapi_service.py"
#: the layer sizes of the MLP (in, hidden..., out) and the rows of one request
SIZES = (16, 512, 512, 512)
BATCH = 64
#: the environment variable giving torch's intra-op thread count in a server
THREADS_ENV = "BENCH_HTTP_THREADS"


def init_params(seed: int = 0) -> list[np.ndarray]:
    """[W1, b1, W2, b2, W3, b3] of the MLP (float32), drawn as the example draws them.

    Each weight ``(n_in, n_out)`` is standard normal over ``sqrt(n_in)``, each
    bias ``0.1`` times standard normal, in that order from one generator.
    """
    rng = np.random.default_rng(seed)
    params: list[np.ndarray] = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        params.append((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32))
        params.append((0.1 * rng.standard_normal(n_out)).astype(np.float32))
    return params


def torch_norm(torch: Any, params: list[Any], x: Any) -> float:
    """One request's work in torch: forward, gradient of every param, their L2 norm.

    tanh after the hidden layers, the output layer linear; the loss is the
    mean of the squared outputs; the norm is summed in float64.
    """
    h = x
    last = len(params) - 2
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i < last:
            h = torch.tanh(h)
    grads = torch.autograd.grad((h * h).mean(), params)
    return math.sqrt(sum(float(g.double().square().sum()) for g in grads))


# NOTE [Loop lag of a server]
# Every server of the workload runs the same ticker on its event loop: a
# task that sleeps 10 ms, again and again, and records how late each sleep
# ends.  A request handler that blocks the loop (torch called in the
# handler, a long stretch of engine work without a yield) delays the next
# wake-up by as long as it blocks; the worst lateness since the last reset
# is what ``GET /_bench/lag`` reports.  The ticker is started from the
# lifespan, wraps no route of the app, and is the same code for the example
# and for the torch servers, so the column compares like with like.  On a
# shared machine it also counts the time the OS gave the CPU to another
# process: the /health prober's idle figures show that floor.


class LagProbe:
    """ASGI middleware: a 10 ms ticker on the server's loop; ``GET /_bench/lag`` reads it.

    ``GET /_bench/lag?reset=1`` answers the figures since the last reset and
    starts a new period.
    """

    def __init__(self, app: App, interval: float = 0.01) -> None:
        self.app = app
        self.interval = interval
        self.lags: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._tick())
        if scope["type"] == "http" and scope["path"] == "/_bench/lag":
            await self._answer(scope, send)
            return
        await self.app(scope, receive, send)

    async def _tick(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(time.perf_counter() - t - self.interval)
            if len(self.lags) > 100_000:  # a server left running: keep the recent ones
                del self.lags[:50_000]

    async def _answer(self, scope: Scope, send: Send) -> None:
        lags = sorted(self.lags)
        if b"reset=1" in scope.get("query_string", b""):
            self.lags = []
        body = {
            "ticks": len(lags),
            "worst": lags[-1] if lags else None,
            "p99": lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else None,
            "running": self.task is not None and not self.task.done(),
        }
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def torch_handler() -> App:
    """torch called in the request handler, on the event loop."""
    # imported here: the aengine server imports neither torch nor FastAPI's torch app
    from ._http_torch import torch_app

    return LagProbe(torch_app(threaded=False))


def torch_threads() -> App:
    """torch called through ``anyio.to_thread.run_sync`` (anyio's 40 threads)."""
    # imported here: the aengine server imports neither torch nor FastAPI's torch app
    from ._http_torch import torch_app

    return LagProbe(torch_app(threaded=True))


def numpy_threads() -> App:
    """The floor: the request's forward and backward by hand in numpy, in anyio's threads."""
    # imported here: the module imports FastAPI, which the other factories import lazily too
    from ._http_numpy import numpy_app

    return LagProbe(numpy_app())


def aengine_example() -> App:
    """The example app of examples/fastapi_service.py, unchanged, under the lag probe."""
    if not EXAMPLE.exists():
        raise RuntimeError(f"{EXAMPLE} not found: the aengine server is the example app")
    sys.path.insert(0, str(EXAMPLE.parent))
    # imported here: the module is found through the path set just above
    import fastapi_service

    return LagProbe(fastapi_service.app)
