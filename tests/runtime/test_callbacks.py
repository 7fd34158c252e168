"""Final callbacks: ``ae.queue_callback`` against torch's engine callbacks."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.api.test_hooks import AeAsyncLib, AeSyncLib, TorchLib, run_plain


def _queue(L: Any) -> Any:
    if L.name == "torch":
        return L.torch.autograd.Variable._execution_engine.queue_callback
    return ae.queue_callback


async def callback_adds_callback(L: Any) -> Any:
    log: list[str] = []
    queue = _queue(L)

    class MyFunc(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        @L.once_differentiable
        def backward(ctx: Any, g: Any) -> Any:
            def callback_a() -> None:
                log.append("a")
                queue(callback_b)

            def callback_b() -> None:
                log.append("b")

            queue(callback_a)
            log.append("backward")
            return g

    x = L.tensor([1.0, 2.0], requires_grad=True)
    await L.backward(MyFunc.apply(x).sum())
    return [log, x.grad]


async def callback_sees_grads(L: Any) -> Any:
    """Callbacks run once every node ran and every .grad was written."""
    seen: list[Any] = []
    queue = _queue(L)
    x = L.tensor([1.0, 2.0], requires_grad=True)
    w = L.tensor([3.0, 4.0], requires_grad=True)
    h = x * 2

    def cb() -> None:
        seen.append(None if x.grad is None else x.grad.clone())
        seen.append(None if w.grad is None else w.grad.clone())

    h.register_hook(lambda g: queue(cb))
    await L.backward((h * w).sum())
    return seen


async def callback_error_propagates(L: Any) -> Any:
    queue = _queue(L)
    x = L.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2

    def cb() -> None:
        raise RuntimeError("blah")

    h.register_hook(lambda g: queue(cb))
    try:
        await L.backward(h.sum())
        return "no error"
    except RuntimeError as exc:
        return [str(exc), x.grad]  # .grad was written before the callbacks ran


SCENARIOS = [callback_adds_callback, callback_sees_grads, callback_error_propagates]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sync_matches_torch(scenario: Any) -> None:
    expected = run_plain(scenario(TorchLib()))
    got = run_plain(scenario(AeSyncLib()))
    _compare(got, expected)


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_async_matches_torch(scenario: Any) -> None:
    expected = run_plain(scenario(TorchLib()))
    got = await scenario(AeAsyncLib())
    _compare(got, expected)


def _compare(got: Any, expected: Any) -> None:
    from tests.api.test_hooks import assert_same

    assert_same(got, expected)


def test_queue_callback_outside_backward() -> None:
    torch = pytest.importorskip("torch")
    msg = "Final callbacks can only be installed during backward pass."
    with pytest.raises(RuntimeError, match=msg):
        torch.autograd.Variable._execution_engine.queue_callback(lambda: None)
    with pytest.raises(ae.AutogradError, match=msg):
        ae.queue_callback(lambda: None)


def test_callback_args() -> None:
    """``queue_callback(fn, *args)`` calls ``fn(*args)``."""
    got: list[Any] = []
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: ae.queue_callback(got.append, ("args", 1)))
    ae.sync.backward(h.sum())
    assert got == [("args", 1)]


@pytest.mark.anyio
async def test_async_callback_is_awaited() -> None:
    ev = anyio.Event()
    started = anyio.Event()
    log: list[str] = []
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2

    async def cb(tag: str) -> None:
        log.append(f"{tag} waits")
        started.set()
        await ev.wait()
        log.append(f"{tag} done, grad={x.grad.tolist()}")

    async def other() -> None:
        await started.wait()  # the waiter suspended; the loop still runs us
        log.append("other")
        ev.set()

    h.register_hook(lambda g: ae.queue_callback(cb, "cb"))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, h.sum())
            tg.start_soon(other)
    assert log == ["cb waits", "other", "cb done, grad=[2.0, 2.0]"]


def test_async_callback_under_sync_without_loop() -> None:
    log: list[str] = []
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2

    async def cb() -> None:
        await anyio.sleep(0)
        log.append("async cb")

    h.register_hook(lambda g: ae.queue_callback(cb))
    ae.sync.backward(h.sum())
    assert log == ["async cb"]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_callbacks_of_a_failed_backward_do_not_run() -> None:
    """A backward that errors runs no final callback (as PyTorch: no post-processing)."""
    torch = pytest.importorskip("torch")
    for lib, queue, backward in (
        (torch, torch.autograd.Variable._execution_engine.queue_callback, torch.autograd.backward),
        (ae, ae.queue_callback, ae.sync.backward),
    ):
        log: list[str] = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2
        y = h * 3

        def fail(g: Any) -> None:
            raise ValueError("fail")

        h.register_hook(fail)
        y.register_hook(lambda g, q=queue, log=log: q(lambda: log.append("cb")))
        with pytest.raises((ValueError, RuntimeError), match="fail"):
            backward(y.sum())
        assert log == []
