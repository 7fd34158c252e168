"""Load generator and /health prober of the ``service`` workload (one process each).

    python -m bench._http_load load URL --clients 16 --requests 500 --warmup 2 --cap 60
    python -m bench._http_load probe URL --interval 0.01 --cap 90

Both speak a line protocol with bench/http_service.py: they print ``ready``
once connected and warmed up, then wait for commands on stdin.

- ``load``: on ``go`` its clients (asyncio tasks, each with its own
  ``httpx.AsyncClient``: one connection each, no shared pool) POST /grad
  until ``--requests`` are done or ``--cap`` seconds passed, printing
  ``progress N`` now and then, then ``result {json}``.
- ``probe``: ``idle S`` GETs /health every ``--interval`` for S seconds and
  prints ``idle {json}``; ``go`` starts the same until ``stop``, then prints
  ``result {json}``.

The process imports neither numpy nor torch: its CPU is the client's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from typing import Any

import httpx

__all__ = ["main", "payloads"]

#: the request's shape (bench/_http_apps.py: BATCH x SIZES[0])
ROWS, COLS = 64, 16


def payloads(seed: int, n: int = 8) -> list[bytes]:
    """``n`` JSON bodies of POST /grad, each a random 64 x 16 batch."""
    rng = random.Random(seed)
    return [
        json.dumps(
            {"x": [[round(rng.gauss(0, 1), 5) for _ in range(COLS)] for _ in range(ROWS)]}
        ).encode()
        for _ in range(n)
    ]


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _readline() -> str:
    return (await asyncio.to_thread(sys.stdin.readline)).strip()


async def _load(args: argparse.Namespace) -> None:
    bodies = payloads(args.seed)
    headers = {"content-type": "application/json"}
    timeout = httpx.Timeout(args.cap + 30.0)
    clients = [
        httpx.AsyncClient(
            base_url=args.url, timeout=timeout, limits=httpx.Limits(max_connections=1)
        )
        for _ in range(args.clients)
    ]
    state: dict[str, Any] = {"left": args.requests, "errors": 0, "first_error": None, "done": 0}
    latencies: list[float] = []

    async def post(c: httpx.AsyncClient, i: int) -> float:
        t = time.perf_counter()
        r = await c.post("/grad", content=bodies[i % len(bodies)], headers=headers)
        dt = time.perf_counter() - t
        norm = r.json().get("norm") if r.status_code == 200 else None
        if not isinstance(norm, float) or not math.isfinite(norm):
            raise RuntimeError(f"POST /grad answered {r.status_code}: {r.text[:200]}")
        return dt

    async def warm(c: httpx.AsyncClient, k: int) -> None:
        for j in range(args.warmup):
            await post(c, k + j)

    async def client(c: httpx.AsyncClient, k: int, deadline: float) -> None:
        i = k
        while state["left"] > 0 and time.monotonic() < deadline:
            state["left"] -= 1
            i += 1
            try:
                latencies.append(await post(c, i))
            except Exception as exc:
                state["errors"] += 1
                if state["first_error"] is None:
                    state["first_error"] = f"{type(exc).__name__}: {exc}"
            state["done"] += 1
            if state["done"] % args.every == 0:
                _emit(f"progress {args.every}")

    try:
        await asyncio.gather(*(warm(c, k) for k, c in enumerate(clients)))
        _emit("ready")
        cmd = await _readline()
        if cmd != "go":
            print(f"expected 'go', read {cmd!r}: stopping", file=sys.stderr)
            return
        cpu0, t0 = time.process_time(), time.monotonic()
        await asyncio.gather(*(client(c, k, t0 + args.cap) for k, c in enumerate(clients)))
        t1, cpu1 = time.monotonic(), time.process_time()
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    _emit(
        "result "
        + json.dumps(
            {
                "latencies": latencies,
                "errors": state["errors"],
                "first_error": state["first_error"],
                "capped": state["left"] > 0,
                "t_start": t0,
                "t_end": t1,
                "cpu": cpu1 - cpu0,
            }
        )
    )


async def _probe(args: argparse.Namespace) -> None:
    async with httpx.AsyncClient(base_url=args.url, timeout=httpx.Timeout(args.cap)) as c:

        async def get() -> float:
            t = time.perf_counter()
            r = await c.get("/health")
            r.raise_for_status()
            return time.perf_counter() - t

        async def every(stop: asyncio.Event, until: float) -> list[float]:
            out: list[float] = []
            t_next = time.monotonic()
            while not stop.is_set() and time.monotonic() < until:
                out.append(await get())
                t_next += args.interval
                await asyncio.sleep(max(0.0, t_next - time.monotonic()))
            return out

        for _ in range(3):
            await get()
        _emit("ready")
        while True:
            cmd = await _readline()
            if cmd.startswith("idle "):
                lat = await every(asyncio.Event(), time.monotonic() + float(cmd.split()[1]))
                _emit("idle " + json.dumps({"latencies": lat}))
            elif cmd == "go":
                stop = asyncio.Event()
                cpu0 = time.process_time()
                task = asyncio.ensure_future(every(stop, time.monotonic() + args.cap))
                while await _readline() not in ("stop", ""):
                    pass
                stop.set()
                lat = await task
                _emit("result " + json.dumps({"latencies": lat, "cpu": time.process_time() - cpu0}))
                return
            else:
                return


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench._http_load")
    p.add_argument("role", choices=("load", "probe"))
    p.add_argument("url")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--warmup", type=int, default=2, help="requests per client before 'ready'")
    p.add_argument("--cap", type=float, default=60.0, help="seconds of load at most")
    p.add_argument("--interval", type=float, default=0.01, help="probe: seconds between GETs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--every", type=int, default=25, help="load: a progress line every N")
    args = p.parse_args(argv)
    asyncio.run(_load(args) if args.role == "load" else _probe(args))


if __name__ == "__main__":
    main()
