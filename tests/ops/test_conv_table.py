"""Convolutions, pooling, padding and interpolation: what the table's harness cannot say.

The table (tests/ops/test_table.py) checks every entry's samples against
torch to the second derivative; these add: 'same' padding with an even
kernel (torch warns there, which the harness turns into an error), third
derivatives, a second backward after the columns kept for the first were
spent, the workspace's buffers, NaN and -inf in max pooling, and the index
arithmetic of nearest and bilinear interpolation over many sizes.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.ops import _conv
from tests.oracle import check_op, torch_or_skip

F = ae.nn.functional


def test_conv_same_padding_even_kernel() -> None:
    torch = torch_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: an even kernel with 'same'
        check_op(
            lambda x, w, b: F.conv2d(x, w, b, padding="same"),
            lambda x, w, b: torch.nn.functional.conv2d(x, w, b, padding="same"),
            [(2, 3, 5, 6), (4, 3, 4, 2), (4,)],
        )
        check_op(
            lambda x, w: F.conv1d(x, w, padding="same", dilation=3),
            lambda x, w: torch.nn.functional.conv1d(x, w, padding="same", dilation=3),
            [(2, 3, 9), (2, 3, 2)],
        )


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"stride": 2, "padding": 1},
        {"groups": 2, "dilation": 2, "padding": (0, 1)},
    ],
)
def test_conv2d_third_derivatives(kw: dict[str, Any]) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in [(2, 4, 6, 5), (4, 2, 3, 3)]]
    if not kw.get("groups"):
        arrays[1] = rng.standard_normal((4, 4, 3, 3))
    xs = [ae.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]

    def third(lib: Any, fn: Any, leaves: list[Any]) -> list[Any]:
        y = fn(*leaves, **kw)
        g = lib.grad([(y * y).sum()], leaves, create_graph=True)
        h = lib.grad([sum((gi * gi).sum() for gi in g)], leaves, create_graph=True)
        return list(lib.grad([sum((hi * hi.detach()).sum() for hi in h)], leaves))

    got = third(ae.sync, F.conv2d, xs)
    want = third(torch.autograd, torch.nn.functional.conv2d, ts)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-8, atol=1e-8)


def test_conv_transpose_output_padding_beyond_stride() -> None:
    """output_padding may reach the dilation: the last positions only get the bias."""
    torch = torch_or_skip()
    kw = {"stride": 2, "output_padding": 2, "dilation": 3, "padding": 1}
    check_op(
        lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
        lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kw),
        [(2, 3, 4, 3), (3, 2, 2, 3), (2,)],
    )


def test_conv_1x1_and_empty_batch() -> None:
    torch = torch_or_skip()
    check_op(F.conv2d, torch.nn.functional.conv2d, [(2, 3, 4, 5), (5, 3, 1, 1), (5,)])
    x = ae.zeros(0, 3, 5, 6, requires_grad=True)
    w = ae.ones(2, 3, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (0, 2, 5, 6)
    gx, gw = ae.sync.grad([y.sum()], [x, w])
    assert gx.shape == x.shape and float(gw.abs().sum()) == 0.0


def test_second_backward_recomputes_the_columns() -> None:
    """The forward's columns serve the first backward; a retained graph recomputes them."""
    rng = np.random.default_rng(1)
    x = ae.tensor(rng.standard_normal((2, 3, 6, 6)), requires_grad=True)
    w = ae.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    y = F.conv2d(x, w, stride=2, padding=1)
    node: Any = y.grad_fn
    assert node is not None and node.attrs[2], "the columns are kept"
    first = ae.sync.grad([y.sum()], [x, w], retain_graph=True)
    assert not node.attrs[2], "and given back once used"
    second = ae.sync.grad([y.sum()], [x, w])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_workspace_reuses_and_bounds_its_buffers() -> None:
    ws = _conv._Workspace(1000)
    a = ws.take(np, (10, 10), np.float32)
    ws.give(a)
    assert ws.take(np, (100,), np.float32) is not None and not ws.free
    ws.give(np.empty(200, np.float32))
    ws.give(np.empty(100, np.float32))  # 1200 bytes: the older one goes
    assert [b.nbytes for b in ws.free] == [400]
    ws.give(np.empty(1000, np.float64))  # larger than the limit: not kept
    assert [b.nbytes for b in ws.free] == [400]


