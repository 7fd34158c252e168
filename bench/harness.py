"""Timing, interleaving and gradient checks shared by every workload.

# NOTE [Interleaving]
# Systems run side by side in one process, one trial each per round
# (A B C, then B C A, ... : the order rotates so no system always follows the
# same neighbour), with a garbage collection and a pause before every trial.
# The pause lets OpenBLAS/MKL worker threads stop spinning after the previous
# system's last call (they spin for tens of ms, and a spinning pool slows the
# next BLAS user, as measured on this machine).  Garbage collection stays
# enabled while a trial runs: what a system costs the collector is part of
# what it costs its users.  Medians are reported with min-max.
"""

from __future__ import annotations

import gc
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["Stat", "summarize", "interleave", "check_grads", "settle", "page_faults", "OK"]

OK = "ok"


def settle(pause: float) -> None:
    """Collect garbage, then sleep ``pause`` seconds (BLAS pools stop spinning)."""
    gc.collect()
    if pause > 0:
        time.sleep(pause)


def page_faults() -> int:
    """Minor page faults of this process so far (every thread; 0 where unknown).

    A minor fault is the kernel mapping a fresh page on first touch: what an
    allocation that glibc takes from (and later gives back to) the OS costs
    (NOTE [Fresh pages] in bench/service.py).
    """
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and the samples themselves (JSON-ready)."""
    if not samples:
        return {"median": None, "min": None, "max": None, "n": 0, "samples": []}
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
        "samples": list(samples),
    }


Stat = dict[str, Any]


def interleave(
    trials: dict[str, Callable[[], dict[str, Any]]],
    repeats: int,
    pause: float,
    warmup: int = 1,
    log: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """Run each trial ``warmup + repeats`` times, systems interleaved per round.

    A trial returns a dict of metric -> seconds (or any number), plus any
    non-numeric extras (kept from the first timed round).  A trial that raises
    is reported as ``error`` and not run again.
    Returns ``{system: {"metrics": {metric: [samples]}, "extras": {...},
    "error": str | None}}``.
    """
    out: dict[str, dict[str, Any]] = {
        name: {"metrics": {}, "extras": {}, "error": None} for name in trials
    }
    names = list(trials)
    for rnd in range(warmup + repeats):
        k = rnd % len(names) if names else 0
        for name in names[k:] + names[:k]:
            rec = out[name]
            if rec["error"] is not None:
                continue
            settle(pause)
            try:
                res = trials[name]()
            except Exception as exc:  # a broken system is a row, not a crash
                rec["error"] = f"{type(exc).__name__}: {exc}"
                log(f"    {name}: {rec['error']}")
                log("".join(traceback.format_exception(exc, limit=-3)))
                continue
            if rnd < warmup:
                continue
            for key, value in res.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    rec["metrics"].setdefault(key, []).append(float(value))
                elif key not in rec["extras"]:
                    rec["extras"][key] = value
    return out


def check_grads(
    got: Sequence[Any] | None,
    ref: Sequence[np.ndarray],
    rtol: float,
    atol: float,
) -> str:
    """``"ok"`` when every gradient is close to the reference, else why not.

    ``atol`` is relative to the largest reference magnitude of each gradient
    (gradients of the 30,000-node chain are about 1e-86).
    """
    if got is None:
        return "FAILED: no gradients returned"
    if len(got) != len(ref):
        return f"FAILED: {len(got)} gradients for {len(ref)} inputs"
    for i, (g, r) in enumerate(zip(got, ref)):
        g = np.asarray(g)
        if g.shape != r.shape:
            return f"FAILED: gradient {i} has shape {g.shape}, torch gives {r.shape}"
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        if not np.allclose(g, r, rtol=rtol, atol=atol * scale):
            err = float(np.max(np.abs(g.astype(np.float64) - r)))
            return f"FAILED: gradient {i} differs from torch by up to {err:.3g} (scale {scale:.3g})"
    return OK


def result_rows(
    systems: Sequence[Any], runs: dict[str, Any], reference: str, wl: Any, keys: Sequence[str]
) -> list[dict[str, Any]]:
    """One row per system of a graph workload: its status and the summaries of ``keys``.

    The status says whether the system was unavailable, failed, or gave the
    gradients of ``reference`` (torch) to the workload's tolerance.
    """
    ref_rec = runs.get(reference)
    ref = None if ref_rec is None else ref_rec["extras"].get("grads")
    rows: list[dict[str, Any]] = []
    for s in systems:
        if not s.available:
            rows.append({"system": s.name, "status": f"unavailable: {s.reason}", "metrics": {}})
            continue
        rec = runs[s.name]
        if rec["error"] is not None:
            status = f"error: {rec['error']}"
        elif ref is None:
            status = "unchecked: torch unavailable"
        else:
            status = check_grads(rec["extras"].get("grads"), ref, wl.rtol, wl.atol)
        metrics = {k: summarize(rec["metrics"].get(k, [])) for k in keys}
        rows.append({"system": s.name, "status": status, "metrics": metrics})
    return rows
