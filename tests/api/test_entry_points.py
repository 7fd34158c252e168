"""The entry points with and without an event loop: PyTorch habits that just work.

``tensor.backward()`` in plain code runs the backward, as PyTorch's does; the
other awaitable entry points (``ae.grad``, ``ae.backward``,
``ae.functional.*``, ``ae.gradcheck``, ``ae.gradgradcheck``) raise at once
where no event loop runs, naming their ``ae.sync`` twin, and what they return
refuses to be a truth value (``assert ae.gradcheck(...)`` without ``await``).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import numpy as np
import pytest
import trio

import aengine as ae
from tests.oracle import torch_or_skip


def _x() -> ae.Tensor:
    return ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)


def _sq(t: Any) -> Any:
    return (t * t).sum()


# name -> a call of the async entry point (made fresh: it needs a new graph)
ENTRY_POINTS: dict[str, Callable[[ae.Tensor], Any]] = {
    "backward": lambda x: ae.backward(_sq(x)),
    "grad": lambda x: ae.grad(_sq(x), [x]),
    "functional.vjp": lambda x: ae.functional.vjp(_sq, x),
    "functional.jvp": lambda x: ae.functional.jvp(lambda t: t * t, x, ae.ones(2)),
    "functional.jacobian": lambda x: ae.functional.jacobian(lambda t: t * t, x),
    "functional.hessian": lambda x: ae.functional.hessian(_sq, x),
    "functional.vhp": lambda x: ae.functional.vhp(_sq, x, ae.ones(2, dtype=ae.float64)),
    "functional.hvp": lambda x: ae.functional.hvp(_sq, x, ae.ones(2, dtype=ae.float64)),
    "gradcheck": lambda x: ae.gradcheck(_sq, (x,)),
    "gradgradcheck": lambda x: ae.gradgradcheck(_sq, (x,)),
}
NAMES = list(ENTRY_POINTS)


@contextmanager
def _no_unawaited_warning() -> Iterator[None]:
    """Fail if a coroutine is left un-awaited (the warning comes when it is collected)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
        gc.collect()
    left = [str(w.message) for w in seen if "was never awaited" in str(w.message)]
    assert not left, left


# -- tensor.backward() ------------------------------------------------------------------------
def test_tensor_backward_in_plain_code_runs_at_once_as_torch() -> None:
    torch = torch_or_skip()
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    assert (tx.sin() * tx).sum().backward() is None
    x = _x()
    with _no_unawaited_warning():
        res = (x.sin() * x).sum().backward()
        assert x.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
        assert not res  # falsy, as PyTorch's None
        del res


def test_tensor_backward_in_plain_code_takes_pytorch_arguments() -> None:
    torch = torch_or_skip()
    tw = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    tb = torch.tensor([2.0, 3.0], dtype=torch.float64, requires_grad=True)
    ty = tw * tb
    ty.backward(torch.tensor([1.0, 10.0], dtype=torch.float64), retain_graph=True, inputs=[tw])
    ty.backward(torch.tensor([1.0, 1.0], dtype=torch.float64))
    w = ae.tensor([0.5, -1.0], dtype=ae.float64, requires_grad=True)
    b = ae.tensor([2.0, 3.0], dtype=ae.float64, requires_grad=True)
    y = w * b
    y.backward(ae.tensor([1.0, 10.0], dtype=ae.float64), retain_graph=True, inputs=[w])
    y.backward(ae.tensor([1.0, 1.0], dtype=ae.float64))
    assert w.grad.tolist() == tw.grad.tolist() and b.grad.tolist() == tb.grad.tolist()
    with pytest.raises(ae.AutogradError, match="backward through the graph a second time"):
        y.backward(ae.ones(2, dtype=ae.float64))  # errors come at once too


def test_tensor_backward_in_plain_code_may_still_be_awaited() -> None:
    """One spelling for both worlds: awaiting the result does nothing more."""
    x = _x()

    async def step() -> Any:
        return await _sq(x).backward()

    coro = step()  # driven by hand: no event loop runs
    with pytest.raises(StopIteration) as stop:
        coro.send(None)
    assert stop.value.value is None
    assert x.grad.tolist() == [2.0, 4.0]  # once, not twice
    # asyncio.run(loss.backward()): the backward runs before the loop starts
    assert asyncio.run(_sq(x).backward()) is None  # type: ignore[arg-type]
    assert x.grad.tolist() == [4.0, 8.0]


