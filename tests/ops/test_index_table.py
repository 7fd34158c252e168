"""Indexing, scatter, sorting and searching ops: what the table's harness cannot say.

The table (tests/ops/test_table.py) checks values, first and second
derivatives and errors against torch per sample; here: results that have
no derivative in torch (their backward raises), the deprecated ``reduce=``
of scatter, ``topk(sorted=False)`` (whose order torch leaves open), ties,
and the float samples on the ``sim`` device (the harness runs ops that take
integers there in int64 only).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aengine as ae
from aengine.ops._table import TABLE, Maker
from tests.ops.test_table import _check_case
from tests.oracle import torch_or_skip

_FAMILY = (
    "select narrow index_select gather take_along_dim masked_fill scatter scatter_add "
    "scatter_reduce index_add index_copy index_fill index_put masked_select masked_scatter "
    "take nonzero sort argsort topk unique searchsorted bucketize"
).split()


@pytest.mark.parametrize("name", _FAMILY)
def test_float64_sample_on_sim_device(name: str) -> None:
    torch = torch_or_skip()
    info = TABLE[name]
    sample = next(iter(info.samples(Maker("float64", seed=0))))
    _check_case(info, "float64", sample, torch, device="sim:0")


def test_unique_records_a_node_whose_backward_raises_as_torch() -> None:
    x = ae.tensor([3.0, 1.0, 3.0], requires_grad=True)
    u = ae.unique(x)
    assert u.requires_grad
    assert type(u.grad_fn).__name__ == "Unique2Backward0"
    # the engine wraps an error raised in a backward (the original is its ``original``)
    with pytest.raises(ae.BackwardError, match="derivative for 'unique'") as info:
        ae.sync.backward(u.sum())
    assert isinstance(info.value.original, NotImplementedError)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_deprecated_reduce_values_and_no_derivative(reduce: str) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    x, src = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    idx = rng.integers(0, 3, size=(5, 4))
    a = ae.tensor(x, requires_grad=True)
    out = ae.scatter(a, 0, ae.tensor(idx), ae.tensor(src), reduce=reduce)
    with warnings.catch_warnings():  # torch's: the reduce argument is deprecated
        warnings.simplefilter("ignore")
        want = torch.scatter(
            torch.from_numpy(x), 0, torch.from_numpy(idx), torch.from_numpy(src), reduce=reduce
        )
    np.testing.assert_allclose(out.detach().numpy(), want.numpy(), rtol=1e-12)
    value = ae.scatter(a, 0, ae.tensor(idx), 2.0, reduce=reduce)
    want = torch.scatter(torch.from_numpy(x), 0, torch.from_numpy(idx), 2.0, reduce=reduce)
    np.testing.assert_allclose(value.detach().numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="not implemented"):
        ae.sync.backward(out.sum())


def test_topk_unsorted_gives_the_same_elements() -> None:
    torch = torch_or_skip()
    x = np.random.default_rng(1).permutation(40).astype(np.float64).reshape(4, 10)
    v, i = ae.topk(ae.tensor(x), 3, sorted=False)
    tv, ti = torch.topk(torch.from_numpy(x), 3, sorted=False)
    np.testing.assert_array_equal(np.sort(v.numpy(), -1), np.sort(tv.numpy(), -1))
    np.testing.assert_array_equal(np.sort(i.numpy(), -1), np.sort(ti.numpy(), -1))


def test_sort_keeps_ties_in_order_without_stable() -> None:
    x = ae.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    assert ae.sort(x).indices.tolist() == [1, 3, 0, 2, 4]
    assert ae.sort(x, descending=True).indices.tolist() == [0, 2, 4, 1, 3]
    assert ae.argsort(x, descending=True).tolist() == [0, 2, 4, 1, 3]


def test_sort_results_are_named_tuples() -> None:
    r = ae.tensor([2.0, 1.0]).sort()
    assert r.values.tolist() == [1.0, 2.0] and r.indices.tolist() == [1, 0]
    t = ae.tensor([2.0, 1.0]).topk(1)
    assert t._fields == ("values", "indices")


def test_scatter_src_larger_than_index_gets_zeros_outside_the_block() -> None:
    # torch's backward raises here (ScatterBackward0 returns a gradient of the index's shape)
    src = ae.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    idx = ae.tensor([[0, 1], [2, 0]])
    out = ae.scatter(ae.zeros(3, 3, dtype=ae.float64), 1, idx, src)
    g = ae.tensor(np.arange(9.0).reshape(3, 3))
    (gs,) = ae.sync.grad([out], [src], grad_outputs=[g])
    assert gs.tolist() == [[0.0, 1.0, 0.0, 0.0], [5.0, 3.0, 0.0, 0.0], [0.0] * 4]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_extremes_share_ties_as_torch(reduce: str, include_self: bool) -> None:
    # without include_self torch still counts an input equal to the result among the ties
    torch = torch_or_skip()
    x = np.array([1.0, 3.0, 0.0, 2.0])
    src = np.array([3.0, 1.0, 3.0, 0.0, 2.0, 2.0])
    idx = np.array([1, 0, 1, 2, 3, 3])
    a, s = ae.tensor(x, requires_grad=True), ae.tensor(src, requires_grad=True)
    out = ae.scatter_reduce(a, 0, ae.tensor(idx), s, reduce, include_self=include_self)
    ta, ts = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    tout = torch.scatter_reduce(ta, 0, torch.from_numpy(idx), ts, reduce, include_self=include_self)
    np.testing.assert_array_equal(out.detach().numpy(), tout.detach().numpy())
    g = np.array([1.0, 2.0, 3.0, 4.0])
    ga = ae.sync.grad([out], [a, s], grad_outputs=[ae.tensor(g)])
    gt = torch.autograd.grad([tout], [ta, ts], grad_outputs=[torch.from_numpy(g)])
    for x1, y1 in zip(ga, gt):
        np.testing.assert_allclose(x1.numpy(), y1.numpy(), rtol=1e-12)


def test_scatter_value_into_integers_truncates_as_torch() -> None:
    torch = torch_or_skip()
    x = np.array([5, 6, 7])
    idx = np.array([0, 2])
    got = ae.scatter(ae.tensor(x), 0, ae.tensor(idx), value=-2.7)
    want = torch.scatter(torch.from_numpy(x), 0, torch.from_numpy(idx), value=-2.7)
    assert got.tolist() == want.tolist()


def test_index_fill_and_index_put_results_are_copies() -> None:
    x = ae.zeros(3)
    y = x.index_fill(0, ae.tensor([0]), 1.0)
    z = x.index_put((ae.tensor([1]),), ae.tensor(2.0))
    assert x.tolist() == [0.0, 0.0, 0.0]
    assert y.tolist() == [1.0, 0.0, 0.0] and z.tolist() == [0.0, 2.0, 0.0]


def test_searchsorted_and_bucketize_are_functions_only() -> None:
    torch = torch_or_skip()
    assert not hasattr(torch.Tensor, "searchsorted") and not hasattr(ae.Tensor, "searchsorted")
    assert not hasattr(torch.Tensor, "bucketize") and not hasattr(ae.Tensor, "bucketize")
