"""``python -m bench``: run the workloads, write JSON and markdown, print the tables.

python -m bench                    # everything, full sizes (several minutes)
python -m bench --quick            # tiny sizes, one repeat: a smoke test
python -m bench --only chain,wide  # some workloads (a family or an exact name)
python -m bench --repeats 3        # fewer repeats than the defaults
python -m bench --only service     # the HTTP service under load (bench/http_service.py)
python -m bench --only steady      # training steps in a row (bench/steady.py; not in the full run)

Progress bars go to stderr when it is a terminal (``--quiet``: none).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from . import _progress
from . import http_service as _http
from .harness import OK, interleave, result_rows
from .report import evaluate_targets, markdown
from .service import run_concurrency, run_fixedcost, run_looplag, run_memory
from .steady import run_steady, steady_workloads
from .systems import REFERENCE, System, all_systems
from .threads import ENV_VARS
from .workloads import GraphWorkload, chain, mlp, wide

__all__ = ["main", "FULL", "QUICK"]

FAMILIES = (
    "chain",
    "wide",
    "mlp",
    "looplag",
    "concurrency",
    "fixedcost",
    "memory",
    "service",
    "steady",
)

#: sizes and repeats of the full run
FULL: dict[str, Any] = {
    # more rounds than the mlp's: on this shared machine the same forward
    # (the four aengine rows record the same graph) varied by up to 1.45x
    # between rows of one 7-round run
    "chain": [(3_000, "chain-small", 21), (30_000, "chain-large", 11)],
    "wide": [(10_000, "wide", 11)],
    "mlp": [((1024, 4, 256), "mlp-large", 7), ((128, 4, 256), "mlp-small", 15)],
    "looplag": {"nodes": 30_000, "repeats": 5},
    "concurrency": {"requests": 16, "width": 512, "depth": 3, "batch": 64, "repeats": 7},
    "fixedcost": {"calls": 2000, "repeats": 7},
    "memory": {"depth": 64, "width": 256, "batch": 64, "repeats": 2},
    # 32 clients, 1,000 requests per system and round, 3 rounds (bench/http_service.py)
    "service": _http.FULL,
    # 6 steps per trial (step 1, then 5 later ones); about 100 s on 2 cores, so
    # only with --only steady (default: False keeps it out of the full run)
    "steady": {
        "steps": 6,
        "default": False,
        "workloads": [
            ("chain", 30_000, 5),
            ("wide", 10_000, 5),
            ("mlp", (128, 4, 256), 7),
            ("mlp", (1024, 4, 256), 5),
        ],
    },
    "pause": 0.1,
}

#: tiny sizes, one repeat: every adapter and workload in seconds (CI smoke)
QUICK: dict[str, Any] = {
    "chain": [(30, "chain-small", 1), (300, "chain-large", 1)],
    "wide": [(50, "wide", 1)],
    "mlp": [((32, 4, 16), "mlp-large", 1), ((8, 4, 16), "mlp-small", 1)],
    "looplag": {"nodes": 300, "repeats": 1},
    "concurrency": {"requests": 4, "width": 32, "depth": 3, "batch": 8, "repeats": 1},
    "fixedcost": {"calls": 20, "repeats": 1},
    "memory": {"depth": 4, "width": 32, "batch": 8, "repeats": 1},
    "service": _http.QUICK,
    "steady": {
        "steps": 3,
        "default": True,
        "workloads": [("chain", 300, 1), ("wide", 50, 1), ("mlp", (8, 4, 16), 1)],
    },
    "pause": 0.0,
}


def run_graph(
    wl: GraphWorkload,
    systems: list[System],
    repeats: int,
    pause: float,
    log: Any,
) -> dict[str, Any]:
    """Time one graph workload on every available system; check gradients vs torch."""
    avail = [s for s in systems if s.available]
    with _progress.bar(len(avail) * (repeats + 1), f"  {wl.name}", unit="trial") as bar:

        def trial(s: System) -> dict[str, Any]:
            bar.set_postfix_str(s.name)
            try:
                return s.trial(wl)
            finally:
                bar.update()

        runs = interleave({s.name: partial(trial, s) for s in avail}, repeats, pause, 1, log)
    keys = ["forward", "backward"] if wl.timing == "split" else ["step"]
    rows = result_rows(systems, runs, REFERENCE, wl, keys)
    metrics = [{"key": k, "unit": "ms", "scale": 1e3, "better": "lower"} for k in keys]
    return {
        "name": wl.name,
        "family": wl.family,
        "description": wl.description,
        "nodes": wl.nodes,
        "metrics": metrics,
        "ratios": True,
        "reference": REFERENCE,
        "rows": rows,
    }


def _allocator() -> str:
    """The malloc settings the process started with (NOTE [Fresh pages], bench/service.py)."""
    keys = sorted(k for k in os.environ if k == "GLIBC_TUNABLES" or k.startswith("MALLOC_"))
    if not keys:
        return "the C library's defaults"
    return ", ".join(f"{k}={os.environ[k]}" for k in keys)


def _machine() -> str:
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {model}, {platform.system()} {platform.release()}"


def _versions(systems: list[System]) -> str:
    import numpy as np

    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    for s in systems:
        if s.available and s.module not in ("numpy",) and s.version:
            entry = f"{s.module} {s.version}"
            if entry not in parts:
                parts.append(entry)
    for mod in ("anyio", "trio"):
        try:
            from importlib.metadata import version

            parts.append(f"{mod} {version(mod)}")
        except Exception:
            pass
    return ", ".join(parts)


def _commit() -> str:
    """The repository's HEAD (and whether the tree had changes), for the record."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "aengine", "adapters"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + (" with uncommitted changes in aengine/" if dirty else "")


