"""Hooks: tensor hooks, node pre/post hooks, AccumulateGrad and post-accumulate hooks.

Each scenario is one ``async def scenario(L)`` written against a small library
adapter ``L``; it runs with torch (the oracle), with ``ae.sync`` and with the
awaitable API under asyncio and trio, and the logs and gradients must match.
"""

from __future__ import annotations

import gc
import re
import weakref
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.core._commit import commit
from aengine.core._graph_task import GraphTask
from tests.oracle import torch_or_skip

# -- library adapters -----------------------------------------------------------------------


class TorchLib:
    name = "torch"

    def __init__(self) -> None:
        self.torch = torch = torch_or_skip()
        self.Function = torch.autograd.Function
        self.once_differentiable = torch.autograd.function.once_differentiable
        self.register_multi_grad_hook = torch.autograd.graph.register_multi_grad_hook

    def iadd(self, a: Any, b: Any) -> Any:
        """``a += b`` in place (bumps the version counter)."""
        return a.add_(b)

    def tensor(self, data: Any, requires_grad: bool = False) -> Any:
        return self.torch.tensor(data, dtype=self.torch.float64, requires_grad=requires_grad)

    async def backward(self, t: Any, grad: Any = None, **kw: Any) -> None:
        self.torch.autograd.backward(t, grad, **kw)

    async def grad(self, outs: Any, ins: Any, grad_outputs: Any = None, **kw: Any) -> Any:
        return self.torch.autograd.grad(outs, ins, grad_outputs, **kw)


class AeSyncLib:
    name = "ae"
    Function = ae.Function
    once_differentiable = staticmethod(ae.once_differentiable)
    register_multi_grad_hook = staticmethod(ae.register_multi_grad_hook)

    def iadd(self, a: Any, b: Any) -> Any:
        """``a += b`` in place."""
        return a.add_(b)

    def tensor(self, data: Any, requires_grad: bool = False) -> Any:
        return ae.tensor(data, dtype=ae.float64, requires_grad=requires_grad)

    async def backward(self, t: Any, grad: Any = None, **kw: Any) -> None:
        ae.sync.backward(t, grad, **kw)

    async def grad(self, outs: Any, ins: Any, grad_outputs: Any = None, **kw: Any) -> Any:
        return ae.sync.grad(outs, ins, grad_outputs, **kw)


class AeAsyncLib(AeSyncLib):
    async def backward(self, t: Any, grad: Any = None, **kw: Any) -> None:
        await ae.backward(t, grad, **kw)

    async def grad(self, outs: Any, ins: Any, grad_outputs: Any = None, **kw: Any) -> Any:
        return await ae.grad(outs, ins, grad_outputs, **kw)


