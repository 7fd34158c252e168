"""Reentrant backward: a node that runs a backward itself."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.core._graph_task import current_graph_task
from aengine.runtime._settings import DEFAULT_REENTRANT_DEPTH_LIMIT
from tests.oracle import torch_or_skip

# -- a chain of graphs, each hook running the backward of the next -------------------------


def make_chain(
    n: int, mode: str, log: list[tuple[int, int, Any]], slow_from: int | None = None
) -> tuple[ae.Tensor, list[Any]]:
    """Level k: y = 3 * (2 * x_k); y's hook runs the backward of level k + 1.

    From level ``slow_from`` on, an async hook sleeps 50 ms first (so that a
    test can cancel in the middle whatever the machine's load).
    """
    leaves: list[ae.Tensor] = []

    def level(k: int) -> ae.Tensor:
        with ae.enable_grad():  # hooks run with grad mode = create_graph (off)
            x = ae.tensor(1.0, requires_grad=True)
            leaves.append(x)
            y = x * 2.0

            if mode == "sync":

                def hook(g: ae.Tensor) -> None:
                    gt = current_graph_task()
                    assert gt is not None
                    log.append((k, gt.depth, threading.get_ident()))
                    if k < n:
                        ae.sync.backward(level(k + 1))

            else:

                async def hook(g: ae.Tensor) -> None:  # type: ignore[misc]
                    gt = current_graph_task()
                    assert gt is not None
                    log.append((k, gt.depth, threading.get_ident()))
                    if slow_from is not None and k >= slow_from:
                        await anyio.sleep(0.05)
                    if k < n:
                        await ae.backward(level(k + 1))

            y.register_hook(hook)
            return y * 3.0

    return level(0), leaves


def _check_chain(n: int, log: list[Any], leaves: list[ae.Tensor]) -> None:
    assert [k for k, _, _ in log] == list(range(n + 1))
    assert [d for _, d, _ in log] == list(range(n + 1))  # graph task depth = level
    assert len(leaves) == n + 1
    assert all(x.grad is not None and x.grad.item() == 6.0 for x in leaves)


@pytest.mark.parametrize("n", [10, 60, 61, 1000])
def test_deep_sync(n: int) -> None:
    log: list[Any] = []
    root, leaves = make_chain(n, "sync", log)
    threads_before = set(threading.enumerate())
    ae.sync.backward(root)
    _check_chain(n, log, leaves)
    caller = threading.get_ident()
    # at most DEPTH_LIMIT graph tasks share one stack, then a new thread takes over
    on_caller = sum(1 for _, _, tid in log if tid == caller)
    assert on_caller <= DEFAULT_REENTRANT_DEPTH_LIMIT
    if n < 40:
        assert on_caller == n + 1
    if n > DEFAULT_REENTRANT_DEPTH_LIMIT:
        assert len({tid for _, _, tid in log}) >= n // DEFAULT_REENTRANT_DEPTH_LIMIT + 1
    assert not set(threading.enumerate()) - threads_before  # every hop thread joined


def test_deep_sync_2000() -> None:
    """As PyTorch's ``test_deep_reentrant``: 2000 levels, then 200 again."""
    for n in (2000, 200):
        log: list[Any] = []
        root, leaves = make_chain(n, "sync", log)
        ae.sync.backward(root)
        _check_chain(n, log, leaves)


@pytest.mark.anyio
@pytest.mark.parametrize("n", [10, 61, 1000])
async def test_deep_async(n: int) -> None:
    log: list[Any] = []
    root, leaves = make_chain(n, "async", log)
    threads_before = set(threading.enumerate())
    await ae.backward(root)
    _check_chain(n, log, leaves)
    # beyond the depth limit a nested async backward runs in a new OS thread
    # with its own event loop (the default reentrant_overflow="thread")
    caller = threading.get_ident()
    on_caller = sum(1 for _, _, tid in log if tid == caller)
    assert on_caller <= DEFAULT_REENTRANT_DEPTH_LIMIT + 1
    if n <= DEFAULT_REENTRANT_DEPTH_LIMIT:
        assert {tid for _, _, tid in log} == {caller}
    else:
        assert len({tid for _, _, tid in log}) >= n // (DEFAULT_REENTRANT_DEPTH_LIMIT + 1) + 1
    # every hop is done; the loop's thread pool keeps idle (daemon) workers
    left = set(threading.enumerate()) - threads_before
    assert all(t.daemon or t.name == "AnyIO worker thread" for t in left), left


@pytest.mark.anyio
@pytest.mark.parametrize("n", [61, 1000])
async def test_deep_async_overflow_to_tasks(n: int) -> None:
    log: list[Any] = []
    async with ae.Engine(reentrant_overflow="task"):
        root, leaves = make_chain(n, "async", log)
        await ae.backward(root)
    _check_chain(n, log, leaves)
    # a fresh task per level beyond the limit: same thread, bounded stacks
    assert {tid for _, _, tid in log} == {threading.get_ident()}


@pytest.mark.anyio
async def test_cancelling_the_caller_stops_a_nested_backward_in_a_thread() -> None:
    entered = anyio.Event()
    log: list[Any] = []
    root, leaves = make_chain(200, "async", log, slow_from=100)
    with anyio.move_on_after(30) as scope:  # a bound only: cancelled below
        async with anyio.create_task_group() as tg:

            async def cancel_when_deep() -> None:
                while len(log) < 100:
                    await anyio.sleep(0.001)
                entered.set()
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_when_deep)
            await ae.backward(root)
    assert entered.is_set() and not scope.cancelled_caught
    assert len(log) < 201  # stopped part way
    assert all(x.grad is None for x in leaves)  # nothing committed


