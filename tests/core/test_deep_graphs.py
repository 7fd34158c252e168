"""Deep graphs: no recursion anywhere in the engine, and the loop stays responsive.

A chain of 1,000,000 nodes runs backward with both drivers; dropping a deep
graph does not overflow the C stack; a long async backward lets other
tasks of the event loop run meanwhile.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio
import numpy as np
import pytest

import aengine as ae

MILLION = 1_000_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic GC while a huge graph is recorded.

    Recording a million nodes with the collector on costs about three times
    as much (each full collection walks the whole growing graph; measured
    37 s vs 14 s for 1M nodes on this 2-core machine under load).  The graph
    holds no cycles, so reference counting frees it either way.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def chain(n: int) -> tuple[ae.Tensor, ae.Tensor]:
    """A leaf and the end of a chain of ``n`` negations after it (``n`` even: grad 1)."""
    x = ae.ones(1, dtype=ae.float64, requires_grad=True)
    y = x
    with gc_paused():
        for _ in range(n):
            y = -y  # the cheapest op to record; saves nothing
    return x, y


def test_million_node_chain_sync() -> None:
    assert sys.getrecursionlimit() < MILLION
    x, y = chain(MILLION)
    assert y.grad_fn.topological_nr == MILLION
    ae.sync.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])
    del y  # freeing the million-node graph must not overflow either


# One backend is enough at this size (the drivers differ only in their
# checkpoint); trio runs the 100k-node async tests below.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_million_node_chain_async() -> None:
    x, y = chain(MILLION)
    await ae.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])
    del y


def test_deep_chain_grad_and_retain() -> None:
    x, y = chain(100_000)
    (g,) = ae.sync.grad(y.sum(), x, retain_graph=True)
    np.testing.assert_array_equal(g.numpy(), [1.0])
    ae.sync.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])


def test_free_deep_graph() -> None:
    x, y = chain(150_000)
    del y  # no stack overflow while the chain is torn down
    with gc_paused():
        prev = z = x
        for _ in range(50_000):  # with skip connections: 100k nodes
            prev, z = z, z * 0.5 + prev * 0.5
    del prev, z


@pytest.mark.anyio
async def test_long_async_backward_lets_other_tasks_run() -> None:
    x, y = chain(100_000)
    loss = y.sum()
    done = anyio.Event()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.sleep(0)

    async def run_backward() -> None:
        try:
            await ae.backward(loss)
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        tg.start_soon(run_backward)
    assert ticks >= 3  # the ticker ran while the backward was in progress
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])


@pytest.mark.anyio
@pytest.mark.parametrize("trial", range(3))
async def test_a_task_woken_during_a_slice_runs_before_the_next_slice(trial: int) -> None:
    """NOTE [Yielding a time slice]: the backward's yield lets a woken sleeper go first.

    The sleeper's timer expires while this task is busy (as during a slice);
    with a single checkpoint asyncio would resume this task first (the timer
    wakes the sleeper two loop iterations later) and trio would half of the
    time.
    """
    from aengine.runtime._loop import yield_slice

    assert await _order_after_a_busy_step(yield_slice) == ["sleeper", "backward"]


@pytest.mark.anyio
@pytest.mark.parametrize("trial", range(3))
async def test_a_short_backward_that_yields_lets_a_woken_sleeper_go_first(trial: int) -> None:
    """A short backward that yields does so as between slices (NOTE [The checkpoint of a
    short backward]): with one checkpoint the woken sleeper would run later."""
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x.sum()

    async def short_backward() -> None:
        await ae.grad(y, [x], retain_graph=True)

    assert await _order_after_a_busy_step(short_backward) == ["sleeper", "backward"]


async def _order_after_a_busy_step(step: Callable[[], Awaitable[None]]) -> list[str]:
    """A sleeper's timer expires while this task is busy, then this task awaits ``step``."""
    import time

    order: list[str] = []
    asleep = anyio.Event()

    async def sleeper() -> None:
        asleep.set()
        await anyio.sleep(0.0005)
        order.append("sleeper")

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await asleep.wait()  # the sleeper went to sleep in the same step
        time.sleep(0.003)  # busy, as in a slice: the sleeper's timer expires
        await step()
        order.append("backward")
    return order
