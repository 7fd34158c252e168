"""Workloads about running inside a program: loop lag, concurrency, fixed cost, memory.

Each ``run_*`` function returns a workload record (see ``report``): a name, a
description, the metrics and one row per system with its status (the
gradient check against torch) and its samples.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter, thread_time
from typing import Any

import numpy as np

from .harness import OK, check_grads, interleave, page_faults, summarize
from .systems import FLOOR
from .workloads import chain, mlp_floor_backward, mlp_floor_forward, mlp_fn, mlp_params

__all__ = [
    "run_looplag",
    "run_concurrency",
    "run_fixedcost",
    "run_memory",
    "fixedcost_sync",
    "fixedcost_async",
]


def _rows(
    names: list[str],
    runs: dict[str, dict[str, Any]],
    checks: dict[str, str],
    unavailable: dict[str, str],
) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        if name in unavailable:
            rows.append(
                {"system": name, "status": f"unavailable: {unavailable[name]}", "metrics": {}}
            )
            continue
        rec = runs[name]
        status = checks.get(name, OK)
        if rec["error"] is not None:
            status = f"error: {rec['error']}"
        metrics = {k: summarize(v) for k, v in rec["metrics"].items()}
        extras = {k: v for k, v in rec["extras"].items() if k != "grads"}
        rows.append({"system": name, "status": status, "metrics": metrics, "extras": extras})
    return rows


def _have(module: str) -> str:
    try:
        __import__(module)
    except Exception as exc:
        return f"import {module} failed: {type(exc).__name__}: {exc}"
    return ""


# -- loop lag -------------------------------------------------------------------


async def _lag_during(backward: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Run ``backward`` while a task sleeping 1 ms records how late it wakes.

    ``worst`` is wall-clock lateness; ``worst_cpu`` is the most CPU time the
    loop's thread spent between a sleep and its wake-up, i.e. the longest
    stretch the loop ran other code.  On a busy machine the wall clock also
    counts the time the OS gave to other processes; the CPU time does not.
    """
    import anyio

    lags: list[float] = []
    woke: list[float] = []
    state = {"active": False, "stop": False}

    cpu: list[float] = []

    async def ticker() -> None:
        while not state["stop"]:
            t = perf_counter()
            c = thread_time()
            await anyio.sleep(0.001)
            if state["active"]:
                now = perf_counter()
                lags.append(now - t - 0.001)
                cpu.append(thread_time() - c)
                woke.append(now)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.01)
        state["active"] = True
        t0 = perf_counter()
        grads = await backward()
        t1 = perf_counter()
        await anyio.sleep(0.005)  # the wake-up right after a blocking call counts
        state["active"] = False
        state["stop"] = True
    worst_at = woke[int(np.argmax(lags))] - t0 if lags else float("nan")
    return {
        "worst": max(lags) if lags else float("nan"),
        "worst_at": worst_at,
        "p99": float(np.percentile(lags, 99)) if lags else float("nan"),
        "worst_cpu": max(cpu) if cpu else float("nan"),
        "backward": t1 - t0,
        "wakeups": len(lags),
        "grads": grads,
    }


# NOTE [Loop lag and the collector]
# The worst wake-up delay of the aengine rows is, on this machine, one full
# (generation 2) garbage collection that CPython starts in the middle of the
# backward: the forward left ~10 GC-tracked objects per node in the young
# generations, the backward's allocations trigger collections, and the full
# one walks the whole graph in one go (0.1-0.6 s for 30,000 nodes on a busy
# 2-core machine), which no time slice of the engine can interrupt.  The row
# "gc.collect() after the forward" moves the graph to the old generation
# first, so what remains is the engine's own slicing.


