"""Gradients as a web service under trio: Starlette served by hypercorn's trio worker.

    python examples/trio_service.py 8000         # or PORT=8000; serves on 127.0.0.1

    POST /grad   {"x": [[16 numbers], ...]}  ->  {"norm": 12.3}
    GET  /health                             ->  {"ok": true}
    GET  /stats                              ->  engine.stats().as_dict(), and "requests":
                                                 this app's done/inflight/cancelled/timed_out

The same service as examples/fastapi_service.py (same model, same answers),
on trio: Starlette runs on trio through anyio, and so does aengine.  The
model is an MLP 16 -> 512 -> 512 -> 512 in float32 (tanh after the two
hidden layers, the output layer linear), its 6 parameters made at import
from a fixed seed; POST /grad answers the global L2 norm of the gradients
of loss = mean of the squared outputs with respect to them, for x of N
rows of 16 numbers (1 <= N <= MAX_ROWS, each of magnitude at most 1e6).
The whole request runs in one of the Engine's compute threads (``await
engine.run(gradient_norm, x)``: forward, ``ae.sync.grad``, norm).  A client
that goes away cancels its backward; a request that takes more
than GRAD_TIMEOUT seconds (an environment variable, default 30; or set
app.state.grad_timeout) answers 504.
"""

import contextlib
import itertools
import math
import os
import sys

import anyio
import numpy as np
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

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


class BadInput(ValueError):
    """What is wrong with a request's body (answered with HTTP 422)."""


def as_batch(body: object) -> np.ndarray:
    """The body's x as an N x 16 float32 array, or BadInput saying what is wrong."""
    expect = f'the body must be {{"x": rows}}, 1 to {MAX_ROWS} rows of {SIZES[0]} numbers'
    rows = body.get("x") if isinstance(body, dict) else None
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_ROWS:
        raise BadInput(f"{expect}; got {str(body)[:60]}")
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != SIZES[0]:
            raise BadInput(f"{expect}; row {i} is {str(row)[:50]}")
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int | float) or not abs(v) <= MAX_ABS:
                raise BadInput(f"x[{i}][{j}] = {v!r} is not a number of magnitude <= {MAX_ABS:g}")
    return np.array(rows, dtype=np.float32)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette):
    async with ae.Engine() as engine:  # one Engine runs every request's compute
        app.state.engine = engine
        yield


async def grad(request: Request) -> JSONResponse:
    try:
        x = as_batch(await request.json())
    except ValueError as exc:  # BadInput, or a body that is not JSON
        status = 422 if isinstance(exc, BadInput) else 400
        return JSONResponse({"detail": f"{exc}"}, status_code=status)
    state = request.app.state
    engine: ae.Engine = state.engine
    timeout: float = state.grad_timeout
    state.requests["inflight"] += 1
    try:
        with anyio.fail_after(timeout):
            # the whole request in a compute thread: the loop serves others meanwhile
            norm = await engine.run(gradient_norm, x)
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
    return JSONResponse({"norm": norm})


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


async def stats(request: Request) -> JSONResponse:
    engine: ae.Engine = request.app.state.engine
    return JSONResponse({**engine.stats().as_dict(), "requests": request.app.state.requests})


app = Starlette(
    routes=[
        Route("/grad", grad, methods=["POST"]),
        Route("/health", health),
        Route("/stats", stats),
    ],
    middleware=[Middleware(CancelOnDisconnect)],
    lifespan=lifespan,
)
app.state.grad_timeout = float(os.environ.get("GRAD_TIMEOUT", "30"))
app.state.requests = {"done": 0, "inflight": 0, "cancelled": 0, "timed_out": 0}


if __name__ == "__main__":
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8000"))
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    trio.run(serve, app, config)
