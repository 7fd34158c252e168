"""Devices: sim:N queues and workers, routing of nodes, cuda (skipped without CuPy)."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.runtime._engine import node_device
from tests.oracle import torch_or_skip

X0 = np.array([0.3, -1.2, 2.0, 0.7])
W0 = np.array([1.5, 0.5, -2.0, 3.0])


def _ae_graph() -> tuple[Any, Any, Any]:
    x = ae.tensor(X0, requires_grad=True)  # cpu leaf
    w = ae.tensor(W0, requires_grad=True, device="sim:1")  # sim:1 leaf
    a = (x * 2).to("sim:0")  # cpu mul, copy to sim:0
    b = ae.sin(a) * a  # sim:0
    c = b.to("sim:1") * w + ae.exp(w)  # sim:1
    d = c.to("cpu") * x  # back on cpu
    return x, w, d.sum()


def _torch_grads() -> tuple[np.ndarray, np.ndarray]:
    torch = torch_or_skip()
    x = torch.tensor(X0, requires_grad=True)
    w = torch.tensor(W0, requires_grad=True)
    a = x * 2
    b = torch.sin(a) * a
    c = b * w + torch.exp(w)
    (c * x).sum().backward()
    return x.grad.numpy(), w.grad.numpy()


@pytest.mark.anyio
async def test_graph_across_cpu_sim0_sim1_matches_torch_and_runs_on_device_workers() -> None:
    tx, tw = _torch_grads()
    x, w, loss = _ae_graph()
    ran: list[tuple[str, str, str]] = []

    def on_node(node: ae.Node, where: str) -> None:
        ran.append((node.name(), str(node_device(node)), where))

    async with ae.Engine(on_node=on_node) as engine:
        await ae.backward(loss)
        assert {str(d) for d in engine.devices} == {"sim:0", "sim:1"}
    np.testing.assert_allclose(x.grad.numpy(), tx, rtol=1e-12)
    np.testing.assert_allclose(w.grad.to("cpu").numpy(), tw, rtol=1e-12)
    assert w.grad.device == ae.device("sim:1")
    # every node ran on its own device's worker; cpu nodes on the awaiting task
    assert len(ran) >= 10
    for name, dev, where in ran:
        if dev == "cpu":
            assert where == "owner", (name, dev, where)
        else:
            assert where.startswith(dev + "#"), (name, dev, where)
    devs = {dev for _, dev, _ in ran}
    assert devs == {"cpu", "sim:0", "sim:1"}
    # the sim:1 leaf's AccumulateGrad ran on sim:1, the cpu leaf's on the owner
    acc = [(dev, where) for name, dev, where in ran if name == "AccumulateGrad"]
    assert sorted(acc) == [("cpu", "owner"), ("sim:1", "sim:1#0")]


def test_sync_backward_runs_device_nodes_inline() -> None:
    tx, tw = _torch_grads()
    x, w, loss = _ae_graph()
    ae.sync.backward(loss)
    np.testing.assert_allclose(x.grad.numpy(), tx, rtol=1e-12)
    np.testing.assert_allclose(w.grad.to("cpu").numpy(), tw, rtol=1e-12)


@pytest.mark.anyio
async def test_without_engine_a_short_lived_one_serves_the_call() -> None:
    tx, tw = _torch_grads()
    x, w, loss = _ae_graph()
    gx, gw = await ae.grad(loss, [x, w])
    np.testing.assert_allclose(gx.numpy(), tx, rtol=1e-12)
    np.testing.assert_allclose(gw.to("cpu").numpy(), tw, rtol=1e-12)
    assert x.grad is None and w.grad is None


@pytest.mark.anyio
async def test_cpu_only_graph_opens_no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from aengine.runtime import _engine

    opened: list[Any] = []
    real = _engine.Engine.__aenter__

    async def spy(self: Any) -> Any:
        opened.append(self)
        return await real(self)

    monkeypatch.setattr(_engine.Engine, "__aenter__", spy)
    x = ae.tensor(X0, requires_grad=True)
    await ae.backward((ae.sin(x) * x).sum())
    assert opened == []
    await ae.backward((x.to("sim:0") * 3).sum())
    assert len(opened) == 1 and opened[0]._closed
    np.testing.assert_allclose(x.grad.numpy(), np.sin(X0) + X0 * np.cos(X0) + 3)


def test_mixing_devices_in_one_op_raises() -> None:
    a = ae.ones(3, requires_grad=True)
    b = ae.ones(3, device="sim:0")
    with pytest.raises(ae.AutogradError, match="same device.*cpu and sim:0"):
        a + b


def test_to_is_differentiable_between_devices() -> None:
    x = ae.tensor(X0, requires_grad=True)
    y = x.to("sim:0").to("sim:1") * 2
    assert y.device == ae.device("sim:1")
    ae.sync.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2.0))
    assert x.grad.device == ae.device("cpu")


def test_node_device() -> None:
    x = ae.ones(2, requires_grad=True, device="sim:3")
    y = x * 2
    assert node_device(y.grad_fn) == ae.device("sim:3")
    assert node_device(y.grad_fn.next_functions[0][0]) == ae.device("sim:3")  # AccumulateGrad
    # the op records the device as a fact; the runtime decides from it where
    # the node runs (only hooks make a node take the general path everywhere)
    assert y.grad_fn.dev == ae.device("sim:3") and not y.grad_fn._special
    z = ae.ones(2, requires_grad=True) * 2
    assert node_device(z.grad_fn) == ae.device("cpu") and not z.grad_fn._special


@pytest.mark.anyio
async def test_sim_latency_and_several_workers() -> None:
    x = ae.tensor(X0, requires_grad=True, device="sim:0")
    parts = [ae.sin(x * float(i)) for i in range(1, 7)]
    loss = parts[0]
    for p in parts[1:]:
        loss = loss + p
    where: set[str] = set()
    async with ae.Engine(
        sim_latency={"sim:0": 0.001}, workers_per_device=3, on_node=lambda n, w: where.add(w)
    ):
        await ae.backward(loss.sum())
    expected = sum(i * np.cos(X0 * i) for i in range(1, 7))
    np.testing.assert_allclose(x.grad.to("cpu").numpy(), expected, rtol=1e-12)
    assert {w for w in where if w != "owner"} <= {"sim:0#0", "sim:0#1", "sim:0#2"}
    assert len(where - {"owner"}) >= 2  # independent branches ran on several workers


def test_cuda_device_needs_cupy() -> None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"aengine\[cupy\]"):
            ae.ones(2, device="cuda:0")
        pytest.skip("CuPy is not installed: cuda:N devices cannot be tested here")


@pytest.mark.anyio
async def test_cuda_workers_select_the_device_per_thread() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: cuda:N not tested")
    if cupy.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("no CUDA device")
    x = ae.tensor(X0, requires_grad=True)
    async with ae.Engine(
        offload_threshold=1, offload_backward=False
    ):  # recorded inside: kernels go to threads
        y = (ae.sin(x.to("cuda:0")) * 2).to("cpu").sum()
        await ae.backward(y)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(X0), rtol=1e-12)


@pytest.mark.anyio
async def test_a_worker_waiting_in_a_nested_backward_is_replaced() -> None:
    # the hook runs on sim:0's only worker and awaits a backward whose nodes
    # are on sim:0 too: a replacement worker must drain the queue meanwhile
    x = ae.tensor(np.ones(3), requires_grad=True)
    z = ae.tensor(np.full(3, 2.0), requires_grad=True, device="sim:0")
    y = x.to("sim:0") * 3

    async def hook(g: ae.Tensor) -> ae.Tensor:
        with ae.enable_grad():
            inner = (z * z).sum()
        await ae.backward(inner)
        return g * 2

    y.register_hook(hook)
    where: list[tuple[str, str]] = []
    async with ae.Engine(on_node=lambda n, w: where.append((n.name(), w))):
        with anyio.fail_after(10):
            await ae.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 6.0))
    np.testing.assert_array_equal(z.grad.to("cpu").numpy(), np.full(3, 4.0))
    workers = {w for _, w in where if w != "owner"}
    assert workers == {"sim:0#0", "sim:0#1"}


def test_a_device_learns_its_array_class_when_its_backend_loads() -> None:
    # ops compare a result's class with it: one check for an array result
    dev = ae.device("sim:7")
    y = ae.ones(3, device=dev, requires_grad=True).sum()  # a numpy scalar, made an array
    assert dev._array_type is np.ndarray
    assert type(y.data) is np.ndarray and y.data.shape == ()
    assert ae.device("cpu")._array_type is np.ndarray


def test_a_cuda_device_without_a_usable_driver_says_what_to_do(monkeypatch: Any) -> None:
    """CuPy's raw cudaErrorInsufficientDriver becomes advice (a fake CuPy: no GPU needed)."""
    import importlib
    import sys
    import types

    class CUDARuntimeError(RuntimeError):
        pass

    def no_driver() -> int:
        raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    runtime = types.SimpleNamespace(
        CUDARuntimeError=CUDARuntimeError, getDeviceCount=no_driver, runtimeGetVersion=lambda: 12040
    )
    fake = types.ModuleType("cupy")
    fake.ndarray = type("ndarray", (), {})  # type: ignore[attr-defined]
    fake.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.delitem(sys.modules, "aengine.adapters._cupy", raising=False)
    cls = importlib.import_module("aengine.adapters._cupy").CupyBackend
    backend = object.__new__(cls)  # (its constructor builds kernels of the real CuPy)
    with pytest.raises(
        RuntimeError,
        match=r"cuda:0 is not usable: the NVIDIA driver on this machine is too old for CUDA 12\.4",
    ) as info:
        backend.check_index("cuda:0", 0)
    assert "or keep the tensors on the cpu" in str(info.value)
    assert isinstance(info.value.__cause__, CUDARuntimeError)
    monkeypatch.delitem(sys.modules, "aengine.adapters._cupy", raising=False)
