"""Sync backwards inside ``engine.run``: the Engine's own (counted, admitted, cancellable)."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import anyio
import anyio.from_thread
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

#: a hang guard, not a timing assertion
GUARD = 120


def mlp(rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray]]:
    x = rng.standard_normal((8, 5))
    ws = [rng.standard_normal((5, 7)), rng.standard_normal((7, 3))]
    return x, ws


def step(x: np.ndarray, params: list[ae.Tensor]) -> list[np.ndarray]:
    """A request's work: forward, ae.sync.grad, numpy."""
    h = ae.tanh(ae.tensor(x) @ params[0])
    loss = ((h @ params[1]) ** 2).mean()
    return [g.numpy() for g in ae.sync.grad(loss, params)]


@pytest.mark.anyio
async def test_a_sync_grad_inside_engine_run_is_counted_and_gives_torchs_gradients() -> None:
    torch = torch_or_skip()
    x, ws = mlp(np.random.default_rng(1))
    params = [ae.tensor(w, requires_grad=True) for w in ws]
    async with ae.Engine() as engine:
        grads = await engine.run(step, x, params)
        grads2 = await engine.run(step, x, params)
        stats = engine.stats()
    assert stats.backwards_done == 2 and stats.calls_run == 2
    assert stats.backwards_inflight == 0 and stats.backwards_failed == 0
    assert all(p.grad is None for p in params)  # grad() writes no .grad
    tp = [torch.tensor(w, requires_grad=True) for w in ws]
    loss = ((torch.tanh(torch.tensor(x) @ tp[0]) @ tp[1]) ** 2).mean()
    for g, g2, t in zip(grads, grads2, torch.autograd.grad(loss, tp), strict=True):
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-12)
        np.testing.assert_array_equal(g, g2)


@pytest.mark.anyio
async def test_a_sync_backward_outside_engine_run_is_not_the_engines() -> None:
    x = ae.ones(3, requires_grad=True)
    async with ae.Engine() as engine:
        await anyio.to_thread.run_sync(lambda: ae.sync.grad(x.sum(), [x]))
        assert engine.stats().backwards_done == 0


@pytest.mark.anyio
async def test_the_error_of_a_sync_backward_in_engine_run_is_raised_in_the_caller() -> None:
    x = ae.ones(3, requires_grad=True)

    def failing() -> None:
        y = x * 2
        y.register_hook(lambda g: (_ for _ in ()).throw(ValueError("bad hook")))
        ae.sync.grad(y.sum(), [x])

    with pytest.raises(Exception, match="bad hook") as plain:  # the same call, no Engine
        await anyio.to_thread.run_sync(failing)
    async with ae.Engine() as engine:
        with pytest.raises(type(plain.value), match="bad hook") as caught:
            await engine.run(failing)
        assert str(caught.value) == str(plain.value)
        assert isinstance(caught.value.__cause__, ValueError)
        stats = engine.stats()
        assert stats.backwards_failed == 1 and stats.backwards_inflight == 0
        # the Engine serves on: the next call's backward is done
        await engine.run(lambda: ae.sync.grad((x * 3).sum(), [x]))
        assert engine.stats().backwards_done == 1


def long_chain(w: ae.Tensor, hook: Any, n: int = 60) -> ae.Tensor:
    """A chain of n nodes whose first backward node (the last op) calls ``hook``."""
    h = w * 1.0
    for _ in range(n):
        h = ae.tanh(h)  # saves its result: freed as the backward passes
    h.register_hook(hook)
    return h.sum()


async def cancelled_mid_backward(w: ae.Tensor, entry: str) -> tuple[Any, list[str], Any]:
    """A call whose backward's hook cancels the caller; (engine, what ran, the graph's ref)."""
    reached: list[str] = []
    refs: list[weakref.ref[Any]] = []

    with anyio.CancelScope() as scope:

        def cancel_caller(g: ae.Tensor) -> None:
            anyio.from_thread.run_sync(scope.cancel)  # the client goes away mid-backward
            reached.append("hook")

        def work() -> None:
            loss = long_chain(w, cancel_caller)
            refs.append(weakref.ref(loss.grad_fn))
            if entry == "grad":
                ae.sync.grad(loss, [w])
            else:
                ae.sync.backward(loss)
            reached.append("after the backward")  # never: the cancellation unwinds the call

        async with ae.Engine(time_slice=1e-9) as engine:
            await engine.run(work)
    assert scope.cancelled_caught
    return engine, reached, refs[0]


@pytest.mark.anyio
@pytest.mark.parametrize("entry", ["grad", "backward"])
async def test_cancelling_the_caller_stops_a_sync_backward_at_its_next_slice(entry: str) -> None:
    w = ae.ones(4, requires_grad=True)
    w.grad = ae.full((4,), 7.0)
    engine, reached, graph = await cancelled_mid_backward(w, entry)
    assert reached == ["hook"]
    stats = engine.stats()
    assert stats.backwards_cancelled == 1 and stats.backwards_done == 0
    assert stats.backwards_inflight == 0
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 7.0))  # nothing committed
    # nothing keeps the graph: not the Engine, not the thread (anyio's idle
    # worker thread keeps its last job's exception until its next job)
    await anyio.to_thread.run_sync(int)
    gc.collect()
    assert graph() is None


