"""The loop's share, admission, one Engine per app, engine.run, stats and BLAS threads.

Many backwards in flight on one event loop run one time slice at a time
between two turns of the loop, taking turns; ``max_inflight`` admits them
in order; an Engine opened in a lifespan serves tasks started outside its
block; ``engine.run`` runs work in the Engine's compute threads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import numpy as np
import pytest
from anyio.lowlevel import checkpoint

import aengine as ae
from aengine.runtime._share import FifoSlots, LoopShare, loop_share


def chain(n: int, width: int = 64) -> tuple[ae.Tensor, ae.Tensor]:
    """A leaf and the sum of n elementwise ops on it (n small nodes)."""
    x = ae.tensor(np.linspace(0.1, 1.0, width), requires_grad=True)
    y = x
    for _ in range(n):
        y = ae.sin(y) * 1.01
    return x, y.sum()


def slow_chain(n: int, delay: float) -> tuple[ae.Tensor, ae.Tensor]:
    """A chain whose every node busy-waits ``delay`` seconds (a slice holds few nodes)."""

    class Slow(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 1.0

        @staticmethod
        def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            end = time.perf_counter() + delay
            while time.perf_counter() < end:
                pass
            return g

    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x
    for _ in range(n):
        y = Slow.apply(y)
    return x, y.sum()


# -- the share itself ---------------------------------------------------------------------------


def test_share_fast_path_without_a_loop() -> None:
    share = LoopShare()
    assert share.try_take() and share.held
    assert not share.try_take()  # held
    share.give()
    assert not share.held and share.try_take()
    share.give()


def test_the_share_is_per_thread() -> None:
    here = loop_share()
    there: list[LoopShare] = []
    t = threading.Thread(target=lambda: there.append(loop_share()))
    t.start()
    t.join()
    assert there[0] is not here and loop_share() is here


@pytest.mark.anyio
async def test_waiters_get_the_share_in_order_and_a_cancelled_one_leaves() -> None:
    share = LoopShare()
    assert share.try_take()
    order: list[int] = []

    async def waiter(i: int) -> None:
        await share.take()
        order.append(i)
        share.give()

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(waiter, i)
            await anyio.sleep(0.001)  # queued in this order
        with anyio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(anyio.get_cancelled_exc_class()):
                await share.take()  # cancelled while waiting: leaves the line
        assert len(share.waiters) == 4
        share.give()
    assert order == [0, 1, 2, 3]
    assert not share.held and not share.waiters


@pytest.mark.anyio
async def test_a_waiter_cancelled_as_its_turn_comes_passes_the_share_on() -> None:
    share = LoopShare()
    assert share.try_take()
    got: list[str] = []

    async def first(scope: anyio.CancelScope) -> None:
        with scope:
            await share.take()  # either cancelled as it was woken (passes it on)...
            got.append("first")  # ...or woken first, the cancellation coming later
            share.give()

    async def second() -> None:
        await share.take()
        got.append("second")
        share.give()

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(first, scope)
        await anyio.sleep(0.001)
        tg.start_soon(second)
        await anyio.sleep(0.001)
        share.give()  # hands the share to `first`...
        scope.cancel()  # ...which is cancelled before it runs
    assert got in (["second"], ["first", "second"])
    assert not share.held and not share.waiters


@pytest.mark.anyio
async def test_a_place_handed_to_a_waiter_is_not_free_for_a_newcomer() -> None:
    """Admission and the share: a place given back goes to the waiter, never to a newcomer."""
    slots = FifoSlots(2)
    assert slots.try_take() and slots.try_take() and not slots.try_take()
    got: list[str] = []

    async def waiter() -> None:
        await slots.take()
        got.append("waiter")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.001)
        slots.give()  # to the waiter, which has not run yet
        assert not slots.try_take()  # a newcomer cannot take it meanwhile
    assert got == ["waiter"] and slots.free == 0
    slots.give()
    slots.give()
    assert slots.free == 2 and not slots.waiters


# -- the loop's responsiveness with many backwards ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("engine", [False, True])
async def test_one_slice_between_two_turns_however_many_backwards(engine: bool) -> None:
    """A task that only yields sees at most about one slice between its turns.

    Without the share each of the 8 backwards in flight ran a slice per turn
    of the loop, so the task waited behind 8 slices.
    """
    share = loop_share()
    graphs = [slow_chain(40, 0.0004) for _ in range(8)]
    gaps: list[int] = []
    done = anyio.Event()

    async def ticker() -> None:
        last = share.slices
        while not done.is_set():
            await checkpoint()
            gaps.append(share.slices - last)
            last = share.slices

    async def backwards() -> None:
        async with anyio.create_task_group() as tg:
            for x, y in graphs:
                tg.start_soon(ae.backward, y)
        done.set()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            tg.start_soon(backwards)

    with anyio.fail_after(60):
        if engine:
            async with ae.Engine(offload=False):
                await main()
        else:
            await main()
    for x, _ in graphs:
        np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])
    assert max(gaps) <= 2, gaps
    assert sum(gaps) >= 8 * 3  # the backwards did run many slices meanwhile


@pytest.mark.anyio
async def test_backwards_take_turns_slice_by_slice() -> None:
    """Two equal backwards started together: neither finishes before the other is half done."""
    progress = {"a": 0, "b": 0}
    seen_at_end: dict[str, int] = {}

    class Count(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor, name: str) -> ae.Tensor:
            ctx.name = name
            return x * 1.0

        @staticmethod
        def backward(ctx: Any, g: ae.Tensor) -> Any:
            progress[ctx.name] += 1
            end = time.perf_counter() + 0.0003
            while time.perf_counter() < end:
                pass
            return g, None

    def graph(name: str) -> ae.Tensor:
        y = ae.tensor([1.0], requires_grad=True)
        for _ in range(60):
            y = Count.apply(y, name)
        return y.sum()

    ya, yb = graph("a"), graph("b")

    async def run(name: str, y: ae.Tensor) -> None:
        await ae.backward(y)
        seen_at_end[name] = progress["b" if name == "a" else "a"]

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "a", ya)
            tg.start_soon(run, "b", yb)
    assert min(seen_at_end.values()) >= 30, seen_at_end


@pytest.mark.anyio
async def test_a_nested_backward_started_inside_a_slice_runs_in_it() -> None:
    """An async backward function awaiting a nested backward, with other backwards in flight."""

    class Nest(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 2.0

        @staticmethod
        async def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            z = ae.tensor([3.0], requires_grad=True)
            with ae.enable_grad():
                zz = (z * z).sum()
            (gz,) = await ae.grad(zz, [z])
            return g * gz.sum() / 6.0 * 2.0

    async def one() -> ae.Tensor:
        x = ae.tensor([1.0], requires_grad=True)
        _, busy = chain(200)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, busy)
            await ae.backward(Nest.apply(x).sum())
        return x

    with anyio.fail_after(30):
        xs = [await one() for _ in range(3)]
    assert [x.grad.item() for x in xs] == [2.0, 2.0, 2.0]
    assert not loop_share().held and not loop_share().waiters


# -- admission ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_max_inflight_admits_in_order_and_bounds_the_running() -> None:
    running: list[int] = []
    finished: list[int] = []
    graphs = [slow_chain(5, 0.001) for _ in range(6)]

    async def one(i: int, y: ae.Tensor, engine: ae.Engine) -> None:
        await ae.backward(y)
        running.append(engine.stats().backwards_inflight)
        finished.append(i)

    with anyio.fail_after(60):
        async with ae.Engine(max_inflight=2) as engine:
            async with anyio.create_task_group() as tg:
                for i, (_, y) in enumerate(graphs):
                    tg.start_soon(one, i, y, engine)
                    await anyio.sleep(0.0005)
                await anyio.sleep(0.002)
                st = engine.stats()
                assert st.backwards_inflight == 2 and st.backwards_waiting >= 1
            stats = engine.stats()
    assert max(running) <= 2
    assert finished == sorted(finished)  # equal work, admitted in order
    assert stats.backwards_done == 6 and stats.backwards_waiting == 0
    assert stats.backwards_inflight == 0


@pytest.mark.anyio
async def test_a_backward_waiting_for_admission_can_be_cancelled() -> None:
    (x1, y1), (x2, y2), (x3, y3) = (slow_chain(10, 0.002) for _ in range(3))
    with anyio.fail_after(60):
        async with ae.Engine(max_inflight=1) as engine:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ae.backward, y1)
                await anyio.sleep(0.001)
                with anyio.move_on_after(0.005) as scope:
                    await ae.backward(y2)  # waits behind y1, then gives up
                assert scope.cancelled_caught
                await ae.backward(y3)  # gets the place y2 left
            stats = engine.stats()
    assert x2.grad is None
    assert x1.grad is not None and x3.grad is not None
    # y2 never ran: its graph is intact
    await ae.backward(y2)
    np.testing.assert_allclose(x2.grad.numpy(), [1.0, 1.0])
    assert stats.backwards_done == 2 and stats.backwards_waiting == 0
    # the one cancelled while it waited counts as cancelled, as any other
    assert stats.backwards_cancelled == 1 and stats.backwards_failed == 0


@pytest.mark.anyio
async def test_nested_backwards_are_not_held_back_by_admission() -> None:
    class Nest(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 1.0

        @staticmethod
        async def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            z = ae.tensor([2.0], requires_grad=True)
            with ae.enable_grad():
                zz = (z * z).sum()
            await ae.grad(zz, [z])  # would wait for its own parent's place
            return g

    x = ae.tensor([1.0], requires_grad=True)
    with anyio.fail_after(10):
        async with ae.Engine(max_inflight=1) as engine:
            await ae.backward(Nest.apply(x).sum())
    assert x.grad.item() == 1.0
    assert engine.stats().backwards_done == 1


# -- one Engine per app ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_engine_opened_later_serves_tasks_started_outside_its_block() -> None:
    """As request handlers started by a server outside the app's lifespan block."""
    ready = anyio.Event()
    opened = anyio.Event()
    seen: list[Any] = []
    a = ae.randn(300, 300, requires_grad=True)

    async def handler() -> None:
        ready.set()
        await opened.wait()
        seen.append(ae.current_engine())
        y = (ae.tanh(a) * 2.0).sum()  # tanh's backward: 90,000 elements
        await ae.grad(y, [a])

    async with anyio.create_task_group() as server:
        server.start_soon(handler)  # started before the Engine opens
        await ready.wait()
        async with ae.Engine(offload_threshold=1000) as engine:
            opened.set()
            await anyio.sleep(0.2)
            while engine.stats().backwards_done < 1:
                await anyio.sleep(0.01)
    assert seen == [engine]
    st = engine.stats()
    assert st.kernels_offloaded + st.backwards_in_threads >= 1  # its offload setting applied
    assert ae.current_engine() is None


