"""Indexing ops against PyTorch: x[idx], select, narrow, index_select, gather, masked_fill."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae
from aengine.tensors._tensor import own_vc
from tests.oracle import check_op, torch_or_skip

# Each index is given to both libraries as is (numpy arrays and lists work in both).
INDICES = {
    "int": 1,
    "neg_int": -1,
    "slice": slice(1, 3),
    "slice_step": slice(None, None, 2),
    "slice_neg_bounds": slice(-3, -1),
    "empty_slice": slice(2, 2),
    "ellipsis": (Ellipsis, 1),
    "none": (None, slice(None), 1),
    "int_tuple": (1, 2),
    "int_slice": (0, slice(1, None)),
    "full_slices": (slice(None), slice(None)),
    "list_dups": [0, 2, 0, 0],
    "neg_list": [-1, 0],
    "empty_list": np.zeros(0, dtype=np.int64),
    "array_2d": np.array([[0, 1], [1, 1]]),
    "bool_mask_rows": np.array([True, False, True]),
    "bool_mask_full": np.arange(12).reshape(3, 4) % 3 == 0,
    "adv_and_slice": (slice(None), [3, 0, 3]),
    "slice_and_adv": ([2, 2], slice(1, 3)),
    "two_advanced": ([0, 2, 2], [1, 1, 3]),
    "int_and_adv": (1, [0, 0, 3]),
    "adv_none": ([0, 1], None, [1, 2]),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(INDICES))
def test_getitem_matches_torch(name, dtype):
    idx = INDICES[name]
    check_op(lambda x: x[idx], lambda x: x[idx], [(3, 4)], dtype=dtype)
    # a non-linear use, so that the second derivative goes through the index rules
    check_op(lambda x: x[idx] ** 3, lambda x: x[idx] ** 3, [(3, 4)], dtype=dtype)


@pytest.mark.parametrize(
    "idx",
    [
        (0, slice(None), [0, 1]),
        ([1, 0], Ellipsis, [0, 1]),
        (slice(None), 1, [[0], [2]]),
        (slice(None), [0, 1], Ellipsis, [0, 3]),  # "..." standing for no dimension
        (Ellipsis, [0, 1], [[1], [2]]),
    ],
)
def test_ints_mixed_with_arrays_follow_torch(idx):
    # numpy would move the advanced dimensions first; PyTorch applies ints as selects
    check_op(lambda x: x[idx] ** 2, lambda x: x[idx] ** 2, [(2, 3, 4)])


def test_getitem_zero_dim_tensor():
    check_op(lambda x: x[()] * x[None] * x[...], lambda x: x[()] * x[None] * x[...], [()])


def test_tensor_indices():
    torch = torch_or_skip()
    i = np.array([2, 0, 2])
    m = np.array([True, False, True])
    check_op(
        lambda x: x[ae.tensor(i)] + x[ae.tensor(m)].sum() + x[ae.tensor(1)],
        lambda x: x[torch.tensor(i)] + x[torch.tensor(m)].sum() + x[torch.tensor(1)],
        [(3, 4)],
    )
    x = ae.randn(3, 4)
    assert x[ae.tensor(1)].grad_fn is None
    assert x[ae.tensor(1)]._base is x  # a 0-d integer tensor index is a select
    assert x[ae.tensor(1, dtype=ae.int32), 1:].shape == (3,)


def test_third_derivative_through_index_rules():
    torch = torch_or_skip()
    a = np.array([0.5, -1.0, 2.0, 0.3])
    idx = [0, 0, 3]
    x = ae.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    (g1,) = ae.sync.grad((x[idx] ** 4).sum(), [x], create_graph=True)
    (g2,) = ae.sync.grad((g1 * ae.tensor(a)).sum(), [x], create_graph=True)
    (g3,) = ae.sync.grad(g2[1:].sum(), [x])
    (t1,) = torch.autograd.grad((tx[idx] ** 4).sum(), [tx], create_graph=True)
    (t2,) = torch.autograd.grad((t1 * torch.tensor(a)).sum(), [tx], create_graph=True)
    (t3,) = torch.autograd.grad(t2[1:].sum(), [tx])
    np.testing.assert_allclose(g3.numpy(), t3.numpy(), rtol=1e-10)


# -- views ---------------------------------------------------------------------------------------
def test_basic_index_is_view_sharing_version():
    x = ae.randn(3, 4)
    for y in (x[1:], x[0], x[None], x[..., 1], x[:, ::2], x.select(1, 2), x.narrow(0, 1, 2)):
        assert y._base is x
        assert y._is_view()
        before = y._version
        own_vc(x)[0] += 1  # what an in-place op on x does
        assert y._version == before + 1
    v = x[1:][0]
    assert v._base is x  # views of views point at the root
    np.testing.assert_array_equal(v._view_fn(ae.ops._core.TENSOR_OPS, x).numpy(), x.numpy()[1])
    np.testing.assert_array_equal(v._view_fn(x.device.backend.raw, x.data), x.numpy()[1])


def test_basic_index_shares_data():
    x = ae.zeros(3, 4)
    y = x[1, 1:3]
    x.data[1, 2] = 5.0
    assert y.tolist() == [0.0, 5.0]


def test_advanced_index_is_copy():
    x = ae.randn(3, 4)
    for y in (x[[0, 1]], x[x > 0], x[:, [1]]):
        assert y._base is None
        assert not np.shares_memory(y.data, x.data)


def test_grad_fn_names_follow_torch():
    x = ae.randn(3, 4, requires_grad=True)
    names = {
        "SelectBackward0": [x[0], x[0, :], x[:, 0], x[None, 0], x.select(0, 1)],
        "SliceBackward0": [x[1:], x[:], x[:, 1:], x.narrow(1, 0, 2)],
        "UnsqueezeBackward0": [x[None], x[0, None]],
        "AliasBackward0": [x[...], x[:, :]],
        "IndexBackward0": [x[[0]], x[x > 0], x[0, [0, 1]]],
        "IndexSelectBackward0": [x.index_select(0, ae.tensor([1]))],
        "GatherBackward0": [x.gather(1, ae.tensor([[0], [1], [2]]))],
        "MaskedFillBackward0": [x.masked_fill(x > 0, 1.0)],
    }
    for name, ys in names.items():
        for y in ys:
            assert y.grad_fn.name() == name


def test_index_on_no_grad_tensor_records_nothing():
    x = ae.randn(3, 4)
    assert x[1:].grad_fn is None and x[[0, 1]].grad_fn is None
    with ae.no_grad():
        y = ae.randn(3, requires_grad=True)[1:]
    # as PyTorch: a no_grad view of a base that requires grad reports
    # requires_grad=True, with no grad_fn
    assert y.grad_fn is None and y.requires_grad and y.is_leaf


def test_advanced_index_saves_indices_freed_by_backward():
    b = ae.randn(3, requires_grad=True)
    c = b[[1, 1]]
    ae.sync.backward(c.sum())
    with pytest.raises(ae.AutogradError, match="retain_graph=True"):
        ae.sync.backward(c.sum())
    np.testing.assert_array_equal(b.grad.numpy(), [0.0, 2.0, 0.0])


def test_index_with_tensor_index_and_duplicates_accumulate():
    x = ae.ones(4, requires_grad=True)
    ae.sync.backward(x[ae.tensor([3, 3, 3, 0])].sum())
    assert x.grad.tolist() == [1.0, 0.0, 0.0, 3.0]


# -- select / narrow / index_select / gather / masked_fill ----------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_select_narrow(dtype):
    for fn in (
        lambda x: x.select(1, -1) ** 2,
        lambda x: x.select(0, 2) ** 2,
        lambda x: x.narrow(1, 1, 2) ** 2,
        lambda x: x.narrow(-1, -3, 3) ** 2,
        lambda x: x.narrow(0, 3, 0) ** 2,
    ):
        check_op(fn, fn, [(3, 4)], dtype=dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim, dtype):
    torch = torch_or_skip()
    i = np.array([2, 0, 2, 1])
    check_op(
        lambda x: x.index_select(dim, ae.tensor(i)) ** 2,
        lambda x: x.index_select(dim, torch.tensor(i)) ** 2,
        [(3, 3)],
        dtype=dtype,
    )
    check_op(
        lambda x: ae.index_select(x, dim, ae.tensor(1)) ** 2,
        lambda x: torch.index_select(x, dim, torch.tensor(1)) ** 2,
        [(3, 3)],
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "dim,index",
    [
        (0, [[0, 1, 0, 0], [2, 2, 2, 2]]),
        (1, [[3, 3], [0, 1], [1, 1]]),
        (-1, [[1], [0]]),  # smaller than the input outside dim
        (0, [[2, 2, 2, 2], [2, 2, 2, 2], [0, 1, 2, 0], [0, 0, 0, 0]]),  # larger along dim
    ],
)
def test_gather(dim, index, dtype):
    torch = torch_or_skip()
    i = np.array(index)
    check_op(
        lambda x: x.gather(dim, ae.tensor(i)) ** 2,
        lambda x: x.gather(dim, torch.tensor(i)) ** 2,
        [(3, 4)],
        dtype=dtype,
    )
    check_op(
        lambda x: ae.gather(x, dim, ae.tensor(i)),
        lambda x: torch.gather(x, dim, torch.tensor(i)),
        [(3, 4)],
        dtype=dtype,
    )


def test_take_along_dim():
    torch = torch_or_skip()
    i = np.array([[0, 2], [1, 1]])
    j = np.array([[1], [0], [2]])
    check_op(
        lambda x: x.take_along_dim(ae.tensor(i)) ** 2 + ae.take_along_dim(x, ae.tensor(j), 1).sum(),
        lambda x: (
            x.take_along_dim(torch.tensor(i)) ** 2
            + torch.take_along_dim(x, torch.tensor(j), 1).sum()
        ),
        [(3, 4)],
    )
    b = np.array([[[1, 0]]])  # broadcasts over the first two dims of x
    check_op(
        lambda x: x.take_along_dim(ae.tensor(b), -1) ** 2,
        lambda x: x.take_along_dim(torch.tensor(b), -1) ** 2,
        [(2, 3, 4)],
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_masked_fill(dtype):
    torch = torch_or_skip()
    m = np.array([[True, False, False, True], [False, False, True, True], [True] * 4])
    row = np.array([False, True, True, False])
    check_op(
        lambda x: x.masked_fill(ae.tensor(m), -2.0) ** 2,
        lambda x: x.masked_fill(torch.tensor(m), -2.0) ** 2,
        [(3, 4)],
        dtype=dtype,
    )
    check_op(  # broadcast mask, tensor value that gets a gradient
        lambda x, v: x.masked_fill(ae.tensor(row), v) * x,
        lambda x, v: x.masked_fill(torch.tensor(row), v) * x,
        [(3, 4), ()],
        dtype=dtype,
    )
    check_op(  # the mask broadcasts x too
        lambda x: ae.Tensor.masked_fill(x, ae.tensor(m[None]).expand(2, 3, 4), 1.0) ** 2,
        lambda x: x.masked_fill(torch.tensor(m[None]).expand(2, 3, 4), 1.0) ** 2,
        [(4,)],
        dtype=dtype,
    )


def test_masked_fill_gradient_zero_where_masked():
    x = ae.ones(3, requires_grad=True)
    y = x.masked_fill(ae.tensor([True, False, True]), 7.0)
    assert y.tolist() == [7.0, 1.0, 7.0]
    ae.sync.backward(y.sum())
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


# -- errors --------------------------------------------------------------------------------------
def test_getitem_errors():
    x = ae.randn(3, 4)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[:, ::0]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[5]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 1 with size 4"):
        x[0, 7]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[[0, 5]]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        x[ae.tensor([-4])]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        ae.tensor(1.0)[0]
    with pytest.raises(IndexError, match=r"valid indices \(got float\)"):
        x[1.5]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        x[ae.tensor([1.0])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        x[ae.tensor(1.0)]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[ae.tensor([True, False])]


def test_op_errors():
    x = ae.randn(3, 4)
    with pytest.raises(IndexError, match=r"select\(\): index 5 out of range for tensor of size"):
        x.select(0, 5)
    with pytest.raises(IndexError, match="select\\(\\) cannot be applied to a 0-dim tensor"):
        ae.tensor(1.0).select(0, 0)
    with pytest.raises(
        RuntimeError, match=r"start \(2\) \+ length \(2\) exceeds dimension size \(3\)"
    ):
        x.narrow(0, 2, 2)
    with pytest.raises(IndexError, match="start out of range"):
        x.narrow(0, 4, 0)
    with pytest.raises(
        IndexError,
        match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
    ):
        x.narrow(2, 0, 1)
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.index_select(0, ae.tensor([[1]]))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.index_select(0, ae.tensor([3]))
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        x.index_select(0, ae.tensor([-1]))
    with pytest.raises(RuntimeError, match="Expected dtype int64 for index"):
        x.index_select(0, ae.tensor([1.0]))
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x.gather(1, ae.tensor([[4]]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 1 with size 4"):
        x.gather(1, ae.tensor([[-1]]))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        x.gather(1, ae.tensor([1]))
    with pytest.raises(RuntimeError, match="Size does not match at dimension 0"):
        x.gather(1, ae.tensor([[1]] * 4))
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        x.masked_fill(ae.tensor([1, 0, 1, 0]), 0.0)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        x.masked_fill(x > 0, ae.tensor([1.0, 2.0]))


def test_getitem_torch_oracle_values_for_odd_indices():
    torch = torch_or_skip()
    a = np.arange(24.0).reshape(2, 3, 4)
    x, t = ae.tensor(a), torch.tensor(a)
    for idx in [
        (Ellipsis, None),
        (None, Ellipsis, None),
        ([True, False],),
        (slice(None), [[0], [2]], [1, 3]),
        (slice(5, 10),),
        (1, slice(None), None, slice(None, None, 3)),
        (ae.tensor([[True, False, True], [False, False, True]]),),
    ]:
        tidx = tuple(torch.tensor(i.numpy()) if isinstance(i, ae.Tensor) else i for i in idx)
        np.testing.assert_array_equal(x[idx].numpy(), t[tidx].numpy())


def test_index_tensor_modified_in_place_is_caught():
    x = ae.randn(4, requires_grad=True)
    i = ae.tensor([0, 2])
    for y in (x[i], x.index_select(0, i), x[None].gather(1, i[None])):
        own_vc(i)[0] += 1  # what i.add_(1) does to its version
        with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
            ae.sync.backward(y.sum())


def test_nested_list_is_one_index_array():
    x = ae.arange(12.0).reshape(3, 4)
    assert x[[[0, 1], [1, 2]]].shape == (2, 2, 4)
    with pytest.raises(IndexError, match="use a tuple"):
        x[[0, slice(None)]]


def test_index_ops_on_another_device():
    x = ae.randn(3, 4, device="sim:0", requires_grad=True)
    i = ae.tensor([[0], [3], [3]], device="sim:0")
    y = x[[0, 0], 1:].sum() + x[1].sum() + x.gather(1, i).sum() + x.masked_fill(x > 0, 0.0).sum()
    (g,) = ae.sync.grad(y, [x])
    assert g.device == x.device
    want = np.zeros((3, 4))
    want[0, 1:] += 2
    want[1] += 1
    want[[0, 1, 2], [0, 3, 3]] += 1
    want += x.detach().numpy() <= 0
    np.testing.assert_allclose(g.numpy(), want)


def _random_index(rng, shape):  # type: ignore[no-untyped-def]
    """A random mix of ints, slices, None, ..., int lists, bool masks and 2-D index arrays."""
    idx: list = []
    dim = 0
    has_ellipsis = False
    for _ in range(rng.integers(1, 5)):
        if dim >= len(shape):
            break
        size = shape[dim]
        k = rng.integers(7)
        if k == 5 and not has_ellipsis:
            has_ellipsis = True
            idx.append(Ellipsis)
            dim = len(shape) - int(rng.integers(0, len(shape) - dim))
            continue
        if k == 0:
            it = int(rng.integers(-size, size))
        elif k == 1:
            it = slice(
                rng.choice([None, 0, 1]), rng.choice([None, size, -1]), rng.choice([None, 1, 2])
            )
        elif k == 2:
            idx.append(None)
            continue
        elif k == 3:
            it = [int(v) for v in rng.integers(-size, size, 2)]
        elif k == 4:
            it = rng.random(size) < 0.5
        else:
            it = rng.integers(0, size, (2, 1))
        idx.append(it)
        dim += 1
    return tuple(idx)


def test_random_indices_match_torch():
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4, 5))
    checked = 0
    for _ in range(150):
        idx = _random_index(rng, a.shape)
        x, t = ae.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        try:
            ty = t[idx]
        except IndexError:
            with pytest.raises(IndexError):
                x[idx]
            continue
        y = x[idx]
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy(), err_msg=str(idx))
        w = rng.standard_normal(y.shape)
        (g,) = ae.sync.grad((y * ae.tensor(w)).sum(), [x])
        (tg,) = torch.autograd.grad((ty * torch.tensor(w)).sum(), [t])
        np.testing.assert_allclose(g.numpy(), tg.numpy(), err_msg=str(idx))
        checked += 1
    assert checked > 100
