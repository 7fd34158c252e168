"""The ``steady`` family: several training steps in a row on the same parameters.

A training loop records the same graph structure every step, then runs its
backward.  Each trial here runs ``steps`` such steps on one set of
parameter tensors (created untimed before the first), forward (recording)
and backward timed apart, and reports the first step and the median of the
later ones: what a system does once (first step) is told apart from what
it does every step (backward plans: step 1 meets the graph structure for the
first time, step 3 builds the plan, steps 4 on run by it).  The parameters are not updated between steps, so each
step's gradients are the same and are checked against torch's last step.

Systems: torch (``torch.autograd.grad``), aengine (``ae.sync.grad``,
``ae.sync.backward`` with ``.grad`` set to None before each step, as
``zero_grad`` does, and ``await ae.grad`` inline in a task under asyncio and
trio, every step in one event loop) and the numpy floor.  Trials are
interleaved by ``harness.interleave`` (NOTE [Interleaving]), one warm-up
trial per system first.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Any

import numpy as np

from . import _progress
from .harness import interleave, result_rows
from .systems import FLOOR, REFERENCE, System
from .workloads import GraphWorkload, chain, mlp, wide

__all__ = ["STEADY_SYSTEMS", "steady_workloads", "run_steady", "steady_trial"]

#: the graph workloads' systems measured here, in report order
STEADY_SYSTEMS = (
    REFERENCE,
    "aengine sync",
    "aengine sync .backward()",
    "aengine async (asyncio)",
    "aengine async (trio)",
    FLOOR,
)

_METRICS = [
    {"key": "fwd step 1", "unit": "ms", "scale": 1e3, "better": "lower", "ratio": False},
    {"key": "fwd later", "unit": "ms", "scale": 1e3, "better": "lower"},
    {"key": "fwd later/first", "unit": "x", "scale": 1.0, "better": "lower", "ratio": False},
    {"key": "bwd step 1", "unit": "ms", "scale": 1e3, "better": "lower", "ratio": False},
    {"key": "bwd later", "unit": "ms", "scale": 1e3, "better": "lower"},
    {"key": "bwd later/first", "unit": "x", "scale": 1.0, "better": "lower", "ratio": False},
]


def steady_workloads(specs: list[tuple[str, Any, int]]) -> list[tuple[GraphWorkload, int]]:
    """``[(family, size, repeats)]`` (as ``FULL["steady"]`` in bench/cli.py) -> workloads."""
    out: list[tuple[GraphWorkload, int]] = []
    for family, size, repeats in specs:
        if family == "chain":
            out.append((chain(size), repeats))
        elif family == "wide":
            out.append((wide(size), repeats))
        elif family == "mlp":
            out.append((mlp(*size), repeats))
        else:
            raise ValueError(f"steady: unknown workload family {family!r}; use chain, wide or mlp")
    return out


Forward = Callable[[], Any]


def _steps(
    steps: int,
    forward: Forward,
    backward: Callable[[Any], Any],
    grads: Callable[[Any], list[np.ndarray]],
    before: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run ``steps`` steps; ``before`` (untimed) runs ahead of each forward."""
    fwd: list[float] = []
    bwd: list[float] = []
    out: Any = None
    for _ in range(steps):
        if before is not None:
            before()
        t0 = perf_counter()
        state = forward()
        t1 = perf_counter()
        out = backward(state)
        t2 = perf_counter()
        del state  # the graph goes as the loop rebinds ``loss``
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    return _summary(fwd, bwd, grads(out))


async def _asteps(
    steps: int,
    forward: Forward,
    backward: Callable[[Any], Any],
    grads: Callable[[Any], list[np.ndarray]],
) -> dict[str, Any]:
    fwd: list[float] = []
    bwd: list[float] = []
    out: Any = None
    for _ in range(steps):
        t0 = perf_counter()
        state = forward()
        t1 = perf_counter()
        out = await backward(state)
        t2 = perf_counter()
        del state
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    return _summary(fwd, bwd, grads(out))