@pytest.mark.anyio
async def test_current_engine_is_the_innermost_block() -> None:
    assert ae.current_engine() is None
    async with ae.Engine() as outer:
        assert ae.current_engine() is outer
        async with ae.Engine() as inner:
            assert ae.current_engine() is inner
        assert ae.current_engine() is outer
    assert ae.current_engine() is None


# -- engine.run --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_engine_run_runs_off_the_loop_with_the_callers_context() -> None:
    loop_thread = threading.get_ident()
    w = ae.ones(4, 3, requires_grad=True)

    def forward(x: ae.Tensor, *, scale: float) -> tuple[ae.Tensor, int, bool]:
        return (x @ w).sum() * scale, threading.get_ident(), ae.is_grad_enabled()

    async with ae.Engine() as engine:
        y, thread, grad_on = await engine.run(forward, ae.ones(2, 4), scale=2.0)
        with ae.no_grad():
            y2, _, grad_off = await engine.run(forward, ae.ones(2, 4), scale=1.0)
        (g,) = await ae.grad(y, [w])
        assert engine.stats().calls_run == 2
    assert thread != loop_thread
    assert grad_on and not grad_off and not y2.requires_grad
    np.testing.assert_allclose(g.numpy(), np.full((4, 3), 4.0))


@pytest.mark.anyio
async def test_engine_run_raises_the_functions_error_and_waits_when_cancelled() -> None:
    finished = threading.Event()

    def slow() -> None:
        time.sleep(0.05)
        finished.set()

    async with ae.Engine() as engine:
        with pytest.raises(ZeroDivisionError):
            await engine.run(lambda: 1 / 0)
        with anyio.move_on_after(0.01) as scope:
            await engine.run(slow)
        assert scope.cancelled_caught and finished.is_set()  # it waited for the thread


