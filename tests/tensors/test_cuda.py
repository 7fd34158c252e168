"""cuda:N through CuPy, against torch on CUDA.

Every test here needs CuPy and a GPU, and skips with its reason without
them.  The op tests (tests/test_ops_*.py and the others built on
``check_op``) cover every op's first and second derivatives on the GPU when
``AENGINE_TEST_DEVICE=cuda:0`` is set, as ``make gpu-check`` does; this
module covers what is particular to a GPU: a graph that crosses between
the host and the GPU, transfers both ways, the Engine's device queue,
kernel offload, hooks that read a GPU result, cancellation, and errors.
"""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

X0 = np.array([0.3, -1.2, 2.0, 0.7])
W0 = np.array([1.5, 0.5, -2.0, 3.0])


def _cupy() -> Any:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: cuda:N not tested")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # a CuPy without a driver raises here
        pytest.skip(f"no CUDA device: {exc}")
    if count < 1:
        pytest.skip("no CUDA device")
    return cupy


@pytest.fixture
def cupy() -> Any:
    return _cupy()


def _torch_cuda() -> Any:
    torch = torch_or_skip()
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA: the GPU oracle is torch on CUDA")
    return torch


def _mixed(ns: Any, x: Any, w: Any, dev: Any) -> Any:
    """cpu -> GPU -> cpu, with a GPU leaf: the same graph in aengine and torch."""
    a = (x * 2).to(dev)  # cpu mul, copy to the GPU
    b = ns.sin(a) * a + ns.exp(w)
    c = (b * w).to("cpu")  # back on the host
    return (c * x).sum()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_graph_across_cpu_and_gpu_matches_torch(cupy: Any, dtype: str) -> None:
    torch = _torch_cuda()
    x = ae.tensor(X0.astype(dtype), requires_grad=True)
    w = ae.tensor(W0.astype(dtype), requires_grad=True, device="cuda:0")
    tx = torch.tensor(X0.astype(dtype), requires_grad=True)
    tw = torch.tensor(W0.astype(dtype), requires_grad=True, device="cuda:0")
    loss = _mixed(ae, x, w, "cuda:0")
    tloss = _mixed(torch, tx, tw, "cuda:0")
    gx, gw = ae.sync.grad(loss, [x, w], create_graph=True)
    tgx, tgw = torch.autograd.grad(tloss, [tx, tw], create_graph=True)
    assert gx.device == "cpu" and gw.device == "cuda:0"
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12}
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().cpu().numpy(), **tol)
    np.testing.assert_allclose(gw.detach().numpy(), tgw.detach().cpu().numpy(), **tol)
    # second derivatives through both transfers (torch would take the cpu
    # 0-d sum beside a GPU tensor; aengine asks for the move: see
    # docs/pytorch-differences.md)
    hx, hw = ae.sync.grad((gx * gx).sum() + (gw * gw).sum().to("cpu"), [x, w])
    thx, thw = torch.autograd.grad((tgx * tgx).sum() + (tgw * tgw).sum().cpu(), [tx, tw])
    np.testing.assert_allclose(hx.numpy(), thx.cpu().numpy(), **tol)
    np.testing.assert_allclose(hw.numpy(), thw.cpu().numpy(), **tol)


def test_to_moves_data_and_gradients_both_ways(cupy: Any) -> None:
    x = ae.tensor(X0, requires_grad=True)
    g = x.to("cuda:0")
    assert g.device == "cuda:0" and isinstance(g.data, cupy.ndarray)
    assert g.grad_fn is not None and g.grad_fn.name() == "ToCopyBackward0"
    back = (g * 3).to("cpu")
    assert isinstance(back.data, np.ndarray)
    back.sum().backward()
    assert x.grad.device == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 3.0))
    # a GPU leaf's gradient stays on the GPU
    w = ae.tensor(W0, requires_grad=True, device="cuda:0")
    (w.to("cpu") * 2).sum().backward()
    assert w.grad.device == "cuda:0" and isinstance(w.grad.data, cupy.ndarray)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 2.0))
    # dtype and device in one call
    h = x.to("cuda:0", ae.float32)
    assert h.device == "cuda:0" and h.dtype == np.float32
    (gx,) = ae.sync.grad(h.sum(), [x])
    assert gx.dtype == np.float64 and gx.device == "cpu"


