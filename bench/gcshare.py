"""``python -m bench.gcshare``: the cyclic garbage collector's share of recording a graph.

The forward of chain-30k (``bench.workloads.chain``) timed with the
collector enabled and disabled, trials alternating, medians over the
rounds.  With ``--torch`` torch is imported first: a larger heap, which
every full collection walks.  Only this tool disables the collector, for
the length of one timed forward.

    python -m bench.gcshare
    python -m bench.gcshare --torch --rounds 15
"""

from __future__ import annotations

import argparse
import gc
import statistics
from time import perf_counter

from .workloads import chain

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.gcshare")
    p.add_argument("--nodes", type=int, default=30_000)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--torch", action="store_true", help="import torch first (a larger heap)")
    args = p.parse_args(argv)
    if args.torch:
        import torch  # noqa: F401  (its objects are the point: a larger heap)
    import aengine as ae

    wl = chain(args.nodes)
    x = ae.tensor(wl.params[0], requires_grad=True)
    times: dict[bool, list[float]] = {True: [], False: []}
    wl.fn(ae, [], x)  # warm-up
    for r in range(args.rounds):
        for enabled in (True, False) if r % 2 == 0 else (False, True):
            if not enabled:
                gc.disable()
            try:
                t0 = perf_counter()
                loss = wl.fn(ae, [], x)
                times[enabled].append(perf_counter() - t0)
            finally:
                gc.enable()
            del loss
    on, off = (statistics.median(times[k]) for k in (True, False))
    print(
        f"forward of {wl.name} ({len(gc.get_objects())} objects tracked): "
        f"collector on {on * 1e3:.1f} ms, off {off * 1e3:.1f} ms, its share {1 - off / on:.0%}"
    )


if __name__ == "__main__":
    main()