async def _lag_steps(
    step: Callable[[], Callable[[], Awaitable[Any]]], steps: int, collect: bool = False
) -> dict[str, Any]:
    """``_lag_during`` for ``steps`` backwards of one structure in a row, on one loop.

    ``step()`` records a new graph of the structure (the forward, before
    the ticker starts) and returns its backward.  For aengine the first
    step runs the general path, step ``PLANS.build_at`` (3) builds the
    structure's plan and the later ones run by it (NOTE [When a plan is
    built]): ``worst_step1``, ``worst_step2`` (the step that builds) and
    ``worst_later`` are their worst wake-up delays;
    ``worst``, ``p99`` and ``worst_cpu`` the worst of all steps.
    """
    recs = []
    for _ in range(steps):
        bwd = step()
        if collect:  # NOTE [Loop lag and the collector]
            gc.collect()
        recs.append(await _lag_during(bwd))
    # (imported here, as aengine: the torch and idle trials need none)
    from aengine.core._plan import PLANS

    build = min(PLANS.build_at, steps) - 1  # the step that builds the plan
    at = max(range(steps), key=lambda i: recs[i]["worst"])
    later = recs[build + 1 :] or recs[-1:]
    return {
        "worst": recs[at]["worst"],
        "worst_step1": recs[0]["worst"],
        "worst_step2": recs[build]["worst"],
        "worst_later": max(r["worst"] for r in later),
        "p99": max(r["p99"] for r in recs),
        "worst_cpu": max(r["worst_cpu"] for r in recs),
        "worst_at": recs[at]["worst_at"],
        "worst_in_step": at + 1,
        "backward_step1": recs[0]["backward"],
        "backward": float(np.median([r["backward"] for r in later])),
        "grads": recs[-1]["grads"],
    }


def run_looplag(
    nodes: int, repeats: int, pause: float, log: Callable[[str], None], steps: int = 4
) -> dict:
    """Loop lag while async backwards of a ``nodes``-node chain run on the loop.

    Each trial runs ``steps`` steps of the same structure on one loop (a new
    graph each step, as a training loop or a service does): the first, the
    one that builds the backward plan, and the planned ones are reported
    apart (``_lag_steps``).
    """
    import anyio

    wl = chain(nodes)
    unavailable: dict[str, str] = {}
    for mod, names in (
        ("torch", ["torch direct in a coroutine (asyncio)", "torch in anyio.to_thread (asyncio)"]),
        ("trio", ["aengine async (trio)", "idle loop (trio)"]),
    ):
        why = _have(mod)
        if why:
            unavailable.update(dict.fromkeys(names, why))

    def ae_trial(backend: str, collect: bool = False) -> Callable[[], dict[str, Any]]:
        def trial() -> dict[str, Any]:
            import aengine as ae

            # (imported here, as aengine: the plans start from nothing in each trial)
            from aengine.core._plan import PLANS

            PLANS.cache.clear()
            x = ae.tensor(wl.params[0], requires_grad=True)

            def step() -> Callable[[], Awaitable[Any]]:
                loss = wl.fn(ae, [], x)

                async def bwd() -> Any:
                    (g,) = await ae.grad(loss, [x])
                    return [g.numpy()]

                return bwd

            return anyio.run(_lag_steps, step, steps, collect, backend=backend)  # type: ignore[no-any-return]

        return trial

    def torch_trial(threaded: bool) -> Callable[[], dict[str, Any]]:
        def trial() -> dict[str, Any]:
            import torch

            x = torch.tensor(wl.params[0], requires_grad=True)

            def step() -> Callable[[], Awaitable[Any]]:
                loss = wl.fn(torch, [], x)

                async def bwd() -> Any:
                    if threaded:
                        (g,) = await anyio.to_thread.run_sync(torch.autograd.grad, loss, [x])
                    else:
                        (g,) = torch.autograd.grad(loss, [x])
                    return [g.numpy()]

                return bwd

            return anyio.run(_lag_steps, step, steps, backend="asyncio")  # type: ignore[no-any-return]

        return trial

    def idle_trial(backend: str) -> Callable[[], dict[str, Any]]:
        def step() -> Callable[[], Awaitable[Any]]:
            async def bwd() -> Any:
                await anyio.sleep(0.1)
                return None

            return bwd

        return lambda: anyio.run(_lag_steps, step, steps, backend=backend)  # type: ignore[no-any-return]

    trials = {
        "aengine async (asyncio)": ae_trial("asyncio"),
        "aengine async (trio)": ae_trial("trio"),
        "aengine async (asyncio), gc.collect() after the forward": ae_trial("asyncio", True),
        "torch direct in a coroutine (asyncio)": torch_trial(False),
        "torch in anyio.to_thread (asyncio)": torch_trial(True),
        "idle loop (asyncio)": idle_trial("asyncio"),
        "idle loop (trio)": idle_trial("trio"),
    }
    names = list(trials)
    runnable = {k: v for k, v in trials.items() if k not in unavailable}
    runs = interleave(runnable, repeats, pause, warmup=0, log=log)
    ref = _reference_chain_grads(wl)
    checks = {}
    for name, rec in runs.items():
        grads = rec["extras"].get("grads")
        if name.startswith("idle"):
            checks[name] = OK
        elif ref is None:
            checks[name] = "unchecked: torch unavailable"
        else:
            checks[name] = check_grads(grads, ref, wl.rtol, wl.atol)
    return {
        "name": "looplag",
        "family": "looplag",
        "description": (
            f"a task sleeping 1 ms records how late it wakes while backwards of the "
            f"{wl.nodes - 1}-node chain run on the same event loop, {steps} steps of one "
            f"structure (a new graph each step; default settings): worst of all steps, "
            f"of step 1 (general path), the step that builds the plan and later steps (planned)"
        ),
        "metrics": [
            {"key": "worst", "unit": "ms", "scale": 1e3, "better": "lower"},
            {"key": "worst_step1", "unit": "ms", "scale": 1e3, "better": "lower"},
            {"key": "worst_step2", "unit": "ms", "scale": 1e3, "better": "lower"},
            {"key": "worst_later", "unit": "ms", "scale": 1e3, "better": "lower"},
            {"key": "p99", "unit": "ms", "scale": 1e3, "better": "lower"},
            {"key": "worst_cpu", "unit": "CPU ms", "scale": 1e3, "better": "lower"},
            {"key": "backward_step1", "unit": "ms", "scale": 1e3, "better": "lower"},
            {"key": "backward", "unit": "ms, later steps", "scale": 1e3, "better": "lower"},
        ],
        "ratios": False,
        "rows": _rows(names, runs, checks, unavailable),
    }


