"""The benchmark harness: ``python -m bench --quick`` runs every system and workload.

Times are never asserted; what is checked is that the run completes, writes
its JSON and markdown, covers every system on every workload, and that every
gradient check against torch passed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.cli import FAMILIES, _wanted, run_graph
from bench.harness import OK, check_grads
from bench.systems import NumpyFloor, System
from bench.workloads import chain, mlp, wide
from tests.paths import ROOT

GRAPH_SYSTEMS = {
    "torch",
    "aengine sync",
    "aengine sync .backward()",
    "aengine async (asyncio)",
    "aengine async (trio)",
    "HIPS autograd",
    "MyGrad",
    "numpy floor",
}


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except Exception:
        return False
    return True


@pytest.mark.slow
def test_quick_run_covers_every_system_and_workload(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "latest.json").read_text())
    assert (tmp_path / "latest.md").read_text().startswith("# aengine benchmarks (quick run)")
    assert results["meta"]["quick"] is True
    families = [wl["family"] for wl in results["workloads"]]
    assert sorted(set(families)) == sorted(FAMILIES)
    assert families.count("chain") == 2 and families.count("mlp") == 2
    optional = {"torch": "torch", "HIPS autograd": "autograd", "MyGrad": "mygrad"}
    for wl in results["workloads"]:
        assert wl["rows"], wl["name"]
        if wl["family"] in ("chain", "wide", "mlp"):
            assert {r["system"] for r in wl["rows"]} == GRAPH_SYSTEMS, wl["name"]
        for row in wl["rows"]:
            status = row["status"]
            module = optional.get(row["system"])
            if status.startswith("unavailable"):
                # only a library that does not import (or torch in memory) may be missing
                assert wl["family"] == "memory" or (module and not _importable(module)), (
                    wl["name"],
                    row,
                )
                continue
            if row["system"].startswith("await checkpoint()"):  # fixedcost's reference rows
                assert status == f"{OK} (reference: no gradient)", row
                continue
            assert status == OK, (wl["name"], row["system"], status)
            for m in wl["metrics"]:
                stat = row["metrics"][m["key"]]
                assert stat["n"] >= 1 and stat["median"] is not None, (wl["name"], row)
    targets = results["targets"]
    assert any("loop lag" in t["target"] for t in targets)
    assert all(t["met"] in (True, False) for t in targets), targets
    assert all(t["met_best"] in (True, False) and t["best"] != "-" for t in targets), targets


def test_check_grads_reports_a_mismatch() -> None:
    ref = [np.array([1.0, 2.0])]
    assert check_grads([np.array([1.0, 2.0 + 1e-12])], ref, 1e-7, 0.0) == OK
    assert check_grads([np.array([1.0, 2.5])], ref, 1e-7, 0.0).startswith("FAILED: gradient 0")
    assert "shape" in check_grads([np.zeros(3)], ref, 1e-7, 0.0)
    assert check_grads(None, ref, 1e-7, 0.0) == "FAILED: no gradients returned"


class _FakeTorch(NumpyFloor):
    name = "torch"


class _Wrong(NumpyFloor):
    name = "wrong"

    def trial(self, wl):  # type: ignore[no-untyped-def]
        res = super().trial(wl)
        res["grads"] = [g * 1.5 for g in res["grads"]]
        return res


class _Broken(System):
    name = "broken"

    def trial(self, wl):  # type: ignore[no-untyped-def]
        raise ValueError("no such op")


def test_failed_check_and_error_mark_the_row_not_the_run() -> None:
    rec = run_graph(
        chain(30), [_FakeTorch(), _Wrong(), _Broken()], repeats=1, pause=0.0, log=lambda m: None
    )
    status = {r["system"]: r["status"] for r in rec["rows"]}
    assert status["torch"] == OK
    assert status["wrong"].startswith("FAILED: gradient 0 differs from torch")
    assert status["broken"] == "error: ValueError: no such op"
    wrong = next(r for r in rec["rows"] if r["system"] == "wrong")
    assert wrong["metrics"]["backward"]["n"] == 1  # still timed, only marked


def test_workloads_keep_their_numpy_dtypes_under_the_float32_default() -> None:
    """Inputs come from numpy arrays: chain and wide stay float64, mlp float32.

    Python floats now give float32 (ae.get_default_dtype()); the workloads'
    scalars (``y * 1.0001``) keep a tensor's dtype, so nothing turns float32.
    """
    import aengine as ae

    for wl, dtype in ((chain(30), ae.float64), (wide(10), ae.float64), (mlp(8, 2, 4), ae.float32)):
        ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
        cs = [ae.as_tensor(c) for c in wl.consts]
        loss = wl.fn(ae, cs, *ps)
        grads = ae.sync.grad(loss, ps)
        assert loss.dtype == dtype and {p.dtype for p in ps} == {g.dtype for g in grads} == {dtype}


def test_only_filter_selects_families_or_names() -> None:
    assert _wanted(None, "chain", "chain-3k")
    assert _wanted("chain,wide", "wide", "wide-10k")
    assert _wanted("chain-3k", "chain", "chain-3k")
    assert not _wanted("chain-3k", "chain", "chain-30k")
    assert not _wanted("mlp", "memory", "memory")


def test_profile_counts_bytecodes_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.profile --bytecodes``: deterministic counts, engine functions listed."""
    from bench.profile import main

    main(["--bytecodes", "--nodes", "30", "--top", "5"])
    first = capsys.readouterr().out
    main(["--bytecodes", "--nodes", "30", "--top", "5"])
    assert capsys.readouterr().out == first  # the same count each time
    assert "bytecodes per node" in first and "_general_run.py:run" in first
    main(["--bytecodes", "--forward", "--wide", "10", "--top", "3"])
    assert "_core.py:record" in capsys.readouterr().out
    for extra in ([], ["--async"], ["--async", "--backend", "trio"]):
        main(["--fixedcost", "--bytecodes", "--top", "40", *extra])
        out = capsys.readouterr().out
        assert "bytecodes per call" in out and "_general_run.py:run" in out, out
        # the awaited call between two yields: no trip through the event loop
        assert ("_drivers.py:run_async" in out) == bool(extra), out
        assert "yield_slice" not in out and "base_events.py" not in out, out