def test_tensor_backward_create_graph_warns_at_the_callers_line() -> None:
    x = _x()
    with pytest.warns(UserWarning, match="create_graph=True will create a reference cycle") as w:
        _sq(x).backward(create_graph=True)
    assert w[0].filename == __file__
    x.grad = None


@pytest.mark.anyio
async def test_tensor_backward_in_async_code_runs_when_awaited() -> None:
    x = _x()
    pending = _sq(x).backward()
    assert inspect.isawaitable(pending) and x.grad is None
    assert await pending is None
    assert x.grad.tolist() == [2.0, 4.0]
    with _no_unawaited_warning():
        pending = _sq(x).backward()
        with pytest.raises(TypeError, match=r"returns an awaitable, not its result.*await"):
            bool(pending)
        del pending
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.anyio
async def test_tensor_backward_in_a_worker_thread_of_a_loop_runs_at_once(
    anyio_backend: str,
) -> None:
    """A worker thread has no event loop, though the thread that started it has one."""
    x = _x()
    await anyio.to_thread.run_sync(lambda: _sq(x).backward())
    assert x.grad.tolist() == [2.0, 4.0]
    with pytest.raises(ae.AutogradError, match=r"call ae\.sync\.grad\(\.\.\.\) in plain code"):
        await anyio.to_thread.run_sync(lambda: ae.grad(_sq(x), [x]))
    if anyio_backend == "trio":
        await trio.to_thread.run_sync(lambda: _sq(x).backward())  # copies the context too
        assert x.grad.tolist() == [4.0, 8.0]
    if anyio_backend == "asyncio":
        # asyncio.to_thread copies the context (and anyio's sniffio variable) into it
        await asyncio.to_thread(lambda: _sq(x).backward())
        assert x.grad.tolist() == [4.0, 8.0]
        # and a sync twin there blocks no loop: no warning
        (g,) = await asyncio.to_thread(ae.sync.grad, _sq(x), [x])
        assert g.tolist() == [2.0, 4.0]


# -- from inside a backward: today's behaviour ----------------------------------------------
class _NestedAwait(ae.Function):
    """An async backward that awaits a nested tensor.backward()."""

    inner: ae.Tensor

    @staticmethod
    def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
        return x * 1.0

    @staticmethod
    async def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
        with ae.enable_grad():  # a backward runs with grad mode off
            loss = (_NestedAwait.inner * 3.0).sum()
        await loss.backward()
        return g


class _NestedNotAwaited(ae.Function):
    """A plain backward that calls tensor.backward() and looks at what it got."""

    inner: ae.Tensor
    got: list[Any] = []

    @staticmethod
    def forward(ctx: Any, x: ae.Tensor) -> ae.Tensor:
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: ae.Tensor) -> ae.Tensor:
        with ae.enable_grad():
            res = (_NestedNotAwaited.inner * 3.0).sum().backward()
        _NestedNotAwaited.got.append(inspect.isawaitable(res))
        res.close()  # type: ignore[attr-defined]
        return g


def test_tensor_backward_inside_a_sync_driven_backward_is_awaitable() -> None:
    """Inside a backward the engine runs, the reentrant rules decide (NOTE [Reentrant stacks])."""
    x, inner = _x(), ae.tensor(1.0, requires_grad=True)
    _NestedAwait.inner = inner
    ae.sync.backward(_NestedAwait.apply(x).sum())
    assert inner.grad.item() == 3.0 and x.grad.tolist() == [1.0, 1.0]
    _NestedNotAwaited.inner, _NestedNotAwaited.got = inner, []
    with _no_unawaited_warning():
        ae.sync.backward(_NestedNotAwaited.apply(x).sum())
    assert _NestedNotAwaited.got == [True] and inner.grad.item() == 3.0  # not run


@pytest.mark.anyio
async def test_tensor_backward_inside_an_awaited_backward() -> None:
    x, inner = _x(), ae.tensor(1.0, requires_grad=True)
    _NestedAwait.inner = inner
    await _NestedAwait.apply(x).sum().backward()
    assert inner.grad.item() == 3.0 and x.grad.tolist() == [1.0, 1.0]


