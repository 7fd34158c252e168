"""Convolutions, pooling, padding and interpolation: what the table's harness cannot say.

The table (tests/ops/test_table.py) checks every entry's samples against
torch to the second derivative; these add: 'same' padding with an even
kernel (torch warns there, which the harness turns into an error), third
derivatives, a second backward (the columns built again), the columns built
in chunks of the batch, NaN and -inf in max pooling, and the index
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


def test_second_backward_rebuilds_the_columns() -> None:
    """The weight's gradient builds its columns again each time: a retained graph's second
    backward gives the first's gradients."""
    rng = np.random.default_rng(1)
    x = ae.tensor(rng.standard_normal((2, 3, 6, 6)), requires_grad=True)
    w = ae.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    y = F.conv2d(x, w, stride=2, padding=1)
    first = ae.sync.grad([y.sum()], [x, w], retain_graph=True)
    second = ae.sync.grad([y.sum()], [x, w])
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize(
    ("shapes", "kw"),
    [
        ([(5, 4, 4, 4), (6, 4, 3, 3), (6,)], {"padding": 1}),  # small images: by a product
        ([(5, 2, 7, 8), (4, 2, 3, 2), (4,)], {"padding": 1}),  # the strided copy
        ([(5, 4, 7, 6), (4, 2, 3, 3), (4,)], {"groups": 2, "dilation": 2, "padding": (2, 1)}),
        ([(5, 4, 9, 7), (6, 4, 3, 3), (6,)], {"stride": 2, "padding": 1}),
        ([(5, 3, 4, 5), (2, 3, 1, 1), (2,)], {}),  # its own columns: one chunk
    ],
)
def test_conv_in_chunks_of_one_image_as_torch(
    shapes: list[tuple[int, ...]], kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Columns built one image at a time (NOTE [Columns in chunks of the batch]): the
    forward, both transposes and the second derivatives still agree with torch."""
    torch = torch_or_skip()
    rows: list[int] = []
    chunks = _conv._column_chunks

    def spy(xp: Any, x: Any, geom: Any, n: int) -> Any:
        rows.append(n)
        return chunks(xp, x, geom, n)

    monkeypatch.setattr(_conv, "_CHUNK_MAX", 1)
    monkeypatch.setattr(_conv, "_column_chunks", spy)
    check_op(
        lambda x, w, b: F.conv2d(x, w, b, **kw),
        lambda x, w, b: torch.nn.functional.conv2d(x, w, b, **kw),
        shapes,
    )
    assert rows and set(rows) == {1}
    tw = (shapes[1][1] * kw.get("groups", 1), shapes[1][0] // kw.get("groups", 1), *shapes[1][2:])
    tkw = {k: v for k, v in kw.items() if k != "padding"}
    check_op(
        lambda x, w: F.conv_transpose2d(x, w, **tkw),
        lambda x, w: torch.nn.functional.conv_transpose2d(x, w, **tkw),
        [shapes[0], tw],
    )


def test_chunk_rows_bounds() -> None:
    """A chunk takes whole images within the budget (clamped), and at least one."""
    lo, hi = _conv._CHUNK_MIN, _conv._CHUNK_MAX
    assert _conv._chunk_rows(1000, 1000, 10 * lo) == 10 * lo // 1000
    assert _conv._chunk_rows(1000, 1000, 1) == lo // 1000  # at least _CHUNK_MIN
    assert _conv._chunk_rows(64, hi // 4, 10 * hi) == 4  # at most _CHUNK_MAX
    assert _conv._chunk_rows(64, 2 * hi, 0) == 1  # one image even past the budget
    assert _conv._chunk_rows(3, 1, hi) == 3
    assert _conv._chunk_rows(0, 1, hi) == 1  # (an empty batch: no chunk is made)


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

        def columns(x: Any, rows: int) -> Any:
            return np.concatenate([c.copy() for _, _, c in _conv._column_chunks(np, x, geom, rows)])

        assert _conv._small_unfold(x, geom) is not None
        for rows in (1, 2, 3):
            np.testing.assert_array_equal(columns(x, rows), _conv.im2col(np, x, geom))
        x[0, 1, 2, 3] = np.inf  # not finite: the strided copy (0 * inf would spread nan)
        assert _conv._small_unfold(x, geom) is None
        np.testing.assert_array_equal(columns(x, 2), _conv.im2col(np, x, geom))


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
