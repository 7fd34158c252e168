"""Grad modes, inference mode and detach, against torch.

The decorators are checked on plain functions, generators, ``async def``
functions and async generators: the mode applies while the body runs and
the caller's mode is back whenever the body is suspended.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

# ---- no_grad, enable_grad, set_grad_enabled --------------------------------------------------


def test_no_grad_results_have_no_graph() -> None:
    torch = torch_or_skip()
    x, tx = ae.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    with ae.no_grad():
        y = x * 2
    with torch.no_grad():
        ty = tx * 2
    assert y.requires_grad is ty.requires_grad is False
    assert y.grad_fn is None and ty.grad_fn is None
    with pytest.raises(ae.AutogradError, match="does not require grad"):
        ae.sync.backward(y.sum())
    with pytest.raises(RuntimeError, match="does not require grad"):
        ty.sum().backward()


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_decorators_with_and_without_parentheses(lib_name: str) -> None:
    lib: Any = ae if lib_name == "ae" else torch_or_skip()

    @lib.no_grad
    def bare_no_grad() -> bool:
        return bool(lib.is_grad_enabled())

    @lib.no_grad()
    def called_no_grad() -> bool:
        return bool(lib.is_grad_enabled())

    @lib.enable_grad
    def bare_enable_grad() -> bool:
        return bool(lib.is_grad_enabled())

    @lib.inference_mode
    def bare_inference() -> tuple[bool, bool]:
        return bool(lib.is_grad_enabled()), bool(lib.is_inference_mode_enabled())

    assert bare_no_grad() is False and called_no_grad() is False
    assert bare_no_grad.__name__ == "bare_no_grad"
    assert lib.is_grad_enabled()
    with lib.no_grad():
        assert bare_enable_grad() is True
        assert lib.is_grad_enabled() is False
    assert bare_inference() == (False, True)
    assert lib.is_grad_enabled() and not lib.is_inference_mode_enabled()


def test_enable_grad_inside_no_grad_records() -> None:
    torch = torch_or_skip()
    x, tx = ae.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)

    @ae.enable_grad()
    def f(a: Any) -> Any:
        return a * 2

    @torch.enable_grad()
    def tf(a: Any) -> Any:
        return a * 2

    with ae.no_grad():
        y = f(x)
    with torch.no_grad():
        ty = tf(tx)
    assert y.requires_grad and ty.requires_grad


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_set_grad_enabled_forms(lib_name: str) -> None:
    lib: Any = ae if lib_name == "ae" else torch_or_skip()
    with lib.set_grad_enabled(False):
        assert not lib.is_grad_enabled()
        lib.set_grad_enabled(True)  # the function form takes effect at once
        assert lib.is_grad_enabled()
        lib.set_grad_enabled(False)
    assert lib.is_grad_enabled()  # the block restores what was before it
    lib.set_grad_enabled(False)
    try:
        assert not lib.is_grad_enabled()
    finally:
        lib.set_grad_enabled(True)
    # decorating does not change the mode of the decorating code
    deco = lib.set_grad_enabled(False)

    @deco
    def f() -> bool:
        return bool(lib.is_grad_enabled())

    assert lib.is_grad_enabled()
    assert f() is False and lib.is_grad_enabled()
    with lib.no_grad():

        @lib.set_grad_enabled(True)
        def g() -> bool:
            return bool(lib.is_grad_enabled())

        assert not lib.is_grad_enabled()
        assert g() is True and not lib.is_grad_enabled()


def test_set_grad_enabled_rejects_non_bool() -> None:
    with pytest.raises(TypeError, match="expects a bool"):
        ae.set_grad_enabled("yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes no arguments"):
        ae.no_grad(3)  # type: ignore[call-overload]


def test_modes_are_reentrant_context_managers() -> None:
    mode = ae.no_grad()
    with mode:
        with ae.enable_grad():
            with mode:
                assert not ae.is_grad_enabled()
            assert ae.is_grad_enabled()
        assert not ae.is_grad_enabled()
    assert ae.is_grad_enabled()


# ---- generators ------------------------------------------------------------------------------


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_generator_mode_only_while_running(lib_name: str) -> None:
    lib: Any = ae if lib_name == "ae" else torch_or_skip()

    @lib.no_grad()
    def gen() -> Iterator[bool]:
        got = yield bool(lib.is_grad_enabled())
        assert got == "sent"
        try:
            yield bool(lib.is_grad_enabled())
        except KeyError:
            yield bool(lib.is_grad_enabled())
        yield bool(lib.is_grad_enabled())

    g = gen()
    assert lib.is_grad_enabled()  # creating it changes nothing
    assert next(g) is False
    assert lib.is_grad_enabled()  # restored at the yield
    assert g.send("sent") is False
    assert lib.is_grad_enabled()
    assert g.throw(KeyError("k")) is False  # throw runs under the mode too
    assert lib.is_grad_enabled()
    g.close()
    assert lib.is_grad_enabled()


def test_generator_close_runs_finally_under_the_mode() -> None:
    seen: list[bool] = []

    @ae.no_grad()
    def gen() -> Iterator[int]:
        try:
            yield 1
        finally:
            seen.append(ae.is_grad_enabled())

    g = gen()
    next(g)
    g.close()
    assert seen == [False] and ae.is_grad_enabled()


def test_generator_return_value_and_mutual_recursion() -> None:
    @ae.no_grad()
    def inner(n: int) -> Iterator[bool]:
        yield ae.is_grad_enabled()
        if n:
            yield from outer(n - 1)
        return "done"

    @ae.enable_grad()
    def outer(n: int) -> Iterator[bool]:
        yield ae.is_grad_enabled()
        result = yield from inner(n)
        assert result == "done"

    with ae.no_grad():
        assert list(outer(2)) == [True, False, True, False, True, False]
        assert not ae.is_grad_enabled()


def test_generator_body_switch_persists_across_yield() -> None:
    @ae.no_grad()
    def gen() -> Iterator[bool]:
        with ae.enable_grad():
            yield ae.is_grad_enabled()
            yield ae.is_grad_enabled()  # still inside the body's enable_grad
        yield ae.is_grad_enabled()

    with ae.no_grad():
        assert list(gen()) == [True, True, False]


# ---- coroutines and async generators (the vllm bug) ------------------------------------------


@pytest.mark.anyio
async def test_async_def_mode_applies_across_awaits() -> None:
    @ae.no_grad()
    async def body() -> list[bool]:
        seen = [ae.is_grad_enabled()]
        await anyio.sleep(0)
        seen.append(ae.is_grad_enabled())
        with ae.enable_grad():
            await anyio.sleep(0)
            seen.append(ae.is_grad_enabled())
        seen.append(ae.is_grad_enabled())
        return seen

    coro = body()
    assert ae.is_grad_enabled()  # creating the coroutine changes nothing
    assert await coro == [False, False, True, False]
    assert ae.is_grad_enabled()


@pytest.mark.anyio
async def test_two_concurrent_tasks_never_see_each_others_mode() -> None:
    seen_ng: list[bool] = []
    seen_plain: list[bool] = []

    @ae.no_grad()
    async def in_no_grad() -> None:
        x = ae.ones(2, requires_grad=True)
        for _ in range(20):
            seen_ng.append(ae.is_grad_enabled())
            assert not (x * 2).requires_grad
            await anyio.sleep(0)

    async def plain() -> None:
        x = ae.ones(2, requires_grad=True)
        for _ in range(20):
            seen_plain.append(ae.is_grad_enabled())
            assert (x * 2).requires_grad
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(in_no_grad)
        tg.start_soon(plain)
    assert seen_ng == [False] * 20 and seen_plain == [True] * 20


@pytest.mark.anyio
async def test_suspended_coroutine_does_not_leak_mode_to_its_driver() -> None:
    # The caller drives the decorated coroutine by hand, in the same task:
    # between its steps the caller's mode must be its own.
    @ae.no_grad()
    async def body() -> bool:
        await _Suspend()
        return ae.is_grad_enabled()

    coro = body()
    coro.send(None)  # runs up to the suspension
    assert ae.is_grad_enabled()
    with pytest.raises(StopIteration) as stop:
        coro.send(None)
    assert stop.value.value is False
    assert ae.is_grad_enabled()


class _Suspend:
    def __await__(self) -> Any:
        yield


@pytest.mark.anyio
async def test_async_generator_mode_restored_at_each_yield() -> None:
    @ae.inference_mode()
    async def agen() -> AsyncIterator[tuple[bool, bool]]:
        for _ in range(3):
            await anyio.sleep(0)
            yield ae.is_grad_enabled(), ae.is_inference_mode_enabled()

    caller: list[tuple[bool, bool]] = []
    got = []
    async for item in agen():
        got.append(item)
        caller.append((ae.is_grad_enabled(), ae.is_inference_mode_enabled()))
    assert got == [(False, True)] * 3
    assert caller == [(True, False)] * 3


@pytest.mark.anyio
async def test_async_generator_asend_athrow_aclose() -> None:
    closed: list[bool] = []

    @ae.no_grad()
    async def agen() -> AsyncIterator[Any]:
        try:
            got = yield ae.is_grad_enabled()
            try:
                yield (got, ae.is_grad_enabled())
            except KeyError:
                yield ("thrown", ae.is_grad_enabled())
            yield "more"
        finally:
            closed.append(ae.is_grad_enabled())

    g = agen()
    assert await g.asend(None) is False
    assert await g.asend("x") == ("x", False)
    assert ae.is_grad_enabled()
    assert await g.athrow(KeyError("k")) == ("thrown", False)
    assert ae.is_grad_enabled()
    await g.aclose()
    assert closed == [False] and ae.is_grad_enabled()


@pytest.mark.anyio
async def test_backward_inside_decorated_coroutine() -> None:
    x = ae.ones(3, requires_grad=True)
    y = (x * x).sum()

    @ae.no_grad()
    async def step() -> None:
        await ae.backward(y)  # the engine sets its own mode inside nodes
        assert not ae.is_grad_enabled()

    await step()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


# ---- inference mode --------------------------------------------------------------------------


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_inference_mode_nesting(lib_name: str) -> None:
    lib: Any = ae if lib_name == "ae" else torch_or_skip()
    x = lib.ones(2, requires_grad=True)
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        c = x * 2
        assert c.is_inference() and not c.requires_grad
        with lib.inference_mode(False):
            assert not lib.is_inference_mode_enabled()
            assert lib.is_grad_enabled()  # inference_mode(False) enables grad mode
            d = x * 2
            assert not d.is_inference() and d.requires_grad
        assert lib.is_inference_mode_enabled()
    with lib.no_grad():
        with lib.inference_mode(False):
            assert lib.is_grad_enabled()
        assert not lib.is_grad_enabled()
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()


def test_inference_tensors_cannot_be_saved() -> None:
    torch = torch_or_skip()
    with ae.inference_mode():
        c = ae.ones(3)
    s = ae.ones(3, requires_grad=True)
    with pytest.raises(ae.AutogradError, match="Inference tensors cannot be saved for backward"):
        c * s
    with torch.inference_mode():
        tc = torch.ones(3)
    ts = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        tc * ts
    assert (c + s).requires_grad  # add saves nothing: allowed, as in torch
    assert (tc + ts).requires_grad


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_inference_mode_inplace_rules(lib_name: str) -> None:
    lib: Any = ae if lib_name == "ae" else torch_or_skip()
    x = lib.ones(3, requires_grad=True)
    s = x * 1.0
    y = (s * s).sum()
    with lib.inference_mode():
        s.mul_(2)  # a normal tensor modified inside: its version still counts
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        if lib is ae:
            ae.sync.backward(y)
        else:
            y.backward()
    with lib.inference_mode():
        c = lib.ones(3)
        c.add_(1)  # allowed inside
    with pytest.raises(
        RuntimeError, match="Inplace update to inference tensor outside InferenceMode"
    ):
        c.add_(1)


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_an_inference_tensor_may_require_grad_inside_inference_mode(lib_name: str) -> None:
    """As PyTorch: made with requires_grad=True inside, it is a leaf that takes gradients."""
    lib: Any = ae if lib_name == "ae" else torch_or_skip()
    with lib.inference_mode():
        o = lib.ones(2, dtype=lib.float64, requires_grad=True)
        r = lib.zeros(2, dtype=lib.float64).requires_grad_()
        assert o.requires_grad and o.is_inference() and o.is_leaf and o.grad_fn is None
        assert r.requires_grad and r.is_inference()
        z = o * 2  # inside: no graph
        assert not z.requires_grad and z.grad_fn is None
    z = o * 2  # outside: o takes part in a graph (mul by a number saves nothing)
    assert z.requires_grad
    if lib is ae:
        ae.sync.backward(z.sum())
    else:
        z.sum().backward()
    assert o.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_view_made_without_grad_mode_of_a_base_requiring_grad(mode: str) -> None:
    """PyTorch: requires_grad True, grad_fn None, a leaf; the same base's result is not."""
    torch = torch_or_skip()
    seen = []
    for lib in (torch, ae):
        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        y = x * 2
        with getattr(lib, mode)():
            views = (x[:2], x.view(3), y[1:])
            computed = x * 2
        for v in views:
            assert not v.is_inference()  # a view of a normal tensor, even in inference mode
            assert repr(v).endswith("requires_grad=True)")
        seen.append(
            [(v.requires_grad, v.grad_fn is None, v.is_leaf) for v in views]
            + [(computed.requires_grad, computed.grad_fn is None, computed.is_leaf)]
        )
    assert seen[0] == seen[1] == [(True, True, True)] * 3 + [(False, True, True)]