# -- stats -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stats_count_outcomes_slices_and_the_loops_worst_lag() -> None:
    class Boom(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 1.0

        @staticmethod
        def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            raise ValueError("boom")

    async with ae.Engine() as engine:
        assert engine.stats() == ae.EngineStats(queue_depth={"cpu": 0}, blas_threads=1)
        x, y = chain(30)
        await ae.grad(y, [x])
        with pytest.raises(ae.BackwardError, match="boom"):
            await ae.backward(Boom.apply(x).sum())
        _, slow = slow_chain(20, 0.001)
        with anyio.move_on_after(0.005):
            await ae.backward(slow)
        time.sleep(0.05)  # hold the loop: the lag probe fires late
        await anyio.sleep(0.03)
        st = engine.stats()
    assert (st.backwards_done, st.backwards_failed, st.backwards_cancelled) == (1, 1, 1)
    # the grad and the failing backward ran a slice each; the cancelled one may be cancelled
    # before its first on a loaded machine
    assert st.slices >= 2 and st.slices_overran >= 0
    assert st.worst_loop_lag >= 0.02
    d = st.as_dict()
    assert d["queue_depth"] == {"cpu": 0} and d["backwards_done"] == 1


@pytest.mark.anyio
async def test_stats_report_device_queues() -> None:
    async with ae.Engine(sim_latency=0.002) as engine:
        x = ae.ones(3, requires_grad=True)
        y = x.to("sim:0")
        for _ in range(20):
            y = y * 1.0
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, y.sum())
            await anyio.sleep(0.01)
            depth = engine.stats().queue_depth
    assert set(depth) == {"cpu", "sim:0"}
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


# -- BLAS threads ------------------------------------------------------------------------------


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.mark.anyio
async def test_an_engine_caps_blas_threads_while_open() -> None:
    before = _blas_threads()
    if not before:
        pytest.skip("numpy's BLAS is not visible to threadpoolctl here")
    async with ae.Engine() as e1:
        assert set(_blas_threads()) == {1}
        async with ae.Engine(blas_threads=None):
            assert set(_blas_threads()) == {1}  # the first cap holds
        assert set(_blas_threads()) == {1} and e1.stats().blas_threads == 1
    assert _blas_threads() == before
    async with ae.Engine(blas_threads=None) as e2:
        assert _blas_threads() == before and e2.stats().blas_threads is None
