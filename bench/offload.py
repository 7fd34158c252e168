"""Kernel offload benchmark: event-loop responsiveness and overlap of backwards.

Run ``python -m bench.offload`` (``--quick`` for a short run).  Prints two
tables (markdown) that ``docs/performance.md`` quotes:

(a) the worst and 99th-percentile wake-up delay of a task sleeping 1 ms on
    the event loop while a large backward runs, with offload on and off,
    against the bound "one time slice plus the longest inline kernel";
(b) two large backwards (kernels that release the GIL) run one after the
    other, then concurrently in one Engine: on 2 cores the concurrent run
    takes clearly less time;
(c) 16 concurrent MLP requests (forward in ``engine.run``, ``await
    ae.grad``) in one warm Engine: each backward moved to a compute thread
    (``offload_backward``, the default), its heavy kernels offloaded one by
    one, or everything but the forward on the loop.

``--calibrate`` prints instead what the offload threshold rests on (NOTE
[Kernel offload policy]): a thread hop's cost under asyncio and trio, and
the time of common backward kernels per element they count.
``--small-model`` times the backward of a small MLP (float32, batch 256,
4 layers of width 128) as ``ae.sync.grad`` and awaited: in one event loop
(asyncio, trio, asyncio in an Engine) and with a new
``loop.run_until_complete`` per step on a kept asyncio loop.

Both run under asyncio and trio.  Medians over repetitions; other processes
on the machine show up as noise, so the tables give min-max too.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np

import aengine as ae
from aengine.ops._core import TRANSCENDENTAL
from aengine.runtime._offload import DEFAULT_OFFLOAD_MIN_ELEMENTS
from aengine.runtime._settings import DEFAULT_TIME_SLICE

__all__ = [
    "calibrate",
    "loop_lag",
    "overlap",
    "requests",
    "longest_inline_kernel",
    "main",
    "small_model",
]


def _big_graph(n_small: int, n_big: int, big: int) -> tuple[ae.Tensor, ae.Tensor]:
    """A loss mixing a long chain of small nodes and heavy elementwise kernels."""
    x = ae.tensor(np.linspace(0.0, 1.0, 16), requires_grad=True)
    y = x
    for _ in range(n_small):
        y = ae.sin(y * 1.0001 + 0.001)
    z = ae.tensor(np.linspace(0.0, 1.0, big), requires_grad=True)
    h = z
    for _ in range(n_big):
        h = ae.sin(h) * 1.0001
    return x, y.sum() + h.sum()


def longest_inline_kernel(reps: int = 20) -> float:
    """Seconds of the slowest kernel kept inline: sin's backward just under the threshold."""
    n = DEFAULT_OFFLOAD_MIN_ELEMENTS // TRANSCENDENTAL - 1  # (sin counts each element 8 times)
    x = ae.tensor(np.linspace(0.0, 1.0, n), requires_grad=True)
    node = ae.sin(x).grad_fn
    g = np.ones(n)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        node.apply([g], False)
        best = min(best, time.perf_counter() - t)
    return best


async def _lag_during(fn: Callable[[], Any]) -> list[float]:
    """Wake-up delays of a task sleeping 1 ms while ``fn()`` is awaited."""
    lags: list[float] = []
    done = False

    async def ticker() -> None:
        while not done:
            t = time.perf_counter()
            await anyio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.005)
        await fn()
        done = True
    return lags


def loop_lag(backend: str, offload: bool, reps: int, n_small: int, n_big: int) -> dict[str, Any]:
    """Worst and p99 loop lag (seconds) during a large backward."""
    worst: list[float] = []
    p99: list[float] = []
    durations: list[float] = []
    chunks: list[float] = []

    async def one() -> None:
        async with ae.Engine(offload=offload):
            _, loss = _big_graph(n_small, n_big, 1 << 20)

            async def run() -> None:
                t = time.perf_counter()
                await ae.backward(loss)
                durations.append(time.perf_counter() - t)

            lags = await _lag_during(run)
        worst.append(max(lags))
        p99.append(float(np.percentile(lags, 99)))

    from aengine.core._graph_task import GraphTask

    orig = GraphTask.run

    def timed_run(self: GraphTask, deadline: float = float("inf")) -> Any:
        t = time.perf_counter()
        try:
            return orig(self, deadline)
        finally:
            chunks.append(time.perf_counter() - t)

    GraphTask.run = timed_run  # type: ignore[method-assign]
    try:
        for _ in range(reps):
            gc.collect()
            anyio.run(one, backend=backend)
            time.sleep(0.05)
    finally:
        GraphTask.run = orig  # type: ignore[method-assign]
    return {
        "run_p50": float(np.median(chunks)),
        "run_p99": float(np.percentile(chunks, 99)),
        "worst": statistics.median(worst),
        "worst_range": (min(worst), max(worst)),
        "p99": statistics.median(p99),
        "backward": statistics.median(durations),
    }


