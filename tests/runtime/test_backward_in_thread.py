"""A backward moved into a compute thread (``ae.Engine(offload_backward=True)``, the default).

Once a backward served by an Engine meets a heavy cpu node, the rest of it
runs in one of the Engine's compute threads when nothing in it needs the
event loop; the result is the same as on the loop, ``.grad`` is committed on
the loop, cancellation is seen between thread slices.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.runtime import _threaded


class Where(ae.Function):
    """Identity whose backward records the thread it ran in (and may sleep)."""

    seen: list[int] = []  # noqa: RUF012
    delay = 0.0

    @staticmethod
    def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
        Where.seen.append(threading.get_ident())
        if Where.delay:
            time.sleep(Where.delay)
        return g


@pytest.fixture(autouse=True)
def _reset() -> None:
    Where.seen = []
    Where.delay = 0.0


def mlp(x: ae.Tensor, ws: list[ae.Tensor]) -> ae.Tensor:
    h = x
    for w in ws:
        h = ae.tanh(Where.apply(h @ w))
    return (h * h).mean()


def params() -> list[ae.Tensor]:
    rng = np.random.default_rng(0)
    return [ae.tensor(rng.standard_normal((32, 32)) / 6, requires_grad=True) for _ in range(3)]


@pytest.mark.anyio
async def test_a_heavy_backward_runs_in_a_compute_thread_with_the_same_gradients() -> None:
    ws = params()
    x = ae.tensor(np.linspace(-1, 1, 8 * 32).reshape(8, 32))
    want = await ae.grad(mlp(x, ws), ws)  # no Engine: on the loop
    loop = threading.get_ident()
    Where.seen = []
    async with ae.Engine(offload_threshold=1) as engine:
        got = await ae.grad(mlp(x, ws), ws)
        st = engine.stats()
    assert st.backwards_in_threads == 1 and st.kernels_offloaded == 0
    assert Where.seen and loop not in Where.seen
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy())


@pytest.mark.anyio
async def test_backward_into_grad_from_a_thread_commits_on_the_loop() -> None:
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    want = await ae.grad(mlp(x, ws), ws)
    calls: list[int] = []
    ws[0].register_post_accumulate_grad_hook(lambda t: calls.append(threading.get_ident()))
    async with ae.Engine(offload_threshold=1) as engine:
        await ae.backward(mlp(x, ws))
        assert engine.stats().backwards_in_threads == 1
    for w, g in zip(ws, want):
        np.testing.assert_allclose(w.grad.numpy(), g.numpy())
    assert calls == [threading.get_ident()]  # post-accumulate hooks run at commit, on the loop


@pytest.mark.anyio
async def test_the_loop_serves_other_tasks_while_the_backward_runs_in_its_thread() -> None:
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    Where.delay = 0.01  # 3 nodes of 10 ms each, in the thread
    ticks = 0

    async def ticker(done: anyio.Event) -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.sleep(0.001)

    async with ae.Engine(offload_threshold=1) as engine:
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker, done)
            await ae.grad(mlp(x, ws), ws)
            done.set()
        assert engine.stats().backwards_in_threads == 1
    assert ticks >= 5  # the loop was free while the nodes slept in their thread


@pytest.mark.anyio
@pytest.mark.parametrize(
    "case", ["tensor hook", "node hook", "retain_grad", "async function", "anomaly", "on_node"]
)
async def test_code_for_the_loop_runs_on_the_loop(case: str) -> None:
    """User code runs on the loop thread; anomaly mode and on_node keep the backward there."""
    ran_on: list[int] = []
    loop = threading.get_ident()

    class Async(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 1.0

        @staticmethod
        async def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            ran_on.append(threading.get_ident())
            await anyio.sleep(0)
            return g

    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    kwargs: dict[str, Any] = {"offload_threshold": 1}
    if case == "on_node":
        kwargs["on_node"] = lambda node, where: ran_on.append(threading.get_ident())
    async with ae.Engine(**kwargs) as engine:
        with _anomaly() if case == "anomaly" else _nothing():
            h = x @ ws[0]
            if case == "tensor hook":
                h.register_hook(lambda g: ran_on.append(threading.get_ident()))
            elif case == "node hook":
                h.grad_fn.register_hook(lambda gi, go: ran_on.append(threading.get_ident()))
            elif case == "retain_grad":
                h.retain_grad()
            elif case == "async function":
                h = Async.apply(h)
            loss = (ae.tanh(h) @ ws[1]).sum()
            await ae.backward(loss)
        st = engine.stats()
    if case in ("anomaly", "on_node"):
        assert st.backwards_in_threads == 0  # never moved
    if case not in ("retain_grad", "anomaly"):
        assert ran_on  # the user code ran...
    assert set(ran_on) <= {loop}  # ...on the loop thread
    assert ws[0].grad is not None
    if case == "retain_grad":
        assert h.grad is not None


@contextlib.contextmanager
def _anomaly() -> Any:
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        with ae.detect_anomaly(check_nan=False):
            yield


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@pytest.mark.anyio
async def test_offload_backward_false_and_large_graphs_keep_kernel_offload() -> None:
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    async with ae.Engine(offload_threshold=1, offload_backward=False) as engine:
        await ae.grad(mlp(x, ws), ws)
        st = engine.stats()
    assert st.backwards_in_threads == 0 and st.kernels_offloaded > 0
    # a large graph whose heavy node (the product) is far from its output
    y = ae.tensor(np.ones((1, 32))) @ ws[0]
    for _ in range(_threaded.MAX_NODES):
        y = y * 1.0
    async with ae.Engine(offload_threshold=64) as engine:
        await ae.grad(y.sum(), [ws[0]])
        st = engine.stats()
    assert st.backwards_in_threads == 0 and st.kernels_offloaded == 1


@pytest.mark.anyio
async def test_a_backward_in_its_thread_is_cancelled_between_slices() -> None:
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    h = x
    for _ in range(40):
        h = Where.apply(h @ ws[0])
    loss = h.sum()
    Where.delay = 0.005  # 40 nodes of 5 ms: 200 ms in all
    async with ae.Engine(offload_threshold=1) as engine:
        with anyio.move_on_after(0.03) as scope:
            await ae.backward(loss)
        st = engine.stats()
    assert scope.cancelled_caught
    assert st.backwards_in_threads == 1 and st.backwards_cancelled == 1
    assert len(Where.seen) < 40  # stopped after a thread slice or two
    assert ws[0].grad is None  # nothing committed
    with pytest.raises(ae.AutogradError, match="cancelled or failed part way"):
        await ae.backward(loss)  # its saved tensors were freed by the nodes that ran


@pytest.mark.anyio
async def test_an_error_in_the_thread_reaches_the_caller_with_the_node_name() -> None:
    class Boom(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 1.0

        @staticmethod
        def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            raise ValueError("boom in a thread")

    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    async with ae.Engine(offload_threshold=1) as engine:
        with pytest.raises(ae.BackwardError, match="boom in a thread.*BoomBackward"):
            await ae.backward(Boom.apply(ae.tanh(x @ ws[0])).sum())
        st = engine.stats()
    assert st.backwards_in_threads == 1 and st.backwards_failed == 1
    assert ws[0].grad is None


@pytest.mark.anyio
async def test_a_device_node_sends_the_backward_back_to_the_loop() -> None:
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    h = ae.tanh(x @ ws[0])
    s = (h.to("sim:0") * 2.0).to("cpu")  # a node on sim:0 in the middle
    loss = (ae.tanh(s @ ws[1])).sum()
    want = await ae.grad(loss, [ws[0], ws[1]], retain_graph=True)
    async with ae.Engine(offload_threshold=1) as engine:
        got = await ae.grad(loss, [ws[0], ws[1]])
        st = engine.stats()
    assert st.backwards_in_threads >= 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy())


@pytest.mark.anyio
async def test_create_graph_in_a_thread_gives_second_order_gradients() -> None:
    w = ae.tensor(np.full((8, 8), 0.1), requires_grad=True)
    x = ae.tensor(np.ones((2, 8)))
    async with ae.Engine(offload_threshold=1) as engine:
        (g,) = await ae.grad(((x @ w) ** 3).sum(), [w], create_graph=True)
        assert engine.stats().backwards_in_threads == 1
        (gg,) = await ae.grad(g.sum(), [w])
    (g1,) = await ae.grad(((x @ w) ** 3).sum(), [w], create_graph=True)
    want = await ae.grad(g1.sum(), [w])
    np.testing.assert_allclose(gg.numpy(), want[0].numpy())


@pytest.mark.anyio
async def test_a_backward_that_starts_heavy_starts_in_its_thread() -> None:
    """The first nodes include a heavy one: the dependency pass and every node run there."""
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    h = x @ ws[0]
    loss = Where.apply(h).sum()  # the matmul is the second node from the output
    async with ae.Engine(offload_threshold=64) as engine:
        await ae.backward(loss)
        assert engine.stats().backwards_in_threads == 1
    assert Where.seen and threading.get_ident() not in Where.seen
    np.testing.assert_allclose(ws[0].grad.numpy(), np.full((32, 32), 4.0))


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["tensor hook", "async function"])
async def test_user_code_met_in_the_thread_runs_on_the_loop(kind: str) -> None:
    """Started in the thread, the backward comes back to the loop before a node with user code."""
    ran_on: list[int] = []

    class Async(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
            return x * 1.0

        @staticmethod
        async def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
            ran_on.append(threading.get_ident())
            await anyio.sleep(0)
            return g * 2.0

    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    h = ae.tanh(x @ ws[0])
    if kind == "tensor hook":
        h.register_hook(lambda g: ran_on.append(threading.get_ident()) or g * 2.0)
    else:
        h = Async.apply(h)
    loss = (h @ ws[1]).sum()  # a heavy node first: the backward starts in a thread
    async with ae.Engine(offload_threshold=64) as engine:
        got = await ae.grad(loss, [ws[0], ws[1]], retain_graph=True)
        assert engine.stats().backwards_in_threads >= 1
    assert ran_on == [threading.get_ident()]  # the user code ran on the loop
    want = await ae.grad(loss, [ws[0], ws[1]])  # no Engine: everything on the loop
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy())


@pytest.mark.anyio
async def test_a_large_graph_that_starts_heavy_comes_back_to_the_loop() -> None:
    ws = params()
    x = ae.tensor(np.ones((4, 32)))
    y = x * 1.0
    for _ in range(_threaded.MAX_NODES):
        y = y * 1.0
    loss = (y @ ws[0]).sum()
    want = await ae.grad(loss, [ws[0]], retain_graph=True)
    async with ae.Engine(offload_threshold=64) as engine:
        (got,) = await ae.grad(loss, [ws[0]])
        st = engine.stats()
    assert st.backwards_in_threads == 1  # started there, came back once counted
    np.testing.assert_allclose(got.numpy(), want[0].numpy())
