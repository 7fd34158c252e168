"""Elementwise ops: what the table's tests cannot say (ties, zero gradients, node names).

The table (aengine/ops/_unary.py, _special.py, _arith.py, _binary.py) tests values,
first and second derivatives against torch; here: gradients at ties, where torch
gives one input the whole gradient; floor_divide, whose backward torch does not
implement; where(condition) alone; integer division by zero.
"""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip


def _grads(fn_ae, fn_t, *arrays):  # type: ignore[no-untyped-def]
    torch = torch_or_skip()
    xs = [ae.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_a = fn_ae(*xs)
    out_t = fn_t(torch, *ts)
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy())
    ga = ae.sync.grad(out_a.sum(), xs, allow_unused=True)
    gt = torch.autograd.grad(out_t.sum(), ts, allow_unused=True)
    for a, t, x in zip(ga, gt, arrays):
        want = np.zeros_like(x) if t is None else t.numpy()
        got = np.zeros_like(x) if a is None else a.numpy()
        np.testing.assert_allclose(got, want)


def test_clamp_with_tensor_bounds_at_ties_gives_the_input_the_gradient() -> None:
    x = np.array([0.0, 1.0, 2.0, -1.0, 3.0])
    lo = np.array([0.0, 0.0, 2.5, -1.0, 1.0])
    hi = np.array([1.0, 1.0, 2.0, 0.0, 3.0])  # element 2: lo > hi
    _grads(lambda a, b, c: ae.clamp(a, b, c), lambda t, a, b, c: t.clamp(a, b, c), x, lo, hi)
    _grads(lambda a, b: ae.clamp_min(a, b), lambda t, a, b: t.clamp_min(a, b), x, lo)
    _grads(lambda a, b: ae.clip(a, max=b), lambda t, a, b: t.clip(a, max=b), x, hi)


def test_fmax_fmin_give_ties_to_the_input() -> None:
    a = np.array([1.0, 2.0, np.nan, 0.5])
    b = np.array([1.0, np.nan, 3.0, 0.7])
    _grads(ae.fmax, lambda t, x, y: t.fmax(x, y), a, b)
    _grads(ae.fmin, lambda t, x, y: t.fmin(x, y), a, b)


def test_floor_divide_and_rounded_div_have_zero_gradients() -> None:
    x = ae.tensor([7.5, -7.5], requires_grad=True)
    y = ae.tensor([2.0, 2.0], requires_grad=True)
    for out in (ae.floor_divide(x, y), ae.div(x, y, rounding_mode="trunc"), x.floor_divide(2)):
        gx, gy = ae.sync.grad(out.sum(), [x, y], allow_unused=True)
        assert gx.tolist() == [0.0, 0.0]
        assert gy is None or gy.tolist() == [0.0, 0.0]
    assert ae.floor_divide(x, y).grad_fn.name() == "DivBackward2"


def test_where_with_the_condition_alone_gives_indices() -> None:
    torch = torch_or_skip()
    c = np.array([[True, False, True], [False, True, False]])
    got = ae.where(ae.tensor(c))
    want = torch.where(torch.tensor(c))
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        assert g.dtype == ae.int64 and g.tolist() == w.tolist()
    assert [t.tolist() for t in ae.where(ae.tensor(True))] == [[0]]
    with pytest.raises(TypeError, match="'other' is missing"):
        ae.where(ae.tensor(c), ae.ones(3))


@pytest.mark.parametrize("op", [ae.remainder, ae.fmod, ae.floor_divide])
def test_integer_division_by_zero_raises(op) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(ae.tensor([1, 2]), ae.tensor([1, 0]))


def test_node_names_follow_pytorch() -> None:
    x = ae.tensor([0.3, 0.6], requires_grad=True)
    names = {
        "Atan2Backward0": ae.atan2(x, x),
        "LerpBackward0": ae.lerp(x, x, 0.5),
        "LerpBackward1": ae.lerp(x, x, x),
        "ErfinvBackward0": ae.erfinv(x),
        "PolygammaBackward0": ae.polygamma(2, x),
        "ClampBackward0": ae.clamp(x, x * 0.5),
        "RoundBackward1": ae.round(x, decimals=1),
        "NanToNumBackward0": ae.nan_to_num(x),
    }
    for name, out in names.items():
        assert out.grad_fn.name() == name
