"""examples/tiny_gpt.py: the model against a torch twin, AdamW steps against torch's, the script.

The twin is the same GPT written with torch.nn (same module names, so the
state_dicts share their keys); it gets the aengine model's weights, and the
logits, the loss and every parameter's gradient must equal torch's in
float64, as must the parameters after a few AdamW steps with the example's
warmup/cosine schedule.  The script itself runs once as a user would, in a
subprocess, on tiny settings; a longer in-process run checks it solves the
task.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip
from tests.paths import ROOT

SCRIPT = ROOT / "examples" / "tiny_gpt.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_tiny_gpt", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpt = load()


def torch_twin(torch: Any, vocab: int, block_size: int, d: int, layers: int, heads: int) -> Any:
    """The example's TinyGPT written with torch.nn: the same names, the same arithmetic."""
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class TinyGPT(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(block_size, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return TinyGPT()


def pair(torch: Any, digits: int = 4, d: int = 16, layers: int = 2, heads: int = 4) -> Any:
    """The example's model (float64, its own init made less trivial) and torch's twin of it."""
    am = gpt.TinyGPT(len(gpt.VOCAB), 2 * digits, d, layers, heads).double()
    with ae.no_grad():  # the example zeroes biases and sets LayerNorm to 1/0: perturb all
        for p in am.parameters():
            p.add_(0.1 * ae.randn(*p.shape, dtype=ae.float64))
    tm = torch_twin(torch, len(gpt.VOCAB), 2 * digits, d, layers, heads).double()
    assert list(tm.state_dict()) == list(am.state_dict())
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in am.state_dict().items()})
    return am, tm


def batch(digits: int = 4, n: int = 5, seed: int = 0) -> tuple[Any, Any]:
    x, y = gpt.make_batch(np.random.default_rng(seed), n, digits)
    return gpt.training_tensors(x, y)


def close(a: Any, t: Any, what: str, rtol: float = 1e-8) -> None:
    np.testing.assert_allclose(
        a.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-12, err_msg=what
    )


def test_task_targets_only_the_answer() -> None:
    inp, tgt = gpt.training_tensors(np.array([[3, 1, 2]]), np.array([[1, 2, 3]]))
    assert gpt.decode(inp.tolist()[0]) == "3 1 2 | 1 2"
    assert tgt.tolist() == [[-100, -100, -100, 1, 2, 3]]


def test_forward_and_gradients_equal_torch() -> None:
    torch = torch_or_skip()
    am, tm = pair(torch)
    inp, tgt = batch()
    ti, tt = torch.from_numpy(inp.numpy()), torch.from_numpy(tgt.numpy())
    la, lt = am(inp), tm(ti)
    close(la, lt, "logits")
    v = len(gpt.VOCAB)
    loss_a = ae.nn.functional.cross_entropy(la.reshape(-1, v), tgt.reshape(-1), ignore_index=-100)
    loss_t = torch.nn.functional.cross_entropy(lt.reshape(-1, v), tt.reshape(-1), ignore_index=-100)
    close(loss_a, loss_t, "loss")
    loss_a.backward()
    loss_t.backward()
    grads = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        assert p.grad is not None, name
        close(p.grad, grads[name].grad, f"grad of {name}")


def test_causal_masking() -> None:
    torch = torch_or_skip()
    am, tm = pair(torch)
    inp, _ = batch()
    changed = inp.numpy().copy()
    changed[:, 5:] = (changed[:, 5:] + 3) % 10  # change every token from position 5 on
    la, lb = am(inp), am(ae.tensor(changed))
    np.testing.assert_array_equal(la.detach().numpy()[:, :5], lb.detach().numpy()[:, :5])
    assert not np.allclose(la.detach().numpy()[:, 5:], lb.detach().numpy()[:, 5:])
    close(lb, tm(torch.from_numpy(changed)), "logits of the changed input")


