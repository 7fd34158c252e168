"""Kernel offload: heavy nodes run in threads (async only), small ones inline; kernels overlap."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.runtime import _offload
from aengine.runtime._offload import DEFAULT_OFFLOAD_MIN_ELEMENTS


@pytest.fixture(autouse=True)
def _fresh_stats() -> None:
    _offload.reset_stats()


def hook_kernels(monkeypatch: pytest.MonkeyPatch, hook: Any) -> None:
    """Run ``hook(node)`` in the worker thread before each offloaded kernel."""
    real = _offload._apply

    def apply(node: Any, *args: Any) -> Any:
        hook(node)
        return real(node, *args)

    monkeypatch.setattr(_offload, "_apply", apply)


def test_ops_record_their_result_size_and_no_policy() -> None:
    small = ae.ones(16, requires_grad=True)
    big = ae.ones(DEFAULT_OFFLOAD_MIN_ELEMENTS, requires_grad=True)
    assert (small * 2).grad_fn.numel == 16 and not (small * 2).grad_fn._special
    node = (big * 2).grad_fn
    assert node.numel == DEFAULT_OFFLOAD_MIN_ELEMENTS and not node._special
    # a reduction's result is small: its backward (a broadcast) stays inline
    assert big.sum().grad_fn.numel == 1


def test_a_transcendental_kernel_counts_more_than_a_cheap_one() -> None:
    """NOTE [Kernel offload policy]: a rule that evaluates sin, cos, a power or exp
    counts each element as TRANSCENDENTAL elements of a cheap kernel."""
    from aengine.ops._core import TRANSCENDENTAL

    x = ae.ones(16, requires_grad=True)
    heavy = [ae.sin(x), ae.cos(x), x**3, x**x, x.log_softmax(0)]
    cheap = [ae.tanh(x), ae.exp(x), x**2, 2.0**x, x * x, x.softmax(0)]
    assert [t.grad_fn.numel for t in heavy] == [16 * TRANSCENDENTAL] * len(heavy)
    assert [t.grad_fn.numel for t in cheap] == [16] * len(cheap)


def _mlp_loss(width: int) -> ae.Tensor:
    rng = np.random.default_rng(0)
    h = ae.tensor(rng.standard_normal((256, width)).astype(np.float32))
    for _ in range(4):
        w = ae.tensor(rng.standard_normal((width, width)).astype(np.float32), requires_grad=True)
        h = ae.tanh(h @ w / float(width))
    return (h * h).mean()


@pytest.mark.anyio
@pytest.mark.parametrize("engine", [False, True])
async def test_a_small_models_awaited_backward_runs_its_kernels_inline(engine: bool) -> None:
    """float32, batch 256, width 128: a hop would cost more than the kernel (NOTE
    [Kernel offload policy]); at width 256 the products' kernels pay for theirs."""
    async with ae.Engine(offload_backward=False) if engine else contextlib.nullcontext():
        await ae.backward(_mlp_loss(128))
        assert _offload.stats.kernels == 0
        await ae.backward(_mlp_loss(256))
        assert _offload.stats.kernels == 4  # the four products


@pytest.mark.anyio
async def test_engine_threshold_applies_to_the_backwards_it_runs() -> None:
    """The Engine's setting decides, wherever the graph was recorded."""
    x = ae.ones(8, requires_grad=True)
    y = (ae.sin(x) * 2).sum()  # recorded outside any Engine
    async with ae.Engine(offload_threshold=8, offload_backward=False):
        await ae.backward(y, retain_graph=True)
    assert _offload.stats.kernels == 2  # mul and sin backward
    _offload.reset_stats()
    await ae.backward(y)  # no Engine: the default threshold, far above 8
    assert _offload.stats.kernels == 0


@pytest.mark.anyio
async def test_heavy_kernels_run_in_threads_and_give_the_same_gradients() -> None:
    main = threading.get_ident()
    x = ae.tensor(np.linspace(0, 1, 64), requires_grad=True)
    async with ae.Engine(offload_threshold=64, offload_backward=False):
        loss = (ae.sin(x) * ae.exp(x)).sum()
        (g,) = await ae.grad(loss, [x])
    x0 = np.linspace(0, 1, 64)
    np.testing.assert_allclose(g.numpy(), np.cos(x0) * np.exp(x0) + np.sin(x0) * np.exp(x0))
    assert _offload.stats.kernels >= 3  # mul, sin, exp backward
    assert main not in _offload.stats.threads


