"""The ``service`` workload: a real HTTP service under load, one server per system.

    python -m bench --only service          # as part of the benchmark report
    python -m bench.http_service [--quick]  # alone: its table on stdout

For each system in turn, a uvicorn server (bench/_http_apps.py) starts on
127.0.0.1 in a process of its own; load-generator processes
(bench/_http_load.py) run concurrent clients, each with its own HTTP
connection, that POST /grad a fixed number of times, while a prober process
GETs /health every 10 ms.  Measured per system: requests per second, the
POST latencies, the /health latencies under load and idle (the measuring
floor), the worst lateness of a 10 ms sleep on the server's loop (NOTE [Loop
lag of a server] in bench/_http_apps.py), and the CPU of the server and of
the load generators per request.  Each server's answer for a fixed batch is
checked against torch's.  Every process is killed when its trial ends.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import _progress
from ._http_apps import BATCH, EXAMPLE, SIZES, THREADS_ENV, init_params, torch_norm
from ._http_load import payloads
from .harness import OK, interleave
from .report import workload_table
from .service import _have, _rows
from .threads import ENV_VARS

__all__ = ["run_http_service", "main", "targets", "SYSTEMS", "FULL", "QUICK", "TARGETS"]

ROOT = Path(__file__).resolve().parent.parent
AENGINE = "aengine (FastAPI example, whole request in engine.run)"
HANDLER = "torch in the handler"
THREADED = "torch in anyio.to_thread"
FLOOR = "numpy by hand in anyio.to_thread (floor)"
#: system name -> uvicorn factory
SYSTEMS = {
    AENGINE: "bench._http_apps:aengine_example",
    HANDLER: "bench._http_apps:torch_handler",
    THREADED: "bench._http_apps:torch_threads",
    FLOOR: "bench._http_apps:numpy_threads",
}

#: full size: 32 clients in 2 processes, 1,000 requests, at most 60 s per system and round
FULL: dict[str, Any] = {
    "clients": 32,
    "procs": 2,
    "requests": 1000,
    "warmup": 2,
    "cap": 60.0,
    "idle": 1.0,
    "rounds": 3,
}
#: a smoke test of every row in seconds
QUICK: dict[str, Any] = {
    "clients": 4,
    "procs": 1,
    "requests": 40,
    "warmup": 1,
    "cap": 20.0,
    "idle": 0.3,
    "rounds": 1,
}

#: seconds a server may take to answer /health after it starts (imports torch)
START_TIMEOUT = 120.0
#: the fixed batch whose answer is checked, and the tolerance of the check
CHECK_SEED = 12345
CHECK_RTOL = 2e-3


class _Child:
    """A child process speaking the line protocol of bench/_http_load.py."""

    def __init__(self, tag: str, cmd: list[str], env: dict[str, str], events: queue.Queue) -> None:
        self.tag = tag
        self.err: IO[bytes] = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, args=(events,), daemon=True)
        self.reader.start()

    def _read(self, events: queue.Queue) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            events.put((self.tag, line.rstrip("\n")))
        events.put((self.tag, None))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        """The end of the child's stderr (read without moving the offset it writes at)."""
        size = os.fstat(self.err.fileno()).st_size
        data = os.pread(self.err.fileno(), 1500, max(0, size - 1500))
        return data.decode(errors="replace").strip()

    def stop(self) -> None:
        _stop(self.proc)
        self.reader.join(10)  # it reads to the end of the output, then returns
        if not self.reader.is_alive() and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.err.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:  # the child is gone: a broken pipe on the flush
            pass


def _collect(
    events: queue.Queue,
    children: dict[str, _Child],
    want: dict[str, str],
    timeout: float,
    on_progress: Callable[[int], None],
) -> dict[str, str]:
    """Wait for one line starting with ``want[tag]`` from each child; their rest."""
    got: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while len(got) < len(want):
        try:
            tag, line = events.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            late = sorted(set(want) - set(got))
            raise TimeoutError(f"no '{want[late[0]]}' from {late} in {timeout:.0f} s") from None
        if line is None:
            if tag in got:  # it said what was wanted, then exited (a load generator done first)
                continue
            raise RuntimeError(
                f"{tag} exited (rc {children[tag].proc.wait()}): {children[tag].tail()}"
            )
        if line.startswith("progress "):
            on_progress(int(line.split()[1]))
        elif tag in want and line.startswith(want[tag]):
            got[tag] = line[len(want[tag]) :].strip()
        else:
            raise RuntimeError(f"{tag} said {line[:200]!r}, expected {want.get(tag)!r}")
    return got


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process under it, from /proc (Linux); ``[pid]`` elsewhere."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                todo += [int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
            except OSError:
                pass
    return out