def _summary(fwd: list[float], bwd: list[float], grads: list[np.ndarray]) -> dict[str, Any]:
    """One trial's numbers: step 1, the median of steps 2.., their ratio; the last grads."""
    res: dict[str, Any] = {"grads": grads}
    for key, xs in (("fwd", fwd), ("bwd", bwd)):
        first = xs[0]
        later = statistics.median(xs[1:]) if len(xs) > 1 else first
        res[f"{key} step 1"] = first
        res[f"{key} later"] = later
        res[f"{key} later/first"] = later / first if first > 0 else 1.0
    return res


def steady_trial(name: str, wl: GraphWorkload, steps: int) -> dict[str, Any]:
    """One trial of system ``name`` (one of STEADY_SYSTEMS): ``steps`` steps in a row."""
    if name == REFERENCE:
        import torch

        tps = [torch.tensor(p, requires_grad=True) for p in wl.params]
        tcs = [torch.from_numpy(c) for c in wl.consts]
        return _steps(
            steps,
            lambda: wl.fn(torch, tcs, *tps),
            lambda loss: torch.autograd.grad(loss, tps),
            lambda gs: [g.numpy() for g in gs],
        )
    if name == FLOOR:
        fps = [p.copy() for p in wl.params]
        return _steps(
            steps, lambda: wl.floor_forward(wl.consts, fps), wl.floor_backward, lambda gs: gs
        )
    import aengine as ae

    # (imported here, as aengine: the torch and floor trials need neither)
    from aengine.core._plan import PLANS

    PLANS.cache.clear()  # step 1 of every trial meets its graph structure first
    ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
    cs = [ae.as_tensor(c) for c in wl.consts]

    def forward() -> Any:
        return wl.fn(ae, cs, *ps)

    def numpy(gs: Any) -> list[np.ndarray]:
        return [g.numpy() for g in gs]

    if name == "aengine sync":
        return _steps(steps, forward, lambda loss: ae.sync.grad(loss, ps), numpy)
    if name == "aengine sync .backward()":

        def zero_grad() -> None:
            for p in ps:
                p.grad = None

        return _steps(
            steps,
            forward,
            ae.sync.backward,
            lambda _: [p.grad.numpy() for p in ps],
            before=zero_grad,
        )
    for backend in ("asyncio", "trio"):
        if name == f"aengine async ({backend})":
            import anyio

            run = partial(_asteps, steps, forward, lambda loss: ae.grad(loss, ps), numpy)
            return anyio.run(run, backend=backend)  # type: ignore[no-any-return]
    raise ValueError(f"steady: no trial for system {name!r}; use one of {STEADY_SYSTEMS}")


def run_steady(
    wl: GraphWorkload,
    systems: list[System],
    steps: int,
    repeats: int,
    pause: float,
    log: Any,
) -> dict[str, Any]:
    """Time ``steps`` steps in a row of ``wl`` per system; check gradients vs torch."""
    chosen = [s for s in systems if s.name in STEADY_SYSTEMS]
    avail = [s for s in chosen if s.available]
    name = f"steady-{wl.name}"
    with _progress.bar(len(avail) * (repeats + 1), f"  {name}", unit="trial") as bar:

        def trial(s: System) -> dict[str, Any]:
            bar.set_postfix_str(s.name)
            try:
                return steady_trial(s.name, wl, steps)
            finally:
                bar.update()

        runs = interleave({s.name: partial(trial, s) for s in avail}, repeats, pause, 1, log)
    rows = result_rows(chosen, runs, REFERENCE, wl, [m["key"] for m in _METRICS])
    return {
        "name": name,
        "family": "steady",
        "description": (
            f"{steps} training steps in a row on the same parameters, the graph re-recorded "
            f"every step ({wl.description}); step 1 and the median of steps 2-{steps}, "
            "forward (recording) and backward timed apart; later/first: the ratio within a "
            "trial; ratio columns are of the later steps. Not in the default full run: "
            "`python -m bench --only steady`"
        ),
        "nodes": wl.nodes,
        "steps": steps,
        "metrics": _METRICS,
        "ratios": True,
        "reference": REFERENCE,
        "rows": rows,
    }
