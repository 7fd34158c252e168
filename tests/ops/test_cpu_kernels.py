"""The numpy kernels of aengine/ops/_cpu_kernels.py.

The table tests compare erf and gelu with torch on small samples, which take
scipy's erf; these check the large-array float32 erf and gelu themselves (NOTE [A float32
erf for numpy], NOTE [A float32 gelu for numpy]): their error on a dense grid,
their special values, and erf and gelu on large inputs against float64 and torch; and that the branch-free masked
gradient (NOTE [A branch-free masked gradient]) has ``where``'s exact bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special
import torch

import aengine as ae
from aengine.ops._cpu_kernels import (
    cumsum_last,
    erf32,
    fast,
    gelu32,
    gelu32_grad,
    max_trailing,
    sum_leading,
    sum_trailing,
    where_zero,
)


def _grid() -> np.ndarray:
    x = np.linspace(-6.0, 6.0, 1_000_001, dtype=np.float32)
    tiny = np.float32(10.0) ** np.linspace(-38, 0, 4001).astype(np.float32)
    x = np.concatenate([x, tiny, -tiny, np.float32([3.92, -3.92, 3.9999998, -4.0])])
    return x.astype(np.float32)


def test_erf32_within_half_an_ulp() -> None:
    x = _grid()
    ref = scipy.special.erf(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    got = erf32(x)
    assert got.dtype == np.float32
    assert np.max(np.abs(got - ref) / ulp) < 0.52


def test_erf32_special_values_and_layouts() -> None:
    x = np.zeros(5000, np.float32)
    x[:6] = [np.nan, -0.0, np.inf, -np.inf, 50.0, -4.0]
    got = erf32(x)
    assert np.isnan(got[0]) and np.signbit(got[1]) and got[1] == 0
    assert got[2:6].tolist() == [1.0, -1.0, 1.0, -1.0]
    a = np.random.default_rng(0).standard_normal((100, 80)).astype(np.float32)
    ref = scipy.special.erf(a)
    np.testing.assert_allclose(erf32(a.T), ref.T, rtol=2e-7, atol=0)  # not C-contiguous
    b = a.copy()
    assert erf32(b, b) is b  # in place
    np.testing.assert_allclose(b, ref, rtol=2e-7, atol=0)
    assert fast(a) and not fast(a[:2]) and not fast(a.astype(np.float64))


def test_large_erf_gelu_match_float64_and_torch() -> None:
    a = (np.random.default_rng(1).standard_normal((64, 129)) * 3).astype(np.float32)
    a[0, :4] = [-30.0, -6.0, 30.0, 0.0]
    g = np.random.default_rng(2).standard_normal(a.shape).astype(np.float32)
    x64, g64 = a.astype(np.float64), g.astype(np.float64)
    pdf = np.exp(-x64 * x64 / 2) / np.sqrt(2 * np.pi)
    cases = [  # op, torch's, float64 value, float64 gradient, tolerance against them
        (
            ae.erf,
            torch.erf,
            scipy.special.erf(x64),
            g64 * 2 / np.sqrt(np.pi) * np.exp(-x64 * x64),
            (3e-7, 1.5e-7),  # erf32 rounds correctly; the gradient's float32 formula
        ),
        (
            ae.nn.functional.gelu,
            torch.nn.functional.gelu,
            x64 * scipy.special.ndtr(x64),
            g64 * (scipy.special.ndtr(x64) + x64 * pdf),
            (1e-6, 6e-7),  # NOTE [A float32 gelu for numpy] (torch's is off by up to 1.2e-6)
        ),
    ]
    for f, tf, ref, gref, (rtol, atol) in cases:
        x = ae.tensor(a, requires_grad=True)
        tx = torch.from_numpy(a.copy()).requires_grad_(True)
        y, ty = f(x), tf(tx)
        (gx,) = ae.sync.grad([y], [x], [ae.tensor(g)])
        (tgx,) = torch.autograd.grad([ty], [tx], [torch.from_numpy(g)])
        assert y.dtype == ae.float32 and gx.dtype == ae.float32
        np.testing.assert_allclose(y.detach().numpy(), ref, rtol=rtol, atol=atol)
        np.testing.assert_allclose(gx.numpy(), gref, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=2e-6)
        np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=2e-6)


def test_gelu32_accuracy_on_a_dense_grid() -> None:
    # NOTE [A float32 gelu for numpy]: its error bounds, where torch's float32 gelu is
    # 5, 38 and 2200 ulp and 1.2e-6 absolute
    x = np.concatenate([np.linspace(-12.0, 12.0, 2_000_001, dtype=np.float32), _grid()])
    x64 = x.astype(np.float64)
    ref = x64 * scipy.special.ndtr(x64)
    got = gelu32(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    err = np.abs(got - ref)
    ulp = err / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert err.max() < 6.5e-7
    assert ulp[x > -1].max() < 5 and ulp[x > -2].max() < 20 and ulp[x > -3].max() < 200
    assert np.array_equal(got[x >= 5.5], x[x >= 5.5])  # Phi rounds to 1 there, as torch's
    pdf = np.exp(-x64 * x64 / 2) / np.sqrt(2 * np.pi)
    gref = scipy.special.ndtr(x64) + x64 * pdf
    gg = gelu32_grad(x, np.ones_like(x))
    assert np.abs(gg - gref).max() < 6.5e-7
    # a gradient of another layout or a broadcast one: the same values
    np.testing.assert_array_equal(gelu32_grad(x, np.float32(2.0)), gg * 2)


def test_gelu32_special_values_and_layouts() -> None:
    x = np.zeros(5000, np.float32)
    x[:8] = [np.nan, -0.0, np.inf, -np.inf, 1e30, -1e30, -8.0, 0.5]
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    ty = torch.nn.functional.gelu(tx)
    got, want = gelu32(x), ty.detach().numpy()
    # nan, -0.0, (inf), nan, x, -0.0, -0.0; gelu(inf) is inf (aengine's small-array
    # formula too) where torch's kernel gives nan
    assert got[2] == np.inf and np.isnan(want[2])
    keep = [0, 1, 3, 4, 5, 6]
    np.testing.assert_array_equal(got[keep], want[keep])
    assert np.signbit(got[[1, 5, 6]]).all()
    g = np.random.default_rng(7).standard_normal(x.shape).astype(np.float32)
    (tgx,) = torch.autograd.grad([ty], [tx], [torch.from_numpy(g)])
    np.testing.assert_allclose(gelu32_grad(x, g)[:8], tgx.numpy()[:8], rtol=1e-6, atol=1e-7)
    a = np.random.default_rng(8).standard_normal((100, 80)).astype(np.float32)
    ga = np.random.default_rng(9).standard_normal((80, 100)).astype(np.float32).T
    np.testing.assert_array_equal(gelu32(a.T), gelu32(a.T.copy()))  # not C-contiguous
    np.testing.assert_array_equal(gelu32_grad(a, ga), gelu32_grad(a, ga.copy()))


def test_large_tanh_gelu_matches_torch() -> None:
    a = (np.random.default_rng(3).standard_normal((64, 129)) * 3).astype(np.float32)
    g = np.random.default_rng(4).standard_normal(a.shape).astype(np.float32)
    x = ae.tensor(a, requires_grad=True)
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    y = ae.nn.functional.gelu(x, approximate="tanh")
    ty = torch.nn.functional.gelu(tx, approximate="tanh")
    (gx,) = ae.sync.grad([y], [x], [ae.tensor(g)])
    (tgx,) = torch.autograd.grad([ty], [tx], [torch.from_numpy(g)])
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    # 1 - tanh^2 near saturation (x < -3) magnifies one ulp of numpy's tanh against torch's
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=5e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_where_zero_is_where(dtype: Any) -> None:
    rng = np.random.default_rng(5)
    g = rng.standard_normal((70, 90)).astype(dtype)
    g[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    mask = rng.standard_normal((70, 90)) > 0
    mask[0, :4] = False
    for gg, m in [(g, mask), (g.T, mask.T), (np.broadcast_to(g[:1], g.shape), mask)]:
        got = where_zero(m, gg)
        want = np.where(m, gg, dtype(0))
        assert got.dtype == gg.dtype
        assert got.tobytes() == want.tobytes()  # the same bits, +0.0 included
    assert where_zero(mask, np.ones((70, 90), np.int64)) is None
    assert where_zero(mask[:2], g[:2]) is None  # small: numpy's where


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blocked_cumsum(reverse: bool, dtype: Any) -> None:
    a = np.random.default_rng(6).standard_normal((3, 40, 1024)).astype(dtype)
    got = cumsum_last(a, reverse)
    assert got is not None and got.dtype == dtype and got.shape == a.shape
    flip = (lambda v: v[..., ::-1]) if reverse else (lambda v: v)
    exact = flip(np.cumsum(flip(a.astype(np.longdouble)), axis=-1))
    seq = flip(np.cumsum(flip(a), axis=-1))  # numpy's one-by-one scan
    err, seq_err = np.abs(got - exact).max(), np.abs(seq - exact).max()
    # rounding errors of the order of numpy's (and of float precision at the sums' scale)
    scale = float(np.abs(exact).max()) * np.finfo(dtype).eps
    assert err <= max(seq_err, 16 * scale), (err, seq_err, scale)
    # where it does not apply: numpy's scan (None)
    b = a.copy()
    b[0, 0, 5] = np.inf
    assert cumsum_last(b, reverse) is None
    assert cumsum_last(a[..., :1000], reverse) is None  # not a multiple of the block
    assert cumsum_last(a[..., ::2], reverse) is None  # not contiguous
    assert cumsum_last(a.astype(np.int64), reverse) is None


def test_large_cumsum_matches_torch() -> None:
    a = np.random.default_rng(7).standard_normal((64, 1024)).astype(np.float32)
    g = np.random.default_rng(8).standard_normal(a.shape).astype(np.float32)
    x = ae.tensor(a, requires_grad=True)
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    y, ty = ae.cumsum(x, 1), torch.cumsum(tx, 1)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=2e-5)
    (gx,) = ae.sync.grad([y], [x], [ae.tensor(g)])
    (tgx,) = torch.autograd.grad([ty], [tx], [torch.from_numpy(g)])
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize(
    ("shape", "dims"),
    [
        ((256, 1024), (1,)),
        ((64, 4, 256), (1, 2)),
        ((64, 1000), (1,)),
        ((1 << 17,), (0,)),
        # short rows: a product with ones, at any size
        ((32, 16, 64), (2,)),
        ((2048, 4, 4), (1, 2)),
        ((3, 5), (1,)),
        ((7,), (0,)),
    ],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_trailing(shape: tuple[int, ...], dims: tuple[int, ...], keepdims: bool) -> None:
    a = (np.random.default_rng(9).standard_normal(shape) + 0.5).astype(np.float32)
    got = sum_trailing(a, dims, keepdims)
    want = a.sum(axis=dims, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == np.float32
    exact = a.astype(np.float64).sum(axis=dims, keepdims=keepdims)
    scale = np.abs(a).astype(np.float64).sum(axis=dims, keepdims=keepdims)
    # as accurate as numpy's pairwise sum (a small multiple of eps times the sum of |a|)
    assert np.max(np.abs(got - exact) / scale) < 4 * np.max(np.abs(want - exact) / scale) + 1e-7
    # not blocked: numpy's own sum, exactly
    for b, d in [
        (a[..., ::2], dims),
        (a.astype(np.int64), dims),
        (a, (0,) if len(shape) > 1 else ()),
    ]:
        np.testing.assert_array_equal(
            sum_trailing(b, d, keepdims), b.sum(axis=d, keepdims=keepdims)
        )


@pytest.mark.parametrize(
    ("shape", "dims"), [((32, 4, 16, 16), (3,)), ((512, 8, 8), (1, 2)), ((4, 16), (1,))]
)
def test_max_trailing_is_numpys_max(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    a = np.random.default_rng(13).standard_normal(shape).astype(np.float32)
    a.reshape(-1)[[0, 17, 40]] = [np.nan, np.inf, -np.inf]
    want = a.max(axis=dims, keepdims=True)
    for b in (a, a.astype(np.float64)):
        got = max_trailing(b, dims)
        assert got.shape == want.shape and got.dtype == b.dtype
        np.testing.assert_array_equal(got, want.astype(b.dtype))
    np.testing.assert_array_equal(
        max_trailing(a[..., ::2], dims), a[..., ::2].max(dims, keepdims=True)
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "lead"), [((32, 16, 64), 2), ((512, 3), 1), ((4, 600), 1)])
def test_sum_leading(shape: tuple[int, ...], lead: int, dtype: Any) -> None:
    a = (np.random.default_rng(12).standard_normal(shape) + 0.5).astype(dtype)
    dims = tuple(range(lead))
    got, want = sum_leading(a, lead), a.sum(axis=dims)
    assert got.shape == want.shape and got.dtype == dtype
    exact = a.astype(np.longdouble).sum(axis=dims)
    scale = np.abs(a).astype(np.longdouble).sum(axis=dims)
    eps = np.finfo(dtype).eps
    # as accurate as numpy's sum, give or take a few roundings
    assert np.max(np.abs(got - exact) / scale) < 4 * np.max(np.abs(want - exact) / scale) + 8 * eps
    # other layouts and dtypes: numpy's own sum, exactly
    for b in (a[::2], a.astype(np.int64)):
        np.testing.assert_array_equal(sum_leading(b, lead), b.sum(axis=dims))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("name", "shape"),
    [("softmax", (128, 1024)), ("log_softmax", (96, 1000)), ("sum", (64, 2, 1024))],
)
def test_large_reductions_match_torch(name: str, shape: tuple[int, ...], dtype: str) -> None:
    a = np.random.default_rng(10).standard_normal(shape).astype(dtype)
    g = np.random.default_rng(11).standard_normal(shape[:-1] if name == "sum" else shape)
    g = g.astype(dtype)
    x = ae.tensor(a, requires_grad=True)
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    y, ty = getattr(ae, name)(x, -1), getattr(torch, name)(tx, -1)
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (1e-12, 1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=atol)
    for gg in (g, np.ones_like(g)):  # (ones: the broadcast gradient of a sum)
        (gx,) = ae.sync.grad([y], [x], [ae.tensor(gg)], retain_graph=True)
        (tgx,) = torch.autograd.grad([ty], [tx], [torch.from_numpy(gg)], retain_graph=True)
        np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=rtol, atol=atol)
