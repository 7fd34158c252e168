"""``python -m bench.ab REV``: another revision of aengine against this one, in one process.

Hot-path changes move timings by a few percent, and on a shared machine the
speed of the same trial drifts by more than that from one minute to the
next; two benchmark processes run one after the other compare two moments
as much as two versions.  This tool imports revision ``REV`` (any git
revision: a commit, a branch, ``HEAD~1``) as a second package beside the
working tree's aengine and runs their trials interleaved, A then B then B
then A, so both see the same moments.  It reports medians and minima of
the graph workloads' forward and backward (``ae.sync.grad``), or of one
gradient call on a 1-node graph (``fixedcost``), and the ratio B/A (B: the
working tree; below 1: faster).

    python -m bench.ab HEAD                 # uncommitted changes against HEAD
    python -m bench.ab c94e0fb --torch      # with torch imported, as in python -m bench
    python -m bench.ab HEAD~3 --only chain-3k --rounds 41
    python -m bench.ab HEAD --only fixedcost   # ae.sync.grad and await ae.grad per call

``--torch`` imports torch first: its objects make every full collection of
the garbage collector longer, as in the benchmark's process.  Pair it with
``python -m bench.profile --bytecodes``, which counts the interpreter's work
but not numpy's or the C-level cost of what the bytecodes call.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .service import fixedcost_async, fixedcost_sync
from .systems import AengineSync
from .workloads import GraphWorkload, chain, mlp, wide

__all__ = ["main", "load_revision", "compare", "graph_trial", "fixedcost_trial"]

ROOT = Path(__file__).resolve().parent.parent
#: gradient calls per fixed-cost trial
CALLS = 500
_ABSOLUTE = re.compile(r"\baengine(?=[.\s])")


def load_revision(rev: str, into: Path) -> Any:
    """Import aengine as it is at git revision ``rev`` under another name; return it.

    The files of ``aengine/`` and ``adapters/`` at ``rev`` are written under
    ``into/aengine_rev`` (``adapters`` as its subpackage, as installed), and
    their absolute references to ``aengine`` renamed, so the two versions
    share no module.
    """
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "aengine", "adapters"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if archive.returncode:
        raise SystemExit(f"git archive {rev}: {archive.stderr.decode().strip()}")
    src = into / "src"
    src.mkdir()
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pkg = into / "aengine_rev"
    (src / "aengine").rename(pkg)
    (src / "adapters").rename(pkg / "adapters")
    for path in pkg.rglob("*.py"):
        text = path.read_text()
        path.write_text(_ABSOLUTE.sub("aengine_rev", text))
    sys.path.insert(0, str(into))
    try:  # later imports inside the package go through its __path__
        return importlib.import_module("aengine_rev")
    finally:
        sys.path.remove(str(into))


Trial = Callable[[], dict[str, float]]


def graph_trial(wl: GraphWorkload) -> Callable[[Any], Trial]:
    """The benchmark's own "aengine sync" trial of ``wl``: forward and backward, in seconds."""

    def make(ae: Any) -> Trial:
        system = AengineSync(ae)

        def trial() -> dict[str, float]:
            gc.collect()  # as the benchmark's settle() before every trial
            res = system.trial(wl)
            return {"forward": res["forward"], "backward": res["backward"]}

        return trial

    return make


def fixedcost_trial(ae: Any) -> Trial:
    """The benchmark's fixed-cost calls: one gradient on a 1-node graph, per call."""
    backends = ["asyncio"] + (["trio"] if importlib.util.find_spec("trio") else [])

    def trial() -> dict[str, float]:
        out = {"ae.sync.grad": fixedcost_sync(ae, CALLS)["per_call"]}
        for backend in backends:
            out[f"await ae.grad ({backend})"] = fixedcost_async(ae, backend, CALLS)["per_call"]
        return out

    return trial


#: the workloads, by name: (trial maker, rounds)
WORKLOADS: dict[str, tuple[Callable[[], Callable[[Any], Trial]], int]] = {
    "chain-3k": (lambda: graph_trial(chain(3_000)), 31),
    "wide-1k": (lambda: graph_trial(wide(1_000)), 31),
    "chain-30k": (lambda: graph_trial(chain(30_000)), 9),
    "wide-10k": (lambda: graph_trial(wide(10_000)), 9),
    "mlp-128": (lambda: graph_trial(mlp(128, 4, 256)), 31),
    "mlp-1024": (lambda: graph_trial(mlp(1024, 4, 256)), 15),
    "fixedcost": (lambda: fixedcost_trial, 15),
}


def compare(a: Any, b: Any, make: Callable[[Any], Trial], rounds: int) -> dict[str, Any]:
    """Interleaved trials of two aengine modules: per part, medians, minima, B/A."""
    trials = {id(m): make(m) for m in (a, b)}
    samples: dict[int, list[dict[str, float]]] = {id(a): [], id(b): []}
    for m in (a, b):  # warm-up: imports, caches
        trials[id(m)]()
    for r in range(rounds):
        for m in (a, b) if r % 2 else (b, a):
            samples[id(m)].append(trials[id(m)]())
    out: dict[str, Any] = {}
    for part in samples[id(a)][0]:
        sa = [s[part] for s in samples[id(a)]]
        sb = [s[part] for s in samples[id(b)]]
        ma, mb = statistics.median(sa), statistics.median(sb)
        out[part] = {"A": ma, "B": mb, "ratio": mb / ma, "min_ratio": min(sb) / min(sa)}
    return out


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:8.2f} us"


def main(argv: list[str] | None = None) -> None:
    """Print B/A ratios of the working tree (B) against revision REV (A)."""
    p = argparse.ArgumentParser(
        prog="python -m bench.ab", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("rev", help="git revision to compare with (A)")
    p.add_argument("--only", default="chain-3k,wide-1k,wide-10k", help="workloads, comma-separated")
    p.add_argument(
        "--rounds", type=int, default=0, help="trials per system (default: per workload)"
    )
    p.add_argument("--torch", action="store_true", help="import torch first (a larger heap)")
    p.add_argument(
        "--no-plans",
        action="store_true",
        help="backward plans off in both (the general path: a structure's first backward)",
    )
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; choose from {sorted(WORKLOADS)}")
    if args.torch:
        import torch  # noqa: F401

    import aengine as b

    with tempfile.TemporaryDirectory() as tmp:
        a = load_revision(args.rev, Path(tmp))
        print(f"A: {args.rev} ({a.__file__})\nB: working tree ({b.__file__})")
        if args.no_plans:
            for m in (a, b):
                plans = getattr(getattr(m.core, "_plan", None), "PLANS", None)
                if plans is not None:  # (a revision before plans has none)
                    plans.enabled = False
            print("backward plans off in A and B")
        print(f"{'workload':10s} {'part':24s} {'A median':>11s} {'B median':>11s}   B/A  of minima")
        for name in names:
            make, rounds = WORKLOADS[name]
            for part, r in compare(a, b, make(), args.rounds or rounds).items():
                print(
                    f"{name:10s} {part:24s} {_fmt(r['A'])} {_fmt(r['B'])}"
                    f"  {r['ratio']:.3f}  {r['min_ratio']:.3f}"
                )


if __name__ == "__main__":
    main()
