"""Explaining a digit classifier's predictions: input gradients served by FastAPI (uvicorn).

    python examples/explain_service.py 8000            # or PORT=8000; serves on 127.0.0.1
    python examples/explain_service.py 8000 cnn.safetensors   # the checkpoint (or EXPLAIN_CHECKPOINT)

    POST /explain  {"image": 8 rows of 8 numbers from 0 to 16,
                    "method": "saliency" | "integrated_gradients",   (default saliency)
                    "steps": 1 to 256 (integrated gradients; default 32),
                    "target": a class 0 to 9, or null for the predicted one}
               ->  {"predicted": 3, "probabilities": [10 numbers], "target": 3,
                    "method": "saliency", "steps": null, "attribution": 8 rows of 8 numbers,
                    "delta": null}
    GET  /health   ->  {"ok": true}
    GET  /stats    ->  engine.stats().as_dict(), and "explained": this app's answers so far

The model is a small CNN for scikit-learn's 8x8 digit images (pixels 0 to
16, divided by 16 before the first layer).  Its weights come from a
safetensors checkpoint (ae.load); if the file does not exist the app trains
the model on ``sklearn.datasets.load_digits`` first (5 epochs of Adam, one or
two seconds on one core; about 97% right on held-out digits) and saves it
there (ae.save).  EXPLAIN_DTYPE=float64 runs the model in float64.

Both methods explain the logit of the target class (the predicted class
unless the request names one), pixel by pixel, for the image as sent:

* saliency: |d logit / d pixel| (Simonyan et al. 2014);
* integrated gradients (Sundararajan et al. 2017) from a black image
  (baseline 0): (x - 0) times the mean of d logit / d pixel at the images
  (k + 1/2)/steps * x, k = 0 .. steps-1 (the midpoint rule).  The
  attributions add up to logit(x) - logit(0) up to the rule's error;
  "delta" is their sum minus that difference.

The whole request's compute runs in one of the Engine's compute threads,
never on the event loop: ``await engine.run(explain, ...)`` runs a function
that does the forward AND the backward, the backward with ``ae.sync.grad``
(which needs no event loop: in that thread none runs).  The Engine counts
that backward as its own (/stats), and stops it at its next time slice if
the request is cancelled (a client that goes away: CancelOnDisconnect).
For integrated
gradients the ``steps`` interpolated images are one batch, behind the image
itself and the baseline: one forward gives the prediction, logit(0) and
every interpolated logit; one backward of the sum of the interpolated
target logits gives every image's gradient at once (each logit depends on
its own image only, so the gradient of their sum with respect to the batch
is the stack of the per-image gradients).  The loop only parses the request
and writes the answer, so /health answers at once however many
explanations are being computed.
"""

import contextlib
import os
import pathlib
import sys
from typing import Annotated, Any, Literal

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

import aengine as ae
from aengine.asgi import CancelOnDisconnect

SIDE = 8  # the images are SIDE x SIDE
MAX_PIXEL = 16.0  # scikit-learn's digits: 0 (white) to 16 (black)
CLASSES = 10
MAX_STEPS = 256
DEFAULT_CHECKPOINT = "digits_cnn.safetensors"


def make_model() -> ae.nn.Module:
    """The CNN: two 3x3 convolutions (16 and 32 channels), each with ReLU and 2x2 max pooling."""
    nn = ae.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 4x4 -> 2x2
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, CLASSES),
    )


def logits(model: ae.nn.Module, images: ae.Tensor) -> ae.Tensor:
    """The model's logits (N x 10) for a batch of images (N x 8 x 8, pixels 0 to 16)."""
    return model((images / MAX_PIXEL).unsqueeze(1))


# -- the checkpoint ------------------------------------------------------------------------------


def train(model: ae.nn.Module, epochs: int = 5, seed: int = 0) -> float:
    """Train on load_digits (1500 images), return the accuracy on the other 297."""
    from sklearn.datasets import load_digits  # the examples extra; only when training

    digits = load_digits()
    images = digits.images.astype(np.float32)
    labels = digits.target
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(labels))
    fit, held_out = order[:1500], order[1500:]
    optimizer = ae.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = ae.nn.CrossEntropyLoss()
    model.train()
    for _ in range(epochs):
        shuffled = rng.permutation(fit)
        for start in range(0, len(shuffled), 64):
            batch = shuffled[start : start + 64]
            optimizer.zero_grad()
            loss = loss_fn(logits(model, ae.tensor(images[batch])), ae.tensor(labels[batch]))
            loss.backward()  # no event loop runs in this thread: a plain synchronous backward
            optimizer.step()
    model.eval()
    with ae.no_grad():
        guessed = logits(model, ae.tensor(images[held_out])).numpy().argmax(axis=1)
    return float((guessed == labels[held_out]).mean())


def load_or_train(path: pathlib.Path, dtype: str = "float32") -> ae.nn.Module:
    """The model with the checkpoint's weights, trained and saved first if the file is missing.

    Frozen (no parameter requires grad: the gradients asked for are the
    input's), in eval mode, in ``dtype``.
    """
    ae.manual_seed(0)  # the initial weights of a model trained here
    model = make_model()
    if not path.exists():
        accuracy = train(model)
        partial = path.with_name(path.name + ".partial")
        ae.save(model.state_dict(), partial)
        os.replace(partial, path)  # whole or not at all, should several workers race
        print(f"trained a model ({accuracy:.1%} right on held-out digits), saved to {path}")
    model.load_state_dict(ae.load(path))
    return model.to(getattr(ae, dtype)).eval().requires_grad_(False)


# -- the explanation: everything in one compute thread ------------------------------------------


