"""``python -m bench.gcshare``: the cyclic garbage collector's share of recording a graph.

The forward of chain-30k (``bench.workloads.chain``; ``--wide N``: of the
wide graph of N branches) timed with the
collector enabled and disabled, trials alternating, medians over the
rounds.  With ``--torch`` torch is imported first: a larger heap, which
every full collection walks.  Only this tool disables the collector, for
the length of one timed forward (and of one census).

The census line counts, by type, the objects the collector tracks that one
more forward leaves alive (the recorded graph and the tensors it saved),
per recorded node: the figure that a cheaper layout of the graph lowers.

    python -m bench.gcshare
    python -m bench.gcshare --torch --rounds 15
    python -m bench.gcshare --wide 10000
"""

from __future__ import annotations

import argparse
import gc
import statistics
from collections import Counter
from collections.abc import Callable
from time import perf_counter

from .workloads import chain, wide

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.gcshare")
    p.add_argument("--nodes", type=int, default=30_000)
    p.add_argument("--wide", type=int, default=0, help="the wide workload with this many branches")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--torch", action="store_true", help="import torch first (a larger heap)")
    args = p.parse_args(argv)
    if args.torch:
        import torch  # noqa: F401  (its objects are the point: a larger heap)
    import aengine as ae

    wl = wide(args.wide) if args.wide else chain(args.nodes)
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
    census = _census(lambda: wl.fn(ae, [], x), ae.Node)
    on, off = (statistics.median(times[k]) for k in (True, False))
    print(
        f"forward of {wl.name} ({len(gc.get_objects())} objects tracked): "
        f"collector on {on * 1e3:.1f} ms, off {off * 1e3:.1f} ms, its share {1 - off / on:.0%}"
    )
    print(census)


def _census(forward: Callable[[], object], node_type: type) -> str:
    """Tracked objects that one ``forward()`` leaves alive, per recorded node, by type."""
    gc.collect()
    gc.disable()
    try:
        alive = gc.get_objects()  # held, so that no id is reused by a new object
        before = {id(o) for o in alive}
        loss = forward()
        new = [o for o in gc.get_objects() if id(o) not in before]
        grown = Counter("nodes" if isinstance(o, node_type) else type(o).__name__ for o in new)
        nodes = grown["nodes"]
        del alive, new
    finally:
        gc.enable()
    del loss
    per = max(nodes, 1)
    parts = ", ".join(f"{name} {n / per:.2f}" for name, n in grown.most_common(5))
    return (
        f"tracked objects left per recorded node: {sum(grown.values()) / per:.2f} "
        f"({nodes} nodes; {parts})"
    )


if __name__ == "__main__":
    main()
