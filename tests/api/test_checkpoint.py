"""ae.checkpoint (reentrant): gradients, memory, and its errors (grad/inputs, no grad output)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae


def _mlp_params(seed: int = 0) -> list[ae.Tensor]:
    rng = np.random.default_rng(seed)
    shapes = [(4, 8), (8,), (8, 8), (8,), (8, 3)]
    return [ae.tensor(rng.standard_normal(s) * 0.5, requires_grad=True) for s in shapes]


def _segment(params: list[ae.Tensor], kept: list[Any] | None = None) -> Any:
    w1, b1, w2, b2, _ = params

    def fn(x: ae.Tensor) -> ae.Tensor:
        z1 = x @ w1 + b1
        h1 = z1.tanh()
        z2 = h1 @ w2 + b2
        if kept is not None:  # the segment's intermediate activations
            kept.extend(weakref.ref(t.data) for t in (z1, h1, z2))
        return z2.relu()

    return fn


def _loss(params: list[ae.Tensor], x: ae.Tensor, checkpointed: bool) -> ae.Tensor:
    seg = _segment(params)
    h = ae.checkpoint(seg, x, use_reentrant=True) if checkpointed else seg(x)
    return ((h @ params[4]) ** 2).sum()


def _grads(params: list[ae.Tensor], x: ae.Tensor) -> list[np.ndarray]:
    out = [p.grad.data.copy() for p in params] + [x.grad.data.copy()]
    for t in [*params, x]:
        t.grad = None
    return out


def _x() -> ae.Tensor:
    return ae.tensor(np.random.default_rng(5).standard_normal((6, 4)), requires_grad=True)


def test_same_gradients_as_plain_sync() -> None:
    params, x = _mlp_params(), _x()
    ae.sync.backward(_loss(params, x, False))
    expected = _grads(params, x)
    ae.sync.backward(_loss(params, x, True))
    for got, exp in zip(_grads(params, x), expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-12)


@pytest.mark.anyio
async def test_same_gradients_as_plain_async() -> None:
    params, x = _mlp_params(), _x()
    await ae.backward(_loss(params, x, False))
    expected = _grads(params, x)
    await ae.backward(_loss(params, x, True))
    for got, exp in zip(_grads(params, x), expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-12)


def test_same_gradients_as_torch() -> None:
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tcp

    params, x = _mlp_params(), _x()
    tparams = [torch.tensor(p.data, requires_grad=True) for p in params]
    tx = torch.tensor(x.data, requires_grad=True)
    th = tcp.checkpoint(_segment(tparams), tx, use_reentrant=True)
    ((th @ tparams[4]) ** 2).sum().backward()
    ae.sync.backward(_loss(params, x, True))
    for p, tp in zip([*params, x], [*tparams, tx], strict=True):
        np.testing.assert_allclose(p.grad.data, tp.grad.numpy(), rtol=1e-12)


def test_segment_intermediates_are_not_kept() -> None:
    """The checkpointed forward keeps only its inputs: the segment's activations die."""
    params, x = _mlp_params(), _x()
    plain_kept: list[Any] = []
    plain = _segment(params, plain_kept)(x)
    ck_kept: list[Any] = []
    ck = ae.checkpoint(_segment(params, ck_kept), x, use_reentrant=True)
    gc.collect()
    assert plain_kept[1]() is not None  # h1: saved by TanhBackward and MmBackward
    assert all(r() is None for r in ck_kept)  # nothing of the segment survives
    # the checkpointed output's node saves only the input
    node = ck.grad_fn
    assert node.name() == "CheckpointFunctionBackward"  # recorded outside an event loop
    assert [t is x for t in node.saved_tensors] == [True]
    del plain, ck


def test_many_segments_then_one_backward() -> None:
    """As PyTorch's test_checkpointing (small): a chain of checkpointed segments."""
    params, x = _mlp_params(), _x()
    w = params[2]
    h = (x @ params[0]).tanh()
    h_plain = (x @ params[0]).tanh()
    for _ in range(20):
        h = ae.checkpoint(lambda t: (t @ w).tanh(), h, use_reentrant=True)
    for _ in range(20):
        h_plain = (h_plain @ w).tanh()
    ae.sync.backward(h.sum())
    got = w.grad.data.copy()
    w.grad = None
    ae.sync.backward(h_plain.sum())
    np.testing.assert_allclose(got, w.grad.data, rtol=1e-10)


@pytest.mark.parametrize("mode", ["grad", "inputs"])
def test_incompatible_with_grad_and_inputs(mode: str) -> None:
    """As PyTorch's test_checkpoint_valid_reset_on_error: error, then a plain backward works."""
    params, x = _mlp_params(), _x()
    loss = _loss(params, x, True)
    with pytest.raises(ae.AutogradError, match="is incompatible with ae.grad()") as info:
        if mode == "grad":
            ae.sync.grad(loss, [x])
        else:
            ae.sync.backward(loss, inputs=[x])
    assert "`inputs`" in str(info.value)
    ae.sync.backward(_loss(params, x, True))  # the flag is per backward: valid again
    assert x.grad is not None


