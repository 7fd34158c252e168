"""The floor of the ``service`` workload: the MLP's forward and backward in numpy, by hand.

The same contract as the example app (bench/_http_apps.py): the whole request's
compute (forward, the six gradients, their norm) written out in numpy, run
through ``anyio.to_thread.run_sync`` (anyio's worker threads, as the torch
server in threads does).  No autograd at all: the least Python a request can
cost, hence the throughput floor an autograd library is measured against.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import anyio.to_thread
import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from ._http_apps import SIZES, init_params

__all__ = ["numpy_app", "numpy_norm", "Batch", "as_batch"]

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


def numpy_norm(params: list[np.ndarray], x: np.ndarray) -> float:
    """One request's work by hand: forward, the gradient of every param, their L2 norm.

    tanh after the hidden layers, the output layer linear; the loss is the
    mean of the squared outputs; the norm is summed in float64.
    """
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    out = h2 @ w3 + b3
    g = out * np.float32(2.0 / out.size)  # d mean(out^2) / d out
    grads = [h2.T @ g, g.sum(axis=0)]  # W3, b3
    g = (g @ w3.T) * (1 - h2 * h2)
    grads += [h1.T @ g, g.sum(axis=0)]  # W2, b2
    g = (g @ w2.T) * (1 - h1 * h1)
    grads += [x.T @ g, g.sum(axis=0)]  # W1, b1
    return math.sqrt(sum(float(np.vdot(d, d)) for d in grads))


def numpy_app() -> FastAPI:
    """A FastAPI app answering POST /grad with ``numpy_norm`` in threads, /health, /stats."""
    params = init_params()
    counters = {"done": 0, "inflight": 0}
    app = FastAPI()

    @app.post("/grad")
    async def grad(body: Batch) -> dict[str, float]:
        x = as_batch(body.x)
        counters["inflight"] += 1
        try:
            norm = await anyio.to_thread.run_sync(numpy_norm, params, x)
        finally:
            counters["inflight"] -= 1
        counters["done"] += 1
        return {"norm": norm}

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return {"requests": counters}

    return app
