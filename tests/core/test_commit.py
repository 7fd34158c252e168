"""The ``.grad`` commit: a leaf's first gradient is the computed array itself
when no one else holds it, a copy otherwise (NOTE [Stealing a leaf's gradient]
in aengine/core/_commit.py).

Every case asks that no ``.grad`` shares memory with a tensor the user can
still reach (the gradient a hook kept or returned, a retained gradient,
the gradient passed to ``backward``, a saved tensor, another leaf's
``.grad``), that the values are torch's, and runs under the sync driver and
the async one on asyncio and trio.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.core import _commit
from tests.oracle import torch_or_skip


@pytest.fixture(params=["sync", "asyncio", "trio"])
def backward(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``backward(roots, grads=None, **kw)`` with one driver."""
    kind = request.param

    def run(*args: Any, **kwargs: Any) -> None:
        if kind == "sync":
            ae.sync.backward(*args, **kwargs)
        else:
            anyio.run(functools.partial(ae.backward, *args, **kwargs), backend=kind)

    return run


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def shares(a: Any, b: Any) -> bool:
    return bool(np.shares_memory(a.data if isinstance(a, ae.Tensor) else a, b.data))


class Fresh(ae.Function):
    """``x * 2`` whose backward returns a fresh array (its id kept, not the array)."""

    ids: list[int] = []

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        out = ae.tensor(np.ascontiguousarray(g.numpy() * 2.0))
        Fresh.ids.append(id(out.data))
        return out


def test_a_gradient_no_one_holds_becomes_the_grad(backward: Callable[..., None]) -> None:
    w = ae.tensor(rand(3, 4), requires_grad=True)
    Fresh.ids.clear()
    backward([Fresh.apply(w).sum()])
    assert Fresh.ids == [id(w.grad.data)]  # type: ignore[union-attr]
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 4), 2.0))  # type: ignore[union-attr]
    assert w.grad.data.flags.c_contiguous and w.grad.data.flags.writeable  # type: ignore[union-attr]


def test_a_gradient_a_hook_kept_is_copied(backward: Callable[..., None]) -> None:
    torch = torch_or_skip()
    arr, k = rand(3, 4), rand(3, 4, seed=1)
    kept: list[Any] = []
    w = ae.tensor(arr, requires_grad=True)
    w.register_hook(kept.append)
    backward([(w * ae.tensor(k)).sum()])
    assert not shares(w.grad, kept[0])
    w.grad.add_(1.0)  # type: ignore[union-attr]
    tw = torch.tensor(arr, requires_grad=True)
    tkept: list[Any] = []
    tw.register_hook(tkept.append)
    (tw * torch.tensor(k)).sum().backward()
    tw.grad.add_(1.0)
    np.testing.assert_allclose(kept[0].numpy(), tkept[0].numpy())
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())  # type: ignore[union-attr]


def test_hooks_that_return_their_input_or_a_held_tensor(backward: Callable[..., None]) -> None:
    arr, k = rand(3, 4), rand(3, 4, seed=1)
    w = ae.tensor(arr, requires_grad=True)
    w.register_hook(lambda g: g)
    backward([(w * ae.tensor(k)).sum()])
    np.testing.assert_allclose(w.grad.numpy(), k)  # type: ignore[union-attr]
    held = ae.tensor(rand(3, 4, seed=2))
    v = ae.tensor(arr, requires_grad=True)
    v.register_hook(lambda g: held)
    backward([(v * ae.tensor(k)).sum()])
    assert not shares(v.grad, held)
    np.testing.assert_array_equal(v.grad.numpy(), held.numpy())  # type: ignore[union-attr]


def test_retained_and_leaf_gradients_of_one_array_are_apart(
    backward: Callable[..., None],
) -> None:
    """A clone passes its gradient on: the retained ``y.grad`` and ``w.grad`` are one array
    when staged, two after the commit."""
    w = ae.tensor(rand(3, 4), requires_grad=True)
    y = w.clone()
    y.retain_grad()
    backward([(y * ae.tensor(rand(3, 4, seed=1))).sum()])
    assert y.grad is not None and w.grad is not None
    assert not shares(w.grad, y.grad)
    np.testing.assert_array_equal(w.grad.numpy(), y.grad.numpy())


def test_two_leaves_given_one_array_get_two(backward: Callable[..., None]) -> None:
    """An add's backward passes the same array to both of its inputs."""
    a = ae.tensor(rand(3, 4), requires_grad=True)
    b = ae.tensor(rand(3, 4, seed=1), requires_grad=True)
    k = rand(3, 4, seed=2)
    backward([((a + b) * ae.tensor(k)).sum()])
    assert a.grad is not None and b.grad is not None and not shares(a.grad, b.grad)
    a.grad.add_(1.0)
    np.testing.assert_allclose(b.grad.numpy(), k)


def test_the_gradient_passed_to_backward_is_not_taken(backward: Callable[..., None]) -> None:
    g = ae.tensor(rand(3, 4, seed=3))
    w = ae.tensor(rand(3, 4), requires_grad=True)
    backward([w], [g])  # a leaf as the root: its own gradient is g
    v = ae.tensor(rand(3, 4), requires_grad=True)
    backward([v.clone()], [g])  # through a node that passes it on
    for leaf in (w, v):
        assert leaf.grad is not None and not shares(leaf.grad, g)
        np.testing.assert_array_equal(leaf.grad.numpy(), g.numpy())