# -- ae.Function that runs a backward in its backward ----------------------------------------


def make_simple_reentrant(lib: Any, base: Any, kind: str) -> Any:
    """As PyTorch's test_simple_reentrant: backward runs the backward of a private graph."""

    class Reenter(base):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            with lib.enable_grad():
                ctx.x = x.detach().requires_grad_()
                ctx.output_var = ctx.x * ctx.x
            return ctx.output_var.detach()

        if kind == "async":

            @staticmethod
            async def backward(ctx, g):  # type: ignore[no-untyped-def]
                with lib.enable_grad():
                    await ae.backward(ctx.output_var.sum())
                return ctx.x.grad * g

        else:

            @staticmethod
            def backward(ctx, g):  # type: ignore[no-untyped-def]
                with lib.enable_grad():
                    if lib is ae:
                        ae.sync.backward(ctx.output_var.sum())
                    else:
                        ctx.output_var.sum().backward()
                return ctx.x.grad * g

    return Reenter


def _simple_reentrant_expected() -> np.ndarray:
    torch = torch_or_skip()
    Reenter = make_simple_reentrant(torch, torch.autograd.Function, "sync")
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    Reenter.apply(x).sum().backward()
    return x.grad.numpy()  # type: ignore[no-any-return]


def test_simple_reentrant_sync() -> None:
    expected = _simple_reentrant_expected()
    Reenter = make_simple_reentrant(ae, ae.Function, "sync")
    x = ae.tensor([1.0, -2.0, 3.0], dtype=ae.float64, requires_grad=True)
    ae.sync.backward(Reenter.apply(x).sum())
    np.testing.assert_allclose(x.grad.numpy(), expected)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_simple_reentrant_async(kind: str) -> None:
    """A sync backward calling ae.sync.backward under an awaited backward nests, no warning."""
    expected = _simple_reentrant_expected()
    Reenter = make_simple_reentrant(ae, ae.Function, kind)
    x = ae.tensor([1.0, -2.0, 3.0], dtype=ae.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await ae.backward(Reenter.apply(x).sum())
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_async_backward_function_under_sync() -> None:
    """An async def backward awaiting ae.backward also works under ae.sync.backward."""
    Reenter = make_simple_reentrant(ae, ae.Function, "async")
    x = ae.tensor([1.0, -2.0, 3.0], dtype=ae.float64, requires_grad=True)
    ae.sync.backward(Reenter.apply(x).sum())
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.data)


