"""``make demo`` (aengine/_demo.py): it runs, and what it prints holds."""

from __future__ import annotations

import json
import re

import pytest

from aengine import _demo

LINE = re.compile(
    r"  (await ae\.grad|blocking backward): +the ticker ran +(\d+) of +(\d+) expected times "
    r"\(worst gap +(\d+\.\d) ms\); final loss (\d+\.\d+)$"
)


def test_main_prints_the_comparison_under_asyncio_and_trio(capsys, tmp_path):
    # a small model: the same code paths in milliseconds (warnings are errors
    # here, so the blocking variant's RuntimeWarning must be silenced by it)
    trace = tmp_path / "trace.json"
    _demo.main(steps=3, depth=4, width=8, trace=str(trace))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "3 training steps of an MLP (4 hidden layers of width 8) "
        "while a task on the same event loop ticks every 1 ms:"
    )
    assert lines[1] == "[asyncio]" and lines[4] == "[trio]"
    for first in (2, 5):
        awaited, blocking = LINE.match(lines[first]), LINE.match(lines[first + 1])
        assert awaited and blocking, lines[first : first + 2]
        assert awaited[1] == "await ae.grad" and blocking[1] == "blocking backward"
        assert blocking[2] == "0"  # the blocking variant never lets the ticker run
        assert awaited[5] == blocking[5]  # the same gradients, the same final loss
    assert lines[7].startswith("`await ae.grad` lets the loop run other tasks")
    # then a profile of two steps, written as a trace, and how to open it
    assert lines[10].startswith("ae.profile() of 2 more steps (asyncio): ")
    assert lines[11] == f"  {trace}"
    assert "https://ui.perfetto.dev" in lines[12] and "chrome://tracing" in lines[13]
    assert len(lines) == 15
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["cat"] == "node" for e in events) == int(lines[10].split()[6].replace(",", ""))


@pytest.mark.anyio
async def test_the_ticker_runs_during_await_ae_grad_only():
    # long enough for several time slices (a few ms at least)
    awaited = await _demo.measure(steps=10, depth=20, width=8, blocking=False)
    blocking = await _demo.measure(steps=10, depth=20, width=8, blocking=True)
    assert awaited.ticks >= 1
    assert blocking.ticks == 0
    assert blocking.worst_gap == pytest.approx(blocking.seconds)
    assert awaited.loss == blocking.loss


def test_main_skips_trio_where_it_is_not_installed(capsys, tmp_path, monkeypatch):
    """trio is optional: without it the demo runs under asyncio and says so."""
    monkeypatch.setattr(_demo, "_importable", lambda module: module != "trio")
    _demo.main(steps=2, depth=4, width=8, trace=str(tmp_path / "trace.json"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "[asyncio]" and LINE.match(lines[2]) and LINE.match(lines[3])
    assert lines[4:6] == ["[trio]", "  trio is not installed: skipped (pip install trio)"]
    assert lines[6].startswith("`await ae.grad` lets the loop run other tasks")


def test_main_runs_where_trio_cannot_be_imported(capsys, tmp_path, monkeypatch):
    """As in an environment without trio (its import fails): no crash, the skip said."""
    import sys

    monkeypatch.setitem(sys.modules, "trio", None)  # ``import trio`` raises ImportError
    with pytest.raises(ImportError):
        import trio  # noqa: F401
    _demo.main(steps=2, depth=4, width=8, trace=str(tmp_path / "trace.json"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "[asyncio]" and LINE.match(lines[2]) and LINE.match(lines[3])
    assert lines[4:6] == ["[trio]", "  trio is not installed: skipped (pip install trio)"]
