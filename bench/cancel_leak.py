"""Stress: does a backward cancelled while its kernels are offloaded leave its graph alive?

Each run builds ``leaf = randn(64, 64)``, eight ``h = tanh(h @ leaf)``,
``loss = h.sum()``, runs ``await ae.backward(loss)`` inside
``ae.Engine(offload_threshold=...)`` under ``anyio.move_on_after(delay)``, and
after ``anyio.run`` returned and ``gc.collect()`` checks weak references to
the graph's nodes.  It prints, per backend and delay, how many runs were
cancelled and in how many a node was still alive.  Exit status 1 if any.

    python -m bench.cancel_leak --runs 200 --delays 0 0.0002 0.0005 0.001 0.003
    python -m bench.cancel_leak --load 2   # with two busy processes beside it
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import sys
import weakref
from typing import Any

import anyio

import aengine as ae


def _nodes(root: Any) -> list[Any]:
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen[id(n)] = n
        stack.extend(f for f, _ in n.next_functions)
    return list(seen.values())


def one_run(backend: str, delay: float, threshold: int, offload_backward: bool) -> tuple[bool, int]:
    """(cancelled?, number of the graph's nodes alive afterwards)."""
    refs: list[weakref.ref[Any]] = []
    cancelled = [False]

    async def main() -> None:
        leaf = ae.randn(64, 64, requires_grad=True)
        h = leaf
        for _ in range(8):
            h = ae.tanh(h @ leaf)
        loss = h.sum()
        refs.extend(weakref.ref(n) for n in _nodes(loss.grad_fn))
        async with ae.Engine(offload_threshold=threshold, offload_backward=offload_backward):
            with anyio.move_on_after(delay) as scope:
                await ae.backward(loss)
            cancelled[0] = scope.cancelled_caught

    anyio.run(main, backend=backend)
    gc.collect()
    return cancelled[0], sum(r() is not None for r in refs)


def _burn(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=100, help="runs per backend and delay")
    p.add_argument("--delays", type=float, nargs="+", default=[0.0, 0.0002, 0.0005, 0.001, 0.003])
    p.add_argument("--backends", nargs="+", default=["asyncio", "trio"])
    p.add_argument("--threshold", type=int, default=64, help="offload_threshold")
    p.add_argument(
        "--offload-backward",
        choices=["on", "off"],
        default="on",
        help="the Engine's offload_backward (on: its default)",
    )
    p.add_argument("--load", type=int, default=0, help="busy processes running beside")
    args = p.parse_args(argv)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(args.load)]
    for b in burners:
        b.start()
    leaked_runs = 0
    try:
        for backend in args.backends:
            for delay in args.delays:
                cancelled = leaked = 0
                for _ in range(args.runs):
                    c, alive = one_run(
                        backend, delay, args.threshold, args.offload_backward == "on"
                    )
                    cancelled += c
                    leaked += alive > 0
                leaked_runs += leaked
                print(
                    f"{backend:8} delay={delay:<7} runs={args.runs} cancelled={cancelled} "
                    f"graph alive after={leaked}",
                    flush=True,
                )
    finally:
        stop.set()
        for b in burners:
            b.join()
    return 1 if leaked_runs else 0


if __name__ == "__main__":
    sys.exit(main())