@pytest.mark.anyio
@pytest.mark.parametrize("offload", [False, True])
async def test_engine_backward_on_the_gpu_matches_torch(cupy: Any, offload: bool) -> None:
    torch = _torch_cuda()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    x = ae.tensor(a, requires_grad=True, device="cuda:0")
    w = ae.tensor(b, requires_grad=True, device="cuda:0")
    tx = torch.tensor(a, requires_grad=True, device="cuda:0")
    tw = torch.tensor(b, requires_grad=True, device="cuda:0")
    loss = (ae.tanh(x @ w) ** 2).mean()
    tloss = (torch.tanh(tx @ tw) ** 2).mean()
    # offload_threshold=1: every kernel counts as heavy; a GPU's kernels are
    # launched on its stream by the device's worker all the same, never in a
    # compute thread (NOTE [Kernel offload policy])
    threshold = 1 if offload else 10**12
    async with ae.Engine(offload_threshold=threshold) as engine:
        gx, gw = await ae.grad(loss, [x, w])
        stats = engine.stats()
    assert stats.kernels_offloaded == 0
    tgx, tgw = torch.autograd.grad(tloss, [tx, tw])
    np.testing.assert_allclose(gx.numpy(), tgx.cpu().numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), tgw.cpu().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.anyio
async def test_a_hook_reads_a_gpu_gradient_after_its_kernels_ran(cupy: Any) -> None:
    # kernels are asynchronous on the GPU: a hook that copies its gradient to
    # the host must see the finished values, the kernels that made them
    # launched by the device's worker a moment before
    n = 1 << 20
    x = ae.tensor(np.linspace(0.0, 1.0, n), requires_grad=True, device="cuda:0")
    y = ae.sin(x) * ae.cos(x) * 3
    seen: list[np.ndarray] = []
    y.register_hook(lambda g: seen.append(g.numpy()))

    async def slow_async_hook(g: ae.Tensor) -> None:
        await anyio.sleep(0)
        seen.append(g.numpy())

    y.register_hook(slow_async_hook)
    async with ae.Engine(offload_threshold=1):
        (gx,) = await ae.grad(y.sum(), [x])
    assert len(seen) == 2
    for s in seen:
        np.testing.assert_array_equal(s, np.ones(n))
    xs = np.linspace(0.0, 1.0, n)
    np.testing.assert_allclose(gx.numpy(), 3 * np.cos(2 * xs), rtol=1e-9, atol=1e-12)


@pytest.mark.anyio
async def test_cancelling_a_gpu_backward_leaves_grad_untouched(cupy: Any) -> None:
    x = ae.tensor(X0, requires_grad=True, device="cuda:0")
    x.grad = ae.tensor(np.full(4, 7.0), device="cuda:0")
    h = ae.sin(x) * 2
    started = anyio.Event()

    async def blocking_hook(g: ae.Tensor) -> None:
        started.set()
        await anyio.sleep_forever()

    h.register_hook(blocking_hook)
    loss = (h * h).sum()
    async with ae.Engine() as engine:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ae.backward, loss)
                await started.wait()
                tg.cancel_scope.cancel()
        assert engine.stats().backwards_cancelled == 1
        np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 7.0))
        # the Engine and the GPU serve the next backward
        x.grad = None
        await ae.backward((ae.sin(x) * 2).sum())
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(X0), rtol=1e-12)


def test_an_absent_gpu_is_a_clear_error(cupy: Any) -> None:
    count = cupy.cuda.runtime.getDeviceCount()
    with pytest.raises(RuntimeError, match=rf"cuda:{count} .*{count} CUDA device"):
        ae.ones(2, device=f"cuda:{count}")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ae.tensor(X0).to(f"cuda:{count}")