def explain(
    model: ae.nn.Module, image: np.ndarray, method: str, steps: int, target: int | None
) -> dict[str, Any]:
    """Forward, backward and the attribution for one image; runs in an Engine's compute thread."""
    dtype = next(model.parameters()).dtype
    if method == "saliency":
        batch = image[None]
    else:  # the image, the baseline (black: 0), then the steps interpolated images
        alphas = (np.arange(steps) + 0.5) / steps
        batch = np.concatenate(
            [image[None], np.zeros((1, SIDE, SIDE)), alphas[:, None, None] * image]
        )
    x = ae.tensor(batch, dtype=dtype, requires_grad=True)
    out = logits(model, x)
    probabilities = ae.nn.functional.softmax(out[0], dim=0)
    predicted = int(probabilities.detach().numpy().argmax())
    t = predicted if target is None else target
    delta = None
    if method == "saliency":
        (g,) = ae.sync.grad(out[0, t], [x])  # no event loop in this thread: ae.sync
        attribution = np.abs(g.numpy()[0])
    else:
        (g,) = ae.sync.grad(out[2:, t].sum(), [x])  # every interpolated image's gradient at once
        attribution = image * g.numpy()[2:].mean(axis=0)  # (x - baseline) * mean gradient
        scores = out.detach().numpy()[:, t]
        delta = float(attribution.sum() - (scores[0] - scores[1]))
    return {
        "predicted": predicted,
        "probabilities": probabilities.tolist(),
        "target": t,
        "method": method,
        "steps": None if method == "saliency" else steps,
        "attribution": attribution.tolist(),
        "delta": delta,
    }


# -- the app -------------------------------------------------------------------------------------

Pixel = Annotated[float, Field(strict=True, ge=0, le=MAX_PIXEL, allow_inf_nan=False)]
Row = Annotated[list[Pixel], Field(min_length=SIDE, max_length=SIDE)]


class ExplainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not a default

    image: Annotated[list[Row], Field(min_length=SIDE, max_length=SIDE)]
    method: Literal["saliency", "integrated_gradients"] = "saliency"
    steps: Annotated[int, Field(strict=True, ge=1, le=MAX_STEPS)] = 32
    target: Annotated[int, Field(strict=True, ge=0, lt=CLASSES)] | None = None


#: what each field must be, added to the validation errors about it
EXPECTED = {
    "image": f"image must be {SIDE} rows of {SIDE} numbers from 0 to {MAX_PIXEL:g}",
    "method": "method must be 'saliency' or 'integrated_gradients'",
    "steps": f"steps must be an integer from 1 to {MAX_STEPS}",
    "target": f"target must be a class from 0 to {CLASSES - 1}, or null",
}
BODY = 'the body must be a JSON object {"image": ..., "method": ..., "steps": ..., "target": ...}'


async def invalid_body(request: Request, exc: Exception) -> JSONResponse:
    # FastAPI's own answer echoes the input back (and fails with a 500 on a NaN in it)
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):  # 400, as the other examples
        return JSONResponse({"detail": [f"the body is not JSON; {BODY}"]}, status_code=400)
    detail, expected = [], []  # what is wrong (5 errors at most), then what each field must be
    for e in errors[:5]:
        loc = [str(part) for part in e["loc"] if part != "body"]
        detail.append(f"{'.'.join(loc) or 'body'}: {e['msg']}")
        hint = EXPECTED.get(loc[0], BODY) if loc else BODY
        if hint not in expected:
            expected.append(hint)
    return JSONResponse({"detail": detail + expected}, status_code=422)


def create_app(
    checkpoint: str | os.PathLike[str] | None = None, dtype: str | None = None
) -> FastAPI:
    """The app; the checkpoint and dtype default to EXPLAIN_CHECKPOINT and EXPLAIN_DTYPE."""
    path = pathlib.Path(checkpoint or os.environ.get("EXPLAIN_CHECKPOINT", DEFAULT_CHECKPOINT))
    dtype = dtype or os.environ.get("EXPLAIN_DTYPE", "float32")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"the dtype must be float32 or float64, got {dtype!r}")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async with ae.Engine() as engine:  # its compute threads run every request's work
            app.state.engine = engine
            app.state.model = await engine.run(load_or_train, path, dtype)  # training too
            app.state.explained = 0
            yield

    app = FastAPI(title="aengine explanations", lifespan=lifespan)
    app.add_exception_handler(RequestValidationError, invalid_body)
    app.add_middleware(CancelOnDisconnect)  # a client that goes away cancels its backward

    @app.post("/explain")
    async def explain_route(body: ExplainRequest, request: Request) -> dict[str, Any]:
        state = request.app.state
        image = np.array(body.image, dtype=np.float64)
        engine: ae.Engine = state.engine
        # forward and backward in a compute thread: the loop serves other requests meanwhile
        answer = await engine.run(explain, state.model, image, body.method, body.steps, body.target)
        state.explained += 1
        return answer

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/stats")
    async def stats(request: Request) -> dict[str, Any]:
        engine: ae.Engine = request.app.state.engine
        # pid: which process answered, where several serve the app (uvicorn's workers, replicas)
        return {
            **engine.stats().as_dict(),
            "explained": request.app.state.explained,
            "pid": os.getpid(),
        }

    return app


app = create_app()  # reads EXPLAIN_CHECKPOINT and EXPLAIN_DTYPE; loads (or trains) at startup

if __name__ == "__main__":
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8000"))
    if len(sys.argv) > 2:
        app = create_app(sys.argv[2])
    uvicorn.run(app, host="127.0.0.1", port=port)
