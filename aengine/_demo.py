"""``make demo``: what an awaitable backward is for.

A task ticks every millisecond on an event loop while another task, on the
same loop, trains a deep and narrow neural network (an MLP) by gradient
descent.  The training runs twice, with one line changed:

- ``grads = await ae.grad(loss, params)``: the engine runs the backward in
  time slices of about 1 ms and lets the loop run its other tasks between
  them, so the ticker keeps ticking during every backward;
- ``grads = ae.sync.grad(loss, params)``: the blocking twin; the loop waits
  for each backward to end, and as the training loop awaits nothing else,
  the ticker does not run at all until the training is over.

Both variants run under asyncio and under trio, and compute the same
gradients (their final losses are equal).  For each, the demo prints how many
times the ticker ran against the number of 1 ms periods the training took,
and the longest gap between two ticks.  ``await ae.grad`` does not reach
every period: the forward pass and the weight update are plain numpy work
that holds the loop between two awaits, and a slice ends only after the
node it is running.

It ends by profiling two more training steps with ``ae.profile()`` and
writing the trace to a file to open in the Perfetto UI or chrome://tracing:
each node, the backward's time slices, and the yields to the loop between
them (docs/profiling.md).

Run it with ``make demo`` or ``python -m aengine._demo``.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from itertools import pairwise

import anyio

import aengine as ae

TICK = 0.001  # the ticker's period, in seconds
BATCH = 64  # samples per training step


@dataclass
class Result:
    """What the ticker saw while one training ran."""

    seconds: float  # how long the training took
    ticks: int  # how many times the ticker ran meanwhile
    worst_gap: float  # the longest time without a tick, in seconds
    loss: float  # the final loss

    @property
    def expected_ticks(self) -> int:
        """How many 1 ms periods the training took."""
        return round(self.seconds / TICK)


def make_model(depth: int, width: int) -> tuple[ae.Tensor, ae.Tensor, list[ae.Tensor]]:
    """A batch of inputs, their targets and the weights of a tanh MLP (the same each time)."""
    gen = ae.Generator(0)
    x = ae.randn(BATCH, width, generator=gen)
    y = ae.randn(BATCH, 1, generator=gen)
    params = [ae.randn(width, width, generator=gen) * width**-0.5 for _ in range(depth)]
    params.append(ae.randn(width, 1, generator=gen) * width**-0.5)
    for p in params:
        p.requires_grad_()
    return x, y, params


async def train(
    x: ae.Tensor, y: ae.Tensor, params: list[ae.Tensor], steps: int, blocking: bool
) -> float:
    """Fit the MLP to the targets by gradient descent; return the final loss."""
    loss = ae.tensor(0.0)
    for _ in range(steps):
        h = x
        for w in params[:-1]:
            h = ae.tanh(h @ w)
        loss = ((h @ params[-1] - y) ** 2).mean()
        if blocking:
            with warnings.catch_warnings():
                # ae.sync.grad warns when it runs inside an event loop, as it
                # blocks the loop: showing that is this variant's purpose.
                # (Nothing is awaited in this block: no other task sees the filter.)
                warnings.filterwarnings(
                    "ignore", r"ae\.sync\.grad\(\) called inside", RuntimeWarning
                )
                grads = ae.sync.grad(loss, params)
        else:
            grads = await ae.grad(loss, params)
        with ae.no_grad():
            for p, g in zip(params, grads):
                p -= 0.05 * g
    return float(loss.item())


async def measure(steps: int, depth: int, width: int, blocking: bool) -> Result:
    """Train while a 1 ms ticker runs on the same event loop; return what it saw."""
    x, y, params = make_model(depth, width)
    tick_times: list[float] = []

    async def ticker() -> None:
        while True:
            tick_times.append(time.perf_counter())
            await anyio.sleep(TICK)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.01)  # the ticker is now running
        start = time.perf_counter()
        loss = await train(x, y, params, steps, blocking)
        end = time.perf_counter()
        tg.cancel_scope.cancel()
    seen = [t for t in tick_times if start < t < end]
    marks = [start, *seen, end]
    worst_gap = max(b - a for a, b in pairwise(marks))
    return Result(end - start, len(seen), worst_gap, loss)


async def profile_steps(steps: int, depth: int, width: int) -> ae.profile:
    """A profile of ``steps`` training steps with ``await ae.grad``."""
    x, y, params = make_model(depth, width)
    async with ae.profile() as p:
        await train(x, y, params, steps, blocking=False)
    return p


def main(steps: int = 25, depth: int = 100, width: int = 64, trace: str | None = None) -> None:
    """Run the comparison under asyncio and trio and print it; then write a trace.

    The default model is deep and narrow: its backward has many short nodes
    (a few ms in all), and its matrices are too small for numpy's BLAS to use
    threads, which stall when other processes keep the cores busy.
    ``trace``: where the trace goes (default: aengine-demo-trace.json in the
    temporary directory).
    """
    print(
        f"{steps} training steps of an MLP ({depth} hidden layers of width {width}) "
        "while a task on the same event loop ticks every 1 ms:"
    )
    for backend in ("asyncio", "trio"):
        print(f"[{backend}]")
        if not _importable(backend):
            print(f"  {backend} is not installed: skipped (pip install {backend})")
            continue
        for label, blocking in (("await ae.grad", False), ("blocking backward", True)):
            r = anyio.run(measure, steps, depth, width, blocking, backend=backend)
            print(
                f"  {label + ':':18} the ticker ran {r.ticks:3} of {r.expected_ticks:3} expected "
                f"times (worst gap {r.worst_gap * 1e3:5.1f} ms); final loss {r.loss:.6f}"
            )
    print(
        "`await ae.grad` lets the loop run other tasks about every millisecond of a backward\n"
        "(the forward pass and the update still hold it in between); `ae.sync.grad` in a\n"
        "coroutine holds the loop for the whole backward: use it only where no loop runs."
    )
    if trace is None:
        trace = os.path.join(tempfile.gettempdir(), "aengine-demo-trace.json")
    p = anyio.run(profile_steps, 2, depth, width)
    p.export_chrome_trace(trace)
    nodes = sum(1 for e in p.events if e["cat"] == "node")
    print(
        f"ae.profile() of 2 more steps (asyncio): {nodes:,} nodes in 2 backwards, written to\n"
        f"  {trace}\n"
        "Open it in the Perfetto UI (https://ui.perfetto.dev, 'Open trace file') or in Chrome\n"
        "at chrome://tracing ('Load'): a row per backward with its time slices and the yields\n"
        "to the loop, a row with the nodes of the training task, arrows from forward to backward."
    )


def _importable(module: str) -> bool:
    """Whether ``module`` can be imported (trio is an optional dependency)."""
    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()
