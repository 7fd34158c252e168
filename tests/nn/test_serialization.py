"""ae.save / ae.load: safetensors checkpoints that move between aengine and torch."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip


def _net(nn: Any) -> Any:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Linear(8, 3))


def test_round_trip_keeps_names_values_and_dtypes(tmp_path: Path) -> None:
    m = _net(ae.nn)
    m(ae.randn(5, 4))  # moves the batch-norm statistics
    path = tmp_path / "m.safetensors"
    ae.save(m.state_dict(), path)
    loaded = ae.load(path)
    assert list(loaded) == list(m.state_dict()) or set(loaded) == set(m.state_dict())
    for k, v in m.state_dict().items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
    fresh = _net(ae.nn)
    fresh.load_state_dict(loaded)
    x = ae.randn(2, 4)
    m.eval(), fresh.eval()
    np.testing.assert_array_equal(m(x).detach().numpy(), fresh(x).detach().numpy())


def test_torch_checkpoint_loads_into_aengine_and_back(tmp_path: Path) -> None:
    torch = torch_or_skip()
    st = pytest.importorskip("safetensors.torch", reason="safetensors' torch API not installed")
    torch.manual_seed(0)
    tm = _net(torch.nn).eval()
    path = tmp_path / "torch.safetensors"
    st.save_file(tm.state_dict(), str(path))
    am = _net(ae.nn).eval()
    am.load_state_dict(ae.load(path))
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    xa = ae.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    ya, yt = am(xa), tm(xt)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    ya.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    # and back: aengine's file in torch
    back = tmp_path / "ae.safetensors"
    ae.save(am.state_dict(), back)
    tm2 = _net(torch.nn).eval()
    tm2.load_state_dict(st.load_file(str(back)))
    np.testing.assert_array_equal(tm2(torch.from_numpy(x)).detach().numpy(), yt.detach().numpy())


def test_optimizer_state_saves_and_loads(tmp_path: Path) -> None:
    w = ae.nn.Parameter(ae.ones(3))
    opt = ae.optim.Adam([w], lr=0.1)
    for _ in range(2):
        w.grad = ae.full((3,), 0.5)
        opt.step()
    path = tmp_path / "opt.safetensors"
    ae.save(opt.state_dict(), path)
    sd = ae.load(path)
    assert sd["param_groups"][0]["betas"] == (0.9, 0.999)
    w2 = ae.nn.Parameter(ae.tensor(w.detach().numpy().copy()))
    opt2 = ae.optim.Adam([w2], lr=0.1)
    opt2.load_state_dict(sd)
    for o, p in ((opt, w), (opt2, w2)):
        p.grad = ae.full((3,), 0.5)
        o.step()
    np.testing.assert_array_equal(w.detach().numpy(), w2.detach().numpy())


def test_streams_and_devices() -> None:
    buf = io.BytesIO()
    ae.save({"a": ae.arange(3.0)}, buf)
    buf.seek(0)
    out = ae.load(buf, map_location="sim:0")
    assert out["a"].device == ae.device("sim:0") and out["a"].cpu().tolist() == [0.0, 1.0, 2.0]


def test_bad_files_and_keys_say_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="bad.safetensors is not a safetensors checkpoint"):
        ae.load(bad)
    with pytest.raises(FileNotFoundError):
        ae.load(tmp_path / "missing.safetensors")
    with pytest.raises(TypeError, match="takes a dict"):
        ae.save([ae.ones(1)], tmp_path / "x")  # type: ignore[arg-type]
    m = ae.nn.Linear(2, 2)
    path = tmp_path / "m.safetensors"
    ae.save({"weight": ae.ones(3, 2), "bias": ae.ones(2)}, path)
    before = m.weight.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        m.load_state_dict(ae.load(path))
    np.testing.assert_array_equal(m.weight.detach().numpy(), before)
