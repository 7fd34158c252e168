"""Train a small CNN on scikit-learn's 8x8 handwritten digits, with an awaited backward.

    python examples/digits_cnn.py                      # 30 epochs: about 98.6% test accuracy
    python examples/digits_cnn.py --epochs 2 --save digits.safetensors
    python examples/digits_cnn.py --backend trio       # the same run under trio

The data are ``sklearn.datasets.load_digits()`` (1797 images of 8x8 pixels,
bundled with scikit-learn: nothing is downloaded), pixels scaled to [0, 1],
split once into 1437 training and 360 test images (stratified, seed 0).
The model is ``DigitsCNN`` below: two 3x3 convolutions with ReLU and 2x2
max pooling, then two linear layers (dropout between them), 13,706
parameters in float32.  It trains with ``ae.optim.AdamW`` under a one-cycle
learning-rate schedule, on mini-batches in a fixed order
(``ae.manual_seed(--seed)`` seeds the initial weights, the shuffling and
the dropout: a run prints the same figures under asyncio and trio).
Training runs in an async main started by ``anyio.run``, and each step
awaits ``loss.backward()``: the backward yields to the event loop as it runs,
so other tasks of the loop (a server's requests) go on while the model
trains.  The forward and the optimizer's step run inline (a service would
run its forward with ``await engine.run(...)``: docs/services.md).

``--save PATH`` writes the trained weights with ``ae.save(model.state_dict(),
PATH)``, a plain safetensors file with torch's key names: ``ae.load`` reads it
into a fresh ``DigitsCNN``, and ``safetensors.torch.load_file`` into the same
architecture written in torch.  Other programs import the model from here::

    sys.path.insert(0, "examples")
    from digits_cnn import DigitsCNN, load_model
    model = load_model("digits.safetensors")     # eval mode, ready to predict
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np

import aengine as ae

#: the classes: the digits 0..9
N_CLASSES = 10


class DigitsCNN(ae.nn.Module):
    """A CNN for 1x8x8 images with pixels in [0, 1]; returns 10 logits per image.

    conv1: Conv2d(1, 16, 3, padding=1) -> ReLU -> MaxPool2d(2)    16 x 4 x 4
    conv2: Conv2d(16, 32, 3, padding=1) -> ReLU -> MaxPool2d(2)   32 x 2 x 2
    flatten -> fc1: Linear(128, 64) -> ReLU -> Dropout(dropout) -> fc2: Linear(64, 10)

    ``dropout`` (default 0.2) acts in training mode only and has no weights:
    a checkpoint loads whatever the dropout.

    The state dict's keys (``conv1.weight``, ..., ``fc2.bias``) are those of
    the same class written with torch.nn, so checkpoints go both ways.

    Example::

        >>> import aengine as ae
        >>> model = DigitsCNN()
        >>> model(ae.zeros(5, 1, 8, 8)).shape
        (5, 10)
    """

    def __init__(self, dropout: float = 0.2) -> None:
        super().__init__()
        self.conv1 = ae.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = ae.nn.Conv2d(16, 32, 3, padding=1)
        self.pool = ae.nn.MaxPool2d(2)
        self.fc1 = ae.nn.Linear(32 * 2 * 2, 64)
        self.drop = ae.nn.Dropout(dropout)
        self.fc2 = ae.nn.Linear(64, N_CLASSES)

    def forward(self, x: ae.Tensor) -> ae.Tensor:
        x = self.pool(ae.relu(self.conv1(x)))
        x = self.pool(ae.relu(self.conv2(x)))
        x = self.drop(ae.relu(self.fc1(x.flatten(1))))
        logits: ae.Tensor = self.fc2(x)
        return logits


def build_model(seed: int | None = None, dropout: float = 0.2) -> DigitsCNN:
    """A fresh ``DigitsCNN`` (torch's default initialisation), seeded first if ``seed`` is given."""
    if seed is not None:
        ae.manual_seed(seed)
    return DigitsCNN(dropout)


def load_model(path: str | os.PathLike[str]) -> DigitsCNN:
    """A ``DigitsCNN`` with the weights saved at ``path`` (by ``--save``), in eval mode."""
    model = DigitsCNN()
    model.load_state_dict(ae.load(path))
    model.eval()
    return model


def load_data(
    test_size: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits as float32 images (N, 1, 8, 8) in [0, 1] and int64 labels: train, then test.

    The split is stratified and fixed by ``seed`` (1437 training, 360 test images).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_size, random_state=seed, stratify=labels
    )
    return x_train, y_train, x_test, y_test


def batches(n: int, batch_size: int) -> list[np.ndarray]:
    """The indices 0..n-1 shuffled by aengine's seeded generator, cut into batches."""
    order = ae.randperm(n).numpy()
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


@ae.no_grad()
def accuracy(model: ae.nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of ``images`` whose largest logit is at the right label."""
    was_training = model.training
    model.eval()
    predicted = model(ae.tensor(images)).argmax(1).numpy()
    model.train(was_training)
    return float((predicted == labels).mean())


def make_optimizer(
    model: ae.nn.Module, lr: float, weight_decay: float, total_steps: int
) -> tuple[ae.optim.AdamW, ae.optim.lr_scheduler.OneCycleLR]:
    """AdamW, and a one-cycle schedule peaking at ``lr`` that ends after ``total_steps`` steps."""
    opt = ae.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = ae.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total_steps)
    return opt, schedule


async def train_step(
    model: ae.nn.Module,
    opt: ae.optim.Optimizer,
    schedule: ae.optim.lr_scheduler.LRScheduler | None,
    images: np.ndarray,
    labels: np.ndarray,
) -> float:
    """One step on one batch: forward, awaited backward, AdamW step; returns the batch's loss."""
    logits = model(ae.tensor(images))
    loss = ae.nn.functional.cross_entropy(logits, ae.tensor(labels))
    opt.zero_grad()
    await loss.backward()  # the event loop runs other tasks meanwhile
    opt.step()
    if schedule is not None:
        schedule.step()
    return float(loss.item())


async def train_epoch(
    model: ae.nn.Module,
    opt: ae.optim.Optimizer,
    schedule: ae.optim.lr_scheduler.LRScheduler | None,
    images: np.ndarray,
    labels: np.ndarray,
    batch_size: int,
) -> float:
    """One pass over the data in shuffled mini-batches; returns the mean training loss."""
    model.train()
    total = 0.0
    for idx in batches(len(images), batch_size):
        total += await train_step(model, opt, schedule, images[idx], labels[idx]) * len(idx)
    return total / len(images)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line: ``--epochs``, ``--batch-size``, ``--save PATH``, ... (see ``--help``)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30, help="passes over the data (30)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per step (32)")
    parser.add_argument("--lr", type=float, default=5e-3, help="the peak learning rate (5e-3)")
    parser.add_argument("--weight-decay", type=float, default=1e-2, help="AdamW's (1e-2)")
    parser.add_argument("--dropout", type=float, default=0.2, help="before the last layer (0.2)")
    parser.add_argument("--seed", type=int, default=0, help="ae.manual_seed (0)")
    parser.add_argument(
        "--limit", type=int, default=None, help="train on the first N training images only"
    )
    parser.add_argument("--save", metavar="PATH", default=None, help="write the weights here")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    return parser.parse_args(argv)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    """Train as ``args`` say, print each epoch and the result; returns the figures and model."""
    x_train, y_train, x_test, y_test = load_data()
    if args.limit is not None:
        x_train, y_train = x_train[: args.limit], y_train[: args.limit]
    model = build_model(args.seed, args.dropout)
    steps_per_epoch = -(-len(x_train) // args.batch_size)
    opt, schedule = make_optimizer(
        model, args.lr, args.weight_decay, max(1, args.epochs * steps_per_epoch)
    )
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        loss = await train_epoch(model, opt, schedule, x_train, y_train, args.batch_size)
        acc = accuracy(model, x_test, y_test)
        print(f"epoch {epoch:3d}  loss {loss:.4f}  test accuracy {acc:.2%}", flush=True)
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_test, y_test)
    print(
        f"test accuracy {acc:.2%} ({round(acc * len(y_test))}/{len(y_test)}) "
        f"after {args.epochs} epoch{'s' * (args.epochs != 1)} on {len(x_train)} images "
        f"in {seconds:.1f} s"
    )
    if args.save:
        ae.save(model.state_dict(), args.save)
        print(f"saved the weights to {args.save}")
    return {"accuracy": acc, "seconds": seconds, "model": model}


if __name__ == "__main__":
    arguments = parse_args()
    anyio.run(main, arguments, backend=arguments.backend)
