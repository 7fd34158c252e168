"""ae.autograd.graph's saved-tensor hooks, increment_version and save_on_cpu, beside torch's."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

G = ae.autograd.graph


def _libs() -> list[tuple[str, Any]]:
    return [("aengine", ae), ("torch", torch_or_skip())]


def _graph(L: Any) -> Any:
    return L.autograd.graph


def _tensor(L: Any, data: Any, **kw: Any) -> Any:
    if L is ae:
        return ae.tensor(np.asarray(data, dtype=np.float64), **kw)
    return L.tensor(np.asarray(data, dtype=np.float64), **kw)


def _grad_list(t: Any) -> list[float]:
    return [float(v) for v in np.asarray(t.grad.detach().numpy()).ravel()]


def _backward(L: Any, y: Any, **kw: Any) -> None:
    if L is ae:
        ae.sync.backward(y, **kw)
    else:
        y.backward(**kw)


PROGRAMS = {
    "mul and exp": lambda L, x: (x * x).exp().sum(),
    "a saved output": lambda L, x: x.sigmoid().sum(),
    "matmul": lambda L, x: (x.reshape(2, 2) @ x.reshape(2, 2)).sum(),
    "several ops": lambda L, x: (x.sin() * x.cos() + x.tanh()).sum(),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_pack_once_per_saved_tensor_unpack_once_per_backward_as_torch(name: str) -> None:
    results = {}
    for lib, L in _libs():
        calls: list[str] = []

        def pack(t: Any) -> Any:
            calls.append("pack")
            return t

        def unpack(t: Any) -> Any:
            calls.append("unpack")
            return t

        x = _tensor(L, [0.5, -1.0, 2.0, 0.25], requires_grad=True)
        with _graph(L).saved_tensors_hooks(pack, unpack):
            y = PROGRAMS[name](L, x)
        packs = calls.count("pack")
        _backward(L, y)
        results[lib] = (packs, calls.count("unpack"), _grad_list(x))
    assert results["aengine"][:2] == results["torch"][:2]
    np.testing.assert_allclose(results["aengine"][2], results["torch"][2], rtol=1e-12)


def test_hooks_that_change_values_change_gradients_and_the_innermost_wins() -> None:
    results = {}
    for lib, L in _libs():
        x = _tensor(L, [1.0, 2.0], requires_grad=True)
        with _graph(L).saved_tensors_hooks(lambda t: t * 100, lambda t: t):
            with _graph(L).saved_tensors_hooks(lambda t: t * 3, lambda t: t):
                y = (x * x).sum()  # the inner pair: d/dx = 2 * (3x)
        _backward(L, y)
        results[lib] = _grad_list(x)
    assert results["aengine"] == results["torch"] == [6.0, 12.0]


def test_custom_function_saved_tensors_unpack_per_access_as_torch() -> None:
    counts = {}
    for lib, L in _libs():
        calls: list[str] = []

        class Square(L.autograd.Function if L is not ae else ae.Function):  # type: ignore[misc]
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.save_for_backward(a)
                return a * a

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (a,) = ctx.saved_tensors
                (a2,) = ctx.saved_tensors  # each access unpacks
                return g * (a + a2)

        x = _tensor(L, [1.5, -2.0], requires_grad=True)
        with _graph(L).saved_tensors_hooks(
            lambda t: calls.append("pack") or t, lambda t: calls.append("unpack") or t
        ):
            y = Square.apply(x).sum()
        _backward(L, y)
        counts[lib] = (calls.count("pack"), calls.count("unpack"), _grad_list(x))
    assert counts["aengine"] == counts["torch"]


def test_retain_graph_and_create_graph_through_hooks() -> None:
    results = {}
    for lib, L in _libs():
        calls: list[str] = []
        x = _tensor(L, [0.5, 1.5], requires_grad=True)
        with _graph(L).saved_tensors_hooks(
            lambda t: calls.append("pack") or t, lambda t: calls.append("unpack") or t
        ):
            y = (x * x * x).sum()
        _backward(L, y, retain_graph=True)
        _backward(L, y)  # unpacked again
        first = _grad_list(x)
        x.grad = None
        with _graph(L).saved_tensors_hooks(lambda t: t, lambda t: t):
            z = (x.exp() * x).sum()
        if L is ae:
            (g,) = ae.sync.grad(z, [x], create_graph=True)
        else:
            (g,) = L.autograd.grad(z, [x], create_graph=True)
        _backward(L, g.sum())
        results[lib] = (calls.count("unpack"), first, _grad_list(x))
    assert results["aengine"][0] == results["torch"][0]
    np.testing.assert_allclose(results["aengine"][1], results["torch"][1], rtol=1e-12)
    np.testing.assert_allclose(results["aengine"][2], results["torch"][2], rtol=1e-12)


class Boom(Exception):
    pass


def test_errors_in_the_hooks_surface_where_torch_raises_them() -> None:
    for _, L in _libs():
        x = _tensor(L, [1.0, 2.0], requires_grad=True)

        def bad_pack(t: Any) -> Any:
            raise Boom("pack")

        with pytest.raises(Boom, match="pack"):
            with _graph(L).saved_tensors_hooks(bad_pack, lambda t: t):
                (x * x).sum()

        def bad_unpack(t: Any) -> Any:
            raise Boom("unpack")

        with _graph(L).saved_tensors_hooks(lambda t: t, bad_unpack):
            y = (x * x).sum()  # the forward is fine
        with pytest.raises(Exception) as info:
            _backward(L, y)
        err = info.value
        assert isinstance(err, Boom) or isinstance(err.__cause__, Boom), repr(err)

        def inplace_pack(t: Any) -> Any:
            with ae.no_grad() if L is ae else L.no_grad():
                t.add_(1.0)
            return t

        y2 = _tensor(L, [1.0, 2.0], requires_grad=True)
        with pytest.raises(
            RuntimeError, match="A saved tensor pack hook is modifying its input in place"
        ):
            with _graph(L).saved_tensors_hooks(inplace_pack, lambda t: t):
                (y2 * 2.0 * y2).sum()

        with _graph(L).saved_tensors_hooks(lambda t: t, lambda t: 42):
            y3 = (x * x).sum()
        with pytest.raises(Exception) as info:
            _backward(L, y3)
        err = info.value
        assert "unpack_hook expected to be a Tensor" in str(
            err
        ) or "unpack_hook expected to be a Tensor" in str(err.__cause__)


def test_disable_saved_tensors_hooks_as_torch() -> None:
    for _, L in _libs():
        with _graph(L).disable_saved_tensors_hooks("hooks are off here"):
            with pytest.raises(RuntimeError, match="hooks are off here"):
                with _graph(L).saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        with _graph(L).saved_tensors_hooks(lambda t: t, lambda t: t):
            pass  # allowed again outside


def test_bad_hooks_are_refused() -> None:
    with pytest.raises(TypeError, match="two callables"):
        G.saved_tensors_hooks(1, lambda t: t)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a str message"):
        G.disable_saved_tensors_hooks(3)  # type: ignore[arg-type]


def test_increment_version_makes_the_backward_refuse_the_saved_tensor_as_torch() -> None:
    for _, L in _libs():
        x = _tensor(L, [1.0, 2.0], requires_grad=True)
        a = x * 1.0
        y = (a * a).sum()
        before = a._version
        _graph(L).increment_version(a)
        assert a._version == before + 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _backward(L, y)
    with pytest.raises(TypeError, match="a Tensor or a list of Tensors"):
        G.increment_version(3)


def test_save_on_cpu_keeps_device_tensors_on_the_cpu() -> None:
    x = ae.tensor([0.5, 1.0, 2.0], requires_grad=True)
    hooks = G.save_on_cpu(pin_memory=True)
    h = x.to("sim:0")
    device, kept = hooks.pack_hook(h)
    assert str(device) == "sim:0" and kept.device.type == "cpu"
    back = hooks.unpack_hook((device, kept))
    assert back.device == h.device and back.tolist() == h.tolist()
    assert hooks.pack_hook(x)[1] is x  # a cpu tensor is kept as it is
    with hooks:
        y = (x.to("sim:0") ** 2).exp().sum()
    (g,) = ae.sync.grad(y, [x])
    data = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(g.numpy(), 2 * data * np.exp(data**2), rtol=1e-6)


@pytest.mark.anyio
async def test_hooks_are_task_local() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    packed: list[str] = []
    inside = anyio.Event()
    done = anyio.Event()

    async def with_hooks() -> None:
        with G.saved_tensors_hooks(lambda t: packed.append("a") or t, lambda t: t):
            inside.set()
            await done.wait()
            (x * x).sum()

    async def without() -> None:
        await inside.wait()
        (x * x).sum()  # another task: not packed
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(with_hooks)
        tg.start_soon(without)
    assert packed == ["a", "a"]


# -- gradient edges -----------------------------------------------------------------------------------


def test_a_backward_split_at_a_gradient_edge_equals_torch() -> None:
    got = {}
    for lib, L in _libs():
        G_ = _graph(L)
        grad = ae.sync.grad if L is ae else L.autograd.grad
        x = _tensor(L, [0.5, -1.0, 2.0], requires_grad=True)
        h = (x * 2.0).sin()
        y = (h * h).exp().sum()
        edge = G_.get_gradient_edge(h)
        assert isinstance(edge, tuple) and edge.output_nr == 0
        (gh,) = grad(y, edge, retain_graph=True)  # the gradient arriving at h's edge
        (gx,) = grad(edge, [x], grad_outputs=[gh], retain_graph=True)  # the rest from there
        (direct,) = grad(y, [G_.get_gradient_edge(x)])  # a leaf's edge: its accumulator's
        got[lib] = [np.asarray(t.detach().numpy()) for t in (gh, gx, direct)]
    for a, b in zip(got["aengine"], got["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(got["aengine"][1], got["aengine"][2], rtol=1e-12)


def test_gradient_edge_errors_as_torch() -> None:
    for _, L in _libs():
        with pytest.raises(RuntimeError, match="not possible to get the gradient edge"):
            _graph(L).get_gradient_edge(_tensor(L, [1.0]))
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    edge = G.get_gradient_edge(x * 2.0)
    with pytest.raises(ae.AutogradError, match="pass its gradient in grad_outputs"):
        ae.sync.grad(edge, [x])
    with pytest.raises(TypeError, match="expects a Tensor"):
        G.get_gradient_edge([1.0])  # type: ignore[arg-type]