def test_inference_tensor_requires_grad_outside_mode() -> None:
    with ae.inference_mode():
        c = ae.ones(2)
    with pytest.raises(ae.AutogradError, match="inference tensor outside InferenceMode"):
        c.requires_grad_(True)


# ---- detach ----------------------------------------------------------------------------------


def test_detach_cuts_the_graph() -> None:
    torch = torch_or_skip()
    x, tx = ae.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    d, td = (x + 2).detach(), (tx + 2).detach()
    assert d.grad_fn is None and not d.requires_grad and td.grad_fn is None
    z, tz = x + (x * 2).detach(), tx + (tx * 2).detach()
    ae.sync.backward(z.sum())
    tz.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))
    dx = x.detach()
    assert dx._vc is x._vc  # shares the version counter (and the data)
    assert dx.data is x.data


def test_detach_inplace_after_retained_backward() -> None:
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        x = lib.ones(3, requires_grad=True)
        a = x * 2
        b = a * 1.0
        if lib is ae:
            ae.sync.backward(b.sum(), retain_graph=True)
        else:
            b.sum().backward(retain_graph=True)
        a.detach_()
        assert a.grad_fn is None and not a.requires_grad and a.is_leaf
        c = (a * 3).sum()
        assert not c.requires_grad
        res.append(x.grad.detach().numpy().copy())
    np.testing.assert_array_equal(res[0], res[1])
    np.testing.assert_array_equal(res[0], np.full(3, 2.0))


