"""ae.checkpoint(use_reentrant=False) and checkpoint_sequential, beside torch's."""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

X = np.array([[0.3, -1.2], [0.7, 2.0]])
W = np.array([[0.5, -1.0], [2.0, 0.25]])


class Lib:
    def __init__(self, name: str) -> None:
        self.name = name
        self.L: Any = ae if name == "aengine" else torch_or_skip()

    def t(self, a: Any, rg: bool = True) -> Any:
        return self.L.tensor(np.asarray(a, dtype=np.float64), requires_grad=rg)

    def checkpoint(self, fn: Any, *args: Any, **kw: Any) -> Any:
        if self.L is ae:
            return ae.checkpoint(fn, *args, **kw)
        return self.L.utils.checkpoint.checkpoint(fn, *args, **kw)

    def grad(self, y: Any, xs: Any, **kw: Any) -> Any:
        if self.L is ae:
            return ae.sync.grad(y, xs, **kw)
        return self.L.autograd.grad(y, xs, **kw)

    def backward(self, y: Any, **kw: Any) -> None:
        if self.L is ae:
            ae.sync.backward(y, **kw)
        else:
            y.backward(**kw)


def both() -> list[Lib]:
    return [Lib("aengine"), Lib("torch")]


def arrays(ts: Any) -> list[np.ndarray]:
    return [np.asarray(t.detach().numpy()) for t in ts]


SEGMENTS = {
    "tanh matmul exp": lambda x, w: ((x @ w).tanh() @ w).exp(),
    "sigmoid product": lambda x, w: (x.sigmoid() * w).sin() * x,
    "softmax": lambda x, w: (x @ w).softmax(1) * w,
}


