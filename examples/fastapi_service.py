"""Gradients as a web service: FastAPI served by uvicorn (asyncio).

    python examples/fastapi_service.py 8000      # or PORT=8000; serves on 127.0.0.1

    POST /grad   {"x": [[16 numbers], ...]}  ->  {"norm": 12.3}
    GET  /health                             ->  {"ok": true}
    GET  /stats                              ->  engine.stats().as_dict(), and "requests":
                                                 this app's done/inflight/cancelled/timed_out

The model is an MLP 16 -> 512 -> 512 -> 512 in float32 (tanh after the two
hidden layers, the output layer linear), its 6 parameters (3 weights, 3
biases) made at import from a fixed seed.  POST /grad runs it on x (N rows
of 16 numbers, 1 <= N <= MAX_ROWS, each of magnitude at most 1e6), takes
loss = mean of the squared outputs, and answers the global L2 norm of the
gradients of the loss with respect to the 6 parameters.

* One ae.Engine for the whole app, opened in the lifespan: its compute
  threads run every request's work, and /stats reports it.
* The whole request runs off the event loop, in one of those threads:
  ``await engine.run(gradient_norm, x)`` runs the forward, the backward
  (``ae.sync.grad``, which the Engine counts, admits and cancels as its
  own) and the norm; /health answers while gradients are computed.
* A client that goes away cancels its request's backward (CancelOnDisconnect).
* A request that takes more than GRAD_TIMEOUT seconds (an environment
  variable, default 30; or set app.state.grad_timeout) answers 504; its
  backward is cancelled.
"""

import contextlib
import itertools
import math
import os
import sys
from typing import Annotated

import anyio
import numpy as np
import uvicorn
from fastapi import Body, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import Field

import aengine as ae
from aengine.asgi import CancelOnDisconnect

SIZES = (16, 512, 512, 512)
MAX_ROWS = 4096
MAX_ABS = 1e6


def make_params(seed: int = 0) -> list[ae.Tensor]:
    """Weights (n_in x n_out, scaled by 1/sqrt(n_in)) and biases, float32, fixed seed."""
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in itertools.pairwise(SIZES):
        w = rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)
        b = 0.1 * rng.standard_normal(n_out)
        params.append(ae.tensor(w.astype(np.float32), requires_grad=True))
        params.append(ae.tensor(b.astype(np.float32), requires_grad=True))
    return params


PARAMS = make_params()


def forward(x: np.ndarray) -> ae.Tensor:
    """The loss for a batch x (N x 16, float32): mean of the squared MLP outputs."""
    h = ae.tensor(x)
    w1, b1, w2, b2, w3, b3 = PARAMS
    h = ae.tanh(h @ w1 + b1)
    h = ae.tanh(h @ w2 + b2)
    out = h @ w3 + b3
    return (out * out).mean()


def global_norm(grads: tuple[ae.Tensor, ...]) -> float:
    """The L2 norm of all the gradients together (float32 dot products, summed as floats)."""
    return math.sqrt(sum(float(np.vdot(g.numpy(), g.numpy())) for g in grads))


def gradient_norm(x: np.ndarray) -> float:
    """A request's whole compute, run in one of the Engine's compute threads.

    The forward, the backward (``ae.sync.grad``: no event loop runs in that
    thread; the Engine counts it, admits it and stops it if the request is
    cancelled) and the norm.
    """
    return global_norm(ae.sync.grad(forward(x), PARAMS))


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI):
    async with ae.Engine() as engine:  # one Engine runs every request's compute
        app.state.engine = engine
        yield


app = FastAPI(title="aengine gradients", lifespan=lifespan)
app.add_middleware(CancelOnDisconnect)
app.state.grad_timeout = float(os.environ.get("GRAD_TIMEOUT", "30"))
app.state.requests = {"done": 0, "inflight": 0, "cancelled": 0, "timed_out": 0}

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # no str, bool, NaN, inf


@app.exception_handler(RequestValidationError)
async def invalid_body(request: Request, exc: RequestValidationError):
    # FastAPI's own answer echoes the input back, and fails (500) on a NaN in it;
    # a body that is not JSON at all is a 400, as the trio example answers it
    errors = exc.errors()
    where = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5]]
    not_json = any(e.get("type") == "json_invalid" for e in errors)
    return JSONResponse({"detail": where}, status_code=400 if not_json else 422)


def as_batch(rows: list[list[float]]) -> np.ndarray:
    """x as an N x 16 float32 array, or HTTP 422 saying what is wrong."""
    expect = f"x must be a list of 1 to {MAX_ROWS} rows of {SIZES[0]} numbers"
    if not 1 <= len(rows) <= MAX_ROWS:
        raise HTTPException(422, f"{expect}; got {len(rows)} rows")
    for i, row in enumerate(rows):
        if len(row) != SIZES[0]:
            raise HTTPException(422, f"{expect}; row {i} has {len(row)} numbers")
    x = np.array(rows, dtype=np.float64)
    if np.abs(x).max() > MAX_ABS:
        raise HTTPException(422, f"the numbers in x must be at most {MAX_ABS:g} in magnitude")
    return x.astype(np.float32)


@app.post("/grad")
async def grad(x: Annotated[list[list[Number]], Body(embed=True)], request: Request):
    batch = as_batch(x)
    state = request.app.state
    engine: ae.Engine = state.engine
    timeout: float = state.grad_timeout
    state.requests["inflight"] += 1
    try:
        with anyio.fail_after(timeout):
            # the whole request in a compute thread: the loop serves others meanwhile
            norm = await engine.run(gradient_norm, batch)
    except TimeoutError:
        state.requests["timed_out"] += 1
        message = f"the gradient took more than {timeout:g} s (GRAD_TIMEOUT); try again later"
        return JSONResponse({"detail": message}, status_code=504)
    except anyio.get_cancelled_exc_class():
        state.requests["cancelled"] += 1  # the client went away (CancelOnDisconnect)
        raise
    finally:
        state.requests["inflight"] -= 1
    state.requests["done"] += 1
    return {"norm": norm}


@app.get("/health")
async def health():
    return {"ok": True}


@app.get("/stats")
async def stats(request: Request):
    engine: ae.Engine = request.app.state.engine
    return {**engine.stats().as_dict(), "requests": request.app.state.requests}


if __name__ == "__main__":
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8000"))
    uvicorn.run(app, host="127.0.0.1", port=port)