def run_plain(coro: Any) -> Any:
    """Run a scenario coroutine that never suspends (torch, ae.sync)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("scenario suspended without an event loop")


def to_py(x: Any) -> Any:
    """Tensors (torch or aengine) to numpy, recursively, for comparison."""
    if isinstance(x, dict):
        return {k: to_py(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_py(v) for v in x]
    if hasattr(x, "detach"):
        return np.asarray(x.detach().numpy(), dtype=np.float64)
    return x


def assert_same(got: Any, expected: Any, path: str = "result") -> None:
    got, expected = to_py(got), to_py(expected)
    _same(got, expected, path)


def _same(got: Any, expected: Any, path: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), path
        for k in expected:
            _same(got[k], expected[k], f"{path}[{k!r}]")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{path}: {got} != {expected}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            _same(g, e, f"{path}[{i}]")
    elif isinstance(expected, np.ndarray):
        np.testing.assert_allclose(got, expected, err_msg=path)
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def acc_of(t: Any) -> Any:
    """The AccumulateGrad node of leaf ``t`` (same spelling in both libraries)."""
    return t.view_as(t).grad_fn.next_functions[0][0]


# -- scenarios ------------------------------------------------------------------------------


async def tensor_hooks_add_remove_and_modify(L: Any) -> Any:
    x = L.tensor(np.ones((2, 2)), requires_grad=True)
    y = L.tensor(np.ones((2, 2)) * 4, requires_grad=True)
    z = x * y + x + y * y + 1
    counter = [0]

    def bw_hook(inc: int, grad: Any) -> None:
        counter[0] += inc

    h1 = z.register_hook(lambda g: bw_hook(1, g))
    await L.backward(z, L.tensor(np.ones((2, 2))), retain_graph=True)
    c1 = counter[0]
    z.register_hook(lambda g: bw_hook(2, g))
    await L.backward(z, L.tensor(np.ones((2, 2))), retain_graph=True)
    c2 = counter[0]
    h1.remove()
    await L.backward(z, L.tensor(np.ones((2, 2))), retain_graph=True)
    c3 = counter[0]
    # a hook doubling what reaches y through z, then one on y itself
    x.grad = None
    y.grad = None
    z.register_hook(lambda g: g * 2)
    await L.backward(z, L.tensor(np.ones((2, 2))), retain_graph=True)
    gy1 = y.grad.clone()
    y.grad = None
    y.register_hook(lambda g: g * 2)
    await L.backward(z, L.tensor(np.ones((2, 2))))
    return [c1, c2, c3, gy1, y.grad, x.grad]


def _mul2(L: Any) -> Any:
    class Mul2(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    return Mul2


async def grad_fn_hooks_of_custom_function(L: Any, custom: bool = True) -> Any:
    log: dict[str, Any] = {"pre": 0, "post": 0, "seen_pre_in_post": []}

    def pre_double(grad_output: Any) -> Any:
        log["pre"] += 1
        return (grad_output[0] * 2,)

    def pre_none(grad_output: Any) -> None:
        log["pre"] += 1

    def pre_same(grad_output: Any) -> Any:
        log["pre"] += 1
        return grad_output

    def post(grad_input: Any, grad_output: Any) -> None:
        log["post"] += 1
        log["seen_pre_in_post"].append(log["pre"])
        log.setdefault("gi", []).append(grad_input[0])
        log.setdefault("go", []).append(grad_output[0])

    out = {}
    a = L.tensor(1.0, requires_grad=True)
    b = _mul2(L).apply(a) if custom else a * 2
    b.grad_fn.register_hook(post)
    b.grad_fn.register_hook(post)
    for _ in range(3):
        b.grad_fn.register_prehook(pre_double)
    await L.backward(b)
    out["a.grad"] = a.grad
    out["log"] = log
    a2 = L.tensor(1.0, requires_grad=True)
    b2 = _mul2(L).apply(a2) if custom else a2 * 2
    b2.grad_fn.register_prehook(pre_none)
    b2.grad_fn.register_prehook(pre_same)
    await L.backward(b2)
    out["a2.grad"] = a2.grad
    return out


async def grad_fn_hooks_of_builtin_node(L: Any) -> Any:
    return await grad_fn_hooks_of_custom_function(L, custom=False)


async def prehooks_multiple_outputs(L: Any) -> Any:
    class DoubleMulAndAdd(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = x * 3
            z = x + 1
            ctx.mark_non_differentiable(z)
            return x * 2, y, z

        @staticmethod
        def backward(ctx: Any, g1: Any, g2: Any, g3: Any) -> Any:
            return g1 * 2 + g2 * 3

    seen: list[Any] = []

    def pre(grad_outputs: Any) -> Any:
        seen.append([g is None for g in grad_outputs])
        return tuple(None if g is None else g * 2 for g in grad_outputs)

    a = L.tensor([1.0, 2.0], requires_grad=True)
    b, c, d = DoubleMulAndAdd.apply(a)
    b.grad_fn.register_prehook(pre)
    await L.backward(b.sum() + c.sum())
    return [a.grad, seen, d.requires_grad]


async def remove_hooks(L: Any) -> Any:
    log: list[int] = []
    a = L.tensor(1.0, requires_grad=True)
    b = a * 2
    handles: list[Any] = []

    def h1(g: Any) -> None:
        log.append(1)
        handles[2].remove()  # removed while the node's pre-hooks run: still runs now
        handles[2].remove()  # twice is harmless

    def h2(g: Any) -> None:
        log.append(2)

    def h3(g: Any) -> None:
        log.append(3)

    def h4(g: Any) -> None:
        log.append(4)

    for h in (h1, h2, h3, h4):
        handles.append(b.grad_fn.register_prehook(h))
    handles[1].remove()  # removed before backward
    await L.backward(b, retain_graph=True)
    log.append(0)
    await L.backward(b)  # h3 is gone for the next backward
    return log


async def prehook_ordering(L: Any) -> Any:
    log: list[int] = []

    def hook1(g: Any) -> Any:
        log.append(1)
        return g * 3

    def hook2(gs: Any) -> Any:
        log.append(2)
        return tuple(g * 2 for g in gs)

    a = L.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.grad_fn.register_prehook(hook2)
    b.register_hook(hook1)
    b.grad_fn.register_prehook(hook2)
    acc = acc_of(a)
    a.register_hook(hook1)
    acc.register_prehook(hook2)
    await L.backward(b.sum(), retain_graph=True)
    logs = [list(log)]
    grads = [a.grad]
    log.clear()
    res = await L.grad(b.sum(), (a,), retain_graph=True)
    logs.append(list(log))
    grads.append(res[0])
    log.clear()
    await L.backward(b.sum(), inputs=(b,))
    logs.append(list(log))
    grads.append(b.grad)
    return [logs, grads]


async def retain_grad_observes_tensor_hooks(L: Any) -> Any:
    a = L.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(lambda g: g * 2)
    b.retain_grad()
    b.register_hook(lambda g: g * 2)
    await L.backward(b)
    r1 = b.grad
    a2 = L.tensor(1.0, requires_grad=True)
    b2 = a2.clone()
    b2.retain_grad()
    b2.register_hook(lambda g: g * 2)
    await L.backward(b2)
    return [r1, b2.grad, a.grad, a2.grad]


async def accumulate_grad_hooks(L: Any) -> Any:
    seen: list[Any] = []
    a = L.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    acc = acc_of(a)
    a.register_hook(lambda g: g * 5)

    def pre(grad_outputs: Any) -> Any:
        seen.append(("pre", grad_outputs[0]))
        return (grad_outputs[0] + 1,)

    def post(grad_inputs: Any, grad_outputs: Any) -> None:
        seen.append(("post", len(grad_inputs), grad_outputs[0]))

    acc.register_prehook(pre)
    acc.register_hook(post)
    await L.backward(b.sum())
    out = [seen, a.grad]

    # backward(inputs=[b]): hooks of other leaves' accumulators never run
    c = L.tensor(1.0, requires_grad=True)
    d = L.tensor(2.0, requires_grad=True)
    e = c * d

    def boom(*args: Any) -> None:
        raise RuntimeError("must not run")

    acc_of(d).register_prehook(boom)
    acc_of(d).register_hook(boom)
    await L.backward(e, inputs=[c])
    out.append(c.grad)
    return out


async def hooks_with_grad(L: Any) -> Any:
    counts = {"tensor": 0, "pre": 0, "post": 0}

    def th(g: Any) -> None:
        counts["tensor"] += 1

    def pre(g: Any) -> None:
        counts["pre"] += 1

    def post(gi: Any, go: Any) -> None:
        counts["post"] += 1

    def setup() -> tuple[Any, Any, Any]:
        a = L.tensor(1.0, requires_grad=True)
        b = a * 2
        c = b * 2
        a.register_hook(th)
        b.register_hook(th)
        for node in (b.grad_fn, acc_of(a)):
            node.register_prehook(pre)
            node.register_hook(post)
        return a, b, c

    res = []
    a, b, c = setup()
    await L.grad(c, b)
    res.append(dict(counts))
    counts.update(tensor=0, pre=0, post=0)
    a, b, c = setup()
    await L.grad(c, (a, b))
    res.append(dict(counts))
    counts.update(tensor=0, pre=0, post=0)
    a, b, c = setup()
    await L.backward(c)
    res.append(dict(counts))
    counts.update(tensor=0, pre=0, post=0)
    a, b, c = setup()
    await L.backward(c, inputs=(a, b))
    res.append(dict(counts))
    return res


async def tensor_hooks_inplace(L: Any) -> Any:
    log: list[Any] = []

    def fn(name: str) -> Any:
        def hook(g: Any) -> Any:
            log.append((name, g.detach().clone()))
            return g * 2

        return hook

    a = L.tensor(1.0, requires_grad=True)
    b = a.clone()
    b.register_hook(fn("old version"))
    b.mul_(2)
    b.register_hook(fn("new version"))
    await L.backward(b.sum())
    out: list[Any] = [log, a.grad]

    class TwoOut(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1, x * 1

        @staticmethod
        def backward(ctx: Any, g1: Any, g2: Any) -> Any:
            return g1 + g2

    log2: list[Any] = []
    a2 = L.tensor(1.0, requires_grad=True)
    b2, c2 = TwoOut.apply(a2)
    b2.register_hook(lambda g: (log2.append(("b old", g.detach().clone())), g * 2)[1])
    b2.mul_(2)
    b2.register_hook(lambda g: (log2.append(("b new", g.detach().clone())), g * 2)[1])
    await L.backward(b2.sum() + c2.sum())
    out += [log2, a2.grad]
    return out


async def hooks_see_none_gradient(L: Any) -> Any:
    info: dict[str, Any] = {}

    class MyFunction(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any) -> Any:
            info["needs"] = tuple(ctx.needs_input_grad)
            return x + y, x * 2

        @staticmethod
        def backward(ctx: Any, gx: Any, gy: Any) -> Any:
            return gx + gy * 2, None

    x = L.tensor([1.0, 2.0], requires_grad=True)
    y = L.tensor([3.0, 4.0])
    rx, ry = MyFunction.apply(x, y)
    got: list[bool] = []
    rx.register_hook(lambda g: got.append(g is not None))
    ry.register_hook(lambda g: got.append(g is not None))
    await L.backward(rx.sum() + ry.sum())
    return [info["needs"], got, x.grad, y.grad is None]


async def post_accumulate_hooks(L: Any) -> Any:
    log: list[Any] = []
    t = L.tensor([1.0, 2.0], requires_grad=True)
    u = L.tensor([3.0], requires_grad=True)

    def simple(name: str) -> Any:
        def hook(tensor: Any) -> None:
            log.append((name, tensor.grad.clone()))

        return hook

    t.register_post_accumulate_grad_hook(simple("t1"))
    handle = t.register_post_accumulate_grad_hook(simple("t2"))
    u.register_post_accumulate_grad_hook(simple("u"))
    await L.backward((t * 2).sum() + (u * 3).sum())
    handle.remove()
    await L.backward((t * 2).sum())
    return [sorted(log, key=lambda e: e[0])[:2], [e[0] for e in log].count("t2"), t.grad, u.grad]


async def optimizer_in_backward(L: Any) -> Any:
    """End to end: an SGD step in a post-accumulate hook equals the plain loop."""
    w1 = L.tensor([1.0, -2.0, 0.5], requires_grad=True)
    w2 = L.tensor([1.0, -2.0, 0.5], requires_grad=True)
    x = L.tensor([0.3, 0.1, -0.7])

    def step(p: Any) -> None:
        p.data -= 0.1 * p.grad.data
        p.grad = None

    w1.register_post_accumulate_grad_hook(step)
    for _ in range(3):
        await L.backward(((w1 * x).sum() - 1.0) ** 2)
        await L.backward(((w2 * x).sum() - 1.0) ** 2)
        w2.data -= 0.1 * w2.grad.data
        w2.grad = None
    return [w1.detach(), w2.detach()]


async def two_leaves_order(L: Any) -> Any:
    """Full order log over a small graph: tensor, node pre and post hooks everywhere."""
    log: list[str] = []
    a = L.tensor([1.0, 2.0], requires_grad=True)
    w = L.tensor([0.5, -1.0], requires_grad=True)
    h = a * w
    s = h.exp()
    out = (s + h).sum()
    for name, t in (("a", a), ("w", w), ("h", h), ("s", s)):
        t.register_hook(lambda g, n=name: log.append(f"tensor:{n}"))
    for name, node in (
        ("sum", out.grad_fn),
        ("add", out.grad_fn.next_functions[0][0]),
        ("exp", s.grad_fn),
        ("mul", h.grad_fn),
        ("acc_a", acc_of(a)),
        ("acc_w", acc_of(w)),
    ):
        node.register_prehook(lambda go, n=name: log.append(f"pre:{n}"))
        node.register_hook(lambda gi, go, n=name: log.append(f"post:{n}"))
    await L.backward(out)
    return [log, a.grad, w.grad]


async def multi_grad_hooks(L: Any) -> Any:
    ts = [L.tensor([1.0, 2.0], requires_grad=True) for _ in range(4)]
    log: list[Any] = []

    def fn(grads: Any) -> None:
        log.append([None if g is None else g.detach().clone() for g in grads])

    h = L.register_multi_grad_hook(ts, fn)
    out = (ts[1] * ts[2] * 2).sum()
    await L.backward(out, retain_graph=True)
    await L.backward(out, inputs=(ts[2],), retain_graph=True)
    await L.backward((ts[0] * 3).sum() + (ts[3] * ts[1]).sum())
    await L.backward((L.tensor([1.0], requires_grad=True) * 2).sum())  # none takes part
    h.remove()
    await L.backward((ts[0] * 3).sum())
    any_log: list[Any] = []
    h2 = L.register_multi_grad_hook(ts, lambda g: any_log.append(g.detach().clone()), mode="any")
    await L.backward((ts[1] * ts[2] * 2).sum())
    h2.remove()
    try:
        L.register_multi_grad_hook(ts, fn, mode="foo")
    except ValueError as exc:
        log.append(str(exc))
    return [log, any_log]


SCENARIOS = [
    multi_grad_hooks,
    tensor_hooks_add_remove_and_modify,
    grad_fn_hooks_of_custom_function,
    grad_fn_hooks_of_builtin_node,
    prehooks_multiple_outputs,
    remove_hooks,
    prehook_ordering,
    retain_grad_observes_tensor_hooks,
    accumulate_grad_hooks,
    hooks_with_grad,
    tensor_hooks_inplace,
    hooks_see_none_gradient,
    post_accumulate_hooks,
    optimizer_in_backward,
    two_leaves_order,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sync_matches_torch(scenario: Any) -> None:
    expected = run_plain(scenario(TorchLib()))
    got = run_plain(scenario(AeSyncLib()))
    assert_same(got, expected)


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_async_matches_torch(scenario: Any) -> None:
    expected = run_plain(scenario(TorchLib()))
    got = await scenario(AeAsyncLib())
    assert_same(got, expected)


# -- aengine-specific behaviour -------------------------------------------------------------


def test_post_accumulate_order_differs_from_torch() -> None:
    """NOTE [Post-accumulate hooks run at commit]: after every node and AccumulateGrad post-hook."""
    log: list[str] = []
    t = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    acc = acc_of(t)
    t.register_hook(lambda g: (log.append("tensor"), g - 2)[1])
    acc.register_prehook(lambda go: (log.append("acc_pre"), (go[0] / 4,))[1])
    acc.register_hook(lambda gi, go: log.append(f"acc_post:{gi}:{go[0].tolist()}"))

    def post_acc(tensor: ae.Tensor) -> None:
        log.append(f"post_acc:{tensor.grad.tolist()}")
        tensor.grad = tensor.grad + 0.5

    t.register_post_accumulate_grad_hook(post_acc)
    ae.sync.backward(t.sum())
    assert log == [
        "tensor",
        "acc_pre",
        "acc_post:():[-0.25, -0.25, -0.25]",
        "post_acc:[-0.25, -0.25, -0.25]",
    ]
    np.testing.assert_allclose(t.grad.numpy(), [0.25, 0.25, 0.25])


def test_post_accumulate_hook_errors() -> None:
    t = ae.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ae.AutogradError, match="cannot be registered on non-leaf tensors"):
        (t * 2).register_post_accumulate_grad_hook(lambda x: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ae.ones(2).register_post_accumulate_grad_hook(lambda x: None)
    t.register_post_accumulate_grad_hook(lambda x: x)
    with pytest.raises(RuntimeError, match="hooks should return None."):
        ae.sync.backward(t.sum())


def test_post_accumulate_hook_not_run_when_backward_fails() -> None:
    t = ae.tensor([1.0, 2.0], requires_grad=True)
    calls: list[int] = []
    t.register_post_accumulate_grad_hook(lambda x: calls.append(1))
    y = t * 2

    def boom(g: ae.Tensor) -> None:
        raise ValueError("boom")

    (y * 3).sum()
    z = y.sum() + (t * 3).sum()
    y.register_hook(boom)
    with pytest.raises(ae.BackwardError, match="boom") as info:
        ae.sync.backward(z)
    assert isinstance(info.value.__cause__, ValueError)
    assert calls == [] and t.grad is None


def test_hook_on_tensor_not_requiring_grad() -> None:
    torch = torch_or_skip()
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't"):
        torch.ones(2).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't"):
        ae.ones(2).register_hook(lambda g: g)


def test_tensor_hook_bad_return() -> None:
    x = ae.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: 3)
    with pytest.raises(ae.BackwardError, match="must return a Tensor or None") as info:
        ae.sync.backward(y.sum())
    assert isinstance(info.value.__cause__, TypeError)


def test_hook_closure_cycle_is_collected() -> None:
    """A hook whose closure holds its node lives with the graph, dies with it."""

    class Holder:
        pass

    a = ae.tensor([1.0], requires_grad=True)
    b = a * 2
    c = b.exp()
    node = c.grad_fn
    calls: list[int] = []
    marker = Holder()

    def hook(go: Any, node: Any = node, marker: Any = marker) -> None:
        calls.append(1)

    node.register_prehook(hook)
    ref = weakref.ref(marker)
    del marker, node
    gc.collect()
    ae.sync.backward(c.sum(), retain_graph=True)
    ae.sync.backward(c.sum())
    assert calls == [1, 1]
    del c, b, hook
    gc.collect()
    assert ref() is None


def test_retain_grad_cycle_is_collected() -> None:
    x = ae.tensor([1.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    ref = weakref.ref(y)
    fn_ref = weakref.ref(y.grad_fn)
    ae.sync.backward(y.sum())
    del y
    gc.collect()
    assert ref() is None and fn_ref() is None


@pytest.mark.anyio
async def test_async_hook_lets_other_tasks_run() -> None:
    """An async tensor hook waiting on an Event does not block the event loop."""
    order: list[str] = []
    ev = anyio.Event()
    started = anyio.Event()
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3

    async def hook(g: ae.Tensor) -> ae.Tensor:
        order.append("hook waits")
        started.set()
        await ev.wait()
        order.append("hook resumes")
        return g * 2

    async def other() -> None:
        await started.wait()  # the waiter suspended; the loop still runs us
        order.append("other runs")
        ev.set()

    y.register_hook(hook)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, y.sum())
            tg.start_soon(other)
    assert order == ["hook waits", "other runs", "hook resumes"]
    assert x.grad.tolist() == [6.0, 6.0]


@pytest.mark.anyio
async def test_async_node_hooks_and_post_accumulate() -> None:
    log: list[str] = []
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3

    async def pre(go: Any) -> Any:
        await anyio.sleep(0)
        log.append("pre")
        return (go[0] * 2,)

    async def post(gi: Any, go: Any) -> None:
        await anyio.sleep(0)
        log.append("post")

    async def post_acc(t: ae.Tensor) -> None:
        await anyio.sleep(0)
        log.append(f"post_acc:{t.grad.tolist()}")

    y.grad_fn.register_prehook(pre)
    y.grad_fn.register_hook(post)
    acc_of(x).register_hook(post)
    x.register_post_accumulate_grad_hook(post_acc)
    await ae.backward(y.sum())
    assert log == ["pre", "post", "post", "post_acc:[6.0, 6.0]"]


def test_async_hooks_under_sync_without_loop() -> None:
    """ae.sync runs async hooks that really suspend (in a loop of their own)."""
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3

    async def hook(g: ae.Tensor) -> ae.Tensor:
        await anyio.sleep(0)
        return g * 2

    async def pre(go: Any) -> Any:
        await anyio.sleep(0)
        return (go[0] + 1,)

    y.register_hook(hook)
    y.grad_fn.register_prehook(pre)
    ae.sync.backward(y.sum())
    assert x.grad.tolist() == [9.0, 9.0]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["all", "any"])
async def test_multi_grad_hook_concurrent_backwards(mode: str) -> None:
    """Multi-grad hooks under 5 concurrent backwards, one of which fails on a node."""
    t1, t2, t3 = (ae.tensor([1.0, 2.0], requires_grad=True) for _ in range(3))
    calls: list[Any] = []

    async def fn(grads: Any) -> None:
        await anyio.sleep(0)
        calls.append(grads)

    ae.register_multi_grad_hook((t2, t3), fn, mode=mode)
    out = (t2 * t3).sum() + (t1 * 2).sum()

    class Fail(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            raise ValueError("boom")

    # t3's branch is recorded later, so it runs (and t3's hook fires) before Fail raises
    f = Fail.apply(t2).sum()
    failing = f + (t3 * 1).sum()
    errors: list[BaseException] = []

    async def one(y: ae.Tensor) -> None:
        try:
            await ae.backward(y, inputs=(t2, t3), retain_graph=True)
        except ae.BackwardError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(one, failing if i == 2 else out)
    assert len(errors) == 1
    # "all" needs both gradients: the failing task never completes them
    assert len(calls) == (4 if mode == "all" else 5)


def test_multi_grad_hook_not_fired_when_backward_fails() -> None:
    a = ae.tensor([1.0], requires_grad=True)
    b = ae.tensor([2.0], requires_grad=True)
    calls: list[Any] = []
    ae.register_multi_grad_hook((a, b), calls.append)
    y = a * b
    y.register_hook(lambda g: (_ for _ in ()).throw(ValueError("fail")))
    with pytest.raises(ae.BackwardError, match="fail"):
        ae.sync.backward(y.sum())
    assert calls == []
    ae.sync.backward((a * b).sum())
    assert len(calls) == 1 and calls[0][0].tolist() == [2.0]


@pytest.mark.anyio
@pytest.mark.parametrize("use_grad", [True, False])
async def test_multi_grad_hook_all_counts_nodes_queued_on_device_workers(use_grad: bool) -> None:
    """Mode "all" fires once with every gradient, also when the nodes run on device workers.

    The count of nodes the backward runs is taken from the nodes it reached,
    not from what is still waiting on the engine's own queue: a node already
    handed to a sim device's worker counted as "will not run" before, and the
    hook fired twice with one gradient each.
    """
    async with ae.Engine():
        x = ae.tensor([1.0, 2.0], requires_grad=True, device="sim:0")
        a, b = x * 2.0, x * 5.0
        seen: list[list[Any]] = []
        ae.register_multi_grad_hook((a, b), lambda gs: seen.append([g.tolist() for g in gs]))
        y = (a * 3.0).sum() + (b * 4.0).sum()
        if use_grad:
            (gx,) = await ae.grad(y, [x])
        else:
            await ae.backward(y)
            gx = x.grad
    assert seen == [[[3.0, 3.0], [4.0, 4.0]]]
    assert gx is not None and gx.tolist() == [26.0, 26.0]


# -- what a hook returns is checked (NOTE [Checking what a hook returns]) ---------------------


def _bad_hook_case(lib: Any, case: str) -> tuple[Any, Any, Any]:
    """A leaf ``x`` (3,), a second leaf ``w``, the loss, with one hook returning ``case``."""
    x = lib.ones(3, requires_grad=True)
    w = lib.ones(3, requires_grad=True)
    y = x * 2
    acc = y.grad_fn.next_functions[0][0]
    f32 = lib.float32

    def bad(*args: Any) -> Any:
        return {
            "pre_size": (lib.tensor(1.0),),
            "pre_count": (lib.ones(3), lib.ones(3)),
            "pre_dtype": (lib.ones(3, dtype=f32),),
            "acc_pre_size": (lib.tensor(5.0),),
            "acc_pre_count": (lib.ones(3), lib.ones(3)),
            "post_size": (lib.ones(2), None),
            "post_count": (lib.ones(3),),
            "post_none_slot": (lib.ones(3), lib.ones(3)),
            "acc_post_count": (lib.ones(3),),
            "tensor_size": lib.ones(2),
            "leaf_size": lib.ones(1, 3),
            "leaf_dtype": lib.ones(3, dtype=f32),
        }[case]

    if case.startswith("pre"):
        y.grad_fn.register_prehook(bad)
    elif case.startswith("acc_pre"):
        acc.register_prehook(bad)
    elif case.startswith("post"):
        y.grad_fn.register_hook(bad)
    elif case.startswith("acc_post"):
        acc.register_hook(bad)
    elif case.startswith("tensor"):
        y.register_hook(bad)
    else:
        x.register_hook(bad)
    return x, w, (y * w).sum()


_BAD_HOOKS = {
    "pre_size": r"hook 'bad' has changed the size of value: expected shape \(3,\), got \(\)",
    "pre_count": r"hook 'bad' has returned an incorrect number of values \(got 2, but expected 1\)",
    "pre_dtype": r"hook 'bad' has changed the type of value \(was float64 got float32\)",
    "acc_pre_size": r"hook 'bad' has changed the size of value: expected shape \(3,\), got \(\)",
    "acc_pre_count": r"hook 'bad' has returned an incorrect number of values \(got 2, but expected 1\)",
    "post_size": r"hook 'bad' has changed the size of value: expected shape \(3,\), got \(2,\)",
    "post_count": r"hook 'bad' has returned an incorrect number of values \(got 1, but expected 2\)",
    "post_none_slot": r"can't replace a None gradient with a non-None value",
    "acc_post_count": r"hook 'bad' has returned an incorrect number of values \(got 1, but expected 0\)",
    "tensor_size": r"hook 'bad' has changed the size of value: expected shape \(3,\), got \(2,\)",
    "leaf_size": r"hook 'bad' has changed the size of value: expected shape \(3,\), got \(1, 3\)",
    "leaf_dtype": r"hook 'bad' has changed the type of value \(was float64 got float32\)",
}


class _AeHookLib:
    float32 = ae.float32

    @staticmethod
    def ones(*shape: int, requires_grad: bool = False, dtype: Any = None) -> Any:
        dtype = dtype or ae.float64  # as _TorchHookLib
        return ae.ones(*shape, requires_grad=requires_grad, dtype=dtype)

    @staticmethod
    def tensor(v: float) -> Any:
        return ae.tensor(v, dtype=ae.float64)


class _TorchHookLib:
    def __init__(self) -> None:
        self.torch = torch_or_skip()
        self.float32 = self.torch.float32

    def ones(self, *shape: int, requires_grad: bool = False, dtype: Any = None) -> Any:
        dtype = dtype or self.torch.float64
        return self.torch.ones(*shape, requires_grad=requires_grad, dtype=dtype)

    def tensor(self, v: float) -> Any:
        return self.torch.tensor(v, dtype=self.torch.float64)


@pytest.mark.parametrize("case", list(_BAD_HOOKS))
def test_a_hook_returning_a_wrong_value_fails_before_any_grad_is_written(case: str) -> None:
    """As PyTorch: the hook is named; aengine adds both shapes; no ``.grad`` changes."""
    torch = torch_or_skip()
    tx, tw, tloss = _bad_hook_case(_TorchHookLib(), case)
    with pytest.raises(RuntimeError) as tinfo:
        tloss.backward()
    # PyTorch's text, up to the shapes aengine adds (and its own dtype names)
    prefix = _BAD_HOOKS[case].split(":")[0].split(r" \(was")[0]
    assert torch is not None and re.search(prefix, str(tinfo.value))

    x, w, loss = _bad_hook_case(_AeHookLib(), case)
    with pytest.raises(ae.AutogradError, match=_BAD_HOOKS[case]):
        ae.sync.backward(loss)
    assert x.grad is None and w.grad is None  # nothing written, not even w's

    # a leaf whose .grad was set keeps it, unchanged
    x, w, loss = _bad_hook_case(_AeHookLib(), case)
    x.grad, w.grad = ae.ones(3, dtype=ae.float64), ae.full((3,), 7.0, dtype=ae.float64)
    with pytest.raises(ae.AutogradError, match=_BAD_HOOKS[case]):
        ae.sync.backward(loss)
    assert x.grad.tolist() == [1.0] * 3 and w.grad.tolist() == [7.0] * 3


@pytest.mark.anyio
async def test_a_hook_returning_a_wrong_shape_on_a_device_node() -> None:
    """The same check on a node a device worker runs (the awaitable API)."""
    x = ae.ones(3, requires_grad=True)
    w = ae.ones(3, requires_grad=True)
    y = x.to("sim:0") * 2
    y.grad_fn.register_prehook(lambda g: (ae.tensor(1.0, device="sim:0"),))
    async with ae.Engine():
        with pytest.raises(ae.AutogradError, match=r"has changed the size of value"):
            await ae.backward((y.to("cpu") * w).sum())
    assert x.grad is None and w.grad is None


def test_the_commit_writes_nothing_when_one_staged_gradient_does_not_fit() -> None:
    """All or nothing: every staged gradient is checked before any ``.grad`` is written."""
    a = ae.ones(3, requires_grad=True)
    b = ae.ones(3, requires_grad=True)
    a.grad = ae.full((3,), 2.0)
    gt = GraphTask(keep_graph=False, create_graph=False)
    gt.stage(a, np.ones(3), "leaf")
    gt.stage(b, np.ones(()), "leaf")  # a wrong shape, staged after a's
    with pytest.raises(
        ae.AutogradError, match=r"shape \(3,\) has shape \(\); no .grad was written"
    ):
        commit(gt)
    assert a.grad.tolist() == [2.0] * 3 and b.grad is None
