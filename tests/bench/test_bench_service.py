"""The ``service`` benchmark workload (bench/http_service.py) in its smallest size.

Real uvicorn servers on 127.0.0.1, 2 clients, 20 requests: what is checked
is the record's structure and that every row answered right (each server's
norm against torch's), never a time.
"""

from __future__ import annotations

import io
import math
import sys
from typing import Any

import pytest

from bench import _progress
from bench.report import evaluate_targets, markdown, workload_table

TINY: dict[str, Any] = {
    "clients": 2,
    "procs": 1,
    "requests": 20,
    "warmup": 1,
    "cap": 30.0,
    "idle": 0.2,
    "rounds": 1,
}


def _need(*modules: str) -> None:
    for mod in modules:
        pytest.importorskip(mod, reason=f"the service workload needs {mod}")


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    _need("torch", "uvicorn", "httpx", "fastapi")
    from bench.http_service import AENGINE, HANDLER, run_http_service

    logs: list[str] = []
    rec = run_http_service(TINY, logs.append, systems=[AENGINE, HANDLER])
    rec["logs"] = logs
    return rec


@pytest.mark.slow
def test_every_row_answers_like_torch(record: dict[str, Any]) -> None:
    from bench.http_service import AENGINE, HANDLER

    rows = {r["system"]: r for r in record["rows"]}
    assert list(rows) == [AENGINE, HANDLER]
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row["status"], record["logs"])
        answer = row["extras"]["answer"]
        assert math.isclose(answer["norm"], answer["torch"], rel_tol=2e-3)
        assert row["extras"]["load"]["requests"] == TINY["requests"]
        assert row["extras"]["load"]["capped"] is False


@pytest.mark.slow
def test_every_row_has_every_metric(record: dict[str, Any]) -> None:
    keys = [m["key"] for m in record["metrics"]]
    assert keys[:3] == ["throughput", "post_p50", "post_p99"]
    assert {"health_p99", "health_idle_p99", "lag_worst", "server_cpu", "load_cpu"} <= set(keys)
    for row in record["rows"]:
        for key in keys:
            stat = row["metrics"][key]
            assert stat["n"] == 1 and stat["median"] is not None, (row["system"], key)
        m = row["metrics"]
        assert m["throughput"]["median"] > 0
        assert 0 < m["post_p50"]["median"] <= m["post_p99"]["median"]
        assert m["lag_worst"]["median"] >= 0 or math.isnan(m["lag_worst"]["median"])
    assert record["family"] == "service" and record["references"][0] == record["reference"]


@pytest.mark.slow
def test_the_report_shows_both_ratios_and_the_targets(record: dict[str, Any]) -> None:
    table = workload_table(record)
    for ref in record["references"]:
        assert f"x {ref}" in table
    results = {
        "meta": {
            "quick": True,
            "date": "-",
            "machine": "-",
            "versions": "-",
            "command": "-",
            "repeats": 1,
            "pause": 0.0,
        },
        "systems": {},
        "workloads": [{**record, "role": "service"}],
    }
    targets = [t for t in evaluate_targets(results) if t["target"].startswith("service:")]
    assert len(targets) == 4
    # the threaded torch row was not run: the throughput against it is not measured
    assert [t["met"] is None for t in targets] == [False, False, True, False]
    assert "## service" in markdown(results)


def test_progress_bars_stay_off_the_output_without_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = io.StringIO()  # not a terminal: a log file, a pipe, a test's capture
    monkeypatch.setattr(sys, "stderr", err)
    try:
        assert _progress.enable() is False
        with _progress.bar(3, "x") as bar:
            bar.update()
            bar.set_postfix_str("y")
        _progress.write("a log line")
    finally:
        _progress.enable(False)
    assert err.getvalue() == "a log line\n"
