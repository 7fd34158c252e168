"""Custom Functions (G1-G13): ae.Function against torch.autograd.Function."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.conftest import torch_or_skip


def _np(t):  # type: ignore[no-untyped-def]
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


# -- the same Functions, written for both libraries ---------------------------------------


def make_g1(lib, base, async_backward=False):  # type: ignore[no-untyped-def]
    """G1: forward(ctx, t1, pyscalar, t2) = t1 + s*t2 + t1*t2."""

    class MyFunction(base):
        @staticmethod
        def forward(ctx, t1, pyscalar, t2):  # type: ignore[no-untyped-def]
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(t1, t2)
            return t1 + pyscalar * t2 + t1 * t2

        if async_backward:

            @staticmethod
            async def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
                await anyio.sleep(0)
                t1, t2 = ctx.saved_tensors
                return (
                    grad_output + grad_output * t2,
                    None,
                    grad_output * ctx.pyscalar + grad_output * t1,
                )

        else:

            @staticmethod
            def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
                t1, t2 = ctx.saved_tensors
                return (
                    grad_output + grad_output * t2,
                    None,
                    grad_output * ctx.pyscalar + grad_output * t1,
                )

    return MyFunction


def _leaves(torch, shape=(3, 4)):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    b = rng.standard_normal(shape)
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    xa = ae.tensor(a, requires_grad=True)
    xb = ae.tensor(b, requires_grad=True)
    return ta, tb, xa, xb


@pytest.mark.parametrize("create_graph", [False, True])
def test_g1_sync_against_torch(create_graph: bool) -> None:
    torch = torch_or_skip()
    ta, tb, xa, xb = _leaves(torch)
    TF = make_g1(torch, torch.autograd.Function)
    AF = make_g1(ae, ae.Function)
    ty = TF.apply(ta, 2.0, tb)
    xy = AF.apply(xa, 2.0, xb)
    assert xy.grad_fn.name() == "MyFunctionBackward"
    assert type(ty.grad_fn).__name__ == "MyFunctionBackward"
    np.testing.assert_allclose(_np(xy), _np(ty))
    tg = torch.autograd.grad(ty.sum(), (ta, tb), create_graph=create_graph)
    xg = ae.sync.grad(xy.sum(), (xa, xb), create_graph=create_graph)
    for t, x in zip(tg, xg, strict=True):
        np.testing.assert_allclose(_np(x), _np(t))
        assert (x.grad_fn is not None) == (t.grad_fn is not None)
    if create_graph:
        (tgg,) = torch.autograd.grad(tg[0].sum(), tb)
        (xgg,) = ae.sync.grad(xg[0].sum(), xb)
        np.testing.assert_allclose(_np(xgg), _np(tgg))


@pytest.mark.anyio
@pytest.mark.parametrize("async_backward", [False, True])
async def test_g1_async(async_backward: bool) -> None:
    torch = torch_or_skip()
    ta, tb, xa, xb = _leaves(torch)
    TF = make_g1(torch, torch.autograd.Function)
    AF = make_g1(ae, ae.Function, async_backward)
    TF.apply(ta, 2.0, tb).sum().backward()
    await ae.backward(AF.apply(xa, 2.0, xb).sum())
    np.testing.assert_allclose(_np(xa.grad), _np(ta.grad))
    np.testing.assert_allclose(_np(xb.grad), _np(tb.grad))
    # create_graph through an async backward: the results carry graphs
    (ga,) = await ae.grad(AF.apply(xa, 2.0, xb).sum(), xa, create_graph=True)
    assert ga.grad_fn is not None
    (gab,) = await ae.grad(ga.sum(), xb)
    np.testing.assert_allclose(_np(gab), np.ones((3, 4)))


def test_async_backward_under_sync() -> None:
    """An async backward runs under ae.sync from plain code (no loop running)."""
    AF = make_g1(ae, ae.Function, async_backward=True)
    x = ae.ones(2, requires_grad=True)
    y = ae.ones(2, requires_grad=True)
    ae.sync.backward(AF.apply(x, 3.0, y).sum())
    assert x.grad.tolist() == [2.0, 2.0]
    assert y.grad.tolist() == [4.0, 4.0]
