"""aengine on ``cuda:0`` (CuPy) against torch on CUDA, side by side in one run.

``python -m bench.gpu [--rounds N] [--out FILE.json]`` on a machine with an
NVIDIA GPU, CuPy and a CUDA build of torch (``make gpu-check`` runs it).

Workloads: the float32 tanh MLP of width 4096 (batch 1024, 3 layers: large
matrix products, where the GPU's time dominates) and the chain of 3,000
small nodes (where the time is the engine's and the kernel launches').
Systems: torch (``torch.autograd.grad``), aengine ``ae.sync.grad``, and
``await ae.grad`` inside an ``ae.Engine`` under asyncio.  Every timed part
ends with a synchronisation of the GPU, so a time covers the kernels, not
only their launches.  Trials are interleaved (one round runs every system
once, in a rotated order), after two warm-up rounds; the table reports
medians and each system's ratio to torch's median.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from collections.abc import Callable
from time import perf_counter
from typing import Any

import numpy as np

from .workloads import GraphWorkload, chain, mlp

__all__ = ["main", "run"]

DEVICE = "cuda:0"


def _torch_trial(torch: Any, wl: GraphWorkload) -> dict[str, Any]:
    ps = [torch.tensor(p, requires_grad=True, device=DEVICE) for p in wl.params]
    cs = [torch.tensor(c, device=DEVICE) for c in wl.consts]
    torch.cuda.synchronize()
    t0 = perf_counter()
    loss = wl.fn(torch, cs, *ps)
    torch.cuda.synchronize()
    t1 = perf_counter()
    grads = torch.autograd.grad(loss, ps)
    torch.cuda.synchronize()
    t2 = perf_counter()
    return {"forward": t1 - t0, "backward": t2 - t1, "grads": [g.cpu().numpy() for g in grads]}


def _ae_inputs(ae: Any, wl: GraphWorkload) -> tuple[list[Any], list[Any]]:
    ps = [ae.tensor(p, requires_grad=True, device=DEVICE) for p in wl.params]
    cs = [ae.tensor(c, device=DEVICE) for c in wl.consts]
    return ps, cs


def _ae_timed_forward(ae: Any, sync: Callable[[], None], wl: GraphWorkload) -> tuple[Any, ...]:
    """(params, loss, t0, t1): the inputs made untimed, the forward timed to the GPU's end."""
    ps, cs = _ae_inputs(ae, wl)
    sync()
    t0 = perf_counter()
    loss = wl.fn(ae, cs, *ps)
    sync()
    return ps, loss, t0, perf_counter()


def _ae_result(sync: Callable[[], None], t0: float, t1: float, grads: Any) -> dict[str, Any]:
    sync()
    t2 = perf_counter()
    return {"forward": t1 - t0, "backward": t2 - t1, "grads": [g.numpy() for g in grads]}


def _ae_sync_trial(ae: Any, sync: Callable[[], None], wl: GraphWorkload) -> dict[str, Any]:
    ps, loss, t0, t1 = _ae_timed_forward(ae, sync, wl)
    return _ae_result(sync, t0, t1, ae.sync.grad(loss, ps))


def _ae_async_trial(ae: Any, sync: Callable[[], None], wl: GraphWorkload) -> dict[str, Any]:
    import anyio  # aengine's own dependency

    async def main() -> dict[str, Any]:
        async with ae.Engine():
            ps, loss, t0, t1 = _ae_timed_forward(ae, sync, wl)
            return _ae_result(sync, t0, t1, await ae.grad(loss, ps))

    return anyio.run(main)  # type: ignore[no-any-return]


def run(rounds: int = 7, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Time every system on every workload; return the figures and the machine."""
    import cupy
    import torch

    import aengine as ae

    if not torch.cuda.is_available():
        raise SystemExit("torch has no CUDA here: the GPU benchmark needs a CUDA build of torch")
    stream = cupy.cuda.Device(0)

    def sync() -> None:
        stream.synchronize()

    systems: dict[str, Callable[[GraphWorkload], dict[str, Any]]] = {
        "torch": lambda wl: _torch_trial(torch, wl),
        "aengine sync": lambda wl: _ae_sync_trial(ae, sync, wl),
        "aengine async (asyncio, Engine)": lambda wl: _ae_async_trial(ae, sync, wl),
    }
    workloads = [mlp(4096, 3, 1024), chain(3000)]
    results: dict[str, Any] = {
        "card": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
        "aengine": getattr(ae, "__version__", ""),
        "python": platform.python_version(),
        "rounds": rounds,
        "workloads": {},
    }
    names = list(systems)
    for wl in workloads:
        times: dict[str, dict[str, list[float]]] = {
            n: {"forward": [], "backward": []} for n in names
        }
        grads: dict[str, list[np.ndarray]] = {}
        for r in range(rounds + 2):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                out = systems[n](wl)
                grads[n] = out["grads"]
                if r >= 2:  # two warm-up rounds: CuPy compiles its kernels on first use
                    times[n]["forward"].append(out["forward"])
                    times[n]["backward"].append(out["backward"])
        for n in names[1:]:
            for g, ref in zip(grads[n], grads["torch"]):
                np.testing.assert_allclose(g, ref, rtol=wl.rtol * 10, atol=wl.atol * 10)
        row: dict[str, Any] = {}
        for n in names:
            fwd = statistics.median(times[n]["forward"])
            bwd = statistics.median(times[n]["backward"])
            row[n] = {
                "forward_ms": fwd * 1e3,
                "backward_ms": bwd * 1e3,
                "step_ms": (fwd + bwd) * 1e3,
            }
        ref = row["torch"]
        for n in names:
            for part in ("forward", "backward", "step"):
                row[n][f"{part}_vs_torch"] = row[n][f"{part}_ms"] / ref[f"{part}_ms"]
        results["workloads"][wl.name] = {"description": wl.description, "systems": row}
        progress(f"{wl.name}: done")
    return results


def table(results: dict[str, Any]) -> str:
    """The figures as a markdown table."""
    lines = [
        f"{results['card']}; torch {results['torch']}, CuPy {results['cupy']}, "
        f"Python {results['python']}; medians of {results['rounds']} interleaved rounds",
        "",
        "| workload | system | forward ms | backward ms | step ms | step vs torch |",
        "|---|---|---|---|---|---|",
    ]
    for name, w in results["workloads"].items():
        for system, r in w["systems"].items():
            lines.append(
                f"| {name} | {system} | {r['forward_ms']:.2f} | {r['backward_ms']:.2f} "
                f"| {r['step_ms']:.2f} | {r['step_vs_torch']:.2f}x |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    results = run(args.rounds, progress=lambda s: print(s, file=sys.stderr, flush=True))
    print(table(results))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
