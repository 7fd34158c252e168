"""``python -m bench.plans``: backward plans on against off, steps in a row, one process.

Each trial clears the plan cache and runs ``--steps`` steps (forward, then
``ae.sync.grad``) of one workload with plans on or off; trials of the two
alternate (on first in even rounds, off first in odd ones), so both see
the same machine.  Reported per workload and setting: the median over the
rounds of step 1 (the structure met for the first time: what plans must
not slow down), of the step that builds the plan (step ``PLANS.build_at``,
3 by default; the steps before it run the general path) and of the
median of the steps after it (run by the plan), backward only, and the
on/off ratios.  The
gradients of every step are checked equal bit for bit between the two.

    python -m bench.plans                       # chain-30k and wide-10k, 7 rounds
    python -m bench.plans --only chain-3k --rounds 21
"""

from __future__ import annotations

import argparse
import statistics
from time import perf_counter
from typing import Any

import numpy as np

from .workloads import GraphWorkload, chain, wide

__all__ = ["main", "plan_bytes", "trial"]

WORKLOADS = {
    "chain-3k": lambda: chain(3_000),
    "chain-30k": lambda: chain(30_000),
    "wide-1k": lambda: wide(1_000),
    "wide-10k": lambda: wide(10_000),
}


def trial(wl: GraphWorkload, steps: int, plans: bool) -> tuple[list[float], list[Any]]:
    """Backward times of ``steps`` steps, plans on or off, and the last gradients."""
    import aengine as ae

    # (imported here, as aengine: --help needs neither)
    from aengine.core._plan import PLANS

    PLANS.enabled = plans
    PLANS.cache.clear()
    ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
    cs = [ae.as_tensor(c) for c in wl.consts]
    times: list[float] = []
    grads: list[Any] = []
    try:
        for _ in range(steps):
            loss = wl.fn(ae, cs, *ps)
            t0 = perf_counter()
            grads = ae.sync.grad(loss, ps)
            times.append(perf_counter() - t0)
            del loss
    finally:
        PLANS.enabled = True
    return times, [g.numpy() for g in grads]


def plan_bytes(wl: GraphWorkload) -> tuple[int, float]:
    """(nodes, bytes per node) of the plan a backward of ``wl`` builds (tracemalloc)."""
    import gc
    import tracemalloc

    import aengine as ae
    from aengine.core._plan import PLANS

    PLANS.cache.clear()
    ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
    cs = [ae.as_tensor(c) for c in wl.consts]
    for _ in range(PLANS.build_at - 1):  # seen before
        ae.sync.grad(wl.fn(ae, cs, *ps), ps)
    loss = wl.fn(ae, cs, *ps)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        ae.sync.grad(loss, ps)  # builds the plan
        del loss
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    nodes = sum(len(e[0].types) for e in PLANS.cache.entries.values() if e[0] is not None)
    PLANS.cache.clear()
    return nodes, grown / max(nodes, 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.plans")
    p.add_argument("--only", default="chain-30k,wide-10k", help=", ".join(WORKLOADS))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=7)
    args = p.parse_args(argv)
    from aengine.core._plan import PLANS  # (imported here, as aengine: --help needs neither)

    build = PLANS.build_at  # the step that builds the plan (1-based)
    if args.steps <= build:
        raise SystemExit(f"--steps must be at least {build + 1} (step {build} builds the plan)")
    heads = [f"step {i}" for i in range(1, build + 1)] + [f"steps {build + 1}+"]
    print(f"{'workload':10} {'plans':5} " + " ".join(f"{h:>10}" for h in heads))
    for name in args.only.split(","):
        if name not in WORKLOADS:
            raise SystemExit(f"unknown workload {name!r}; use one of {', '.join(WORKLOADS)}")
        wl = WORKLOADS[name]()
        rows: dict[bool, list[list[float]]] = {True: [], False: []}
        trial(wl, args.steps, True)  # warm-up: imports, caches
        for r in range(args.rounds):
            got = {}
            for plans in (True, False) if r % 2 == 0 else (False, True):
                ts, got[plans] = trial(wl, args.steps, plans)
                rows[plans].append([*ts[:build], statistics.median(ts[build:])])
            for a, b in zip(got[True], got[False], strict=True):
                if not np.array_equal(a, b):
                    raise SystemExit(f"{name}: the gradients differ with and without plans")
        med = {k: [statistics.median(col) for col in zip(*v, strict=True)] for k, v in rows.items()}
        for plans in (False, True):
            cells = " ".join(f"{t * 1e3:8.2f}ms" for t in med[plans])
            print(f"{name:10} {'on' if plans else 'off':5} {cells}")
        ratios = " ".join(f"{a / b:10.3f}" for a, b in zip(med[True], med[False], strict=True))
        print(f"{name:10} {'on/off':5} {ratios}")
        nodes, per_node = plan_bytes(wl)
        print(f"{name:10} plan: {nodes} nodes, {per_node:.0f} bytes per node")


if __name__ == "__main__":
    main()
