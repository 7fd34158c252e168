"""``python -m bench.profile``: where aengine's backward spends its time.

Profiles ``ae.sync.grad`` on the chain workload (30,000 nodes by default)
with cProfile and prints the top functions by own time; ``--async`` profiles
``await ae.grad`` under asyncio instead, ``--forward`` the graph recording.

    python -m bench.profile                  # backward, 30,000-node chain
    python -m bench.profile --nodes 3000 --top 15
    python -m bench.profile --bytecodes --nodes 300            # bytecodes per node
    python -m bench.profile --bytecodes --forward --wide 100   # of the forward
    python -m bench.profile --fixedcost --bytecodes --async    # one await ae.grad, 1 node

``--fixedcost`` profiles the fixed cost instead: one call (``--bytecodes``)
or 20,000 calls (cProfile) of ``ae.sync.grad`` or ``await ae.grad``
(``--async``, ``--backend``) on the benchmark's 1-node graph.

``--bytecodes`` counts the Python bytecodes each function executes (per node
of the graph) instead of timing: a deterministic measure of the engine's
interpreter overhead, unaffected by the machine's noise, for comparing two
versions of the hot path (numpy's own work does not show in it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from collections import Counter
from types import FrameType
from typing import Any

from .workloads import chain, wide

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Print the cProfile table of one aengine backward (or forward)."""
    import aengine as ae

    p = argparse.ArgumentParser(prog="python -m bench.profile")
    p.add_argument("--nodes", type=int, default=30_000, help="chain length (nodes)")
    p.add_argument("--wide", type=int, default=0, help="profile wide with this many branches")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--async", dest="use_async", action="store_true", help="await ae.grad")
    p.add_argument("--forward", action="store_true", help="profile the forward instead")
    p.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumtime)")
    p.add_argument(
        "--bytecodes", action="store_true", help="count bytecodes per node instead of timing"
    )
    p.add_argument("--fixedcost", action="store_true", help="one gradient call on 1 node")
    p.add_argument("--backend", default="asyncio", help="anyio backend for --async")
    p.add_argument(
        "--plans",
        action="store_true",
        help="profile a backward run by a backward plan (built by an earlier backward "
        "of its structure); without it, plans are off: the general path",
    )
    args = p.parse_args(argv)
    # (imported here as aengine above: the tool's --help needs no aengine)
    from aengine.core._plan import PLANS

    PLANS.cache.clear()  # each run sees the same history of graph structures
    previous, PLANS.enabled = PLANS.enabled, args.plans
    try:
        _profile(ae, args)
    finally:
        PLANS.enabled = previous


def _profile(ae: Any, args: argparse.Namespace) -> None:
    import anyio  # (as in main: imported when profiling only)

    if args.fixedcost:
        _fixedcost(ae, args)
        return
    wl = wide(args.wide) if args.wide else chain(args.nodes)
    x = ae.tensor(wl.params[0], requires_grad=True)
    from aengine.core._plan import PLANS  # (as in main)

    for _ in range(PLANS.build_at if args.plans else 1):
        ae.sync.grad(wl.fn(ae, [], x), [x])  # warm-up: imports, caches, the plan
    if args.bytecodes:
        _bytecodes(ae, wl, x, args.forward, args.top)
        return
    prof = cProfile.Profile()
    if args.forward:
        prof.enable()
        loss = wl.fn(ae, [], x)
        prof.disable()
    else:
        loss = wl.fn(ae, [], x)
        if args.use_async:

            async def run() -> None:
                prof.enable()
                await ae.grad(loss, [x])
                prof.disable()

            anyio.run(run)
        else:
            prof.enable()
            ae.sync.grad(loss, [x])
            prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    what = "forward" if args.forward else ("await ae.grad" if args.use_async else "ae.sync.grad")
    print(f"# {what} on {wl.name} ({wl.nodes} nodes)")
    print(s.getvalue())


class _Counter:
    """A ``sys.settrace`` tracer counting the bytecodes each function executes."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == __file__:
            return None  # this tool's own lines (stopping the trace)
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            self.counts[(code.co_filename.rsplit("/", 1)[-1], code.co_name)] += 1
        return self

    def print(self, title: str, per: int, unit: str, top: int) -> None:
        print(f"# {title}: {sum(self.counts.values()) / per:.1f} bytecodes per {unit}")
        for (file, fn), c in self.counts.most_common(top):
            print(f"{c / per:8.1f}  {file}:{fn}")


def _bytecodes(ae: Any, wl: Any, x: Any, forward: bool, top: int) -> None:
    """Print the bytecodes executed per graph node, in total and by function."""
    tracer = _Counter()
    loss = None if forward else wl.fn(ae, [], x)
    sys.settrace(tracer)
    try:
        if forward:
            wl.fn(ae, [], x)
        else:
            ae.sync.grad(loss, [x])
    finally:
        sys.settrace(None)
    what = "forward" if forward else "ae.sync.grad"
    tracer.print(f"{what} on {wl.name}", wl.nodes, "node", top)


def _fixedcost(ae: Any, args: Any) -> None:
    """Profile ``ae.sync.grad`` / ``await ae.grad`` on the fixedcost workload's graph.

    The awaited call is the one between two yields to the loop (about 24 of
    25 calls in a loop of them, NOTE [The checkpoint of a short backward]):
    the engine's clock of the last yield is set so that it does not yield.
    """
    import anyio

    from aengine.runtime import _loop

    from .service import _FIXED_X

    x = ae.tensor(_FIXED_X, requires_grad=True)
    y = x.sum()
    calls = 1 if args.bytecodes else 20_000
    tracer = _Counter()
    prof = cProfile.Profile()

    def start() -> None:
        if args.bytecodes:
            sys.settrace(tracer)
        else:
            prof.enable()

    def stop() -> None:
        sys.settrace(None)
        prof.disable()

    if args.use_async:

        async def run() -> None:
            for _ in range(10):
                await ae.grad(y, [x], retain_graph=True)
            _loop._last_yield.set(float("inf"))  # no yield in the traced call
            start()
            for _ in range(calls):
                await ae.grad(y, [x], retain_graph=True)
            stop()

        anyio.run(run, backend=args.backend)
        what = f"await ae.grad ({args.backend})"
    else:
        for _ in range(10):
            ae.sync.grad(y, [x], retain_graph=True)
        start()
        for _ in range(calls):
            ae.sync.grad(y, [x], retain_graph=True)
        stop()
        what = "ae.sync.grad"
    if args.bytecodes:
        tracer.print(f"{what} on a 1-node graph", 1, "call", args.top)
        return
    s = io.StringIO()
    pstats.Stats(prof, stream=s).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    print(f"# {what} on a 1-node graph, {calls} calls")
    print(s.getvalue())


if __name__ == "__main__":
    main()
