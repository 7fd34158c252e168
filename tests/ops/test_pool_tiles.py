"""Max pooling over windows that tile the input (NOTE [Max pooling over tiles]) against torch.

Values, indices and gradients (plain and under create_graph) where the
winner is delicate: ties (the first wins), NaNs (the last wins), -0.0 beside
0.0, windows of -inf; 1-d and 2-d, unbatched, non-square and non-contiguous.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import aengine as ae


def _input(shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=shape).astype(np.float32)  # many ties
    flat = a.reshape(-1)
    flat[:24] = [np.nan, 1, np.nan, 0, -0.0, 0.0, 0.0, -0.0] + [-np.inf] * 8 + [np.nan] * 8
    return a


CASES = [
    ("max_pool2d", (2, 3, 8, 12), {"kernel_size": 2}),
    ("max_pool2d", (3, 6, 8), {"kernel_size": (3, 2)}),
    ("max_pool2d", (2, 2, 4, 8), {"kernel_size": (2, 4), "stride": (2, 4)}),
    ("max_pool1d", (2, 3, 12), {"kernel_size": 3}),
    ("max_pool1d", (4, 10), {"kernel_size": 5}),
]


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(("name", "shape", "kw"), CASES)
def test_tiles_match_torch(
    name: str, shape: tuple[int, ...], kw: dict[str, Any], transposed: bool
) -> None:
    a = _input(shape, 0)
    g = np.random.default_rng(1).standard_normal(a.shape).astype(np.float32)
    if transposed:  # the same values in a non-contiguous layout
        a = np.ascontiguousarray(a.T).T
    x = ae.tensor(a, requires_grad=True)
    tx = torch.from_numpy(a.copy()).requires_grad_(True)
    y, idx = getattr(ae.nn.functional, name)(x, return_indices=True, **kw)
    ty, tidx = getattr(torch.nn.functional, name)(tx, return_indices=True, **kw)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    yv = y.detach().numpy()
    np.testing.assert_array_equal(yv, ty.detach().numpy())
    assert np.array_equal(np.signbit(yv), np.signbit(ty.detach().numpy()))
    gy = np.random.default_rng(2).standard_normal(yv.shape).astype(np.float32)
    for create_graph in (False, True):
        (gx,) = ae.sync.grad(
            [y], [x], [ae.tensor(gy)], create_graph=create_graph, retain_graph=True
        )
        (tgx,) = torch.autograd.grad([ty], [tx], [torch.from_numpy(gy)], retain_graph=True)
        np.testing.assert_array_equal(gx.detach().numpy(), tgx.numpy())
    # the gradient of a broadcast output gradient (a sum), and the second derivative
    (gx,) = ae.sync.grad([y.sum()], [x], create_graph=True)
    (tgx,) = torch.autograd.grad([ty.sum()], [tx], create_graph=True)
    np.testing.assert_array_equal(gx.detach().numpy(), tgx.detach().numpy())
    (hx,) = ae.sync.grad([(gx * ae.tensor(g)).sum()], [x], allow_unused=True)
    (thx,) = torch.autograd.grad([(tgx * torch.from_numpy(g)).sum()], [tx], allow_unused=True)
    assert (hx is None or not hx.numpy().any()) and (thx is None or not thx.numpy().any())