@pytest.mark.anyio
async def test_incompatible_with_grad_async() -> None:
    params, x = _mlp_params(), _x()
    with pytest.raises(ae.AutogradError, match="is incompatible with"):
        await ae.grad(_loss(params, x, True), [x])


def test_nested_inside_grad_is_invalid_too() -> None:
    """A backward nested in a grad() call inherits checkpoint_valid = False."""
    params, x = _mlp_params(), _x()
    v = ae.tensor(1.0, requires_grad=True)

    def hook(g: ae.Tensor) -> None:
        with ae.enable_grad():
            loss = _loss(params, x, True)
        ae.sync.backward(loss)

    with ae.enable_grad():
        y = v * 2.0
    y.register_hook(hook)
    with pytest.raises(ae.AutogradError, match="is incompatible with"):
        with ae.enable_grad():
            ae.sync.grad(y * 1.0, [v])


def test_no_output_requires_grad() -> None:
    """A checkpointed function that computes under no_grad."""
    x = ae.tensor([1.0, 2.0], requires_grad=True)

    def fn(t: ae.Tensor) -> ae.Tensor:
        with ae.no_grad():
            return t * 2.0

    y = ae.checkpoint(fn, x, use_reentrant=True)
    with pytest.raises(ae.AutogradError, match="none of output has requires_grad=True"):
        ae.sync.backward((y * x).sum())


def test_no_input_requires_grad_warns() -> None:
    w = ae.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = ae.checkpoint(lambda t: t * w, ae.tensor([3.0, 4.0]), use_reentrant=True)
    assert not y.requires_grad  # as torch: the parameters inside get no gradient


def test_non_tensor_args_and_multiple_outputs() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = ae.tensor([0.5, -1.0], requires_grad=True)
    a, b = ae.checkpoint(lambda t, k, u: (t * k, (t * u).sin()), x, 3.0, y, use_reentrant=True)
    ae.sync.backward((a * a).sum() + b.sum())
    xv, yv = x.data, y.data
    np.testing.assert_allclose(x.grad.data, 18 * xv + np.cos(xv * yv) * yv)
    np.testing.assert_allclose(y.grad.data, np.cos(xv * yv) * xv)


def test_preserve_rng_state() -> None:
    """The recomputation sees the same random numbers as the forward."""
    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def noisy(t: ae.Tensor) -> ae.Tensor:
        return t * ae.rand(3)

    ae.manual_seed(3)
    y = ae.checkpoint(noisy, x, use_reentrant=True)
    mask = (y / x).data.copy()
    ae.sync.backward(y.sum())
    np.testing.assert_allclose(x.grad.data, mask)


def test_sync_backward_in_running_loop_no_warning_from_nesting() -> None:
    """The checkpoint's nested backward never warns (it nests in a running graph task)."""
    params, x = _mlp_params(), _x()

    async def main() -> None:
        await ae.backward(_loss(params, x, True))

    anyio.run(main)
    assert x.grad is not None


@pytest.mark.anyio
async def test_recorded_in_loop_backward_either_way() -> None:
    """Recorded inside an event loop: the async flavour; both APIs give the same grads."""
    params, x = _mlp_params(), _x()
    await ae.backward(_loss(params, x, False))
    expected = _grads(params, x)
    h = ae.checkpoint(_segment(params), x, use_reentrant=True)
    assert h.grad_fn.name() == "AsyncCheckpointFunctionBackward"
    loss = ((h @ params[4]) ** 2).sum()
    with pytest.warns(RuntimeWarning, match="blocks the loop"):
        ae.sync.backward(loss)  # a sync call in a running loop: warns, still works
    for got, exp in zip(_grads(params, x), expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-12)


def test_recorded_outside_loop_awaited_inside() -> None:
    """The plain flavour nests a sync backward inside an awaited one: no warning."""
    params, x = _mlp_params(), _x()
    ae.sync.backward(_loss(params, x, False))
    expected = _grads(params, x)
    loss = _loss(params, x, True)
    anyio.run(ae.backward, loss)
    for got, exp in zip(_grads(params, x), expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-12)


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_nested_checkpoints(mode: str) -> None:
    """Checkpoints inside a checkpointed function: reentrant backwards two levels deep.

    (In the no_grad forward of ``outer`` the inner checkpoints see inputs that do
    not require grad and warn, as in torch; the recomputation records them.)"""
    params, x = _mlp_params(), _x()
    w1, b1, w2, b2, w3 = params

    def inner(t: ae.Tensor) -> ae.Tensor:
        return (t @ w1 + b1).tanh()

    def outer(t: ae.Tensor) -> ae.Tensor:
        h = ae.checkpoint(inner, t, use_reentrant=True)
        return ae.checkpoint(lambda u: (u @ w2 + b2).sin(), h, use_reentrant=True)

    def loss(checkpointed: bool) -> ae.Tensor:
        h = ae.checkpoint(outer, x, use_reentrant=True) if checkpointed else outer(x)
        return ((h @ w3) ** 2).sum()

    ae.sync.backward(loss(False))
    expected = _grads(params, x)
    if mode == "sync":
        ae.sync.backward(loss(True))
    else:
        anyio.run(ae.backward, loss(True))
    for got, exp in zip(_grads(params, x), expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-12)
