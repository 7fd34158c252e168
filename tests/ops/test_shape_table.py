"""Shape ops beyond what the table's harness checks: which results are views, in place.

The table (tests/ops/test_table.py) compares values and derivatives with
torch; here: the view ops share data and version counter with their input
(and an in-place change through them reaches the input, with torch's
gradients), the copying ops do not, and a few calls the harness cannot
express (a warning, a dtype of a result that is not a float).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

VIEWS: dict[str, Callable[[Any], Any]] = {
    "unflatten": lambda x: x.unflatten(1, (2, 2)),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "swapdims": lambda x: x.swapdims(0, 1),
    "movedim": lambda x: x.movedim(0, 1),
    "t": lambda x: x.t(),
    "diagonal": lambda x: x.diagonal(1),
    "diagonal_batched": lambda x: x.reshape(3, 2, 2).diagonal(0, 0, 2),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "unfold_overlapping": lambda x: x.unfold(0, 2, 1),
}

COPIES: dict[str, Callable[[Any], Any]] = {
    "repeat": lambda x: x.repeat(1, 1),
    "tile": lambda x: x.tile((1,)),
    "repeat_interleave": lambda x: x.repeat_interleave(1, 0),
    "flip": lambda x: x.flip(()),
    "roll": lambda x: x.roll(0),
    "rot90": lambda x: x.rot90(4),
    "diag": lambda x: x.diag(),
    "tril": lambda x: x.tril(5),
    "triu": lambda x: x.triu(-5),
    "diag_embed": lambda x: x.diag_embed(),
}


def _x() -> Any:
    return ae.arange(12.0).reshape(3, 4).clone()


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_ops_share_data_and_version(name: str) -> None:
    x = _x()
    v = VIEWS[name](x)
    assert v._base is x and v._vc is x._vc, f"{name} is not a view of its input"
    before = x.numpy().copy()
    v.add_(100.0)
    assert x._version == 1
    changed = x.numpy() != before
    assert changed.sum() > 0, f"an in-place change through {name} does not reach the input"


def test_atleast_and_grids_are_views() -> None:
    x = ae.arange(3.0)
    assert ae.atleast_3d(x)._base is x
    assert ae.atleast_2d(x)._base is x
    m = ae.arange(4.0).reshape(2, 2)
    assert ae.atleast_1d(m) is m  # as torch: the tensor itself
    g = ae.meshgrid(x, ae.arange(2.0), indexing="ij")
    assert all(t._base is not None for t in g)
    b = ae.broadcast_tensors(x, ae.zeros(2, 1))
    assert b[0]._base is x


@pytest.mark.parametrize("name", list(COPIES))
def test_copying_ops_do_not_share(name: str) -> None:
    x = _x()
    y = COPIES[name](x)
    assert y._base is None
    assert not np.shares_memory(y.numpy(), x.numpy())


@pytest.mark.parametrize(
    "name", ["diagonal", "diagonal_batched", "unfold", "unflatten", "movedim", "t"]
)
def test_inplace_through_view_gradients_match_torch(name: str) -> None:
    """``y = x * 1; v = op(y); v.mul_(w); (y * c).sum()``: CopySlices vs torch."""
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((3, 4))
    ca = rng.standard_normal((3, 4))
    fn = VIEWS[name]

    def run(lib: Any, make: Any) -> tuple[Any, Any]:
        x = make(xa.copy())
        x.requires_grad_(True)
        y = x * 1.0
        v = fn(y)
        w = make(rng2.standard_normal(tuple(v.shape)))
        v.mul_(w)
        loss = (y * make(ca)).sum() + (v * v).sum()
        return x, loss

    rng2 = np.random.default_rng(1)
    xa_, la = run(ae, ae.tensor)
    (ga,) = ae.sync.grad([la], [xa_], create_graph=True)
    (gga,) = ae.sync.grad([(ga * ga).sum()], [xa_])
    rng2 = np.random.default_rng(1)
    xt, lt = run(torch, torch.from_numpy)
    (gt,) = torch.autograd.grad([lt], [xt], create_graph=True)
    (ggt,) = torch.autograd.grad([(gt * gt).sum()], [xt])
    np.testing.assert_allclose(la.item(), lt.item(), rtol=1e-10)
    np.testing.assert_allclose(ga.detach().numpy(), gt.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gga.numpy(), ggt.numpy(), rtol=1e-10, atol=1e-12)


def test_view_grad_fn_is_rebuilt_after_inplace_on_base() -> None:
    """A diagonal taken before an in-place change of its base sees the new history."""
    torch = torch_or_skip()
    xa = np.arange(9.0).reshape(3, 3)

    def run(make: Any) -> Any:
        x = make(xa.copy())
        x.requires_grad_(True)
        y = x * 2.0
        d = y.diagonal()
        y.mul_(3.0)
        return x, (d * d).sum()

    xa_, la = run(ae.tensor)
    xt, lt = run(torch.from_numpy)
    (ga,) = ae.sync.grad([la], [xa_])
    (gt,) = torch.autograd.grad([lt], [xt])
    np.testing.assert_allclose(ga.numpy(), gt.numpy())


def test_meshgrid_warns_without_indexing() -> None:
    with pytest.warns(UserWarning, match="indexing"):
        a, b = ae.meshgrid(ae.arange(2.0), ae.arange(3.0))
    assert a.shape == (2, 3) and b.shape == (2, 3)


def test_repeat_interleave_counts_alone_give_int64() -> None:
    out = ae.repeat_interleave(ae.tensor([2, 0, 1]))
    assert out.dtype == ae.int64 and out.tolist() == [0, 0, 2]


def test_tensor_split_pieces_are_views() -> None:
    x = ae.arange(6.0)
    parts = ae.tensor_split(x, [1, 4])
    assert [p.tolist() for p in parts] == [[0.0], [1.0, 2.0, 3.0], [4.0, 5.0]]
    assert all(p._base is x for p in parts)
    parts[1].zero_()  # as torch: each piece is its own view (no multi-output restriction)
    assert x.tolist() == [0.0, 0.0, 0.0, 0.0, 4.0, 5.0]