@pytest.mark.anyio
async def test_a_graph_freed_by_a_cancelled_sync_backward_says_so() -> None:
    w = ae.ones(4, requires_grad=True)
    kept: list[ae.Tensor] = []

    with anyio.CancelScope() as scope:

        def work() -> None:
            def cancel_once(g: ae.Tensor) -> None:
                if not kept[1:]:
                    kept.append(g)
                    anyio.from_thread.run_sync(scope.cancel)

            loss = long_chain(w, cancel_once, n=60)
            kept.append(loss)
            ae.sync.grad(loss, [w])

        async with ae.Engine(time_slice=1e-9) as engine:
            await engine.run(work)
    with pytest.raises(ae.AutogradError, match="was cancelled or failed part way"):
        await ae.grad(kept[0], [w])
    assert engine.stats().backwards_cancelled == 1


@pytest.mark.anyio
async def test_max_inflight_admits_sync_backwards_of_calls_with_the_awaited_ones() -> None:
    x = ae.ones(3, requires_grad=True)
    inside = threading.Event()
    go = threading.Event()

    def slow_hook(g: ae.Tensor) -> None:
        inside.set()
        assert go.wait(GUARD)

    def first() -> None:
        y = x * 2
        y.register_hook(slow_hook)
        ae.sync.grad(y.sum(), [x])

    def second() -> list[ae.Tensor]:
        ae.sync.grad((x * 3).sum(), [x])  # waits for the place; then a later one of
        return list(ae.sync.grad((x * 4).sum(), [x]))  # the same call uses it

    async def awaited() -> None:
        await ae.grad((x * 5).sum(), [x])

    # two compute threads: `first` holds one, `second` hands its own back while it waits
    async with ae.Engine(max_inflight=1, offload_threads=2) as engine:
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                tg.start_soon(engine.run, first)
                await anyio.to_thread.run_sync(inside.wait)
                tg.start_soon(engine.run, second)
                tg.start_soon(awaited)
                while engine.stats().backwards_waiting < 2:
                    await anyio.sleep(0.001)
                stats = engine.stats()
                assert stats.backwards_inflight == 1 and stats.backwards_waiting == 2
                assert await engine.run(int, "42") == 42  # in the thread `second` handed back
                go.set()
        stats = engine.stats()
    assert stats.backwards_done == 4 and stats.backwards_inflight == 0
    assert stats.backwards_waiting == 0


@pytest.mark.anyio
async def test_a_call_cancelled_while_its_backward_waits_for_admission_ends() -> None:
    x = ae.ones(3, requires_grad=True)
    inside = threading.Event()
    go = threading.Event()
    ran: list[str] = []

    def first() -> None:
        y = x * 2
        y.register_hook(lambda g: (inside.set(), go.wait(GUARD)) and None)
        ae.sync.grad(y.sum(), [x])

    def second() -> None:
        ae.sync.grad((x * 3).sum(), [x])
        ran.append("second")  # never: cancelled while it waited

    async def second_in(scope: anyio.CancelScope) -> None:
        with scope:
            await engine.run(second)

    waiter = anyio.CancelScope()
    async with ae.Engine(max_inflight=1) as engine:
        with anyio.fail_after(GUARD):
            async with anyio.create_task_group() as tg:
                tg.start_soon(engine.run, first)
                await anyio.to_thread.run_sync(inside.wait)
                tg.start_soon(second_in, waiter)
                while engine.stats().backwards_waiting < 1:
                    await anyio.sleep(0.001)
                waiter.cancel()
                while engine.stats().backwards_waiting:
                    await anyio.sleep(0.001)
                go.set()
            await engine.run(lambda: ae.sync.grad((x * 4).sum(), [x]))  # the place is free
        stats = engine.stats()
    assert waiter.cancelled_caught and ran == []
    assert stats.backwards_cancelled == 1 and stats.backwards_done == 2
    assert stats.backwards_inflight == 0 and stats.backwards_waiting == 0


@pytest.mark.anyio
async def test_a_training_step_runs_whole_in_engine_run_as_torchs() -> None:
    torch = torch_or_skip()
    x, ws = mlp(np.random.default_rng(2))
    params = [ae.nn.Parameter(ae.tensor(w)) for w in ws]
    optimizer = ae.optim.SGD(params, lr=0.1, momentum=0.9)

    def train_step(x: np.ndarray) -> float:  # forward, backward, optimizer step: one thread
        optimizer.zero_grad()
        h = ae.tanh(ae.tensor(x) @ params[0])
        loss = ((h @ params[1]) ** 2).mean()
        ae.sync.backward(loss)
        optimizer.step()
        return float(loss.detach().numpy())

    async with ae.Engine() as engine:
        losses = [await engine.run(train_step, x) for _ in range(3)]
        stats = engine.stats()
    assert stats.backwards_done == 3 and stats.calls_run == 3
    tp = [torch.nn.Parameter(torch.tensor(w)) for w in ws]
    topt = torch.optim.SGD(tp, lr=0.1, momentum=0.9)
    for want in losses:
        topt.zero_grad()
        loss = ((torch.tanh(torch.tensor(x) @ tp[0]) @ tp[1]) ** 2).mean()
        loss.backward()
        topt.step()
        assert want == pytest.approx(float(loss.detach()), rel=1e-12)
    for p, t in zip(params, tp, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-12)
