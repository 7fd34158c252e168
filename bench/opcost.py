"""``python -m bench.opcost``: what recording one op costs, beside torch's and numpy's.

Each op of the chain and wide workloads (``bench.workloads``), on a (16,)
float64 vector that requires grad, runs ``--calls`` times in a loop, in
``--rounds`` rounds (the median round per call is reported), with the
cyclic garbage collector off for the whole run: the op's own work
(checking its arguments, the numpy call, recording the node and the
result Tensor), not the collections the graph it leaves would trigger
(``python -m bench.gcshare`` measures those).  Each result is dropped at
once, so no graph grows.  torch's column needs torch (CPU build), else it
says "not installed".

    python -m bench.opcost
    python -m bench.opcost --calls 2000 --rounds 3   # quicker, noisier
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
from collections.abc import Callable
from time import perf_counter
from typing import Any

import numpy as np

__all__ = ["main"]


def _per_call(fn: Callable[[], Any], calls: int, rounds: int) -> float:
    """Median over ``rounds`` of the time per call of ``fn``, in ns."""
    for _ in range(min(calls, 200)):
        fn()
    times = []
    for _ in range(rounds):
        t0 = perf_counter()
        for _ in range(calls):
            fn()
        times.append((perf_counter() - t0) / calls)
    return statistics.median(times) * 1e9


def _ops(lib: Any, tensor: Callable[..., Any]) -> dict[str, Callable[[], Any]]:
    """The workloads' ops on ``lib`` (aengine, torch or numpy), by name."""
    x = tensor(np.linspace(0.0, 1.0, 16))
    z = x * 1.5
    s = lib.sin(z)
    m = s.sum()
    return {
        "leaf * number": lambda: x * 1.5,
        "tensor * number": lambda: z * 1.0001,
        "tensor + number": lambda: z + 0.001,
        "sin": lambda: lib.sin(z),
        "sum": lambda: s.sum(),
        "0-d tensor + tensor": lambda: m + m,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.opcost")
    p.add_argument("--calls", type=int, default=20_000, help="calls per round")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    import aengine as ae

    systems: dict[str, dict[str, Callable[[], Any]] | None] = {
        "aengine": _ops(ae, lambda a: ae.tensor(a, requires_grad=True)),
        "torch": None,
        "numpy": _ops(np, np.asarray),
    }
    if importlib.util.find_spec("torch") is not None:
        import torch

        systems["torch"] = _ops(torch, lambda a: torch.tensor(a, requires_grad=True))
    print(
        f"one op on a (16,) float64 tensor that requires grad, collector off, "
        f"ns per call (median of {args.rounds} rounds of {args.calls} calls)"
    )
    print(f"{'op':22s} {'aengine':>9s} {'torch':>9s} {'numpy':>9s}  aengine/torch")
    gc.disable()
    try:
        for name in systems["aengine"]:  # type: ignore[union-attr]
            row = {
                system: None if ops is None else _per_call(ops[name], args.calls, args.rounds)
                for system, ops in systems.items()
            }
            a, t, n = row["aengine"], row["torch"], row["numpy"]
            cells = [f"{v:9.0f}" if v is not None else f"{'not installed':>9s}" for v in (a, t, n)]
            ratio = f"{a / t:.2f}" if a is not None and t is not None else "-"
            print(f"{name:22s} {' '.join(cells)}  {ratio}")
    finally:
        gc.enable()


if __name__ == "__main__":
    main()