@pytest.mark.parametrize("lib_name", ["ae", "torch"])
def test_detach_inplace_on_views(lib_name: str) -> None:
    lib: Any = ae if lib_name == "ae" else torch_or_skip()
    x = lib.ones(4, requires_grad=True)
    a = x * 2
    v = a.view(2, 2)
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        v.detach_()
    a.detach_()  # detaching the base does not detach an existing view
    assert v.requires_grad and v.grad_fn is not None
    assert not a.requires_grad and a.grad_fn is None


# ---- detach_ of a tensor saved for backward (NOTE [Saved tensors detached in place]) ----------

_ERR_DETACHED = (
    r"^Trying to use a saved tensor that has been detached in-place, i\.e\. with \.detach_\(\)\."
    r"This is not supported, please use out-of-place `\.detach\(\)` instead$"
)


def _detach_case(lib: Any, case: str) -> tuple[Any, Any, Any]:
    """Returns (leaf, loss, the graph's other leaf or None) for one detach_ scenario."""
    x = lib.ones(3, dtype=lib.float64, requires_grad=True)
    w = None
    if case == "saved non-leaf input":
        y = x * 2
        z = y * y
        y.detach_()
    elif case == "then modified in place":
        y = x * 2
        z = y * y
        y.detach_()
        y.add_(1)
    elif case == "saved leaf input":
        w = lib.ones(3, dtype=lib.float64, requires_grad=True)
        z = x * w
        x.detach_()
        x = w
    elif case == "saved output":
        y = x.exp()
        z = y * 1.0
        y.detach_()
    elif case == "not saved":
        y = x * 2
        z = y + 1
        y.detach_()
    elif case == "saved after detach_":
        y = x * 2
        y.detach_()
        z = y * x
    elif case == "saved after detach_, modified":
        y = x * 2
        y.detach_()
        z = y * x
        y.add_(1)
    elif case == "alias saved before":
        y = x * 2
        d = y.detach()
        z = d * x
        y.detach_()
    elif case == "alias saved before, modified":
        y = x * 2
        d = y.detach()
        z = d * x
        y.detach_()
        y.add_(1)
    else:  # a custom Function's saved input: PyTorch unpacks it fine
        y = x * 2

        class Keep(lib.autograd.Function if lib is not ae else ae.Function):  # type: ignore[misc]
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.save_for_backward(a)
                return a * 1

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (a,) = ctx.saved_tensors
                return g * a

        z = Keep.apply(y)
        y.detach_()
    return x, z.sum(), w


