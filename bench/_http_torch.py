"""The torch servers of the ``service`` workload: FastAPI apps calling torch per request.

The same contract as the example app (bench/_http_apps.py); ``threaded``
chooses where torch runs: in the request handler, on the event loop, or in
anyio's worker threads (``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import os
from typing import Any

import anyio.to_thread
import numpy as np
import torch
from fastapi import FastAPI

from ._http_apps import THREADS_ENV, init_params, torch_norm
from ._http_numpy import Batch, as_batch

__all__ = ["torch_app"]


def torch_app(threaded: bool) -> FastAPI:
    """A FastAPI app answering POST /grad with torch, GET /health and GET /stats."""
    torch.set_num_threads(max(1, int(os.environ.get(THREADS_ENV, "1"))))
    params = [torch.from_numpy(p).requires_grad_() for p in init_params()]
    counters = {"done": 0, "inflight": 0}

    def work(x: np.ndarray) -> float:
        return torch_norm(torch, params, torch.from_numpy(x))

    app = FastAPI()

    @app.post("/grad")
    async def grad(body: Batch) -> dict[str, float]:
        x = as_batch(body.x)
        counters["inflight"] += 1
        try:
            if threaded:
                norm = await anyio.to_thread.run_sync(work, x)
            else:
                norm = work(x)
        finally:
            counters["inflight"] -= 1
        counters["done"] += 1
        return {"norm": norm}

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return {"requests": counters, "torch_threads": torch.get_num_threads()}

    return app