@pytest.mark.anyio
async def test_sync_backward_and_offload_false_run_inline() -> None:
    x = ae.tensor(np.linspace(0, 1, 64), requires_grad=True)
    async with ae.Engine(offload_threshold=64, offload=False, offload_backward=False):
        loss = (ae.sin(x) * 3).sum()
        await ae.backward(loss, retain_graph=True)
    await anyio.to_thread.run_sync(ae.sync.backward, loss)  # sync, off the loop
    assert _offload.stats.kernels == 0
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.cos(np.linspace(0, 1, 64)))


@pytest.mark.anyio
async def test_kernels_of_two_backwards_overlap_in_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each backward has one heavy kernel; both must be inside their threads at
    # the same time for the barrier to open (no timing involved).
    barrier = threading.Barrier(2, timeout=10)
    hook_kernels(monkeypatch, lambda node: barrier.wait())
    a = ae.tensor(np.linspace(0, 1, 64), requires_grad=True)
    b = ae.tensor(np.linspace(1, 2, 64), requires_grad=True, device="sim:0")
    async with ae.Engine(offload_threshold=64, offload_backward=False):
        la = ae.sin(a).sum()  # cpu: kernel offloaded by its owner
        lb = ae.sin(b).sum()  # sim:0: kernel offloaded by the device worker
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, la)
            tg.start_soon(ae.backward, lb)
    assert _offload.stats.max_concurrent == 2
    assert len(_offload.stats.threads) == 2
    np.testing.assert_allclose(a.grad.numpy(), np.cos(np.linspace(0, 1, 64)))


@pytest.mark.anyio
async def test_two_cpu_backwards_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    barrier = threading.Barrier(2, timeout=10)
    hook_kernels(monkeypatch, lambda node: barrier.wait())
    xs = [ae.tensor(np.full(64, float(i)), requires_grad=True) for i in range(2)]
    async with ae.Engine(offload_threshold=64, offload_backward=False):
        losses = [(x * 3.0).sum() for x in xs]
        async with anyio.create_task_group() as tg:
            for loss in losses:
                tg.start_soon(ae.backward, loss)
    assert _offload.stats.max_concurrent == 2
    for x in xs:
        np.testing.assert_array_equal(x.grad.numpy(), np.full(64, 3.0))


@pytest.mark.anyio
async def test_offload_without_an_engine_uses_a_loop_wide_limiter() -> None:
    n = DEFAULT_OFFLOAD_MIN_ELEMENTS
    x = ae.tensor(np.ones(n), requires_grad=True)
    await ae.backward((x * 2.0).sum())
    assert _offload.stats.kernels == 1
    np.testing.assert_array_equal(x.grad.numpy()[:3], [2.0, 2.0, 2.0])


@pytest.mark.anyio
async def test_kernel_errors_in_threads_reach_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(node: Any) -> None:
        raise ValueError("kernel failed")

    hook_kernels(monkeypatch, boom)
    x = ae.tensor(np.ones(8), requires_grad=True)
    async with ae.Engine(offload_threshold=8, offload_backward=False):
        loss = (ae.sin(x) * 2).sum()
        with pytest.raises(ae.BackwardError, match="ValueError: kernel failed"):
            await ae.backward(loss)
    assert x.grad is None


@pytest.mark.anyio
async def test_create_graph_through_offloaded_kernels_and_sim_devices() -> None:
    x0 = np.linspace(0, 1, 64)
    x = ae.tensor(x0, requires_grad=True)
    async with ae.Engine(offload_threshold=64, offload_backward=False):
        y = (ae.sin(x.to("sim:0")) * x.to("sim:0")).to("cpu").sum()
        (g,) = await ae.grad(y, [x], create_graph=True)  # kernels record a graph in threads
        (gg,) = await ae.grad(g.sum(), [x])
    assert _offload.stats.kernels >= 4
    np.testing.assert_allclose(g.detach().numpy(), np.cos(x0) * x0 + np.sin(x0))
    np.testing.assert_allclose(gg.numpy(), -np.sin(x0) * x0 + 2 * np.cos(x0))