def _threads(requested: int | None) -> str:
    import os

    parts = [f"{v}={os.environ[v]}" for v in ENV_VARS if v in os.environ]
    try:
        import torch

        parts.append(f"torch.get_num_threads()={torch.get_num_threads()}")
    except Exception:
        pass
    head = "library defaults" if requested is None else f"--threads {requested}"
    return head + (f" ({', '.join(parts)})" if parts else "")


def _wanted(only: str | None, family: str, name: str) -> bool:
    if not only:
        return True
    picks = {p.strip() for p in only.split(",") if p.strip()}
    return family in picks or name in picks


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the process exit status (1 if a check failed)."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (smoke test)")
    p.add_argument("--only", help=f"comma-separated families or names: {', '.join(FAMILIES)}")
    p.add_argument("--repeats", type=int, help="override every workload's repeat count")
    p.add_argument("--pause", type=float, help="seconds of pause before each trial")
    p.add_argument(
        "--threads",
        type=int,
        help="BLAS/OpenMP threads for every system (numpy, torch); default: the libraries' own "
        "(the service workload's servers: 1)",
    )
    p.add_argument("--out", default=str(Path(__file__).parent / "results"), help="output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    args = p.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    pause = cfg["pause"] if args.pause is None else args.pause

    def reps(n: int) -> int:
        return n if args.repeats is None else max(1, args.repeats)

    _progress.enable(not args.quiet)
    log = _progress.write

    if args.threads is not None:
        import os

        for var in ENV_VARS:  # effective only if numpy is not imported yet
            os.environ[var] = str(args.threads)
    systems = all_systems()
    if args.threads is not None and any(s.name == REFERENCE and s.available for s in systems):
        import torch

        torch.set_num_threads(args.threads)
    _freeze_heap()
    t_start = time.perf_counter()
    workloads: list[dict[str, Any]] = []
    graph: list[tuple[GraphWorkload, str, int]] = []
    for nodes, role, n in cfg["chain"]:
        graph.append((chain(nodes), role, n))
    for branches, role, n in cfg["wide"]:
        graph.append((wide(branches), role, n))
    for (width, depth, batch), role, n in cfg["mlp"]:
        graph.append((mlp(width, depth, batch), role, n))
    special = [
        ("looplag", lambda c: run_looplag(c["nodes"], reps(c["repeats"]), pause, log)),
        (
            "concurrency",
            lambda c: run_concurrency(
                c["requests"], c["width"], c["depth"], c["batch"], reps(c["repeats"]), pause, log
            ),
        ),
        ("fixedcost", lambda c: run_fixedcost(c["calls"], reps(c["repeats"]), pause, log)),
        (
            "memory",
            lambda c: run_memory(c["depth"], c["width"], c["batch"], reps(c["repeats"]), log),
        ),
        (
            "service",
            lambda c: _http.run_http_service(c, log, args.threads, rounds=reps(c["rounds"])),
        ),
    ]
    graph = [g for g in graph if _wanted(args.only, g[0].family, g[0].name)]
    special = [sp for sp in special if _wanted(args.only, sp[0], sp[0])]
    steady = [
        (wl, n)
        for wl, n in steady_workloads(cfg["steady"]["workloads"])
        if (args.only or cfg["steady"]["default"])
        and _wanted(args.only, "steady", f"steady-{wl.name}")
    ]
    overall = _progress.bar(
        len(graph) + len(special) + len(steady), "bench", unit="workload", leave=True
    )
    for wl, role, n in graph:
        overall.set_postfix_str(wl.name)
        log(f"[bench] {wl.name}: {wl.description} ({reps(n)} repeats)")
        rec = run_graph(wl, systems, reps(n), pause, log)
        rec["role"] = role
        workloads.append(rec)
        overall.update()
    for family, fn in special:
        overall.set_postfix_str(family)
        log(f"[bench] {family}")
        rec = fn(cfg[family])
        rec["role"] = family
        workloads.append(rec)
        overall.update()
    for wl, n in steady:
        name = f"steady-{wl.name}"
        overall.set_postfix_str(name)
        log(f"[bench] {name}: {cfg['steady']['steps']} steps per trial ({reps(n)} repeats)")
        rec = run_steady(wl, systems, cfg["steady"]["steps"], reps(n), pause, log)
        rec["role"] = name
        workloads.append(rec)
        overall.update()
    overall.close()

    cmd = "python -m bench" + ("" if argv is None else " " + " ".join(argv)).rstrip()
    if argv is None:
        cmd = "python -m bench " + " ".join(sys.argv[1:])
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": _machine(),
            "versions": _versions(systems),
            "command": cmd.strip(),
            "commit": _commit(),
            "quick": bool(args.quick),
            "repeats": "per workload (see FULL in bench/cli.py)"
            if args.repeats is None and not args.quick
            else (args.repeats or 1),
            "pause": pause,
            "threads": _threads(args.threads),
            "allocator": _allocator(),
            "seconds": None,
        },
        "systems": {
            s.name: {"available": s.available, "reason": s.reason, "version": s.version}
            for s in systems
        },
        "workloads": workloads,
    }
    results["targets"] = evaluate_targets(results)
    results["meta"]["seconds"] = round(time.perf_counter() - t_start, 1)
    text = markdown(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=1, default=_jsonable))
    (out / "latest.md").write_text(text)
    print(text)
    log(f"[bench] done in {results['meta']['seconds']} s; wrote {out / 'latest.json'}")
    failed = [
        (wl["name"], r["system"], r["status"])
        for wl in workloads
        for r in wl["rows"]
        # "ok", "ok (reference: ...)" (a row with no gradient to check), or not run
        if not r["status"].startswith((OK, "unavailable", "not measured"))
    ]
    for name, system, status in failed:
        log(f"[bench] CHECK {name} / {system}: {status}")
    return 1 if failed else 0


def _freeze_heap() -> None:
    """Move every object alive after the imports out of the collector's sight.

    torch's import leaves a heap on which one ``gc.collect()`` takes
    0.1-0.5 s; the collection before each trial (NOTE [Interleaving]) then
    only walks what the benchmarks themselves allocated.
    """
    import anyio
    import anyio.to_thread  # noqa: F401

    for backend in ("asyncio", "trio"):
        try:
            anyio.run(anyio.sleep, 0, backend=backend)  # import the backend's machinery
        except Exception:
            pass
    gc.collect()
    gc.freeze()


def _jsonable(x: Any) -> Any:
    try:
        import numpy as np

        if isinstance(x, np.ndarray):
            return x.tolist()
        if isinstance(x, np.generic):
            return x.item()
    except Exception:
        pass
    return str(x)
