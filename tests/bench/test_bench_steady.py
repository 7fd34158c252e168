"""The ``steady`` benchmark family (bench/steady.py) in its quick sizes.

Times are never asserted; what is checked is the record's structure (one
workload per graph family, every system a row, every metric a sample) and
that every row's gradients matched torch's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from bench.cli import FULL, QUICK
from bench.harness import OK
from bench.steady import STEADY_SYSTEMS, steady_workloads
from tests.paths import ROOT

METRICS = [
    "fwd step 1",
    "fwd later",
    "fwd later/first",
    "bwd step 1",
    "bwd later",
    "bwd later/first",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("torch", reason="torch (the gradient oracle) is not installed")
    pytest.importorskip("trio", reason="the steady family's trio row needs trio")
    out = tmp_path_factory.mktemp("steady")
    # a process of its own: the run freezes the collector's heap (bench/cli.py)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            "steady",
            "--quiet",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "latest.md").read_text().count("## steady-") == len(QUICK["steady"]["workloads"])
    return json.loads((out / "latest.json").read_text())  # type: ignore[no-any-return]


def test_quick_steady_run_has_a_checked_row_per_system(results: dict[str, Any]) -> None:
    wls = results["workloads"]
    assert [wl["family"] for wl in wls] == ["steady"] * len(QUICK["steady"]["workloads"])
    assert [wl["name"] for wl in wls] == ["steady-chain-300", "steady-wide-50", "steady-mlp-8"]
    for wl in wls:
        assert wl["steps"] == QUICK["steady"]["steps"]
        assert [m["key"] for m in wl["metrics"]] == METRICS
        assert [r["system"] for r in wl["rows"]] == list(STEADY_SYSTEMS)
        for row in wl["rows"]:
            assert row["status"] == OK, (wl["name"], row["system"], row["status"])
            for key in METRICS:
                stat = row["metrics"][key]
                assert stat["n"] == 1 and stat["median"] > 0, (wl["name"], row["system"], key)


def test_steady_stays_out_of_the_default_full_run() -> None:
    assert FULL["steady"]["default"] is False
    names = [wl.name for wl, _ in steady_workloads(FULL["steady"]["workloads"])]
    assert names == ["chain-30k", "wide-10k", "mlp-128", "mlp-1024"]
    with pytest.raises(ValueError, match="unknown workload family 'conv'"):
        steady_workloads([("conv", 3, 1)])
