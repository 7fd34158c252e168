"""First end-to-end checks of both drivers."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae


def test_sync_backward_accumulates():
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    ae.sync.backward((x * x).sum())
    ae.sync.backward((x * 3.0).sum())
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])


@pytest.mark.anyio
async def test_async_grad_second_order():
    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = (ae.sin(x) * x + 2.0).sum()
    (g,) = await ae.grad(z, [x], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.sin(x.data) + x.data * np.cos(x.data))
    (h,) = await ae.grad(g.sum(), [x])
    expected = 2 * np.cos(x.data) - x.data * np.sin(x.data)
    np.testing.assert_allclose(h.numpy(), expected)


@pytest.mark.anyio
async def test_await_tensor_backward():
    x = ae.tensor(3.0, requires_grad=True)
    await (x**2).backward()
    assert x.grad.item() == 6.0
