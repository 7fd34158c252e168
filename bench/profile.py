"""``python -m bench.profile``: where aengine's backward spends its time.

Profiles ``ae.sync.grad`` on the chain workload (30,000 nodes by default)
with cProfile and prints the top functions by own time; ``--async`` profiles
``await ae.grad`` under asyncio instead, ``--forward`` the graph recording.

    python -m bench.profile                  # backward, 30,000-node chain
    python -m bench.profile --nodes 3000 --top 15
    python -m bench.profile --bytecodes --nodes 300            # bytecodes per node
    python -m bench.profile --bytecodes --forward --wide 100   # of the forward

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
    import anyio

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
    args = p.parse_args(argv)
    wl = wide(args.wide) if args.wide else chain(args.nodes)
    x = ae.tensor(wl.params[0], requires_grad=True)
    ae.sync.grad(wl.fn(ae, [], x), [x])  # warm-up: imports, caches
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


def _bytecodes(ae: Any, wl: Any, x: Any, forward: bool, top: int) -> None:
    """Print the bytecodes executed per graph node, in total and by function."""
    counts: Counter[tuple[str, str]] = Counter()

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename.rsplit("/", 1)[-1], code.co_name)] += 1
        return tracer

    loss = None if forward else wl.fn(ae, [], x)
    sys.settrace(tracer)
    try:
        if forward:
            wl.fn(ae, [], x)
        else:
            ae.sync.grad(loss, [x])
    finally:
        sys.settrace(None)
    n = wl.nodes
    what = "forward" if forward else "ae.sync.grad"
    print(f"# {what} on {wl.name}: {sum(counts.values()) / n:.1f} bytecodes per node")
    for (file, fn), c in counts.most_common(top):
        print(f"{c / n:8.1f}  {file}:{fn}")


if __name__ == "__main__":
    main()
