"""Joining and splitting ops against PyTorch: cat, stack, split, chunk, unbind."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip


def _torch():  # type: ignore[no-untyped-def]
    return torch_or_skip()


CAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 5)], 1),
    ([(2, 3), (2, 2)], -1),
    ([(2, 0, 3), (2, 2, 3), (2, 1, 3)], 1),
    ([(0, 3), (2, 3)], 0),
    ([(3,), (0,), (2,)], 0),
    ([(2, 2)], 0),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shapes,dim", CAT_CASES)
def test_cat(shapes, dim, dtype):
    torch = _torch()
    check_op(lambda *xs: ae.cat(xs, dim), lambda *xs: torch.cat(xs, dim), shapes, dtype=dtype)
    check_op(
        lambda *xs: ae.cat(list(xs), dim=dim) ** 2,
        lambda *xs: torch.cat(list(xs), dim=dim) ** 2,
        shapes,
        dtype=dtype,
    )


def test_cat_legacy_empty_and_dtype_promotion():
    torch = _torch()
    check_op(  # 1-D empty tensors are skipped next to 2-D ones
        lambda a, e: ae.cat([a, e], 1) ** 2, lambda a, e: torch.cat([a, e], 1) ** 2, [(2, 3), (0,)]
    )
    check_op(  # float32 + float64 -> float64; the gradient comes back as float32
        lambda a, b: ae.cat([a.float(), b]) ** 2,
        lambda a, b: torch.cat([a.float(), b]) ** 2,
        [(2,), (3,)],
    )
    for dts in [("int64", "float16"), ("int64", "bool"), ("uint8", "int8"), ("float32", "int32")]:
        parts = [np.ones(2, dtype=d) for d in dts]
        got = ae.cat([ae.tensor(p) for p in parts]).dtype
        want = torch.cat([torch.from_numpy(p) for p in parts]).dtype
        assert str(got) == str(want).replace("torch.", "")
    x = ae.randn(2, requires_grad=True, dtype=ae.float32)
    y = ae.cat([x, ae.tensor([1, 2])])
    assert y.dtype == ae.float32
    ae.sync.backward((y * y).sum())
    assert x.grad.dtype == ae.float32


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "shape,dim", [((3,), 0), ((3,), 1), ((3,), -1), ((2, 3), 1), ((2, 3), -3), ((), 0), ((0, 2), 1)]
)
def test_stack(shape, dim, dtype):
    torch = _torch()
    check_op(
        lambda a, b, c: ae.stack((a, b, c), dim) ** 2,
        lambda a, b, c: torch.stack((a, b, c), dim) ** 2,
        [shape] * 3,
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "arg,dim",
    [(2, 0), (3, 1), (4, -1), (10, 0), ([1, 4], 0), ([2, 0, 2], 1), ([4], -1), (1, 0)],
)
def test_split(arg, dim, dtype):
    check_op(
        lambda x: [p**2 for p in x.split(arg, dim)],
        lambda x: [p**2 for p in x.split(arg, dim)],
        [(5, 4)],
        dtype=dtype,
    )
    torch = _torch()
    check_op(
        lambda x: ae.split(x, arg, dim), lambda x: torch.split(x, arg, dim), [(5, 4)], dtype=dtype
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("chunks,dim", [(2, 0), (3, 0), (4, 1), (6, 0), (1, -1)])
def test_chunk(chunks, dim, dtype):
    torch = _torch()
    check_op(
        lambda x: [p.exp() for p in x.chunk(chunks, dim)],
        lambda x: [p.exp() for p in x.chunk(chunks, dim)],
        [(5, 4)],
        dtype=dtype,
    )
    check_op(
        lambda x: ae.chunk(x, chunks, dim),
        lambda x: torch.chunk(x, chunks, dim),
        [(5, 4)],
        dtype=dtype,
    )


def test_chunk_uneven_and_empty_shapes():
    torch = _torch()
    for size, chunks in [(5, 4), (5, 3), (6, 4), (0, 3), (1, 2)]:
        got = [p.shape for p in ae.zeros(size).chunk(chunks)]
        want = [tuple(p.shape) for p in torch.zeros(size).chunk(chunks)]
        assert got == want, (size, chunks)
    for size, s in [(0, 2), (0, 0), (5, 5), (5, 7)]:
        got = [p.shape for p in ae.zeros(size).split(s)]
        assert got == [tuple(p.shape) for p in torch.zeros(size).split(s)], (size, s)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape,dim", [((3, 4), 0), ((3, 4), 1), ((2, 3, 2), -1), ((3,), 0)])
def test_unbind(shape, dim, dtype):
    torch = _torch()
    check_op(
        lambda x: [p.sin() for p in x.unbind(dim)],
        lambda x: [p.sin() for p in x.unbind(dim)],
        [shape],
        dtype=dtype,
    )
    check_op(lambda x: ae.unbind(x, dim), lambda x: torch.unbind(x, dim), [shape], dtype=dtype)


# -- multi-output nodes --------------------------------------------------------------------------
def test_split_outputs_share_one_node_and_are_views():
    x = ae.randn(5, 2, requires_grad=True)
    for parts, name in [
        (x.split(2), "SplitBackward0"),
        (x.chunk(2), "SplitBackward0"),
        (x.split([1, 4]), "SplitWithSizesBackward0"),
        (x.unbind(), "UnbindBackward0"),
    ]:
        node = parts[0].grad_fn
        assert node.name() == name
        assert node.num_outputs == len(parts)
        for i, p in enumerate(parts):
            assert p.grad_fn is node and p.output_nr == i
            assert p._base is x and p._vc is x._vc
            assert p._creation == "multi_output:" + name
            assert np.shares_memory(p.data, x.data)
    with ae.no_grad():
        a, _ = x.split(3)
    assert a.grad_fn is None and a._creation == "no_grad"


def test_only_some_outputs_used_gives_zero_grad_elsewhere():
    x = ae.randn(5, requires_grad=True)
    a, b, c = x.split(2)
    ae.sync.backward((a * 2).sum())
    assert x.grad.tolist() == [2.0, 2.0, 0.0, 0.0, 0.0]
    x.grad = None
    xs = ae.randn(4, 3, requires_grad=True)
    rows = xs.unbind()
    ae.sync.backward(rows[2].sum() + rows[0].sum())
    assert xs.grad.tolist() == [[1.0] * 3, [0.0] * 3, [1.0] * 3, [0.0] * 3]


def test_only_some_outputs_used_second_order():
    torch = _torch()
    check_op(
        lambda x: x.chunk(3)[1] ** 3,
        lambda x: x.chunk(3)[1] ** 3,
        [(7, 2)],
    )
    check_op(lambda x: x.unbind(1)[0] ** 3, lambda x: x.unbind(1)[0] ** 3, [(3, 2)])
    # grad w.r.t. the pieces themselves (captures at a multi-output node)
    x = ae.randn(4, 2, requires_grad=True)
    a, b = x.chunk(2)
    go = ae.randn(2, 2)
    ga, gb = ae.sync.grad(a + 2 * b, [a, b], grad_outputs=go, create_graph=True)
    np.testing.assert_allclose(ga.numpy(), go.numpy())
    np.testing.assert_allclose(gb.numpy(), 2 * go.numpy())
    assert x.grad is None
    _ = torch


def test_multi_output_views_used_twice_accumulate():
    x = ae.randn(4, requires_grad=True)
    a, b = x.chunk(2)
    ae.sync.backward((a * b).sum() + a.sum())
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), [xv[2] + 1, xv[3] + 1, xv[0], xv[1]])


# -- errors --------------------------------------------------------------------------------------
def test_cat_stack_errors():
    a = ae.randn(2, 3)
    with pytest.raises(ValueError, match=r"cat\(\): expected a non-empty list of Tensors"):
        ae.cat([])
    with pytest.raises(ValueError, match=r"stack\(\): expected a non-empty list of Tensors"):
        ae.stack(())
    with pytest.raises(TypeError, match="expects a list or tuple of Tensors"):
        ae.cat(a)
    with pytest.raises(TypeError, match="element 1 of the list is list"):
        ae.cat([a, [1.0, 2.0, 3.0]])
    with pytest.raises(
        ValueError,
        match=r"Sizes of tensors must match except in dimension 0. Expected size 3 but got size "
        r"4 for tensor number 1 in the list \(shapes \[2, 3\] and \[2, 4\]\)",
    ):
        ae.cat([a, ae.randn(2, 4)])
    with pytest.raises(
        ValueError, match="Tensors must have same number of dimensions: got 2 and 1"
    ):
        ae.cat([a, ae.randn(3)])
    with pytest.raises(ValueError, match=r"zero-dimensional tensor \(at position 0\) cannot be"):
        ae.cat([ae.tensor(1.0), ae.tensor(2.0)])
    with pytest.raises(IndexError, match="Dimension out of range"):
        ae.cat([a, a], 2)
    with pytest.raises(
        ValueError,
        match=r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and "
        r"\[3\] at entry 1",
    ):
        ae.stack([a, ae.randn(3)])
    with pytest.raises(IndexError, match="Dimension out of range"):
        ae.stack([a, a], 3)


def test_split_chunk_errors():
    x = ae.randn(3, 2)
    with pytest.raises(ValueError, match="chunk expects `chunks` to be greater than 0, got: 0"):
        x.chunk(0)
    with pytest.raises(ValueError, match="split_size can only be 0 if dimension size is 0"):
        x.split(0)
    with pytest.raises(ValueError, match="split expects split_size be non-negative"):
        x.split(-1)
    with pytest.raises(
        ValueError,
        match=r"split_with_sizes expects split_sizes to sum exactly to 3 \(input tensor's size "
        r"at dimension 0\), but got split_sizes=\[1, 1\]",
    ):
        x.split([1, 1])
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.split(1, 2)
    with pytest.raises(ValueError, match="unbind expects at least a 1-dimensional tensor"):
        ae.tensor(1.0).unbind()
    assert ae.zeros(0, 2).unbind() == ()


def test_devices_must_match_and_other_devices_work():
    a = ae.randn(2, 3)
    b = ae.randn(2, 3, device="sim:0", requires_grad=True)
    with pytest.raises(ae.AutogradError, match="Expected all tensors to be on the same device"):
        ae.cat([a, b])
    with pytest.raises(ae.AutogradError, match="Expected all tensors to be on the same device"):
        ae.stack([b, a])
    parts = b.split([1, 1])
    y = ae.cat([ae.stack(parts[1].unbind(1), 1), parts[0]], 0) ** 2
    assert y.device == b.device
    ae.sync.backward(y.sum())
    assert b.grad.device == b.device
    np.testing.assert_allclose(b.grad.numpy(), 2 * b.detach().numpy())