def _tree_cpu_seconds(pid: int) -> float | None:
    """The CPU seconds of ``pid`` and the processes under it (uvicorn's workers, Ray's)."""
    total = None
    for p in _descendants(pid):
        cpu = _cpu_seconds(p)
        if cpu is not None:
            total = (total or 0.0) + cpu
    return total


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of process ``pid`` (every thread) from /proc; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in ENV_VARS:
        env[var] = str(threads)
    env[THREADS_ENV] = str(threads)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def uvicorn_command(target: str, port: int, processes: int = 1) -> list[str]:
    """uvicorn serving the app factory ``target`` on ``port`` (``processes``: its workers)."""
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(ROOT),
        "--factory",
        target,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
        "--timeout-keep-alive",
        "300",
    ]
    return cmd if processes == 1 else [*cmd, "--workers", str(processes)]


def _start_server(
    target: str,
    threads: int,
    log_file: IO[bytes],
    command: Callable[[str, int], list[str]] = uvicorn_command,
) -> tuple[subprocess.Popen, str]:
    """A server of ``target`` on a free loopback port (``command``); waits until /health answers."""
    import httpx  # imported here: the workload is reported unavailable without it

    port = _free_port()
    cmd = command(target, port)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(threads), stdout=log_file, stderr=log_file)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            log_file.seek(0)
            tail = log_file.read()[-1500:].decode(errors="replace").strip()
            raise RuntimeError(f"the server exited (rc {proc.returncode}): {tail}")
        try:
            if httpx.get(url + "/health", timeout=2.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            _stop(proc)
            raise TimeoutError(f"the server did not answer /health in {START_TIMEOUT:.0f} s")
        time.sleep(0.1)


def _reference(body: bytes) -> float | None:
    """torch's answer for the request ``body`` (None without torch)."""
    if _have("torch"):  # a reason why torch does not import
        return None
    import torch

    params = [torch.from_numpy(p).requires_grad_() for p in init_params()]
    x = torch.tensor(json.loads(body)["x"], dtype=torch.float32)
    return torch_norm(torch, params, x)


def _check(norm: Any, ref: float | None) -> str:
    if not isinstance(norm, (int, float)):
        return f"FAILED: the answer has no number 'norm': {norm!r}"
    if ref is None:
        return "unchecked: torch unavailable"
    if not abs(norm - ref) <= CHECK_RTOL * abs(ref):
        return f"FAILED: norm {norm:.6g}, torch gives {ref:.6g}"
    return OK


def _spawn(url: str, cfg: dict[str, Any], events: queue.Queue) -> dict[str, _Child]:
    """The /health prober and the load generators, ``cfg["clients"]`` spread over them."""
    py = [sys.executable, "-m", "bench._http_load"]
    env = _env(1)
    children = {
        "probe": _Child("probe", [*py, "probe", url, f"--cap={cfg['cap'] + 60}"], env, events)
    }
    procs = max(1, min(cfg["procs"], cfg["clients"]))
    for i in range(procs):
        clients = cfg["clients"] // procs + (i < cfg["clients"] % procs)
        share = cfg["requests"] // procs + (i < cfg["requests"] % procs)
        cmd = [
            *py,
            "load",
            url,
            f"--clients={clients}",
            f"--requests={share}",
            f"--warmup={cfg['warmup']}",
            f"--cap={cfg['cap']}",
            f"--seed={i}",
            f"--every={max(1, min(25, share // 10))}",
        ]
        children[f"load{i}"] = _Child(f"load{i}", cmd, env, events)
    return children


def _trial(
    name: str,
    target: str,
    cfg: dict[str, Any],
    threads: int,
    check_body: bytes,
    ref: float | None,
    command: Callable[[str, int], list[str]] = uvicorn_command,
    servers: int = 1,
) -> dict[str, Any]:
    """One system: start its server, load it, measure, stop everything.

    ``command`` starts the server (uvicorn; its workers or Ray Serve's
    replicas for ``bench.scale``); with ``servers`` processes behind one
    address the loop-lag probe is read from several requests (each answered
    by one process) and its worst kept.
    """
    import httpx  # imported here: the workload is reported unavailable without it

    events: queue.Queue = queue.Queue()
    children: dict[str, _Child] = {}
    log_file = tempfile.TemporaryFile()
    server = None
    pbar = _progress.bar(cfg["requests"], f"  {name}", unit="req")

    def wait_for(want: dict[str, str], timeout: float) -> dict[str, str]:
        return _collect(events, children, want, timeout, pbar.update)

    try:
        pbar.set_postfix_str("starting")
        server, url = _start_server(target, threads, log_file, command)
        with httpx.Client(base_url=url, timeout=60.0) as c:
            r = c.post("/grad", content=check_body, headers={"content-type": "application/json"})
            norm = r.json().get("norm") if r.status_code == 200 else r.text[:200]
            children.update(_spawn(url, cfg, events))
            gens = [t for t in children if t.startswith("load")]
            pbar.set_postfix_str("warming up")
            wait_for(dict.fromkeys(children, "ready"), START_TIMEOUT)
            pbar.set_postfix_str("idle /health")
            children["probe"].send(f"idle {cfg['idle']}")
            idle = json.loads(wait_for({"probe": "idle"}, cfg["idle"] + 30)["probe"])
            for _ in range(4 * servers):
                c.get("/_bench/lag?reset=1", headers=FRESH).raise_for_status()
            cpu0 = _tree_cpu_seconds(server.pid)
            pbar.set_postfix_str("load")
            for t in ["probe", *gens]:
                children[t].send("go")
            res = wait_for(dict.fromkeys(gens, "result"), cfg["cap"] + 60)
            cpu1 = _tree_cpu_seconds(server.pid)
            rss = _worker_rss(server.pid, servers)
            pbar.update(max(0, cfg["requests"] - getattr(pbar, "n", cfg["requests"])))
            children["probe"].send("stop")
            probe = json.loads(wait_for({"probe": "result"}, 60)["probe"])
            lags = [c.get("/_bench/lag", headers=FRESH).json() for _ in range(4 * servers)]
            lag = max(lags, key=lambda x: -1.0 if x.get("worst") is None else x["worst"])
            stats = c.get("/stats").json()
    finally:
        pbar.close()
        for child in children.values():
            child.stop()
        if server is not None:
            _stop(server)
        log_file.close()
    server_cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    out = _summary([json.loads(v) for v in res.values()], probe, idle["latencies"], lag, server_cpu)
    out.update(check=_check(norm, ref), answer={"norm": norm, "torch": ref}, stats=stats)
    out["server_rss_mb"] = rss
    return out


#: a request on a connection of its own: with several processes behind one
#: socket (uvicorn's workers), each connection is one process's
FRESH = {"connection": "close"}


def _worker_rss(pid: int, servers: int) -> float | None:
    """The mean resident memory (MB) of the ``servers`` largest processes under ``pid``."""
    sizes = []
    for p in _descendants(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024)
        except OSError:
            pass
    if not sizes:
        return None
    top = sorted(sizes)[-servers:]
    return sum(top) / len(top)


def _summary(
    loads: list[dict[str, Any]],
    probe: dict[str, Any],
    idle: list[float],
    lag: dict[str, Any],
    server_cpu: float | None,
) -> dict[str, Any]:
    """A trial's metrics from what the children and the server reported."""
    errors = sum(x["errors"] for x in loads)
    if errors:
        first = next(x["first_error"] for x in loads if x["first_error"])
        raise RuntimeError(f"{errors} requests failed; the first: {first}")
    posts = np.concatenate([np.asarray(x["latencies"], dtype=float) for x in loads])
    wall = max(x["t_end"] for x in loads) - min(x["t_start"] for x in loads)
    done = len(posts)
    health = np.asarray(probe["latencies"], dtype=float)
    nan = float("nan")
    return {
        "throughput": done / wall,
        "post_p50": float(np.percentile(posts, 50)),
        "post_p99": float(np.percentile(posts, 99)),
        "health_p99": float(np.percentile(health, 99)) if health.size else nan,
        "health_idle_p99": float(np.percentile(idle, 99)) if idle else nan,
        "lag_worst": nan if lag.get("worst") is None else lag["worst"],
        "server_cpu": nan if server_cpu is None else server_cpu / done,
        "server_cores": nan if server_cpu is None else server_cpu / wall,
        "load_cpu": sum(x["cpu"] for x in loads) / done,
        "load": {
            "requests": done,
            "seconds": wall,
            "capped": any(x["capped"] for x in loads),
            "health_probes": int(health.size),
            "health_max_ms": float(health.max() * 1e3) if health.size else None,
            "prober_cpu": probe.get("cpu"),
            "loop_ticks": lag.get("ticks"),
            "loop_lag_p99": lag.get("p99"),
            "loadavg_after": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
    }


def _unavailable(names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for mod in ("uvicorn", "httpx", "fastapi"):
        why = _have(mod)
        if why:
            return dict.fromkeys(names, why)
    why = _have("torch")
    if why:
        out.update({n: why for n in names if n in (HANDLER, THREADED)})
    if AENGINE in names and not EXAMPLE.exists():
        out[AENGINE] = f"{EXAMPLE.relative_to(ROOT)} not found"
    return out


def run_http_service(
    cfg: dict[str, Any],
    log: Callable[[str], None],
    threads: int | None = None,
    systems: list[str] | None = None,
    rounds: int | None = None,
) -> dict[str, Any]:
    """The workload record (bench/report.py) of ``cfg`` (``FULL``, ``QUICK`` or alike).

    ``threads``: BLAS/OpenMP and torch threads of every server (default 1);
    ``systems``: some of ``SYSTEMS`` (default all); ``rounds`` overrides
    ``cfg["rounds"]`` (trials per system, interleaved).
    """
    names = list(SYSTEMS) if systems is None else systems
    n_threads = 1 if threads is None else max(1, threads)
    unavailable = _unavailable(names)
    check_body = _check_body()
    ref = _reference(check_body)
    trials: dict[str, Callable[[], dict[str, Any]]] = {
        n: partial(_trial, n, SYSTEMS[n], cfg, n_threads, check_body, ref)
        for n in names
        if n not in unavailable
    }
    runs = interleave(trials, rounds or cfg["rounds"], pause=0.0, warmup=0, log=log)
    checks = {n: r["extras"].get("check", OK) for n, r in runs.items()}
    rows = _rows(names, runs, checks, unavailable)
    ms = {"unit": "ms", "scale": 1e3, "better": "lower"}
    return {
        "name": "service",
        "family": "service",
        "description": (
            f"a uvicorn server per system (127.0.0.1, one process, {n_threads} BLAS/torch "
            f"thread{'s' if n_threads > 1 else ''}); {cfg['clients']} concurrent clients, each "
            f"with its own connection, in {cfg['procs']} load-generator process"
            f"{'es' if cfg['procs'] > 1 else ''}, POST /grad {cfg['requests']} times after "
            f"{cfg['warmup']} warm-up request{'s' if cfg['warmup'] > 1 else ''} each: a "
            f"{BATCH} x {SIZES[0]} batch through an MLP "
            f"{' -> '.join(map(str, SIZES))} (float32, tanh after the hidden layers), the "
            "gradient of the mean squared output w.r.t. its 6 "
            "parameters, their norm; a prober process GETs /health every 10 ms "
            "(health_idle_p99: the same before the load, the measuring floor); lag_worst: "
            "the latest wake-up of a 10 ms sleep on the server's loop during the load; "
            "server_cpu and load_cpu: CPU ms per request of the server and of the load "
            "generators; server_cores: the server's CPU seconds per second"
        ),
        "metrics": [
            {"key": "throughput", "unit": "req/s", "scale": 1.0, "better": "higher"},
            {"key": "post_p50", **ms, "ratio": False},
            {"key": "post_p99", **ms},
            {"key": "health_p99", **ms, "ratio": False},
            {"key": "health_idle_p99", **ms, "ratio": False},
            {"key": "lag_worst", **ms, "ratio": False},
            {"key": "server_cpu", "unit": "CPU ms/req", "scale": 1e3, "better": "lower"},
            {
                "key": "server_cores",
                "unit": "cores",
                "scale": 1.0,
                "better": "lower",
                "ratio": False,
            },
            {
                "key": "load_cpu",
                "unit": "CPU ms/req",
                "scale": 1e3,
                "better": "lower",
                "ratio": False,
            },
        ],
        "ratios": True,
        "reference": HANDLER,
        "references": [HANDLER, THREADED, FLOOR],
        "subject": AENGINE,
        "rows": rows,
    }


#: the example's targets (32 clients, 2 cores, one BLAS thread): (what, metric, reference
#: system or None for an absolute figure, limit, higher is better)
TARGETS: list[tuple[str, str, str | None, float, bool]] = [
    ("/health p99 under load (ms)", "health_p99", None, 10.0, False),
    ("worst loop lag under load (ms)", "lag_worst", None, 20.0, False),
    (f"throughput vs {THREADED}", "throughput", THREADED, 1.0, True),
    (f"throughput vs {FLOOR}", "throughput", FLOOR, 0.9, True),
]


def targets(rec: dict[str, Any]) -> list[str]:
    """The targets of the aengine row as markdown table lines (medians; ratios in one run)."""
    return target_lines(
        rec, [(what, AENGINE, ref, key, lim, hi) for what, key, ref, lim, hi in TARGETS]
    )


def target_lines(
    rec: dict[str, Any], specs: list[tuple[str, str, str | None, str, float, bool]]
) -> list[str]:
    """Markdown lines for ``specs``: (what, system, reference or None, metric, limit, higher)."""
    rows = {r["system"]: r.get("metrics", {}) for r in rec["rows"]}
    out = ["| target | measured | limit | status |", "|---|---|---|---|"]
    for what, system, ref, key, limit, higher in specs:
        mine = rows.get(system, {}).get(key, {}).get("median")
        other = None if ref is None else rows.get(ref, {}).get(key, {}).get("median")
        if mine is None or (ref is not None and not other):
            out.append(f"| {what} | not measured | {limit:g} | - |")
            continue
        value = mine / other if other else mine * 1e3
        met = value >= limit if higher else value <= limit
        shown = f"{value:.2f}x" if other else f"{value:.1f}"
        bound = f"at least {limit:g}x" if higher else f"at most {limit:g}"
        out.append(f"| {what} | {shown} | {bound} | {'met' if met else 'missed'} |")
    return out


def _check_body() -> bytes:
    return payloads(CHECK_SEED, 1)[0]


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.http_service``: the workload alone; its table on stdout."""
    p = argparse.ArgumentParser(
        prog="python -m bench.http_service", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="4 clients, 40 requests (a smoke test)")
    p.add_argument("--clients", type=int, help="concurrent clients (default 32)")
    p.add_argument("--procs", type=int, help="load-generator processes (default 2)")
    p.add_argument("--requests", type=int, help="POST /grad requests per system (default 1000)")
    p.add_argument("--cap", type=float, help="seconds of load per system at most (default 60)")
    p.add_argument(
        "--rounds", type=int, help="trials per system, interleaved (default 3; --quick: 1)"
    )
    p.add_argument("--threads", type=int, help="BLAS/torch threads per server (default 1)")
    p.add_argument("--only", help="comma-separated systems: aengine, handler, threads, numpy")
    p.add_argument("--json", help="also write the workload record to this file")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    for key in ("clients", "procs", "requests", "cap", "rounds"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    systems = None
    if args.only:
        short = {"aengine": AENGINE, "handler": HANDLER, "threads": THREADED, "numpy": FLOOR}
        systems = [short.get(s.strip(), s.strip()) for s in args.only.split(",") if s.strip()]
    _progress.enable(not args.quiet)
    rec = run_http_service(cfg, _progress.write, args.threads, systems)
    if args.json:
        Path(args.json).write_text(json.dumps(rec, indent=1, default=str))
    print(workload_table(rec))
    print("\n".join(["", *targets(rec)]))
    bad = [r for r in rec["rows"] if not r["status"].startswith((OK, "unavailable"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
