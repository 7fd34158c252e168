"""Per-sample gradient norms of a digit classifier, served by FastAPI (uvicorn).

    python examples/per_sample_service.py 8000          # or PORT=8000; serves on 127.0.0.1
    python examples/per_sample_service.py 8000 cnn.safetensors   # weights (or PER_SAMPLE_CHECKPOINT)

    POST /per_sample  {"images": 1 to 256 images, each 8 rows of 8 numbers from 0 to 16,
                       "labels": one class 0 to 9 per image}
                  ->  {"losses": [one per image], "grad_norms": [one per image],
                       "layer_norms": {"0.weight": [one per image], ...}}
    GET  /health      ->  {"ok": true}

Per-example gradient norms are what a gradient service is asked for in
data attribution (which training examples move the model most), in
differential privacy (clipping each example's gradient) and in spotting
mislabelled examples (their gradients are large).  The model is the small
digits CNN of examples/explain_service.py; its weights come from a
safetensors checkpoint, or are a seeded random initialisation when none is
given (the norms are then those of an untrained model).

Every example's gradient comes from one forward and one backward of the
whole batch: ``ae.func.vmap(ae.func.grad_and_value(loss), in_dims=(None, 0,
0))(params, images, labels)`` with ``loss`` calling the model through
``ae.func.functional_call``.  The request's whole computation runs in one of
the Engine's compute threads (``await engine.run(per_sample, ...)``, with
the ``ae.sync.func`` flavour of the transforms: no event loop runs in that
thread), so the loop only parses the request and writes the answer.
"""

import contextlib
import os
import pathlib
import sys
from typing import Annotated, Any

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

import aengine as ae

SIDE = 8
MAX_PIXEL = 16.0
CLASSES = 10
MAX_BATCH = 256


def make_model() -> ae.nn.Module:
    """The digits CNN: two 3x3 convolutions (16 and 32 channels), ReLU, 2x2 max pooling, a linear head."""
    nn = ae.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, CLASSES),
    )


def load_model(path: pathlib.Path | None) -> ae.nn.Module:
    """The model with the checkpoint's weights (seeded random ones without a checkpoint), frozen."""
    ae.manual_seed(0)
    model = make_model()
    if path is not None:
        model.load_state_dict(ae.load(path))
    return model.eval().requires_grad_(False)


def per_sample(model: ae.nn.Module, images: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Each image's loss and gradient norms; runs in an Engine's compute thread."""
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(p: dict[str, ae.Tensor], image: ae.Tensor, label: ae.Tensor) -> ae.Tensor:
        x = (image / MAX_PIXEL).reshape(1, 1, SIDE, SIDE)  # one image: a batch of one
        out = ae.func.functional_call(model, p, (x,))
        return ae.nn.functional.cross_entropy(out, label.reshape(1))

    # one forward and one backward for the whole batch (no event loop here: ae.sync.func)
    per_example = ae.sync.func.vmap(ae.sync.func.grad_and_value(loss), in_dims=(None, 0, 0))
    grads, losses = per_example(params, ae.tensor(images, dtype=ae.float32), ae.tensor(labels))
    n = len(labels)
    squares = {name: (g.reshape(n, -1) ** 2).sum(1) for name, g in grads.items()}
    total = sum(squares.values(), ae.zeros(n))
    return {
        "losses": losses.tolist(),
        "grad_norms": total.sqrt().tolist(),
        "layer_norms": {name: s.sqrt().tolist() for name, s in squares.items()},
    }


Pixel = Annotated[float, Field(strict=True, ge=0, le=MAX_PIXEL, allow_inf_nan=False)]
Row = Annotated[list[Pixel], Field(min_length=SIDE, max_length=SIDE)]
Image = Annotated[list[Row], Field(min_length=SIDE, max_length=SIDE)]
Label = Annotated[int, Field(strict=True, ge=0, lt=CLASSES)]


class PerSampleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    images: Annotated[list[Image], Field(min_length=1, max_length=MAX_BATCH)]
    labels: Annotated[list[Label], Field(min_length=1, max_length=MAX_BATCH)]

    @model_validator(mode="after")
    def _one_label_per_image(self) -> "PerSampleRequest":
        if len(self.images) != len(self.labels):
            raise ValueError(
                f"give one label per image: {len(self.images)} images, {len(self.labels)} labels"
            )
        return self


async def invalid_body(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return JSONResponse({"detail": ["the body is not JSON"]}, status_code=400)
    detail = []
    for e in errors[:5]:
        loc = [str(part) for part in e["loc"] if part != "body"]
        detail.append(f"{'.'.join(loc) or 'body'}: {e['msg']}")
    detail.append(
        f"the body must be {{'images': 1 to {MAX_BATCH} images of {SIDE}x{SIDE} numbers from 0 "
        f"to {MAX_PIXEL:g}, 'labels': one class from 0 to {CLASSES - 1} per image}}"
    )
    return JSONResponse({"detail": detail}, status_code=422)


def create_app(checkpoint: str | os.PathLike[str] | None = None) -> FastAPI:
    """The app; the checkpoint defaults to PER_SAMPLE_CHECKPOINT (none: seeded random weights)."""
    name = checkpoint or os.environ.get("PER_SAMPLE_CHECKPOINT")
    path = pathlib.Path(name) if name else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async with ae.Engine() as engine:  # its compute threads run every request's work
            app.state.engine = engine
            app.state.model = await engine.run(load_model, path)
            yield

    app = FastAPI(title="aengine per-sample gradients", lifespan=lifespan)
    app.add_exception_handler(RequestValidationError, invalid_body)

    @app.post("/per_sample")
    async def per_sample_route(body: PerSampleRequest, request: Request) -> dict[str, Any]:
        state = request.app.state
        images = np.array(body.images, dtype=np.float32)
        labels = np.array(body.labels, dtype=np.int64)
        engine: ae.Engine = state.engine
        # the forward, the backward and the norms in a compute thread, off the loop
        return await engine.run(per_sample, state.model, images, labels)

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    return app


app = create_app()

if __name__ == "__main__":
    port = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8000"))
    if len(sys.argv) > 2:
        app = create_app(sys.argv[2])
    uvicorn.run(app, host="127.0.0.1", port=port)