def make_priority(kind: str, order: list[str]) -> tuple[Any, Any]:
    """As PyTorch's test_reentrant_priority: nested graph tasks run before the outer pending
    node."""

    class MyFunction(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x

        @staticmethod
        def backward(ctx, x):  # type: ignore[no-untyped-def]
            order.append("MyFunction")
            return x

    class Reentrant(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            with ae.enable_grad():
                ctx.x = x.detach().requires_grad_()
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        if kind == "async":

            @staticmethod
            async def backward(ctx, x):  # type: ignore[no-untyped-def]
                order.append("Reentrant")
                if ctx.x.item() < 0:
                    return x
                with ae.enable_grad():
                    await ae.backward(Reentrant.apply(ctx.x))
                return x

        else:

            @staticmethod
            def backward(ctx, x):  # type: ignore[no-untyped-def]
                order.append("Reentrant")
                if ctx.x.item() < 0:
                    return x
                with ae.enable_grad():
                    ae.sync.backward(Reentrant.apply(ctx.x))
                return x

    return MyFunction, Reentrant


def _priority_graph(kind: str, order: list[str]) -> ae.Tensor:
    MyFunction, Reentrant = make_priority(kind, order)
    a = MyFunction.apply(ae.tensor(6.0, requires_grad=True))
    b = Reentrant.apply(ae.tensor(9.0, requires_grad=True))
    return a * b


def test_reentrant_priority_sync() -> None:
    order: list[str] = []
    ae.sync.backward(_priority_graph("sync", order))
    assert order == ["Reentrant"] * 10 + ["MyFunction"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_reentrant_priority_async(kind: str) -> None:
    order: list[str] = []
    await ae.backward(_priority_graph(kind, order))
    assert order == ["Reentrant"] * 10 + ["MyFunction"]


# -- errors in nested graph tasks ------------------------------------------------------------


class _Fails(ae.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x * 1.0

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        raise ValueError("Simulate error on backward pass")


def _error_chain(n: int, mode: str) -> ae.Tensor:
    """n levels of reentrant hooks; the deepest graph contains a failing node."""

    def level(k: int) -> ae.Tensor:
        with ae.enable_grad():
            x = ae.tensor(1.0, requires_grad=True)
            y = x * 2.0
            if k == n:
                return _Fails.apply(y)
            if mode == "sync":
                y.register_hook(lambda g: ae.sync.backward(level(k + 1)))
            else:

                async def hook(g: ae.Tensor) -> None:
                    await ae.backward(level(k + 1))

                y.register_hook(hook)
            return y * 3.0

    return level(0)


def _original(exc: BaseException | None) -> BaseException | None:
    while exc is not None and not isinstance(exc, ValueError):
        exc = exc.__cause__
    return exc


@pytest.mark.parametrize("n", [1, 70])
def test_reentrant_child_error_sync(n: int) -> None:
    threads_before = set(threading.enumerate())
    x = ae.tensor(1.0, requires_grad=True)
    with pytest.raises(ae.AutogradError, match="Simulate error on backward pass") as info:
        ae.sync.backward(_error_chain(n, "sync") * x)
    assert isinstance(_original(info.value), ValueError)  # the original is chained
    assert x.grad is None  # the outer graph task failed: nothing committed
    assert not set(threading.enumerate()) - threads_before


@pytest.mark.anyio
@pytest.mark.parametrize("n", [1, 70])
async def test_reentrant_child_error_async(n: int) -> None:
    x = ae.tensor(1.0, requires_grad=True)
    with pytest.raises(ae.AutogradError, match="Simulate error on backward pass") as info:
        await ae.backward(_error_chain(n, "async") * x)
    assert isinstance(_original(info.value), ValueError)
    assert x.grad is None


@pytest.mark.anyio
async def test_cancel_outer_stops_nested() -> None:
    """Cancelling the outer backward cancels the nested one: no task left, no grads."""
    started = anyio.Event()
    finished: list[str] = []
    inner_leaf = ae.tensor(1.0, requires_grad=True)

    class Slow(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        async def backward(ctx, g):  # type: ignore[no-untyped-def]
            started.set()
            await anyio.sleep(30)
            finished.append("slow")
            return g

    def make() -> ae.Tensor:
        with ae.enable_grad():
            return Slow.apply(inner_leaf * 2.0)

    async def hook(g: ae.Tensor) -> None:
        await ae.backward(make())
        finished.append("hook")

    x = ae.tensor(1.0, requires_grad=True)
    y = x * 2.0
    y.register_hook(hook)
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, y * 3.0)
            await started.wait()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert finished == []
    assert x.grad is None and inner_leaf.grad is None


# -- callbacks, hooks, sub-graph backward, grad mode -----------------------------------------


@pytest.mark.parametrize("depths", [(True, False), (False, True), (True, True)])
def test_reentrant_with_callbacks(depths: tuple[bool, bool]) -> None:
    """Each callback runs once, at the end of the graph task that queued it."""
    outer_cb, inner_cb = depths
    counter = {"outer": 0, "inner": 0}
    seen_in_outer: list[int] = []

    class Inner(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            if inner_cb:
                ae.queue_callback(lambda: counter.__setitem__("inner", counter["inner"] + 1))
            return g

    class Outer(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            if outer_cb:
                ae.queue_callback(lambda: counter.__setitem__("outer", counter["outer"] + 1))
            with ae.enable_grad():
                v = ae.tensor(1.0, requires_grad=True)
                ae.sync.backward(Inner.apply(v * 2.0))
            seen_in_outer.append(counter["inner"])  # the inner callback already ran
            assert counter["outer"] == 0
            return g

    x = ae.tensor(1.0, requires_grad=True)
    ae.sync.backward(Outer.apply(x * 2.0))
    assert counter == {"outer": int(outer_cb), "inner": int(inner_cb)}
    assert seen_in_outer == [int(inner_cb)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_reentrant_with_non_leaf_variable_hook(mode: str) -> None:
    """A hook removes itself and runs a nested backward (gradient penalty)."""
    handle: Any = None
    param = ae.rand(10, requires_grad=True)

    def manual_increase_gradient(grad: ae.Tensor) -> ae.Tensor:
        handle.remove()
        with ae.enable_grad():
            g = grad.detach().requires_grad_()
            out = ((g * 2) + 5).sum()
            ae.sync.backward(out)
        return g.grad + grad

    tmp = param * param
    handle = tmp.register_hook(manual_increase_gradient)
    loss = tmp.sum()
    if mode == "sync":
        ae.sync.backward(loss)
    else:
        anyio.run(ae.backward, loss)
    np.testing.assert_allclose(param.grad.numpy(), 6 * param.data)
    assert not tmp.grad_fn._tensor_pre_hooks  # removed itself


def test_reentrant_with_leaf_variable_hook() -> None:
    torch = torch_or_skip()
    results = []
    for lib in (torch, ae):
        p0 = np.linspace(0.5, 2.0, 5)
        param = lib.tensor(p0, requires_grad=True)
        handle: Any = None

        def add_gradient_penalty_to_grad(grad: Any, lib: Any = lib, param: Any = param) -> Any:
            handle.remove()
            old_param_grad = grad
            param.grad = None
            with lib.enable_grad():
                g = grad.detach().requires_grad_()
                new_param = param.detach().requires_grad_()
                out = ((g * 2) + new_param).sum()
                if lib is ae:
                    ae.sync.backward(out)
                else:
                    out.backward()
            res = g.grad + grad
            param.grad = old_param_grad
            return res

        handle = param.register_hook(add_gradient_penalty_to_grad)
        loss = (param * param).sum()
        if lib is ae:
            ae.sync.backward(loss)
        else:
            loss.backward()
        results.append(np.asarray(param.grad.detach().numpy()))
    np.testing.assert_allclose(results[1], results[0])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_post_hook_backward_on_pending_subgraph(mode: str) -> None:
    """A node post-hook runs backward(retain_graph=True) on a part of the graph the
    outer backward has not run yet: no deadlock, both gradients accumulate."""
    a = ae.tensor([0.3, -1.2], requires_grad=True)
    b = a.sin()
    c = b.exp()
    d = c * 2.0
    bs = b.sum()

    def sync_hook(grad_inputs: Any, grad_outputs: Any) -> None:
        ae.sync.backward(bs, retain_graph=True)

    async def async_hook(grad_inputs: Any, grad_outputs: Any) -> None:
        await ae.backward(bs, retain_graph=True)

    d.grad_fn.register_hook(sync_hook if mode == "sync" else async_hook)
    if mode == "sync":
        ae.sync.backward(d.sum())
    else:
        anyio.run(ae.backward, d.sum())
    av = a.data
    expected = np.cos(av) + 2 * np.exp(np.sin(av)) * np.cos(av)
    np.testing.assert_allclose(a.grad.numpy(), expected)


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_mode_in_nested(create_graph: bool) -> None:
    """Grad mode inside a nested graph task = its create_graph; restored after."""
    modes: list[tuple[str, bool]] = []
    x = ae.tensor(2.0, requires_grad=True)

    def inner_hook(g: ae.Tensor) -> None:
        modes.append(("inner", ae.is_grad_enabled()))

    def outer_hook(g: ae.Tensor) -> None:
        modes.append(("outer-before", ae.is_grad_enabled()))
        with ae.enable_grad():
            v = ae.tensor(1.0, requires_grad=True)
            w = v * x
            w.register_hook(inner_hook)
            w2 = w * w
        ae.sync.grad(w2, [v], create_graph=create_graph)
        modes.append(("outer-after", ae.is_grad_enabled()))

    y = x * 3.0
    y.register_hook(outer_hook)
    ae.sync.backward(y)
    assert modes == [
        ("outer-before", False),
        ("inner", create_graph),
        ("outer-after", False),
    ]


def test_depth_outside_and_inside() -> None:
    assert current_graph_task() is None
    depths: list[int] = []
    x = ae.tensor(1.0, requires_grad=True)

    def hook(g: ae.Tensor) -> None:
        gt = current_graph_task()
        assert gt is not None
        depths.append(gt.depth)

    y = x * 2.0
    y.register_hook(hook)
    ae.sync.backward(y, retain_graph=True)
    assert depths == [0]
    assert current_graph_task() is None


# -- the parent's failure stops the nested graph task ----------------------------------------


def _parent_fails_while_child_runs(mode: str) -> tuple[ae.Tensor, list[ae.Tensor], list[str]]:
    """The child's first node makes the parent fail (as a device worker would, concurrently);
    the child's later nodes must not run and no leaf may get a gradient."""
    ran: list[str] = []  # FailParent, then at most a few dozen of the 100 Later nodes
    parents: list[Any] = []
    leaves: list[ae.Tensor] = []

    class FailParent(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            ran.append("FailParent")
            parents[0].fail(None, ValueError("Simulate error on the parent"))
            return g

    class Later(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            ran.append("Later")
            return g

    def child_graph() -> ae.Tensor:
        with ae.enable_grad():
            v = ae.tensor(1.0, requires_grad=True)
            leaves.append(v)
            h = v * 2.0
            for _ in range(100):
                h = Later.apply(h)
            return FailParent.apply(h)

    def sync_hook(g: ae.Tensor) -> None:
        parents.append(current_graph_task())
        ae.sync.backward(child_graph())

    async def async_hook(g: ae.Tensor) -> None:
        parents.append(current_graph_task())
        await ae.backward(child_graph())

    x = ae.tensor(1.0, requires_grad=True)
    leaves.append(x)
    y = x * 2.0
    y.register_hook(sync_hook if mode == "sync" else async_hook)
    return y * 3.0, leaves, ran


def test_parent_error_stops_child_sync() -> None:
    root, leaves, ran = _parent_fails_while_child_runs("sync")
    with pytest.raises(ae.AutogradError, match="Simulate error on the parent"):
        ae.sync.backward(root)
    assert ran[0] == "FailParent" and len(ran) < 50  # the child stopped early
    assert all(t.grad is None for t in leaves)


@pytest.mark.anyio
async def test_parent_error_stops_child_async() -> None:
    root, leaves, ran = _parent_fails_while_child_runs("async")
    with pytest.raises(ae.AutogradError, match="Simulate error on the parent"):
        await ae.backward(root)
    assert ran[0] == "FailParent" and len(ran) < 50  # the child stopped early
    assert all(t.grad is None for t in leaves)


@pytest.mark.anyio
async def test_depth_limit_from_engine_settings() -> None:
    """ae.Engine(reentrant_depth_limit=...) moves nesting to threads earlier."""
    for mode in ("sync", "async"):
        log: list[Any] = []
        root, leaves = make_chain(12, mode, log)
        async with ae.Engine(reentrant_depth_limit=4):
            await ae.backward(root)
        _check_chain(12, log, leaves)
        caller = threading.get_ident()
        on_caller = sum(1 for _, _, tid in log if tid == caller)
        if mode == "sync":
            assert on_caller == 4  # the outer graph task and 3 nested, then threads
        else:
            assert on_caller <= 5  # async: a new thread with its own loop beyond the limit
        assert len({tid for _, _, tid in log}) >= 3


# -- deep reentrant ae.Function, and callbacks under the async engine ------------------------


def make_deep_reentrant(kind: str) -> Any:
    """As PyTorch's test_deep_reentrant: backward runs the backward of a new instance until < 0."""

    class DeepReentrant(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            with ae.enable_grad():
                ctx.x = x.detach().requires_grad_()
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        if kind == "async":

            @staticmethod
            async def backward(ctx, x):  # type: ignore[no-untyped-def]
                if ctx.x.item() < 0:
                    return x
                with ae.enable_grad():
                    await ae.backward(DeepReentrant.apply(ctx.x).sum())
                return x

        else:

            @staticmethod
            def backward(ctx, x):  # type: ignore[no-untyped-def]
                if ctx.x.item() < 0:
                    return x
                with ae.enable_grad():
                    ae.sync.backward(DeepReentrant.apply(ctx.x).sum())
                return x

    return DeepReentrant


def test_deep_reentrant_function_sync() -> None:
    DeepReentrant = make_deep_reentrant("sync")
    for start in (2000.0, 200.0):
        v = ae.tensor(start, requires_grad=True)
        ae.sync.backward(DeepReentrant.apply(v).sum())
        assert v.grad.item() == 1.0


@pytest.mark.anyio
async def test_deep_reentrant_function_async() -> None:
    DeepReentrant = make_deep_reentrant("async")
    for start in (300.0, 100.0):  # depth 1000 is covered by test_deep_async
        v = ae.tensor(start, requires_grad=True)
        await ae.backward(DeepReentrant.apply(v).sum())
        assert v.grad.item() == 1.0


@pytest.mark.anyio
async def test_reentrant_with_callbacks_async() -> None:
    """Callbacks under await: async backward functions, async callbacks, nested awaited."""
    events: list[str] = []

    class Inner(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        async def backward(ctx, g):  # type: ignore[no-untyped-def]
            async def cb() -> None:
                await anyio.sleep(0)
                events.append("inner-callback")

            ae.queue_callback(cb)
            return g

    class Outer(ae.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            return x * 1.0

        @staticmethod
        async def backward(ctx, g):  # type: ignore[no-untyped-def]
            await anyio.sleep(0)  # the graph task stays current across suspensions
            ae.queue_callback(lambda: events.append("outer-callback"))
            with ae.enable_grad():
                v = ae.tensor(1.0, requires_grad=True)
                await ae.backward(Inner.apply(v * 2.0))
            events.append("outer-backward-done")
            return g

    x = ae.tensor(1.0, requires_grad=True)
    await ae.backward(Outer.apply(x * 2.0))
    assert events == ["inner-callback", "outer-backward-done", "outer-callback"]


def _mixed_chain(n: int, leaves: list[ae.Tensor]) -> ae.Tensor:
    """Levels alternate a sync hook (ae.sync.backward) and an async one (await ae.backward)."""

    def level(k: int) -> ae.Tensor:
        with ae.enable_grad():
            x = ae.tensor(1.0, requires_grad=True)
            leaves.append(x)
            y = x * 2.0
            if k % 2:

                def hook(g: ae.Tensor) -> None:
                    if k < n:
                        ae.sync.backward(level(k + 1))

            else:

                async def hook(g: ae.Tensor) -> None:  # type: ignore[misc]
                    if k < n:
                        await ae.backward(level(k + 1))

            y.register_hook(hook)
            return y * 3.0

    return level(0)


@pytest.mark.anyio
async def test_mixed_sync_async_nesting_deep() -> None:
    leaves: list[ae.Tensor] = []
    await ae.backward(_mixed_chain(300, leaves))
    assert len(leaves) == 301 and all(x.grad.item() == 6.0 for x in leaves)


def test_mixed_sync_async_nesting_sync_top() -> None:
    leaves: list[ae.Tensor] = []
    ae.sync.backward(_mixed_chain(100, leaves))
    assert len(leaves) == 101 and all(x.grad.item() == 6.0 for x in leaves)


@pytest.mark.anyio
@pytest.mark.parametrize("overflow", ["thread", "task"])
async def test_a_timeout_stops_a_deep_chain_of_nested_awaited_backwards(overflow: str) -> None:
    """3,001 nested levels, 2 ms: both overflow modes stop long before every level ran.

    A chain of nested backwards never suspends on its way down (each level
    starts the next within its first time slice), so only the hops off the
    stack can notice the caller's cancellation: the thread mode's watcher
    fails the nested graph task, the task mode checks when the fresh task
    starts.
    """
    n = 3000
    log: list[int] = []
    leaves: list[ae.Tensor] = []

    class Nest(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: ae.Tensor, k: int) -> ae.Tensor:
            ctx.k = k
            return x * 1.0

        @staticmethod
        async def backward(ctx: Any, g: ae.Tensor) -> Any:
            log.append(ctx.k)
            if ctx.k < n:
                await ae.backward(level(ctx.k + 1))
            return g, None

    def level(k: int) -> ae.Tensor:
        with ae.enable_grad():
            x = ae.tensor(1.0, requires_grad=True)
            leaves.append(x)
            return Nest.apply(x, k)  # type: ignore[no-any-return]

    async with ae.Engine(reentrant_overflow=overflow):
        root = level(0)
        with anyio.fail_after(60):  # a bound only
            with anyio.move_on_after(0.002) as scope:
                await ae.backward(root)
    assert scope.cancelled_caught
    # stopped within a few hops of 60 levels after the deadline (all 3,001 ran before)
    assert len(log) < 1000, len(log)
    assert all(x.grad is None for x in leaves)  # nothing committed