def _reference_chain_grads(wl: Any) -> list[np.ndarray] | None:
    try:
        import torch
    except Exception:
        return None
    x = torch.tensor(wl.params[0], requires_grad=True)
    return [torch.autograd.grad(wl.fn(torch, [], x), [x])[0].numpy()]


# -- concurrency ----------------------------------------------------------------
#
# NOTE [Fresh pages]
# The requests of a burst hold their memory at the same time (about 3.3 MB
# each here: 0.4 MB of graph, then 3.2 MB of weight gradients; tracemalloc).
# glibc's malloc serves large arrays from fresh mappings or gives freed
# memory at the top of its heap back to the OS (``mmap_threshold`` and
# ``trim_threshold``, both adjusted as the process runs), so a burst can
# touch fresh pages that the kernel maps and zeroes on first touch (a minor
# fault each).  Timed in a loop of bursts alone (no other system between
# them), 16-request bursts of aengine tasks took 10,000-24,000 faults each
# and ran at 0.8-0.95x torch's threads (300-1,800 faults), while the same
# requests one after the other took none in most trials; with
# ``GLIBC_TUNABLES=glibc.malloc.trim_threshold=268435456:glibc.malloc.
# mmap_threshold=33554432`` (freed memory kept, arrays up to 32 MB from the
# heap) no burst faulted and they ran at 1.1-1.3x.  Interleaved with the
# other systems, as here, most trials find the heap large from the previous
# one and fault little (the column's median), and some fault a whole burst
# (its maximum).  The ``allocator`` line of the report gives the run's
# settings.


