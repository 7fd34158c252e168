"""``python -m bench.profile``: where aengine's backward spends its time.

Profiles ``ae.sync.grad`` on the chain workload (30,000 nodes by default)
with cProfile and prints the top functions by own time; ``--async`` profiles
``await ae.grad`` under asyncio instead, ``--forward`` the graph recording.

    python -m bench.profile                  # backward, 30,000-node chain
    python -m bench.profile --nodes 3000 --top 15
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats

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
    args = p.parse_args(argv)
    wl = wide(args.wide) if args.wide else chain(args.nodes)
    x = ae.tensor(wl.params[0], requires_grad=True)
    wl.fn(ae, [], x)  # warm-up: imports, caches
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


if __name__ == "__main__":
    main()
