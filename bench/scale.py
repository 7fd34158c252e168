"""``python -m bench.scale``: the ``service`` workload at one and two processes.

The same load as bench/http_service.py (32 clients in 2 load-generator
processes POST /grad, a prober GETs /health every 10 ms; one BLAS thread per
server process), against the same app served by:

- one uvicorn process, and two (``uvicorn --workers 2``: one listening
  socket, the kernel spreading connections over the workers);
- Ray Serve with two replicas behind its HTTP proxy (a local cluster on
  127.0.0.1; examples/serve_ray.py's deployment, with the bench's app);
- torch in anyio's threads, in one and two uvicorn workers.

Measured per system: requests per second, POST p99, /health p99, the worst
loop lag seen by a few probes of the processes, the CPU (cores) of the whole
server process tree (uvicorn's workers; for Serve also the proxy, the
controller and Ray's own processes), and the resident memory of a serving
process (the largest ones under the server: the workers, the replicas).
Targets (the scaling issue, 2 cores): two processes at least 1.4x one
process's throughput with /health p99 at most 10 ms; two aengine workers at
least torch's two.

    python -m bench.scale                  # every system, 3 rounds
    python -m bench.scale --quick          # a smoke test
    python -m bench.scale --rounds 1 --only "aengine, 1 process" "aengine, 2 uvicorn workers"
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any

from .harness import OK, interleave
from .http_service import (
    FULL,
    QUICK,
    _check_body,
    _have,
    _reference,
    _rows,
    _trial,
    target_lines,
    uvicorn_command,
)
from .report import workload_table

__all__ = ["main", "run_scale", "SYSTEMS", "TARGETS"]

ONE = "aengine, 1 process"
TWO = "aengine, 2 uvicorn workers"
SERVE = "aengine, 2 Ray Serve replicas"
TORCH_ONE = "torch in threads, 1 process"
TORCH_TWO = "torch in threads, 2 uvicorn workers"


def _ray_command(target: str, port: int, replicas: int = 2) -> list[str]:
    return [sys.executable, "-m", "bench._http_ray", target, str(port), str(replicas)]


#: system -> (app factory, server command, serving processes)
SYSTEMS: dict[str, tuple[str, Any, int]] = {
    ONE: ("bench._http_apps:aengine_example", uvicorn_command, 1),
    TWO: ("bench._http_apps:aengine_example", partial(uvicorn_command, processes=2), 2),
    SERVE: ("bench._http_apps:aengine_example", _ray_command, 2),
    TORCH_ONE: ("bench._http_apps:torch_threads", uvicorn_command, 1),
    TORCH_TWO: ("bench._http_apps:torch_threads", partial(uvicorn_command, processes=2), 2),
}

#: (what, system, reference system or None, metric, limit, higher is better)
TARGETS: list[tuple[str, str, str | None, str, float, bool]] = [
    ("2 uvicorn workers vs 1 process, throughput", TWO, ONE, "throughput", 1.4, True),
    ("2 Ray Serve replicas vs 1 process, throughput", SERVE, ONE, "throughput", 1.4, True),
    ("2 uvicorn workers: /health p99 (ms)", TWO, None, "health_p99", 10.0, False),
    ("2 Ray Serve replicas: /health p99 (ms)", SERVE, None, "health_p99", 10.0, False),
    ("2 aengine workers vs torch's 2, throughput", TWO, TORCH_TWO, "throughput", 1.0, True),
]


def _unavailable(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for mod in ("uvicorn", "httpx", "fastapi"):
        why = _have(mod)
        if why:
            return dict.fromkeys(names, why)
    for name in names:
        if "torch" in name and _have("torch"):
            out[name] = _have("torch")
        if "Ray" in name and _have("ray.serve"):
            out[name] = _have("ray.serve")
    return out


def run_scale(
    cfg: dict[str, Any], log: Any, systems: list[str] | None = None, rounds: int | None = None
) -> dict[str, Any]:
    """The workload record (bench/report.py)."""
    names = list(SYSTEMS) if systems is None else systems
    unavailable = _unavailable(names)
    body = _check_body()
    ref = _reference(body)
    trials = {
        n: partial(_trial, n, SYSTEMS[n][0], cfg, 1, body, ref, SYSTEMS[n][1], SYSTEMS[n][2])
        for n in names
        if n not in unavailable
    }
    runs = interleave(trials, rounds or cfg["rounds"], pause=0.0, warmup=0, log=log)
    checks = {n: r["extras"].get("check", OK) for n, r in runs.items()}
    ms = {"unit": "ms", "scale": 1e3, "better": "lower"}
    return {
        "name": "scale",
        "family": "service",
        "description": (
            f"the service workload ({cfg['clients']} clients, POST /grad {cfg['requests']} "
            "times, /health probed every 10 ms; one BLAS thread per server process) at one "
            "and two serving processes; server_cores: the CPU of the server's whole process "
            "tree per second; server_rss_mb: resident memory of a serving process"
        ),
        "metrics": [
            {"key": "throughput", "unit": "req/s", "scale": 1.0, "better": "higher"},
            {"key": "post_p99", **ms},
            {"key": "health_p99", **ms, "ratio": False},
            {"key": "lag_worst", **ms, "ratio": False},
            {
                "key": "server_cores",
                "unit": "cores",
                "scale": 1.0,
                "better": "lower",
                "ratio": False,
            },
        ],
        "ratios": True,
        "reference": ONE,
        "references": [ONE, TORCH_TWO],
        "subject": TWO,
        "rows": _rows(names, runs, checks, unavailable),
    }


def targets(rec: dict[str, Any]) -> list[str]:
    """The targets as markdown table lines (medians; ratios within the run)."""
    return target_lines(rec, TARGETS)


def memory(rec: dict[str, Any]) -> list[str]:
    """The resident memory of a serving process per system (MB)."""
    out = ["| system | MB per serving process |", "|---|---:|"]
    for row in rec["rows"]:
        rss = row.get("metrics", {}).get("server_rss_mb", {}).get("median")
        out.append(f"| {row['system']} | {'-' if rss is None else f'{rss:.0f}'} |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="4 clients, 40 requests (a smoke test)")
    p.add_argument("--rounds", type=int, help="trials per system, interleaved (default 3)")
    p.add_argument("--requests", type=int, help="POST /grad requests per system and round")
    p.add_argument("--only", nargs="+", choices=list(SYSTEMS), help="some systems only")
    args = p.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.requests:
        cfg["requests"] = args.requests
    rec = run_scale(cfg, lambda m: print(m, file=sys.stderr), args.only, args.rounds)
    print(workload_table(rec))
    print()
    print("\n".join(targets(rec)))
    print()
    print("\n".join(memory(rec)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