# -- the other entry points: no loop, no awaitable ------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_async_entry_point_without_a_loop_names_its_sync_twin(name: str) -> None:
    x = _x()
    msg = (
        rf"ae\.{name}\(\) was called where no event loop runs; call ae\.sync\.{name}\(\.\.\.\) "
        rf"in plain code, or await ae\.{name}\(\.\.\.\) inside async code"
    )
    with _no_unawaited_warning(), pytest.raises(ae.AutogradError, match=msg):
        ENTRY_POINTS[name](x)
    assert issubclass(ae.AutogradError, RuntimeError)
    assert x.grad is None


def test_asyncio_run_of_a_call_is_refused_with_the_fix() -> None:
    x = _x()
    with pytest.raises(ae.AutogradError, match=r"use anyio\.run\(ae\.grad, \.\.\.\)"):
        asyncio.run(ae.grad(_sq(x), [x]))  # the call is made before the loop runs


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_functions_of_the_event_loops_still_take_them(backend: str) -> None:
    x = _x()
    anyio.run(ae.backward, _sq(x), backend=backend)
    assert x.grad.tolist() == [2.0, 4.0]
    (g,) = anyio.run(ae.grad, _sq(x), [x], backend=backend)
    assert g.tolist() == [2.0, 4.0]
    assert anyio.run(ae.gradcheck, _sq, (x,), backend=backend) is True
    anyio.run(_sq(x).backward, backend=backend)
    assert x.grad.tolist() == [4.0, 8.0]
    if backend == "trio":
        (g,) = trio.run(ae.grad, _sq(x), [x])
        assert g.tolist() == [2.0, 4.0]
        trio.run(ae.backward, _sq(x))
        assert x.grad.tolist() == [6.0, 12.0]
    else:

        async def main() -> Any:
            return await ae.functional.jacobian(lambda t: t * t, x)

        assert asyncio.run(main()).tolist() == [[2.0, 0.0], [0.0, 4.0]]


# -- the other entry points in async code ----------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("name", NAMES)
async def test_awaitable_refuses_to_be_a_truth_value(name: str) -> None:
    x = _x()
    msg = (
        rf"ae\.{name}\(\.\.\.\) returns an awaitable, not its result, and an awaitable has no "
        rf"truth value: write `await ae\.{name}\(\.\.\.\)` in async code, or call "
        rf"ae\.sync\.{name}\(\.\.\.\) in plain code"
    )
    with _no_unawaited_warning():
        with pytest.raises(TypeError, match=msg):
            assert ENTRY_POINTS[name](x)
        with pytest.raises(TypeError, match=msg):
            if ENTRY_POINTS[name](x):
                pass
    assert x.grad is None  # nothing ran
    res = await ENTRY_POINTS[name](x)  # awaited, they work
    assert res is None if name == "backward" else res is not None


@pytest.mark.anyio
async def test_an_unawaited_call_still_warns() -> None:
    x = _x()
    pending = ae.grad(_sq(x), [x])
    assert repr(pending) == "<awaitable ae.grad(...): await it>"
    with pytest.warns(RuntimeWarning, match="coroutine 'grad' was never awaited"):
        del pending
        gc.collect()


@pytest.mark.anyio
async def test_task_apis_take_what_they_return(anyio_backend: str) -> None:
    x = _x()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ae.backward, _sq(x))
        tg.start_soon(_sq(x).backward)
    assert x.grad.tolist() == [4.0, 8.0]
    if anyio_backend == "asyncio":
        task = asyncio.create_task(ae.grad(_sq(x), [x]))
        (g,) = await task
        assert g.tolist() == [2.0, 4.0]
        pending = ae.grad(_sq(x), [x])
        assert asyncio.iscoroutine(pending)  # what asyncio's and anyio's task APIs check
        await pending
    else:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ae.backward, _sq(x))
        assert x.grad.tolist() == [6.0, 12.0]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_call_in_an_asyncio_callback_gives_the_awaitable(anyio_backend: str) -> None:
    x = _x()
    loop = asyncio.get_running_loop()
    futures: list[Any] = []
    loop.call_soon(lambda: futures.append(asyncio.ensure_future(ae.grad(_sq(x), [x]))))
    await asyncio.sleep(0)
    (g,) = await futures[0]
    assert g.tolist() == [2.0, 4.0]