@pytest.mark.parametrize(
    "kw", [{"padding": 1}, {"stride": 2, "padding": 2, "dilation": 2}, {"groups": 2}]
)
def test_small_image_columns_by_a_product(kw: dict[str, Any]) -> None:
    """Small images take their columns from a product: the same as the strided copy."""
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((3, 4, 5, 6)).astype(dtype)
        w = ae.tensor(rng.standard_normal((4, 2 if "groups" in kw else 4, 3, 3)).astype(dtype))
        y = F.conv2d(ae.tensor(x, requires_grad=True), w, **kw)
        geom = y.grad_fn.attrs[1]  # type: ignore[union-attr]
        cols, owned = _conv._columns(np, x, geom)
        assert owned and _conv._small_columns(x, geom) is not None
        np.testing.assert_array_equal(cols, _conv.im2col(np, x, geom))
        x[0, 1, 2, 3] = np.inf  # not finite: the strided copy (0 * inf would spread nan)
        assert _conv._small_columns(x, geom) is None
        np.testing.assert_array_equal(_conv._columns(np, x, geom)[0], _conv.im2col(np, x, geom))


def test_conv_under_no_grad_and_dropped_graphs() -> None:
    rng = np.random.default_rng(2)
    x = ae.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    w = ae.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    with ae.no_grad():
        a = F.conv2d(x, w, padding=1)
    for _ in range(3):  # recorded, never run backward: the columns die with the graph
        F.conv2d(x, w, padding=1)
    b = F.conv2d(x, w, padding=1)
    np.testing.assert_array_equal(a.numpy(), b.detach().numpy())


def test_max_pool_nan_and_inf_as_torch() -> None:
    torch = torch_or_skip()
    nan, inf = float("nan"), float("inf")
    data = np.array([[[1.0, nan, 3.0, nan, 0.0, -inf, -inf, -inf, 2.0]]])
    calls: list[dict[str, Any]] = [
        {"kernel_size": 3},
        {"kernel_size": 3, "padding": 1, "stride": 2},
    ]
    for kw in calls:
        va, ia = F.max_pool1d(ae.tensor(data), return_indices=True, **kw)
        vt, it = torch.nn.functional.max_pool1d(torch.tensor(data), return_indices=True, **kw)
        np.testing.assert_array_equal(va.numpy(), vt.numpy())
        np.testing.assert_array_equal(ia.numpy(), it.numpy())
    va, ia = F.adaptive_max_pool1d(ae.tensor(data), 4, return_indices=True)
    vt, it = torch.nn.functional.adaptive_max_pool1d(torch.tensor(data), 4, return_indices=True)
    np.testing.assert_array_equal(va.numpy(), vt.numpy())
    np.testing.assert_array_equal(ia.numpy(), it.numpy())


def test_max_pool_ties_pick_the_first() -> None:
    torch = torch_or_skip()
    data = np.ones((1, 2, 5, 6))
    kw: dict[str, Any] = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}
    _, ia = F.max_pool2d(ae.tensor(data), return_indices=True, **kw)
    _, it = torch.nn.functional.max_pool2d(torch.tensor(data), return_indices=True, **kw)
    np.testing.assert_array_equal(ia.numpy(), it.numpy())


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear"])
def test_interpolate_source_positions(mode: str) -> None:
    torch = torch_or_skip()
    x = np.arange(2 * 11 * 13, dtype=np.float32).reshape(1, 2, 11, 13)
    calls: list[dict[str, Any]] = [
        {"size": (h, w)} for h, w in [(5, 7), (22, 26), (17, 3), (11, 13)]
    ]
    calls += [{"scale_factor": s} for s in (0.3, 1.7, 2.0, 3.3)]
    calls += [{"scale_factor": (1.25, 0.5), "recompute_scale_factor": True}]
    for kw in calls:
        extra = [{"align_corners": False}, {"align_corners": True}] if mode == "bilinear" else [{}]
        for more in extra:
            a = F.interpolate(ae.tensor(x), mode=mode, **kw, **more)
            t = torch.nn.functional.interpolate(torch.tensor(x), mode=mode, **kw, **more)
            np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-5, atol=1e-3, err_msg=str(kw))


def test_pad_circular_crops_before_it_wraps() -> None:
    torch = torch_or_skip()
    check_op(
        lambda x: F.pad(x, (-2, 3, 1, -1), mode="circular"),
        lambda x: torch.nn.functional.pad(x, (-2, 3, 1, -1), mode="circular"),
        [(2, 3, 4, 6)],
    )


def test_unbatched_results_and_int_values() -> None:
    torch = torch_or_skip()
    x = np.arange(2 * 5 * 6).reshape(2, 5, 6)
    w = np.arange(3 * 2 * 2 * 2).reshape(3, 2, 2, 2) % 3
    a = F.conv2d(ae.tensor(x), ae.tensor(w))
    t = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w))
    assert a.dtype == np.int64
    np.testing.assert_array_equal(a.numpy(), t.numpy())