def test_adamw_steps_equal_torch() -> None:
    torch = torch_or_skip()
    am, tm = pair(torch, layers=1)
    steps, warmup = 6, 2

    def schedule(step: int) -> float:  # the example's shape: warmup, then a cosine
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1.0 + math.cos(math.pi * (step - warmup) / (steps - warmup)))

    opt_a = ae.optim.AdamW(am.parameters(), lr=3e-3, weight_decay=0.01)
    opt_t = torch.optim.AdamW(tm.parameters(), lr=3e-3, weight_decay=0.01)
    sch_a = ae.optim.lr_scheduler.LambdaLR(opt_a, schedule)
    sch_t = torch.optim.lr_scheduler.LambdaLR(opt_t, schedule)
    v = len(gpt.VOCAB)
    for step in range(steps):
        inp, tgt = batch(seed=step)
        ti, tt = torch.from_numpy(inp.numpy()), torch.from_numpy(tgt.numpy())
        loss_a = ae.nn.functional.cross_entropy(am(inp).reshape(-1, v), tgt.reshape(-1))
        loss_t = torch.nn.functional.cross_entropy(tm(ti).reshape(-1, v), tt.reshape(-1))
        close(loss_a, loss_t, f"loss at step {step}")
        for opt in (opt_a, opt_t):
            opt.zero_grad()
        loss_a.backward()
        loss_t.backward()
        opt_a.step()
        opt_t.step()
        sch_a.step()
        sch_t.step()
        assert sch_a.get_last_lr() == pytest.approx(sch_t.get_last_lr(), rel=1e-15)
    params = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        close(p, params[name], f"{name} after {steps} steps", rtol=1e-7)


def test_checkpoint_loads_into_torch() -> None:
    """ae.save's file is plain safetensors: torch's twin reads it and gives the same logits."""
    torch = torch_or_skip()
    st = pytest.importorskip("safetensors.torch")
    am, tm = pair(torch)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tiny_gpt_{os.getpid()}.safetensors")
    try:
        ae.save(am.state_dict(), path)
        tm.load_state_dict(st.load_file(path))
    finally:
        os.unlink(path)
    inp, _ = batch()
    close(am(inp), tm(torch.from_numpy(inp.numpy())), "logits after the round trip")


def test_generate_is_greedy_and_records_no_graph() -> None:
    model = gpt.TinyGPT(len(gpt.VOCAB), 6, 16, 1, 2)
    prompt = gpt.prompts(np.array([[3, 1, 2], [0, 0, 9]]))
    out = gpt.generate(model, prompt, 3)
    assert out.shape == (2, 3) and not out.requires_grad
    # step by step by hand: the argmax of the last position's logits, appended
    idx = prompt.numpy()
    for _ in range(3):
        with ae.no_grad():
            logits = model(ae.tensor(idx)).numpy()
        idx = np.concatenate([idx, logits[:, -1].argmax(-1)[:, None]], axis=1)
    np.testing.assert_array_equal(out.numpy(), idx[:, 4:])


def test_script_runs_end_to_end(tmp_path: Any) -> None:
    """As a user runs it, on tiny settings: it trains, decodes, saves and reloads identically."""
    ckpt = tmp_path / "gpt.safetensors"
    cmd = [
        sys.executable, str(SCRIPT), "--digits", "3", "--d-model", "16", "--layers", "1",
        "--heads", "2", "--steps", "20", "--batch", "16", "--eval", "20", "--log-every", "10",
        "--backend", "trio", "--save", str(ckpt),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the loaded model decodes identically" in proc.stdout, proc.stdout
    assert "step    20" in proc.stdout
    assert ckpt.exists()
    # the checkpoint is the model: loaded here, it decodes as the script's did
    model = gpt.TinyGPT(len(gpt.VOCAB), 6, 16, 1, 2)
    model.load_state_dict(ae.load(ckpt))
    held_out, _ = gpt.make_batch(np.random.default_rng(1), 20, 3)
    acc, _ = gpt.accuracy(model, held_out)
    assert f"held-out exact match {acc:.1%}" in proc.stdout


def test_script_solves_the_task(tmp_path: Any) -> None:
    """A small model learns to sort 4 digits: >= 95% exact match on held-out prompts (~5 s)."""
    argv = [
        "--digits", "4", "--d-model", "32", "--layers", "2", "--heads", "4", "--steps", "300",
        "--batch", "64", "--eval", "200", "--log-every", "50", "--target", "0.95",
        "--save", str(tmp_path / "gpt.safetensors"),
    ]  # fmt: skip
    out = gpt.main(argv)
    assert out["accuracy"] >= 0.95, out
    assert out["same_decoding"] and out["loaded_accuracy"] == out["accuracy"]


def test_script_on_another_device(tmp_path: Any) -> None:
    """--device moves the model and the batches (sim:0, the simulated accelerator, here)."""
    argv = [
        "--digits", "3", "--d-model", "16", "--layers", "1", "--heads", "2", "--steps", "4",
        "--batch", "8", "--eval", "10", "--log-every", "2", "--device", "sim:0",
        "--save", str(tmp_path / "gpt.safetensors"),
    ]  # fmt: skip
    out = gpt.main(argv)
    assert out["steps"] == 4 and out["same_decoding"]