@pytest.mark.anyio
async def test_sync_twin_in_a_loop_still_warns_and_works() -> None:
    x = _x()
    with pytest.warns(RuntimeWarning, match=r"ae\.sync\.grad\(\) called inside a running"):
        (g,) = ae.sync.grad(_sq(x), [x])
    assert g.tolist() == [2.0, 4.0]


def test_entry_points_show_their_result_type_not_a_generator() -> None:
    """help() and editors read the result of a call, for both twins."""
    import inspect

    for async_fn, sync_fn, result in [
        (ae.grad, ae.sync.grad, "tuple[Tensor | None, ...]"),
        (ae.backward, ae.sync.backward, "None"),
        (ae.gradcheck, ae.sync.gradcheck, "bool"),
        (ae.functional.vjp, ae.sync.functional.vjp, "tuple[Any, Any]"),
    ]:
        for fn in (async_fn, sync_fn):
            shown = inspect.signature(fn).return_annotation
            assert shown == result, (fn, shown)
            assert "Generator" not in str(fn.__annotations__["return"])
    assert "annotations" not in dir(ae)


# -- a backward dropped without await (NOTE [A backward never awaited]) ------------------------------
DROPPED = {
    "loss.backward()": lambda loss: loss.backward(),
    "ae.backward(...)": lambda loss: ae.backward(loss),
}


@pytest.mark.anyio
@pytest.mark.parametrize("call", list(DROPPED))
async def test_a_dropped_backward_warns_and_the_optimizer_step_raises(call: str) -> None:
    w = ae.tensor([1.0, -2.0], requires_grad=True)
    opt = ae.optim.SGD([w], lr=0.1)
    with pytest.warns(RuntimeWarning, match=re.escape(f"Write `await {call}`")):
        DROPPED[call]((w * w).sum())  # the PyTorch habit: no await
    with pytest.raises(
        ae.AutogradError, match=re.escape(f"`{call}` was called in async code without `await`")
    ):
        opt.step()  # the first line that needs the gradient: loud, never silent
    assert w.tolist() == [1.0, -2.0] and w.grad is None  # nothing ran; reported once
    await (w * w).sum().backward()  # awaited: it runs
    opt.step()
    assert w.tolist() == pytest.approx([0.8, -1.6])


@pytest.mark.anyio
async def test_a_dropped_backward_is_reported_at_the_first_grad_read() -> None:
    w = ae.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(RuntimeWarning, match="without `await`"):
        (w * 3.0).sum().backward()
    with pytest.raises(ae.AutogradError, match=r"\.grad was read after a backward that never ran"):
        _ = w.grad


@pytest.mark.anyio
async def test_a_dropped_backward_does_not_touch_other_tasks(anyio_backend: str) -> None:
    w = ae.tensor([1.0, 2.0], requires_grad=True)
    dropped = anyio.Event()
    seen: list[Any] = []

    async def careless() -> None:
        with pytest.warns(RuntimeWarning, match="without `await`"):
            (w * w).sum().backward()
        dropped.set()
        with pytest.raises(ae.AutogradError):
            _ = w.grad

    async def careful() -> None:
        await dropped.wait()
        await (w * 2.0).sum().backward()
        seen.append(w.grad.tolist())  # another task: no error

    async with anyio.create_task_group() as tg:
        tg.start_soon(careless)
        tg.start_soon(careful)
    assert seen == [[2.0, 2.0]]


@pytest.mark.anyio
async def test_backwards_awaited_later_or_by_task_apis_are_not_dropped(anyio_backend: str) -> None:
    x = _x()
    with _no_unawaited_warning():
        pending = _sq(x).backward()  # made first, awaited later: fine
        await pending
        async with anyio.create_task_group() as tg:
            tg.start_soon(_sq(x).backward)
            tg.start_soon(ae.backward, _sq(x))
        if anyio_backend == "asyncio":
            import asyncio

            await asyncio.gather(_sq(x).backward(), ae.backward(_sq(x)))
    assert x.grad is not None