def test_ab_imports_a_revision_beside_the_working_tree(tmp_path: Path) -> None:
    """``python -m bench.ab REV``: REV's aengine as a second package, trials interleaved."""
    import shutil

    import aengine
    from bench.ab import compare, fixedcost_trial, graph_trial, load_revision

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("bench.ab needs a git checkout: this tree has none")
    try:
        rev = load_revision("HEAD", tmp_path)
        assert rev.__name__ == "aengine_rev" and rev is not aengine
        assert rev.core._graph_task is not aengine.core._graph_task  # no module shared
        x = rev.tensor([1.0, 2.0], requires_grad=True)
        (g,) = rev.sync.grad((x * x).sum(), [x])
        assert g.tolist() == [2.0, 4.0] and type(g) is not aengine.Tensor
        assert type(x.device.backend).__module__.startswith("aengine_rev.adapters")
        res = compare(rev, aengine, graph_trial(chain(30)), rounds=2)
        assert set(res) == {"forward", "backward"}
        assert res["forward"]["ratio"] > 0 and res["backward"]["min_ratio"] > 0
        res = compare(rev, aengine, fixedcost_trial, rounds=1)
        assert {"ae.sync.grad", "await ae.grad (asyncio)"} <= set(res)
    finally:
        for name in [m for m in sys.modules if m == "aengine_rev" or m.startswith("aengine_rev.")]:
            del sys.modules[name]