_DETACH_CASES = {
    "saved non-leaf input": _ERR_DETACHED,
    "then modified in place": _ERR_DETACHED,  # the detach_ error comes first, as in PyTorch
    "saved leaf input": None,
    "saved output": None,
    "not saved": None,
    "saved after detach_": None,
    "saved after detach_, modified": r"has been modified by an inplace operation: .* is at "
    r"version 1; expected version 0 instead",
    "alias saved before": None,
    "alias saved before, modified": r"has been modified by an inplace operation: .* is at "
    r"version 1; expected version 0 instead",
    "custom Function input": None,
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("case", list(_DETACH_CASES))
def test_a_saved_tensor_detached_in_place(case: str, create_graph: bool) -> None:
    torch = torch_or_skip()
    error = _DETACH_CASES[case]
    tx, tloss, _ = _detach_case(torch, case)
    x, loss, _ = _detach_case(ae, case)
    if error is None:
        (tg,) = torch.autograd.grad(tloss, [tx], create_graph=create_graph)
        (g,) = ae.sync.grad(loss, [x], create_graph=create_graph)
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy())
        return
    with pytest.raises(RuntimeError, match=error):
        torch.autograd.grad(tloss, [tx], create_graph=create_graph)
    with pytest.raises(ae.AutogradError, match=error):
        ae.sync.grad(loss, [x], create_graph=create_graph)


def test_a_failed_backward_through_a_detached_saved_tensor_writes_no_grad() -> None:
    x, loss, _ = _detach_case(ae, "saved non-leaf input")
    with pytest.raises(ae.AutogradError, match=_ERR_DETACHED):
        ae.sync.backward(loss)
    assert x.grad is None


def test_detach_inplace_keeps_the_version_and_the_shared_counter() -> None:
    x = ae.ones(3, requires_grad=True)
    y = x * 2
    d = y.detach()
    y.detach_()
    assert y._version == 0 and d._version == 0
    y.add_(1)  # the counter is still the one d shares
    assert y._version == 1 and d._version == 1
    v = y[:2]
    assert v._version == 1