def overlap(backend: str, reps: int, n_big: int, size: int) -> dict[str, Any]:
    """Two large backwards: sequential vs concurrent wall time (seconds).

    Also the process's CPU time over wall time while the concurrent pair ran:
    above 1 means kernels ran on two cores at once.
    """
    seq: list[float] = []
    conc: list[float] = []
    cpu_ratio: list[float] = []

    async def one(concurrent: bool) -> float:
        async with ae.Engine():
            losses = [_big_graph(0, n_big, size)[1] for _ in range(2)]
            t = time.perf_counter()
            c = time.process_time()
            if concurrent:
                async with anyio.create_task_group() as tg:
                    for loss in losses:
                        tg.start_soon(ae.backward, loss)
            else:
                for loss in losses:
                    await ae.backward(loss)
            wall = time.perf_counter() - t
            if concurrent:
                cpu_ratio.append((time.process_time() - c) / wall)
            return wall

    for i in range(reps):
        for concurrent in (i % 2 == 0, i % 2 == 1):  # alternate who goes first
            gc.collect()
            time.sleep(0.05)
            (conc if concurrent else seq).append(anyio.run(one, concurrent, backend=backend))
    return {
        "sequential": statistics.median(seq),
        "concurrent": statistics.median(conc),
        "speedup": statistics.median(seq) / statistics.median(conc),
        "seq_range": (min(seq), max(seq)),
        "conc_range": (min(conc), max(conc)),
        "cpu_per_wall": statistics.median(cpu_ratio),
    }


def requests(backend: str, reps: int, settings: dict[str, Any], n: int = 16) -> list[float]:
    """Requests per second of ``n`` concurrent MLP requests, one value per round."""
    rng = np.random.default_rng(0)
    ws = [ae.tensor(rng.standard_normal((512, 512)).astype(np.float32) / 23) for _ in range(3)]
    for w in ws:
        w.requires_grad_()
    xs = [ae.tensor(rng.standard_normal((64, 512)).astype(np.float32)) for _ in range(n)]

    def forward(x: ae.Tensor) -> ae.Tensor:
        h = x
        for w in ws:
            h = ae.tanh(h @ w)
        return (h * h).mean()

    async def main() -> list[float]:
        out = []
        async with ae.Engine(**settings) as engine:

            async def one(x: ae.Tensor) -> None:
                await ae.grad(await engine.run(forward, x), ws)

            for i in range(reps + 1):  # the first round warms the threads up
                t = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for x in xs:
                        tg.start_soon(one, x)
                if i:
                    out.append(n / (time.perf_counter() - t))
        return out

    return anyio.run(main, backend=backend)


