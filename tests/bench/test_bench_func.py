"""``python -m bench.func --quick`` runs and prints one table per model (a smoke test)."""

from __future__ import annotations

import pytest

from tests.oracle import torch_or_skip

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


def test_quick_run_prints_both_models(capsys: pytest.CaptureFixture[str]) -> None:
    torch_or_skip()
    from bench import func

    func.main(["--quick"])
    out = capsys.readouterr().out
    for model in ("mlp", "cnn"):
        assert f"#### {model}, batch 16" in out
    for way in (
        "ae vmap(grad)",
        "ae per-sample loop",
        "ae batched backward",
        "torch.func vmap(grad)",
    ):
        assert out.count(f"| {way} |") == 2
    # the per-sample gradients agree with torch's (the printed max difference)
    diffs = [
        float(line.split(": ")[2].split(";")[0])
        for line in out.splitlines()
        if "max |ae - torch|" in line
    ]
    assert len(diffs) == 2 and max(diffs) < 1e-4