@pytest.mark.parametrize("name", list(SEGMENTS))
@pytest.mark.parametrize("how", ["backward", "grad", "inputs"])
def test_gradients_equal_torch(name: str, how: str) -> None:
    got = {}
    for lib in both():
        x, w = lib.t(X), lib.t(W)
        y = lib.checkpoint(SEGMENTS[name], x, w, use_reentrant=False)
        loss = (y * y).sum()
        if how == "grad":
            got[lib.name] = arrays(lib.grad(loss, [x, w]))
        elif how == "inputs":  # only x's .grad
            lib.backward(loss, inputs=[x])
            assert w.grad is None
            got[lib.name] = arrays([x.grad])
        else:
            lib.backward(loss)
            got[lib.name] = arrays([x.grad, w.grad])
    for a, b in zip(got["aengine"], got["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_the_segments_intermediate_values_are_not_kept() -> None:
    x, w = ae.tensor(X, requires_grad=True), ae.tensor(W, requires_grad=True)
    refs: list[Any] = []

    def segment(a: ae.Tensor) -> ae.Tensor:
        h = (a @ w).tanh()
        refs.append(weakref.ref(h))
        return (h * h).sum()

    kept = segment(x)  # without a checkpoint the graph keeps h (saved by h * h)
    gc.collect()
    assert refs[0]() is not None
    y = ae.checkpoint(segment, x, use_reentrant=False)
    gc.collect()
    assert refs[1]() is None  # dropped with the forward: recomputed in the backward
    gx, gw = ae.sync.grad(y, [x, w])
    ex, ew = ae.sync.grad(kept, [x, w])
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-12)


def test_nested_checkpoints_and_a_second_derivative_equal_torch() -> None:
    got = {}
    for lib in both():
        x = lib.t([0.4, -0.3, 1.1])

        def inner(a: Any) -> Any:
            return (a.sin() * a).exp()

        def outer(a: Any) -> Any:
            return lib.checkpoint(inner, a * 2.0, use_reentrant=False).cos() * a

        y = lib.checkpoint(outer, x, use_reentrant=False).sum()
        (g,) = lib.grad(y, [x], create_graph=True)
        (gg,) = lib.grad(g.sum(), [x])
        got[lib.name] = arrays([g, gg])
    for a, b in zip(got["aengine"], got["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_random_numbers_are_the_forwards_in_the_recomputation() -> None:
    ae.manual_seed(3)
    x = ae.tensor(np.linspace(-1, 1, 8), requires_grad=True)

    def noisy(a: ae.Tensor) -> ae.Tensor:
        mask = (ae.rand(8) > 0.5).to(ae.float64)
        return (a.exp() * mask).sum()

    state = ae.random.get_rng_state() if hasattr(ae, "random") else None
    y = ae.checkpoint(noisy, x, use_reentrant=False)
    (g,) = ae.sync.grad(y, [x])
    # the gradient is exp(x) where the forward's mask was 1: the same mask was recomputed
    ae.manual_seed(3)
    mask = (ae.rand(8) > 0.5).numpy()
    np.testing.assert_allclose(g.numpy(), np.where(mask, np.exp(x.detach().numpy()), 0.0))
    del state


def test_a_recomputation_that_differs_is_a_checkpoint_error_as_torch() -> None:
    for lib in both():
        calls = [0]

        def changing(a: Any) -> Any:
            calls[0] += 1
            return (a[: calls[0]] * a[: calls[0]]).sum()  # another shape the second time

        x = lib.t([1.0, 2.0, 3.0])
        y = lib.checkpoint(changing, x, use_reentrant=False)
        error = ae.CheckpointError if lib.L is ae else lib.L.utils.checkpoint.CheckpointError
        with pytest.raises(error, match="metadata"):
            lib.backward(y)


def test_missing_use_reentrant_warns_and_takes_the_reentrant_variant_as_torch() -> None:
    for lib in both():
        x = lib.t([1.0, 2.0])
        with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
            y = lib.checkpoint(lambda a: (a * a).sum(), x)
        lib.backward(y)
        assert arrays([x.grad])[0].tolist() == [2.0, 4.0]


def test_arguments_as_torch() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = ae.checkpoint(lambda a, *, k: (a * k).sum(), x, k=3.0, use_reentrant=False)
    (g,) = ae.sync.grad(y, [x])
    assert g.tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        ae.checkpoint(lambda a, k: a, x, k=3.0, use_reentrant=True)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        ae.checkpoint(lambda a: a, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        ae.checkpoint(lambda a: a * a, x, use_reentrant=False, determinism_check="strict")
    entered: list[str] = []

    class Mark:
        def __init__(self, name: str) -> None:
            self.name = name

        def __enter__(self) -> None:
            entered.append(self.name)

        def __exit__(self, *exc: object) -> None:
            pass

    y = ae.checkpoint(
        lambda a: (a.exp() * a).sum(),
        x,
        use_reentrant=False,
        context_fn=lambda: (Mark("forward"), Mark("recompute")),
    )
    ae.sync.backward(y)
    assert entered == ["forward", "recompute"]


def test_early_stop_ends_the_recomputation_once_everything_saved_is_back() -> None:
    ran: list[str] = []

    def segment(a: ae.Tensor) -> ae.Tensor:
        ran.append("start")
        h = a.exp() * a  # everything saved is made here
        ran.append("end")  # not reached in an early-stopped recomputation
        return h.sum()

    x = ae.tensor([1.0, 2.0], requires_grad=True)
    ae.sync.backward(ae.checkpoint(segment, x, use_reentrant=False))
    assert ran == ["start", "end", "start"]
    ran.clear()
    ae.sync.backward(ae.checkpoint(segment, x, use_reentrant=False, early_stop=False))
    assert ran == ["start", "end", "start", "end"]


def test_checkpoint_sequential_equals_torch() -> None:
    got = {}
    for lib in both():
        nn = lib.L.nn
        lib.L.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.Sigmoid(), nn.Linear(4, 1)
        )
        if lib.L is ae:
            continue
        got["state"] = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        got["torch_model"] = model
    torch_model = got["torch_model"]
    nn = ae.nn
    model = nn.Sequential(
        nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.Sigmoid(), nn.Linear(4, 1)
    )
    model.load_state_dict(got["state"])
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    ax = ae.tensor(x, requires_grad=True)
    ay = ae.checkpoint_sequential(model, 2, ax, use_reentrant=False)
    ae.sync.backward(ay.sum())
    torch = torch_or_skip()
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.utils.checkpoint.checkpoint_sequential(torch_model, 2, tx, use_reentrant=False)
    ty.sum().backward()
    np.testing.assert_allclose(ay.detach().numpy(), ty.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
    for (name, p), q in zip(model.named_parameters(), torch_model.parameters()):
        np.testing.assert_allclose(
            p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7, err_msg=name
        )


@pytest.mark.anyio
async def test_awaited_backward_through_a_non_reentrant_checkpoint() -> None:
    x, w = ae.tensor(X, requires_grad=True), ae.tensor(W, requires_grad=True)
    y = ae.checkpoint(SEGMENTS["tanh matmul exp"], x, w, use_reentrant=False)
    await (y * y).sum().backward()
    ex, ew = await ae.grad((SEGMENTS["tanh matmul exp"](x, w) ** 2).sum(), [x, w])
    np.testing.assert_allclose(x.grad.numpy(), ex.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), ew.numpy(), rtol=1e-12)


def test_no_warning_with_use_reentrant_given() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = ae.tensor([1.0], requires_grad=True)
        ae.checkpoint(lambda a: a * 2.0, x, use_reentrant=False)