def calibrate(reps: int = 30, hops: int = 300) -> dict[str, Any]:
    """A thread hop's cost per backend, and backward kernels' time per counted element.

    ``hop_<backend>``: median seconds of ``anyio.to_thread.run_sync`` of a
    function that does nothing, in a warm loop.  ``kernels``: rows of
    (kernel, dtype, width, counted elements, median seconds) for the
    backward of a (256 x width) by (width x width) product, tanh, a
    product of two tensors and sin, each ``node.apply`` timed alone.
    """

    async def hop() -> float:
        def nothing() -> None:
            return None

        for _ in range(hops // 6):  # (the worker threads start)
            await anyio.to_thread.run_sync(nothing)
        ts = []
        for _ in range(hops):
            t = time.perf_counter()
            await anyio.to_thread.run_sync(nothing)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    out: dict[str, Any] = {f"hop_{b}": anyio.run(hop, backend=b) for b in ("asyncio", "trio")}
    rows = []
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for n in (128, 256, 512):
            a = ae.tensor(rng.standard_normal((256, n)).astype(dtype), requires_grad=True)
            w = ae.tensor(rng.standard_normal((n, n)).astype(dtype), requires_grad=True)
            for name, y in (
                ("matmul", a @ w),
                ("tanh", ae.tanh(a)),
                ("mul", a * a),
                ("sin", ae.sin(a)),
            ):
                node = y.grad_fn
                g = np.ones(y.shape, dtype)
                ts = []
                for _ in range(reps):
                    t = time.perf_counter()
                    node.apply([g], False)
                    ts.append(time.perf_counter() - t)
                rows.append((name, np.dtype(dtype).name, n, node.numel, statistics.median(ts)))
    out["kernels"] = rows
    return out


def small_model(steps: int = 40, width: int = 128) -> dict[str, float]:
    """Median backward seconds of a small MLP, sync and awaited in four ways (see the module)."""
    import asyncio

    rng = np.random.default_rng(0)
    ws = [
        ae.tensor((rng.standard_normal((width, width)) / width**0.5).astype(np.float32))
        for _ in range(4)
    ]
    for w in ws:
        w.requires_grad_()
    x = ae.tensor(rng.standard_normal((256, width)).astype(np.float32))

    def loss() -> ae.Tensor:
        h = x
        for w in ws[:-1]:
            h = ae.tanh(h @ w)
        return ((h @ ws[-1]) ** 2).mean()

    def median(ts: list[float]) -> float:
        return statistics.median(ts[steps // 8 :])  # (the first steps warm up)

    def sync() -> float:
        ts = []
        for _ in range(steps):
            y = loss()
            t = time.perf_counter()
            ae.sync.grad(y, ws)
            ts.append(time.perf_counter() - t)
        return median(ts)

    async def in_loop(engine: bool) -> float:
        ts = []
        async with ae.Engine() if engine else contextlib.nullcontext():
            for _ in range(steps):
                y = loss()
                t = time.perf_counter()
                await ae.grad(y, ws)
                ts.append(time.perf_counter() - t)
        return median(ts)

    async def one(y: ae.Tensor) -> Any:
        return await ae.grad(y, ws)

    def per_step_loop() -> float:
        loop = asyncio.new_event_loop()
        ts = []
        try:
            for _ in range(steps):
                y = loss()
                t = time.perf_counter()
                loop.run_until_complete(one(y))
                ts.append(time.perf_counter() - t)
        finally:
            loop.close()
        return median(ts)

    return {
        "sync": sync(),
        "asyncio": anyio.run(in_loop, False),
        "trio": anyio.run(in_loop, False, backend="trio"),
        "asyncio, Engine": anyio.run(in_loop, True),
        "run_until_complete per step": per_step_loop(),
    }


def _print_small_model(rounds: int) -> None:
    print("backward of an MLP (float32, batch 256, 4 layers of width 128), median ms per step")
    print()
    print("| round | ae.sync.grad | await: asyncio | trio | asyncio, Engine | run_until_complete |")
    print("|---|---|---|---|---|---|")
    for r in range(rounds):
        t = small_model()
        s = t["sync"]
        cells = " | ".join(
            f"{t[k] * 1e3:.2f} ({t[k] / s:.2f}x)"
            for k in ("asyncio", "trio", "asyncio, Engine", "run_until_complete per step")
        )
        print(f"| {r + 1} | {s * 1e3:.2f} | {cells} |")


def _print_calibration(reps: int) -> None:
    c = calibrate(reps)
    us = 1e6
    print(f"offload threshold {DEFAULT_OFFLOAD_MIN_ELEMENTS} counted elements")
    print(f"thread hop: asyncio {c['hop_asyncio'] * us:.1f} us, trio {c['hop_trio'] * us:.1f} us")
    print()
    print(
        "| kernel | dtype | width | counted elements | time (us) | ns per counted element | runs |"
    )
    print("|---|---|---|---|---|---|---|")
    hop = min(c["hop_asyncio"], c["hop_trio"])
    for name, dtype, n, numel, t in c["kernels"]:
        where = "in a thread" if numel >= DEFAULT_OFFLOAD_MIN_ELEMENTS else "inline"
        print(
            f"| {name} | {dtype} | {n} | {numel} | {t * us:.1f} | {t * 1e9 / numel:.2f} "
            f"| {where} ({t / hop:.1f} hops) |"
        )


def main(argv: list[str] | None = None) -> None:
    """Run both benchmarks and print markdown tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.offload", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller graphs")
    parser.add_argument(
        "--calibrate", action="store_true", help="a thread hop's cost and kernels' cost per element"
    )
    parser.add_argument(
        "--small-model", action="store_true", help="a small MLP's backward, sync and awaited"
    )
    args = parser.parse_args(argv)
    if args.calibrate:
        _print_calibration(5 if args.quick else 30)
        return
    if args.small_model:
        _print_small_model(1 if args.quick else 3)
        return
    reps = 3 if args.quick else 7
    n_small = 5_000 if args.quick else 30_000
    n_big = 4 if args.quick else 10
    inline = longest_inline_kernel()
    ms = 1e3
    print(
        f"time slice {DEFAULT_TIME_SLICE * ms:.1f} ms; offload threshold "
        f"{DEFAULT_OFFLOAD_MIN_ELEMENTS} elements; longest inline kernel "
        f"{inline * ms:.2f} ms; bound = slice + kernel = {(DEFAULT_TIME_SLICE + inline) * ms:.2f} ms"
    )
    print()
    print(f"(a) loop lag during a backward of {3 * n_small} small nodes + {2 * n_big} kernels on")
    print("    2**20 elements (a task sleeping 1 ms; median over runs of the worst delay)")
    print()
    print(
        "| backend | offload | worst lag (ms) | worst min-max | p99 lag (ms) | backward (ms) "
        "| engine run p50 / p99 (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    for backend in ("asyncio", "trio"):
        for off in (True, False):
            r = loop_lag(backend, off, reps, n_small, n_big)
            lo, hi = r["worst_range"]
            print(
                f"| {backend} | {'on' if off else 'off'} | {r['worst'] * ms:.2f} | "
                f"{lo * ms:.2f}-{hi * ms:.2f} | {r['p99'] * ms:.2f} | {r['backward'] * ms:.0f} "
                f"| {r['run_p50'] * ms:.2f} / {r['run_p99'] * ms:.2f} |"
            )
    print()
    size = 1 << 20 if args.quick else 1 << 21
    print(f"(b) two backwards of {2 * n_big} kernels on {size} elements each")
    print()
    print(
        "| backend | sequential (ms) | concurrent (ms) | speedup | seq min-max | conc min-max "
        "| CPU/wall (concurrent) |"
    )
    print("|---|---|---|---|---|---|---|")
    for backend in ("asyncio", "trio"):
        r = overlap(backend, reps, n_big, size)
        s0, s1 = r["seq_range"]
        c0, c1 = r["conc_range"]
        print(
            f"| {backend} | {r['sequential'] * ms:.0f} | {r['concurrent'] * ms:.0f} | "
            f"{r['speedup']:.2f}x | {s0 * ms:.0f}-{s1 * ms:.0f} | {c0 * ms:.0f}-{c1 * ms:.0f} "
            f"| {r['cpu_per_wall']:.2f} |"
        )
    print()
    print("(c) 16 concurrent requests: an MLP 512 -> 512 -> 512 -> 512 (float32, batch 64)")
    print()
    print("| backend | backward | requests/s | min-max |")
    print("|---|---|---|---|")
    modes = {
        "in a compute thread (default)": {},
        "kernels offloaded one by one": {"offload_backward": False},
        "on the loop (offload=False)": {"offload": False},
    }
    for backend in ("asyncio", "trio"):
        for name, settings in modes.items():
            rates = requests(backend, reps, settings)
            print(
                f"| {backend} | {name} | {statistics.median(rates):.0f} | "
                f"{min(rates):.0f}-{max(rates):.0f} |"
            )


if __name__ == "__main__":
    main()