def test_report_names_the_malloc_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # NOTE [Fresh pages]: glibc's trim and mmap thresholds change the concurrency rows
    from bench.cli import _allocator
    from bench.harness import page_faults

    for key in [k for k in __import__("os").environ if k.startswith(("MALLOC_", "GLIBC_"))]:
        monkeypatch.delenv(key)
    assert _allocator() == "the C library's defaults"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=268435456")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    assert _allocator() == (
        "GLIBC_TUNABLES=glibc.malloc.trim_threshold=268435456, MALLOC_ARENA_MAX=2"
    )
    before = page_faults()
    # 64 MB: above glibc's largest mmap threshold, so mapped afresh (huge pages
    # may serve it: a few dozen faults rather than 16,384)
    np.ones(1 << 23).sum()
    if sys.platform == "linux":
        assert page_faults() > before


def test_targets_read_medians_and_best_trials() -> None:
    """A target's verdict is of medians; ``best`` reads the rows' best trials."""
    from bench.report import evaluate_targets, markdown

    def row(system: str, key: str, lo: float, med: float, hi: float) -> dict:
        stat = {"median": med, "min": lo, "max": hi, "n": 3, "samples": [lo, med, hi]}
        return {"system": system, "status": OK, "metrics": {key: stat}}

    results = {
        "meta": {
            "quick": False,
            "date": "-",
            "machine": "-",
            "versions": "-",
            "command": "-",
            "repeats": 3,
            "pause": 0.1,
        },
        "systems": {},
        "workloads": [
            {  # a time: the best trial is the minimum
                "name": "mlp-128",
                "role": "mlp-small",
                "family": "mlp",
                "description": "-",
                "metrics": [{"key": "step", "unit": "ms", "scale": 1e3, "better": "lower"}],
                "rows": [
                    row("aengine sync", "step", 1.0, 2.0, 9.0),
                    row("numpy floor", "step", 0.9, 1.0, 1.1),
                ],
            },
            {  # a throughput: the best trial is the maximum
                "name": "concurrency",
                "family": "concurrency",
                "description": "-",
                "reference": "torch, 16 threads",
                "metrics": [
                    {"key": "throughput", "unit": "req/s", "scale": 1.0, "better": "higher"}
                ],
                "rows": [
                    row(
                        "aengine concurrent tasks (asyncio) in ae.Engine",
                        "throughput",
                        50,
                        100,
                        130,
                    ),
                    row("torch, 16 threads", "throughput", 90, 100, 100),
                ],
            },
        ],
    }
    readings = {
        t["target"]: (t["measured"], t["met"], t["best"], t["met_best"])
        for t in evaluate_targets(results)
    }
    assert readings["mlp-128 step vs numpy floor"] == ("2.00x", False, "1.11x", True)
    conc = "concurrency: aengine tasks (asyncio) vs torch in threads"
    assert readings[conc] == ("1.00x", False, "1.30x", True)
    results["targets"] = evaluate_targets(results)
    assert "| 2.00x | at most 1.30x | MISSED | 1.11x (met) |" in markdown(results)


