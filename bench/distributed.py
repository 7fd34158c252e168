"""``python -m bench.distributed``: the overlap gain of GradSync.

One data-parallel training step (forward, backward, gradients summed over
the ranks) of an MLP, every rank a task of this process's event loop,
measured three ways side by side in one run (modes interleaved per round):

* ``backward only``: no communication (the floor);
* ``backward then reduce``: the backward, then every bucket's all-reduce
  (the same buckets as GradSync's), the gradients reduced after the fact;
* ``GradSync``: the buckets reduced while the backward runs.

The overlap gain is ``backward then reduce`` / ``GradSync`` (medians).  Two
kinds of ranks: in-process ranks whose hub injects a network (``--latency``
per transfer and ``--bandwidth``, one transfer at a time), and, with
``--ray``, 2 ranks whose collectives go through Ray actors on loopback (a
local cluster started here).  Runs under asyncio (``--backend trio`` too).

    python -m bench.distributed                 # in-process ranks
    python -m bench.distributed --ray           # and 2 Ray ranks on loopback
    python -m bench.distributed --quick         # a smoke run (tests)
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio
import numpy as np
from threadpoolctl import threadpool_limits

import aengine as ae

MODES = ("backward only", "backward then reduce", "GradSync")


def make_rank(width: int, depth: int, batch: int, seed: int) -> tuple[list[Any], Any, Any]:
    rng = np.random.default_rng(seed)
    ws = [ae.tensor(rng.standard_normal((width, width)) / width**0.5, requires_grad=True)
          for _ in range(depth)]  # fmt: skip
    x = ae.tensor(rng.standard_normal((batch, width)))
    y = ae.tensor(rng.standard_normal((batch, width)))
    return ws, x, y


def loss_of(ws: list[Any], x: Any, y: Any) -> Any:
    h = x
    for w in ws:
        h = ae.tanh(h @ w)
    return ((h - y) ** 2).mean()


async def step(mode: str, group: Any, sync: Any, ws: list[Any], x: Any, y: Any, n: int) -> None:
    """One training step of one rank (``n``: the step's number, the same on every rank)."""
    for w in ws:
        w.grad = None
    loss = loss_of(ws, x, y)
    if mode == "GradSync":
        sync.attach()
        try:
            await loss.backward()
        finally:
            sync.detach()
        return
    await loss.backward()
    if mode == "backward then reduce":
        works = []
        for b, bucket in enumerate(sync.buckets):
            flat = np.concatenate([ws[j].grad.data.ravel() for j in bucket])
            works.append(group.start(("bench", n, b), flat, "sum"))
        for work in works:
            await work.wait()


async def measure(groups: list[Any], rounds: int, width: int, depth: int, batch: int,
                  bucket_bytes: int) -> dict[str, list[float]]:  # fmt: skip
    ranks = [make_rank(width, depth, batch, seed=g.rank) for g in groups]
    syncs = [
        ae.distributed.GradSync(ws, g, bucket_bytes=bucket_bytes, average=False)
        for g, (ws, _, _) in zip(groups, ranks)
    ]
    times: dict[str, list[float]] = {m: [] for m in MODES}
    n = 0
    for r in range(rounds + 1):  # the first round warms up
        for mode in MODES if r % 2 else reversed(MODES):
            n += 1
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for g, s, (ws, x, y) in zip(groups, syncs, ranks):
                    tg.start_soon(step, mode, g, s, ws, x, y, n)
            if r:
                times[mode].append(time.perf_counter() - t0)
    return times


def report(title: str, times: dict[str, list[float]]) -> None:
    med = {m: statistics.median(v) for m, v in times.items()}
    print(f"\n{title}")
    for m in MODES:
        print(f"  {m:22s} {med[m] * 1e3:8.2f} ms  (min {min(times[m]) * 1e3:7.2f})")
    print(f"  overlap gain (backward then reduce / GradSync): "
          f"{med['backward then reduce'] / med['GradSync']:.2f}x")  # fmt: skip


async def run(args: argparse.Namespace) -> None:
    sizes = dict(width=args.width, depth=args.depth, batch=args.batch, bucket_bytes=args.bucket)
    groups = ae.distributed.local_groups(
        args.ranks, latency=args.latency / 1e3, bandwidth=args.bandwidth * 1e6
    )
    title = (f"{args.ranks} in-process ranks, latency {args.latency} ms, "
             f"bandwidth {args.bandwidth} MB/s, {args.depth} layers {args.width}x{args.width} "
             f"float64, batch {args.batch} per rank ({args.backend})")  # fmt: skip
    report(title, await measure(groups, args.rounds, **sizes))
    if args.ray:
        import ray  # only this part needs the ray extra

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _node_ip_address="127.0.0.1", configure_logging=False)  # fmt: skip
        try:
            rgroups = await ae.distributed.ray_groups(2)
            try:
                times = await measure(rgroups, args.rounds, **sizes)
            finally:
                rgroups[0].close()
        finally:
            ray.shutdown()
        report(f"2 Ray ranks on loopback, same model ({args.backend})", times)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.distributed",
                                description=(__doc__ or "").split("\n")[0])  # fmt: skip
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--latency", type=float, default=1.0, help="ms per transfer")
    p.add_argument("--bandwidth", type=float, default=500.0, help="MB/s, one transfer at a time")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--bucket", type=int, default=2**19, help="GradSync bucket_bytes")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--ray", action="store_true", help="also 2 ranks through Ray actors")
    p.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    p.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (default 1)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, 2 rounds (a smoke run)")
    args = p.parse_args(argv)
    if args.quick:
        args.width, args.depth, args.batch, args.rounds, args.bucket = 16, 3, 8, 2, 2048
    # every rank computes on this one thread: BLAS pools would only fight over the cores
    with threadpool_limits(limits=args.blas_threads):
        anyio.run(run, args, backend=args.backend)


if __name__ == "__main__":
    main()
