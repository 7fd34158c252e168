"""examples/digits_cnn.py: its training steps are torch's, it runs as a script, it checkpoints.

torch is the oracle: the same architecture written with torch.nn (``TorchDigitsCNN``
below) starts from the same weights, takes the same AdamW + one-cycle steps on the
same batches in float64, and reads the example's checkpoint with safetensors.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip
from tests.paths import ROOT

pytest.importorskip("sklearn", reason="the examples extra (scikit-learn) is not installed")

SCRIPT = ROOT / "examples" / "digits_cnn.py"
WAIT = 120.0  # the bound of the script's run: generous for a loaded machine


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_digits_cnn", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


digits = load_example()


def torch_twin(torch: Any, dropout: float = 0.0) -> Any:
    """DigitsCNN written with torch.nn: the same layers, names and arithmetic."""
    nn = torch.nn

    class TorchDigitsCNN(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc1 = nn.Linear(32 * 2 * 2, 64)
            self.drop = nn.Dropout(dropout)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x: Any) -> Any:
            x = self.pool(torch.relu(self.conv1(x)))
            x = self.pool(torch.relu(self.conv2(x)))
            x = self.drop(torch.relu(self.fc1(x.flatten(1))))
            return self.fc2(x)

    return TorchDigitsCNN()


def test_the_model_imports_from_the_examples_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    try:
        module = importlib.import_module("digits_cnn")
        assert {"DigitsCNN", "build_model", "load_model"} <= set(vars(module))
        assert module.DigitsCNN.__doc__
    finally:
        sys.modules.pop("digits_cnn", None)


def test_the_model_has_torchs_parameters() -> None:
    torch = torch_or_skip()
    model = digits.DigitsCNN()
    twin = torch_twin(torch)
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert ours == {k: tuple(v.shape) for k, v in twin.state_dict().items()}
    assert sum(p.numel() for p in model.parameters()) == 13_706
    # and the docstrings' examples run
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(digits, "digits_cnn", globs={"ae": ae, **vars(digits)}):
        assert runner.run(test).failed == 0, test.name


@pytest.mark.anyio
async def test_the_first_training_steps_equal_torchs() -> None:
    torch = torch_or_skip()
    steps, lr, weight_decay = 4, 5e-3, 1e-2
    x_train, y_train, _, _ = digits.load_data()
    x_train = x_train.astype(np.float64)
    order = digits.batches(len(x_train), 32)[:steps]  # the example's first batches

    torch.manual_seed(0)
    twin = torch_twin(torch).double()
    model = digits.DigitsCNN(dropout=0.0).double()
    model.load_state_dict(twin.state_dict())  # torch's tensors load directly
    opt, schedule = digits.make_optimizer(model, lr, weight_decay, total_steps=steps + 2)
    topt = torch.optim.AdamW(twin.parameters(), lr=lr, weight_decay=weight_decay)
    tschedule = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=lr, total_steps=steps + 2)

    for k, idx in enumerate(order):
        loss = await digits.train_step(model, opt, schedule, x_train[idx], y_train[idx])
        tloss = torch.nn.functional.cross_entropy(
            twin(torch.from_numpy(x_train[idx])), torch.from_numpy(y_train[idx])
        )
        topt.zero_grad()
        tloss.backward()
        topt.step()
        tschedule.step()
        assert loss == pytest.approx(tloss.item(), rel=1e-9), f"step {k + 1}"
        for (name, p), tp in zip(model.named_parameters(), twin.parameters()):
            np.testing.assert_allclose(
                p.detach().numpy(), tp.detach().numpy(), rtol=1e-9, atol=1e-12,
                err_msg=f"{name} after step {k + 1}",
            )  # fmt: skip
        assert opt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12)
        assert opt.param_groups[0]["betas"] == pytest.approx(topt.param_groups[0]["betas"])


def test_the_script_runs_and_saves_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "digits.safetensors"
    args = ["--epochs", "1", "--limit", "300", "--batch-size", "50", "--save", str(path)]
    # the checkout's aengine, the one this test imports, first on the script's path
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"^test accuracy (\d+\.\d\d)% \((\d+)/360\)", proc.stdout, re.M)
    assert found, proc.stdout
    assert path.exists(), proc.stdout
    # the saved weights give the accuracy the script printed
    _, _, x_test, y_test = digits.load_data()
    model = digits.load_model(path)
    assert not model.training
    correct = round(digits.accuracy(model, x_test, y_test) * len(y_test))
    assert correct == int(found.group(2))


@pytest.mark.anyio
async def test_a_short_run_learns() -> None:
    args = digits.parse_args(["--epochs", "5"])  # 95.6% (about a second)
    ticks = 0

    async def ticker() -> None:  # another task of the loop, running while the model trains
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        result = await digits.main(args)
        tg.cancel_scope.cancel()
    assert result["accuracy"] > 0.9
    assert ticks > 0


def test_a_checkpoint_round_trips_through_ae_load_and_torch(tmp_path: Path) -> None:
    torch = torch_or_skip()
    safetensors_torch = pytest.importorskip("safetensors.torch", reason="safetensors' torch part")
    _, _, x_test, _ = digits.load_data()
    model = digits.build_model(seed=1)
    model.eval()
    path = tmp_path / "digits.safetensors"
    ae.save(model.state_dict(), path)

    fresh = digits.build_model(seed=2)  # other weights until the checkpoint loads
    with ae.no_grad():
        assert not np.array_equal(
            fresh(ae.tensor(x_test)).numpy(), model(ae.tensor(x_test)).numpy()
        )
        logits = model(ae.tensor(x_test)).numpy()
        loaded = digits.load_model(path)
        np.testing.assert_array_equal(loaded(ae.tensor(x_test)).numpy(), logits)

    twin = torch_twin(torch)
    twin.load_state_dict(safetensors_torch.load_file(str(path)))
    twin.eval()
    with torch.no_grad():
        tlogits = twin(torch.from_numpy(x_test)).numpy()
    np.testing.assert_allclose(logits, tlogits, rtol=1e-4, atol=1e-5)
    assert (logits.argmax(1) == tlogits.argmax(1)).mean() > 0.99