class ReturnsSaved(ae.Function):
    """A backward that returns a tensor it saved (here: the input itself)."""

    @staticmethod
    def forward(ctx: Any, x: Any, keep: Any) -> Any:
        ctx.save_for_backward(keep)
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (keep,) = ctx.saved_tensors
        return keep, None


def test_a_saved_tensor_returned_as_a_gradient_is_copied(backward: Callable[..., None]) -> None:
    w = ae.tensor(rand(3, 4), requires_grad=True)
    keep = ae.tensor(rand(3, 4, seed=1))
    backward([ReturnsSaved.apply(w, keep).sum()])
    assert w.grad is not None and not shares(w.grad, keep) and not shares(w.grad, w)
    np.testing.assert_array_equal(w.grad.numpy(), keep.numpy())


class ReturnsView(ae.Function):
    """A backward that returns a view: of a fresh array, or of one the user holds."""

    held: Any = None

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        if ReturnsView.held is not None:
            return ae.from_numpy(ReturnsView.held[1:].reshape(g.shape))
        return ae.from_numpy(np.ones(g.shape[0] * g.shape[1] + 2)[2:].reshape(g.shape))


def test_views_are_taken_only_when_no_one_holds_their_memory(
    backward: Callable[..., None],
) -> None:
    taken: list[bool] = []
    real = _commit._unshared

    def spy(*args: Any) -> bool:
        taken.append(real(*args))
        return taken[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_commit, "_unshared", spy)
        w = ae.tensor(rand(3, 4), requires_grad=True)
        ReturnsView.held = None
        backward([ReturnsView.apply(w).sum()])
        assert taken == [True]
        np.testing.assert_array_equal(w.grad.numpy(), np.ones((3, 4)))  # type: ignore[union-attr]
        held = np.arange(13.0)
        ReturnsView.held = held
        v = ae.tensor(rand(3, 4), requires_grad=True)
        try:
            backward([ReturnsView.apply(v).sum()])
        finally:
            ReturnsView.held = None
        assert taken == [True, False]
        assert v.grad is not None and not np.shares_memory(v.grad.data, held)
        np.testing.assert_array_equal(v.grad.numpy(), np.arange(1.0, 13.0).reshape(3, 4))


def test_a_weakly_referenced_gradient_is_copied(backward: Callable[..., None]) -> None:
    refs: list[Any] = []
    w = ae.tensor(rand(3, 4), requires_grad=True)
    w.register_hook(lambda g: refs.append(weakref.ref(g.data)))
    backward([(w * ae.tensor(rand(3, 4, seed=1))).sum()])
    seen = refs[0]()
    assert seen is None or not np.shares_memory(seen, w.grad.data)  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:Using backward")
def test_create_graph_grad_is_a_differentiable_copy(backward: Callable[..., None]) -> None:
    torch = torch_or_skip()
    arr = rand(3, 4)
    kept: list[Any] = []
    w = ae.tensor(arr, requires_grad=True)
    w.register_hook(kept.append)
    backward([(w * w).sum()], create_graph=True)
    assert w.grad is not None and w.grad.grad_fn is not None and not shares(w.grad, kept[0])
    tw = torch.tensor(arr, requires_grad=True)
    (tw * tw).sum().backward(create_graph=True)
    np.testing.assert_allclose(w.grad.detach().numpy(), tw.grad.detach().numpy())
    backward([w.grad.sum()])  # its graph: d(sum 2w)/dw added into .grad
    tw.grad.sum().backward()
    np.testing.assert_allclose(w.grad.detach().numpy(), tw.grad.detach().numpy())


def test_grad_leaves_grad_untouched_and_accumulation_is_in_place(
    backward: Callable[..., None],
) -> None:
    torch = torch_or_skip()
    arr, k = rand(3, 4), rand(3, 4, seed=1)
    w = ae.tensor(arr, requires_grad=True)
    (g,) = ae.sync.grad([(w * ae.tensor(k)).sum()], [w])
    assert w.grad is None
    backward([(w * ae.tensor(k)).sum()])
    first = w.grad
    assert first is not None and not shares(first, g)
    version = first._version
    backward([(w * w).sum()])
    assert w.grad is first and first._version == version + 1  # added in place
    (g2,) = ae.sync.grad([(w * w).sum()], [w])
    assert w.grad is first and not shares(first, g2)
    tw = torch.tensor(arr, requires_grad=True)
    (tw * torch.tensor(k)).sum().backward()
    (tw * tw).sum().backward()
    np.testing.assert_allclose(first.numpy(), tw.grad.numpy())


def test_a_transposed_gradient_is_stored_in_c_order(backward: Callable[..., None]) -> None:
    """Only a C-ordered array is taken; an F-ordered one is copied into C order."""
    w = ae.tensor(rand(4, 3), requires_grad=True)
    x = ae.tensor(rand(5, 4, seed=1))
    backward([(x @ w).sum()])  # w's gradient x.T @ ones: may come out in F order
    assert w.grad is not None and w.grad.data.flags.c_contiguous
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ np.ones((5, 3)))