def run_concurrency(
    requests: int,
    width: int,
    depth: int,
    batch: int,
    repeats: int,
    pause: float,
    log: Callable[[str], None],
) -> dict:
    """``requests`` concurrent forward+backward requests of a small MLP: requests/s."""
    import anyio

    params, _ = mlp_params(width, depth, batch, seed=1)
    rng = np.random.default_rng(2)
    reqs = [
        [
            rng.standard_normal((batch, width)).astype(np.float32),
            (rng.standard_normal((batch, width)) * 0.5).astype(np.float32),
        ]
        for _ in range(requests)
    ]
    n = requests
    note = _engine_note()
    unavailable: dict[str, str] = {}
    why = _have("torch")
    if why:
        unavailable.update(dict.fromkeys([f"torch, {n} threads", "torch sequential"], why))
    why = _have("trio")
    if why:
        unavailable[f"aengine concurrent tasks (trio){note}"] = why

    def ae_concurrent(backend: str) -> Callable[[], dict[str, Any]]:
        def trial() -> dict[str, Any]:
            import aengine as ae

            ps = [ae.tensor(p, requires_grad=True) for p in params]
            consts = [[ae.as_tensor(a) for a in r] for r in reqs]
            out: list[Any] = [None] * requests

            engine: Any = None

            async def one(i: int) -> None:
                # the forward off the loop where the Engine can (engine.run):
                # what a service writes, so that requests use every core
                if engine is not None and hasattr(engine, "run"):
                    loss = await engine.run(mlp_fn, ae, consts[i], *ps)
                else:
                    loss = mlp_fn(ae, consts[i], *ps)
                grads = await ae.grad(loss, ps)
                out[i] = [g.numpy() for g in grads]

            async def main() -> tuple[float, int]:
                nonlocal engine
                engine = ae.Engine() if hasattr(ae, "Engine") else None
                if engine is not None:
                    async with engine:
                        return await timed()
                return await timed()

            async def timed() -> tuple[float, int]:
                # one untimed round first: a service's loop, Engine and compute
                # threads are warm (as torch's thread pool, made once for all trials)
                async with anyio.create_task_group() as tg:
                    for i in range(requests):
                        tg.start_soon(one, i)
                f0, t0 = page_faults(), perf_counter()
                async with anyio.create_task_group() as tg:
                    for i in range(requests):
                        tg.start_soon(one, i)
                return perf_counter() - t0, page_faults() - f0

            dt, faults = anyio.run(main, backend=backend)
            return {"throughput": requests / dt, "faults": faults, "grads": out}

        return trial

    def ae_sequential() -> dict[str, Any]:
        import aengine as ae

        ps = [ae.tensor(p, requires_grad=True) for p in params]
        consts = [[ae.as_tensor(a) for a in r] for r in reqs]
        out = []
        f0, t0 = page_faults(), perf_counter()
        for c in consts:
            out.append([g.numpy() for g in ae.sync.grad(mlp_fn(ae, c, *ps), ps)])
        return _requests_done(requests, t0, f0, out)

    pool = ThreadPoolExecutor(max_workers=requests)

    def torch_request(ps: list[Any], c: list[Any]) -> list[np.ndarray]:
        import torch

        return [g.numpy() for g in torch.autograd.grad(mlp_fn(torch, c, *ps), ps)]

    def torch_setup() -> tuple[list[Any], list[Any]]:
        import torch

        ps = [torch.tensor(p, requires_grad=True) for p in params]
        consts = [[torch.from_numpy(a) for a in r] for r in reqs]
        return ps, consts

    def torch_threads() -> dict[str, Any]:
        ps, consts = torch_setup()
        f0, t0 = page_faults(), perf_counter()
        futs = [pool.submit(torch_request, ps, c) for c in consts]
        out = [f.result() for f in futs]
        return _requests_done(requests, t0, f0, out)

    def torch_sequential() -> dict[str, Any]:
        ps, consts = torch_setup()
        f0, t0 = page_faults(), perf_counter()
        out = [torch_request(ps, c) for c in consts]
        return _requests_done(requests, t0, f0, out)

    def floor_sequential() -> dict[str, Any]:
        f0, t0 = page_faults(), perf_counter()
        out = [mlp_floor_backward(mlp_floor_forward(r, params)) for r in reqs]
        return _requests_done(requests, t0, f0, out)

    trials = {
        f"aengine concurrent tasks (asyncio){note}": ae_concurrent("asyncio"),
        f"aengine concurrent tasks (trio){note}": ae_concurrent("trio"),
        "aengine sequential (sync)": ae_sequential,
        f"torch, {n} threads": torch_threads,
        "torch sequential": torch_sequential,
        f"{FLOOR}, sequential": floor_sequential,
    }
    names = list(trials)
    try:
        runs = interleave(
            {k: v for k, v in trials.items() if k not in unavailable},
            repeats,
            pause,
            warmup=1,
            log=log,
        )
    finally:
        pool.shutdown()
    checks = {}
    ref = None
    if not _have("torch"):
        ps, consts = torch_setup()
        ref = [torch_request(ps, c) for c in consts]
    for name, rec in runs.items():
        got = rec["extras"].get("grads")
        if ref is None:
            checks[name] = "unchecked: torch unavailable"
        elif got is None or len(got) != len(ref):
            checks[name] = "FAILED: missing requests"
        else:
            bad = [check_grads(g, r, 2e-3, 2e-4) for g, r in zip(got, ref)]
            checks[name] = next((b for b in bad if b != OK), OK)
    return {
        "name": "concurrency",
        "family": "concurrency",
        "description": (
            f"{n} concurrent requests, each forward+backward of an MLP (float32, batch "
            f"{batch}, {depth} layers of {width}, tanh, MSE) w.r.t. its shared weights"
        ),
        "metrics": [
            {"key": "throughput", "unit": "req/s", "scale": 1.0, "better": "higher"},
            {
                "key": "faults",
                "unit": "page faults",
                "scale": 1.0,
                "better": "lower",
                "ratio": False,
            },
        ],
        "ratios": True,
        "reference": f"torch, {n} threads",
        "rows": _rows(names, runs, checks, unavailable),
    }


