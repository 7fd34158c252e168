"""ae.Engine as a service: shared queues, many concurrent backwards, fairness, errors, threads."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.runtime import _engine


def test_engine_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="time_slice must be a positive"):
        ae.Engine(time_slice=0)
    with pytest.raises(ValueError, match="offload_threshold must be >= 0"):
        ae.Engine(offload_threshold=-1)
    with pytest.raises(ValueError, match="reentrant_depth_limit must be >= 1"):
        ae.Engine(reentrant_depth_limit=0)
    with pytest.raises(ValueError, match="workers_per_device must be >= 1"):
        ae.Engine(workers_per_device=0)
    with pytest.raises(ValueError, match="sim_latency must be >= 0"):
        ae.Engine(sim_latency={"sim:0": -1.0})


#: (setting, a bad value, error type, text naming the setting)
BAD_SETTINGS = [
    ("time_slice", "a", TypeError, "time_slice must be a number of seconds, got str"),
    ("time_slice", float("nan"), ValueError, "time_slice must be a finite number of seconds"),
    ("time_slice", float("inf"), ValueError, "time_slice must be a finite number of seconds"),
    ("offload", 1, TypeError, "offload must be a bool, got int"),
    ("offload_threshold", 1.5, TypeError, "offload_threshold must be an int, got float"),
    ("offload_threads", 2.5, TypeError, "offload_threads must be an int, got float"),
    ("offload_threads", 0, ValueError, "offload_threads must be >= 1"),
    ("reentrant_depth_limit", "a", TypeError, "reentrant_depth_limit must be an int, got str"),
    ("reentrant_depth_limit", True, TypeError, "reentrant_depth_limit must be an int, got bool"),
    ("reentrant_overflow", 5, TypeError, "reentrant_overflow must be 'thread' or 'task', got int"),
    ("workers_per_device", 1.0, TypeError, "workers_per_device must be an int, got float"),
    ("sim_latency", "a", TypeError, "sim_latency must be a number of seconds or a dict"),
    ("sim_latency", float("nan"), ValueError, "sim_latency must be a finite number of seconds"),
    ("sim_latency", {"tpu": 0.1}, ValueError, "sim_latency: 'tpu' is not a sim device"),
    ("sim_latency", {"cpu": 0.1}, ValueError, "sim_latency: 'cpu' is not a sim device"),
    ("sim_latency", {0: 0.1}, TypeError, "sim_latency: 0 is not a sim device"),
    ("sim_latency", {"sim:0": "a"}, TypeError, "sim_latency must be a number .* for 'sim:0'"),
    ("sim_latency", {"sim:0": math.nan}, ValueError, "finite number of seconds, got nan for"),
    ("on_node", 5, TypeError, r"on_node must be a callable \(node, where\) or None, got int"),
]


@pytest.mark.parametrize(("setting", "value", "exc", "text"), BAD_SETTINGS, ids=str)
def test_engine_settings_of_the_wrong_kind_are_refused_at_construction(
    setting: str, value: Any, exc: type[Exception], text: str
) -> None:
    with pytest.raises(exc, match=text):
        ae.Engine(**{setting: value})


def test_engine_settings_of_the_right_kinds_are_kept() -> None:
    eng = ae.Engine(
        time_slice=1,
        offload=False,
        offload_threshold=np.int64(10),
        offload_threads=np.int64(3),
        reentrant_depth_limit=np.int32(7),
        workers_per_device=2,
        sim_latency={"sim": 0.5, "sim:1": np.float32(0.25)},
        on_node=print,
    )
    assert eng.time_slice == 1.0 and eng.offload is False and eng.offload_threshold == 10
    assert eng.offload_threads == 3 and eng.reentrant_depth_limit == 7
    assert eng.sim_latency == {"sim:0": 0.5, "sim:1": 0.25}  # keys are device names


@pytest.mark.anyio
async def test_engine_sets_the_settings_inside_and_restores_them() -> None:
    from aengine.runtime import _settings

    before = (_settings.time_slice(), _settings.reentrant_depth_limit())
    async with ae.Engine(time_slice=0.005, reentrant_depth_limit=7, offload_threshold=10) as eng:
        assert _engine.current_engine() is eng
        assert _settings.time_slice() == 0.005
        assert _settings.reentrant_depth_limit() == 7
        assert eng.offload_min == 10  # what its backwards hand to threads
    assert (_settings.time_slice(), _settings.reentrant_depth_limit()) == before
    assert _engine.current_engine() is None
    with pytest.raises(RuntimeError, match="entered only once"):
        async with eng:
            pass


@pytest.mark.anyio
async def test_200_concurrent_backwards_on_shared_parameters_sum_exactly() -> None:
    w = ae.tensor(np.arange(1.0, 9.0), requires_grad=True)  # cpu, float64
    v = ae.tensor(np.full(8, 0.5), requires_grad=True, device="sim:0")
    w.grad = ae.ones(8, dtype=ae.float64)  # accumulation onto an existing grad
    expect_w = np.ones(8)
    expect_v = np.zeros(8)

    async def one(i: int) -> None:
        c = float(i % 7 + 1)
        h = (w * c).to("sim:0") * v  # integer-valued products: sums are exact
        loss = (h * 2.0).to("sim:1").sum()
        await ae.backward(loss)

    for i in range(200):
        c = float(i % 7 + 1)
        expect_w += c * 0.5 * 2.0
        expect_v += np.arange(1.0, 9.0) * c * 2.0
    async with ae.Engine():
        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(one, i)
    np.testing.assert_array_equal(w.grad.numpy(), expect_w)
    np.testing.assert_array_equal(v.grad.to("cpu").numpy(), expect_v)


def _chain(x: ae.Tensor, n: int) -> ae.Tensor:
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.001
    return y.sum()


@pytest.mark.anyio
async def test_a_long_backward_does_not_hold_back_short_ones_on_the_same_device() -> None:
    x = ae.tensor(np.ones(4), requires_grad=True, device="sim:0")
    # the short graphs are recorded first: a queue ordered by sequence_nr alone
    # (across graph tasks) would run every node of the long one before them
    shorts = [_chain(x, 1) for _ in range(100)]
    long_loss = _chain(x, 1500)  # 3000 sim:0 nodes
    finished: list[str] = []
    started = anyio.Event()

    def on_node(node: ae.Node, where: str) -> None:
        if where.startswith("sim:0") and not started.is_set():
            started.set()

    async def run(name: str, loss: ae.Tensor) -> None:
        await ae.grad(loss, [x])
        finished.append(name)

    async with ae.Engine(on_node=on_node):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "long", long_loss)
            await started.wait()  # the long one holds the device already
            for i, s in enumerate(shorts):
                tg.start_soon(run, f"short{i}", s)
    assert len(finished) == 101
    assert finished[-1] == "long", finished.index("long")


@pytest.mark.anyio
async def test_errors_in_device_workers_reach_the_caller() -> None:
    x = ae.tensor(np.ones(3), requires_grad=True)
    y = x.to("sim:0") * 2
    y.register_hook(lambda g: 1 / 0)
    async with ae.Engine():
        with pytest.raises(ae.BackwardError, match="ZeroDivisionError") as info:
            await ae.backward(y.sum())
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert x.grad is None

    a = ae.tensor(np.ones(3), requires_grad=True).to("sim:1")
    b = a * a
    with ae.no_grad():
        a.mul_(2)  # modifies a tensor saved by MulBackward0 on sim:1
    async with ae.Engine():
        with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
            await ae.backward(b.sum())


@pytest.mark.anyio
async def test_engine_closed_while_a_backward_waits_on_it() -> None:
    x = ae.tensor(np.ones(2), requires_grad=True)
    loss = (x.to("sim:0") * 2).sum()
    gate, entered = anyio.Event(), anyio.Event()
    failures: list[BaseException] = []

    async def hook_waits(g: ae.Tensor) -> None:
        entered.set()  # a sim:0 worker runs this node now
        await gate.wait()

    loss.grad_fn.register_prehook(lambda g: None)
    loss.grad_fn.next_functions[0][0].register_prehook(hook_waits)

    async def caller() -> None:
        try:
            await ae.backward(loss)
        except ae.AutogradError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        async with ae.Engine():
            tg.start_soon(caller)
            await entered.wait()
        gate.set()
    assert len(failures) == 1 and "was closed while it ran" in str(failures[0])
    assert x.grad is None


@contextlib.asynccontextmanager
async def lifespan(app: dict[str, Any]) -> AsyncIterator[None]:
    """A Starlette/FastAPI lifespan: the Engine lives as long as the app."""
    async with ae.Engine() as engine:
        app["engine"] = engine
        yield


@pytest.mark.anyio
async def test_lifespan_engine_serves_request_tasks_started_outside_it() -> None:
    # A server starts request handlers in tasks that do not inherit the
    # lifespan's context: they find the Engine of their event loop.
    app: dict[str, Any] = {}
    where: list[str] = []
    ready, stop = anyio.Event(), anyio.Event()
    x = ae.tensor(np.arange(3.0), requires_grad=True)

    async def serve() -> None:
        async with lifespan(app):
            app["engine"].on_node = lambda node, w: where.append(w)
            ready.set()
            await stop.wait()

    async def handler() -> None:
        await ready.wait()
        assert _engine.current_engine() is app["engine"]
        await ae.backward((x.to("sim:2") * x.to("sim:2")).sum())

    async with anyio.create_task_group() as tg:
        tg.start_soon(handler)  # started before the Engine exists
        tg.start_soon(serve)
        await ready.wait()
        with anyio.fail_after(10):
            while x.grad is None:
                await anyio.sleep(0.001)
        stop.set()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.arange(3.0))
    assert any(w.startswith("sim:2#") for w in where)
    assert _engine.current_engine() is None


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.anyio
async def test_engine_inside_a_trio_nursery() -> None:
    import trio

    x = ae.tensor(np.arange(4.0), requires_grad=True)
    results: dict[int, np.ndarray] = {}

    async def request(i: int) -> None:
        (g,) = await ae.grad((ae.sin(x.to(f"sim:{i % 2}")) * float(i)).sum(), [x])
        results[i] = g.numpy()

    async with trio.open_nursery() as nursery:
        async with ae.Engine() as engine:
            async with trio.open_nursery() as inner:
                for i in range(10):
                    inner.start_soon(request, i)
            assert {str(d) for d in engine.devices} == {"sim:0", "sim:1"}
        nursery.start_soon(request, 10)  # after the Engine: a short-lived one
    for i in range(11):
        np.testing.assert_allclose(results[i], i * np.cos(np.arange(4.0)), rtol=1e-12)


def test_backwards_from_several_threads_on_shared_leaves_sum_exactly() -> None:
    w = ae.tensor(np.arange(1.0, 5.0), requires_grad=True)
    n_threads, per_thread = 6, 20
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def body(k: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                loss = ((w * float(k + 1)).to("sim:0") * 2.0).sum()
                if k % 3 == 0:
                    ae.sync.backward(loss)
                else:
                    anyio.run(ae.backward, loss, backend="asyncio" if k % 3 == 1 else "trio")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    expected = sum(float(k + 1) * 2.0 * per_thread for k in range(n_threads))
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, expected))
