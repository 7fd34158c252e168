"""The torch servers of the ``service`` workload: FastAPI apps calling torch per request.

The same contract as the example app (bench/_http_apps.py); ``threaded``
chooses where torch runs: in the request handler, on the event loop, or in
anyio's worker threads (``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import anyio.to_thread
import numpy as np
import torch
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from ._http_apps import SIZES, THREADS_ENV, init_params, torch_norm

__all__ = ["torch_app", "Batch", "as_batch"]


#: a JSON number, as the example accepts it (no int coercion, no NaN or infinity)
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
MAX_ABS = 1e6


class Batch(BaseModel):
    """The body of POST /grad: ``x``, rows of 16 numbers (the example's model)."""

    x: list[list[Number]]


def as_batch(rows: list[list[float]]) -> np.ndarray:
    """x as an N x 16 float32 array, or HTTP 422: the example's checks, in the same order."""
    if not 1 <= len(rows) <= 4096 or any(len(r) != SIZES[0] for r in rows):
        raise HTTPException(422, f"x must be a list of 1 to 4096 rows of {SIZES[0]} numbers")
    x = np.array(rows, dtype=np.float64)
    if np.abs(x).max() > MAX_ABS:
        raise HTTPException(422, f"the numbers in x must be at most {MAX_ABS:g} in magnitude")
    return x.astype(np.float32)


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