def _requests_done(requests: int, t0: float, f0: int, grads: list[Any]) -> dict[str, Any]:
    """A concurrency trial's result: requests/s and page faults since ``t0`` / ``f0``."""
    return {
        "throughput": requests / (perf_counter() - t0),
        "faults": page_faults() - f0,
        "grads": grads,
    }


def _engine_note() -> str:
    try:
        import aengine as ae
    except Exception:
        return ""
    return " in ae.Engine" if hasattr(ae, "Engine") else ""


# -- fixed cost -----------------------------------------------------------------


#: the reference row of fixedcost: one bare ``await anyio.lowlevel.checkpoint()``
CHECKPOINT_ROW = "await checkpoint() ({})"


_FIXED_X = np.linspace(-1.0, 1.0, 16)


def _per_call(grad: Callable[..., Any], x: Any, calls: int) -> dict[str, Any]:
    """``calls`` synchronous gradient calls of ``x.sum()`` with ``grad``, timed."""
    y = x.sum()
    t0 = perf_counter()
    for _ in range(calls):
        (g,) = grad(y, [x], retain_graph=True)
    return {"per_call": (perf_counter() - t0) / calls, "grads": [g.numpy()]}


def fixedcost_sync(ae: Any, calls: int) -> dict[str, Any]:
    """``calls`` of ``ae.sync.grad`` on a 1-node graph (``ae``: an aengine module)."""
    return _per_call(ae.sync.grad, ae.tensor(_FIXED_X, requires_grad=True), calls)


def fixedcost_async(ae: Any, backend: str, calls: int) -> dict[str, Any]:
    """The same with ``await ae.grad`` on a running ``backend`` loop."""
    import anyio

    x = ae.tensor(_FIXED_X, requires_grad=True)
    y = x.sum()

    async def main() -> dict[str, Any]:
        for _ in range(10):
            await ae.grad(y, [x], retain_graph=True)
        t0 = perf_counter()
        for _ in range(calls):
            (g,) = await ae.grad(y, [x], retain_graph=True)
        return {"per_call": (perf_counter() - t0) / calls, "grads": [g.numpy()]}

    return anyio.run(main, backend=backend)  # type: ignore[no-any-return]