def test_opcost_tool_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.opcost``: one row per op, aengine's time and its ratio to torch's."""
    from bench.opcost import main as opcost

    opcost(["--calls", "20", "--rounds", "1"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines()[2:] if line.strip()]
    assert [r[:22].strip() for r in rows] == [
        "leaf * number",
        "tensor * number",
        "tensor + number",
        "sin",
        "sum",
        "0-d tensor + tensor",
    ]
    assert all(float(r[22:].split()[0]) > 0 for r in rows), out  # aengine's ns per call


def test_plans_and_gcshare_tools_run(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.plans`` (gradients checked equal) and ``python -m bench.gcshare``."""
    from aengine.core._plan import PLANS
    from bench.gcshare import main as gcshare
    from bench.plans import main as plans

    plans(["--only", "chain-3k", "--rounds", "1", "--steps", "4"])
    out = capsys.readouterr().out
    assert "chain-3k   on/off" in out and PLANS.enabled
    # a plan of the 3,002 nodes, its size per node (held in lists and arrays, no node)
    assert "chain-3k   plan: 3002 nodes, " in out and " bytes per node" in out
    gcshare(["--nodes", "300", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "its share" in out
    # a chain link: 3 nodes (each the list of its next nodes) and the Tensor
    # sin saves (+ sum, leaf); no tuple of edges per node
    assert "tracked objects left per recorded node: 1.3" in out and "(302 nodes;" in out
    assert "tuple 0.0" in out


def test_offload_calibration_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.offload --calibrate``: a hop's cost and a row per kernel."""
    from bench.offload import main as offload

    offload(["--calibrate", "--quick"])
    out = capsys.readouterr().out
    assert "thread hop: asyncio" in out and " us, trio " in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 24  # 4 kernels x 3 widths x 2 dtypes
    # the products of width 128 run inline, those of width 512 in a thread
    assert "| matmul | float32 | 128 | 262144 |" in out
    assert all(("inline" in r) == (int(r.split("|")[4]) < 1 << 19) for r in rows)


def test_offload_small_model_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.offload --small-model``: sync and four awaited ways, one round."""
    from bench.offload import main as offload

    offload(["--small-model", "--quick"])
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("| 1 |")]
    assert len(row) == 1 and row[0].count("x)") == 4, out


def test_walk_counts_the_calls_of_one_gradient(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.walk``: every call into aengine during one awaited backward."""
    from bench.walk import main as walk_main
    from bench.walk import walk

    calls = walk()
    files = {f for f, _ in calls}
    assert ("runtime/_drivers.py", "run_async") in calls and ("core/_graph_task.py", "run") in calls
    assert "core/_graph_task.py" in files and len(calls) > len(files) > 5
    walk_main(["--list"])
    out = capsys.readouterr().out
    assert f"{len(calls)} calls, {len(files)} files, " in out


def test_ops_tool_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="bench.ops compares with torch (CPU), not installed")
    from bench import ops

    assert ops.main(["--quick", "--only", "small"]) == 0
    out = capsys.readouterr().out
    assert "| exp |" in out and "median ratio over" in out
    # the small cases come from the operator table, one per entry torch has
    assert [c[0] for c in ops.small_cases(["exp", "sum"])] == ["exp", "sum"]
    names = [c[0] for c in ops.small_cases(["exp", "sum"])]
    assert names == ["exp"] or set(names) <= {"exp", "sum"}


def test_models_tool_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m bench.models --quick``: a row per model (time, memory) and the target lines."""
    pytest.importorskip("torch", reason="bench.models compares with torch (CPU), not installed")
    from bench import models

    assert models.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for name in models.MODELS:
        assert out.count(f"| {name} |") == 2, out  # the time row and the memory row
        assert f"| {name} training step vs torch (one BLAS thread) |" in out, out
        assert f"| {name} peak memory of a step vs torch |" in out, out
        assert f"- {name}: aengine " in out, out


def test_scale_targets_and_memory_read_a_record() -> None:
    """bench.scale's target lines from a record (the workload itself takes minutes)."""
    from bench import scale

    def row(system: str, tput: float, health: float, rss: float) -> dict:
        return {
            "system": system,
            "metrics": {
                "throughput": {"median": tput},
                "health_p99": {"median": health},
                "server_rss_mb": {"median": rss},
            },
        }

    rec = {
        "rows": [
            row(scale.ONE, 100.0, 0.009, 80.0),
            row(scale.TWO, 150.0, 0.008, 82.0),
            row(scale.SERVE, 120.0, 0.02, 200.0),
            row(scale.TORCH_TWO, 140.0, 0.05, 400.0),
            {"system": scale.TORCH_ONE, "status": "unavailable: no torch", "metrics": {}},
        ]
    }
    lines = scale.targets(rec)
    assert "| 2 uvicorn workers vs 1 process, throughput | 1.50x | at least 1.4x | met |" in lines
    assert "| 2 Ray Serve replicas vs 1 process, throughput | 1.20x | at least 1.4x | missed |" in lines
    assert "| 2 Ray Serve replicas: /health p99 (ms) | 20.0 | at most 10 | missed |" in lines
    assert "| 2 aengine workers vs torch's 2, throughput | 1.07x | at least 1x | met |" in lines
    memory = scale.memory(rec)
    assert f"| {scale.SERVE} | 200 |" in memory and f"| {scale.TORCH_ONE} | - |" in memory