def run_fixedcost(calls: int, repeats: int, pause: float, log: Callable[[str], None]) -> dict:
    """The cost of one gradient call on a 1-node graph (x.sum()), per call."""
    import anyio

    ref = [np.ones(16)]
    unavailable: dict[str, str] = {}
    if _have("torch"):
        unavailable["torch.autograd.grad"] = _have("torch")
    if _have("trio"):
        unavailable["await ae.grad (trio)"] = _have("trio")
        unavailable[CHECKPOINT_ROW.format("trio")] = _have("trio")

    def ae_async(backend: str) -> Callable[[], dict[str, Any]]:
        def trial() -> dict[str, Any]:
            import aengine as ae

            return fixedcost_async(ae, backend, calls)

        return trial

    def loop_checkpoint(backend: str) -> Callable[[], dict[str, Any]]:
        """The event loop's own cheapest await: this machine's speed at loop work now."""

        def trial() -> dict[str, Any]:
            from anyio.lowlevel import checkpoint

            async def main() -> dict[str, Any]:
                for _ in range(10):
                    await checkpoint()
                t0 = perf_counter()
                for _ in range(calls):
                    await checkpoint()
                return {"per_call": (perf_counter() - t0) / calls}

            return anyio.run(main, backend=backend)  # type: ignore[no-any-return]

        return trial

    def ae_sync() -> dict[str, Any]:
        import aengine as ae

        return fixedcost_sync(ae, calls)

    def torch_grad() -> dict[str, Any]:
        import torch

        return _per_call(torch.autograd.grad, torch.tensor(_FIXED_X, requires_grad=True), calls)

    trials = {
        "torch.autograd.grad": torch_grad,
        "ae.sync.grad": ae_sync,
        "await ae.grad (asyncio)": ae_async("asyncio"),
        "await ae.grad (trio)": ae_async("trio"),
        CHECKPOINT_ROW.format("asyncio"): loop_checkpoint("asyncio"),
        CHECKPOINT_ROW.format("trio"): loop_checkpoint("trio"),
    }
    names = list(trials)
    runs = interleave(
        {k: v for k, v in trials.items() if k not in unavailable}, repeats, pause, 1, log
    )
    checks = {
        n: "ok (reference: no gradient)"
        if n.startswith("await checkpoint()")
        else check_grads(r["extras"].get("grads"), ref, 1e-12, 0.0)
        for n, r in runs.items()
    }
    return {
        "name": "fixedcost",
        "family": "fixedcost",
        "description": (
            f"one gradient call on a 1-node graph (x (16,), y = x.sum(), retain_graph=True), "
            f"{calls} calls in a row; the async calls on a running loop; "
            "'await checkpoint()' rows: anyio's bare checkpoint, the loop's cost of one await "
        ),
        "metrics": [{"key": "per_call", "unit": "us", "scale": 1e6, "better": "lower"}],
        "ratios": True,
        "reference": "torch.autograd.grad",
        "rows": _rows(names, runs, checks, unavailable),
    }


# -- memory ---------------------------------------------------------------------


def _traced(forward: Callable[[], Any], backward: Callable[[Any], Any]) -> dict[str, Any]:
    """Peak traced memory of forward then backward, above the memory before forward."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        state = forward()
        after_fwd = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        grads = backward(state)
        del state
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {
        "peak": peak - base,
        "graph": after_fwd - base,
        "backward_extra": peak - after_fwd,
        "grads": grads,
    }


def run_memory(
    depth: int, width: int, batch: int, repeats: int, log: Callable[[str], None]
) -> dict:
    """Peak memory of a backward (retain_graph=False) through a ``depth``-layer MLP."""
    import anyio

    params, consts = mlp_params(width, depth, batch, seed=3)
    unavailable: dict[str, str] = {
        "torch": "not measured: torch's allocator is not seen by tracemalloc"
    }
    for mod, name in (("autograd", "HIPS autograd"), ("mygrad", "MyGrad")):
        if _have(mod):
            unavailable[name] = _have(mod)

    def ae_sync() -> dict[str, Any]:
        import aengine as ae

        ps = [ae.tensor(p, requires_grad=True) for p in params]
        cs = [ae.as_tensor(c) for c in consts]
        return _traced(
            lambda: mlp_fn(ae, cs, *ps),
            lambda loss: [g.numpy() for g in ae.sync.grad(loss, ps, retain_graph=False)],
        )

    def ae_async() -> dict[str, Any]:
        import aengine as ae

        ps = [ae.tensor(p, requires_grad=True) for p in params]
        cs = [ae.as_tensor(c) for c in consts]

        async def main() -> dict[str, Any]:
            # forward and backward inside the loop; the loop's own memory was
            # allocated before tracing started
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                loss = mlp_fn(ae, cs, *ps)
                after_fwd = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                grads = [g.numpy() for g in await ae.grad(loss, ps, retain_graph=False)]
                del loss
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            return {
                "peak": peak - base,
                "graph": after_fwd - base,
                "backward_extra": peak - after_fwd,
                "grads": grads,
            }

        return anyio.run(main, backend="asyncio")  # type: ignore[no-any-return]

    def hips() -> dict[str, Any]:
        import autograd.numpy as anp
        from autograd import make_vjp

        ps = [p.copy() for p in params]
        return _traced(
            lambda: make_vjp(lambda q: mlp_fn(anp, consts, *q))(ps),
            lambda st: list(st[0](np.ones_like(st[1]))),
        )

    def mygrad() -> dict[str, Any]:
        import mygrad as mg

        ps = [mg.tensor(p) for p in params]

        def backward(loss: Any) -> Any:
            loss.backward()
            return [np.asarray(p.grad) for p in ps]

        return _traced(lambda: mlp_fn(mg, consts, *ps), backward)

    def floor() -> dict[str, Any]:
        ps = [p.copy() for p in params]
        return _traced(lambda: mlp_floor_forward(consts, ps), mlp_floor_backward)

    trials = {
        "aengine sync": ae_sync,
        "aengine async (asyncio)": ae_async,
        "HIPS autograd": hips,
        "MyGrad": mygrad,
        FLOOR: floor,
    }
    names = ["torch", *trials]
    runs = interleave(
        {k: v for k, v in trials.items() if k not in unavailable}, repeats, 0.0, 0, log
    )
    ref = None
    if not _have("torch"):
        import torch

        tp = [torch.tensor(p, requires_grad=True) for p in params]
        tc = [torch.from_numpy(c) for c in consts]
        ref = [g.numpy() for g in torch.autograd.grad(mlp_fn(torch, tc, *tp), tp)]
    checks = {
        n: (check_grads(r["extras"].get("grads"), ref, 2e-3, 2e-4) if ref else "unchecked")
        for n, r in runs.items()
    }
    param_bytes = sum(p.nbytes for p in params)
    return {
        "name": "memory",
        "family": "memory",
        "description": (
            f"peak traced memory (tracemalloc) of forward+backward of a {depth}-layer MLP "
            f"(float32, width {width}, batch {batch}, tanh, MSE), retain_graph=False, above "
            f"the memory before the forward; the gradients alone are {param_bytes / 1e6:.2f} MB"
        ),
        "metrics": [
            {"key": "peak", "unit": "MB", "scale": 1e-6, "better": "lower"},
            {"key": "graph", "unit": "MB", "scale": 1e-6, "better": "lower"},
            {"key": "backward_extra", "unit": "MB", "scale": 1e-6, "better": "lower"},
        ],
        "ratios": True,
        "reference": FLOOR,
        "rows": _rows(names, runs, checks, unavailable),
    }
