"""What the operator table's harness cannot express for reductions, scans and norms.

- The 1- and inf-norms: torch's second derivative through ``sgn`` is a
  ZeroTensor, which tests/ops/test_table.py cannot turn into numpy
  (NOTE [ZeroTensor second derivatives] in aengine/ops/_reduce.py):
  checked here with tests.oracle.check_op, which can.
- Third derivatives of the scans (cumprod at zeros, logcumsumexp) and of the
  SVD norms, against torch.
- cummax / cummin of empty tensors (torch's backward returns the input there).
- Index choices: ties of cummax, mode, and NaN in median.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip

ORDS = [1, -1, math.inf, -math.inf]


@pytest.mark.parametrize("ord", [1, math.inf, -math.inf], ids=str)
@pytest.mark.parametrize("dim", [None, 1, (0, 1)], ids=str)
def test_vector_norm_one_and_inf(ord, dim):
    check_op(
        lambda x: ae.linalg.vector_norm(x, ord, dim),
        lambda x: __import__("torch").linalg.vector_norm(x, ord, dim),
        [(3, 4)],
    )


@pytest.mark.parametrize("ord", ORDS, ids=str)
@pytest.mark.parametrize(("shape", "dim"), [((3, 4), (-2, -1)), ((3, 2, 4), (2, 0))], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_one_and_inf(ord, shape, dim, keepdim):
    check_op(
        lambda a: ae.linalg.matrix_norm(a, ord, dim, keepdim),
        lambda a: __import__("torch").linalg.matrix_norm(a, ord, dim, keepdim),
        [shape],
    )


@pytest.mark.parametrize("p", [1, math.inf, -math.inf], ids=str)
def test_norm_one_and_inf(p):
    check_op(lambda x: x.norm(p, 1), lambda x: x.norm(p, 1), [(3, 4)])


def _third(torch, f_ae, f_t, a, finite_only=False):
    """The third derivative of f along random directions, in both libraries.

    ``finite_only``: compare where torch's is finite (and require aengine's to be).
    """
    rng = np.random.default_rng(3)
    ws = [rng.standard_normal(a.shape) for _ in range(3)]
    x = ae.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    ga, gt = f_ae(x), f_t(t)
    for i, w in enumerate(ws):
        last = i == len(ws) - 1
        (ga,) = ae.sync.grad([(ga * ae.tensor(w)).sum()], [x], create_graph=not last)
        (gt,) = torch.autograd.grad([(gt * torch.tensor(w)).sum()], [t], create_graph=not last)
    an, tn = ga.numpy(), gt.numpy()
    if finite_only:
        assert np.isfinite(an).all()
        keep = np.isfinite(tn)
        assert keep.any()
        an, tn = an[keep], tn[keep]
    np.testing.assert_allclose(an, tn, rtol=1e-7, atol=1e-9)


def test_cumprod_third_derivative_with_zeros():
    torch = torch_or_skip()
    a = np.array([[0.5, 0.0, 1.5, -0.7, 0.0, 1.2], [0.0, 0.0, 0.9, 1.1, -1.3, 0.8]])
    _third(torch, lambda x: x.cumprod(1), lambda t: t.cumprod(1), a)
    _third(torch, lambda x: x.cumprod(0), lambda t: t.cumprod(0), a.T.copy())


def test_logcumsumexp_third_derivative():
    # torch's third derivative overflows to NaN in places (its formula's lowest-float
    # stand-ins meet at that order); aengine's stays finite and agrees elsewhere
    torch = torch_or_skip()
    a = np.random.default_rng(0).uniform(-2, 2, (3, 5))
    _third(torch, lambda x: x.logcumsumexp(1), lambda t: t.logcumsumexp(1), a, True)


def test_cumsum_third_derivative():
    torch = torch_or_skip()
    a = np.random.default_rng(0).uniform(-2, 2, (3, 5))
    _third(torch, lambda x: x.cumsum(1) ** 3, lambda t: t.cumsum(1) ** 3, a)


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (3, 3)], ids=str)
def test_svd_norms_third_derivative(ord, shape):
    torch = torch_or_skip()
    a = np.random.default_rng(1).uniform(-2, 2, shape)
    _third(
        torch,
        lambda x: ae.linalg.matrix_norm(x, ord),
        lambda t: torch.linalg.matrix_norm(t, ord),
        a,
    )


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_of_empty(name):
    torch = torch_or_skip()
    x = ae.zeros(0, 3, requires_grad=True)
    v, i = getattr(x, name)(1)
    tv, ti = getattr(torch.zeros(0, 3), name)(1)
    assert v.shape == tuple(tv.shape) and i.shape == tuple(ti.shape) and i.dtype == ae.int64
    (g,) = ae.sync.grad([v.sum()], [x])
    assert g.shape == (0, 3)


def test_index_choices_as_torch():
    torch = torch_or_skip()
    nan = math.nan
    cases = [
        ("cummax", [[1.0, 3.0, 3.0, 2.0, 3.0, nan, 4.0, nan]], (1,)),
        ("cummin", [[1.0, 0.0, 0.0, 2.0, 0.0, -1.0, -1.0]], (1,)),
        ("mode", [[1.0, 2.0, 2.0, 1.0, 3.0], [4.0, 4.0, 4.0, 0.0, 0.0]], (1,)),
        ("median", [[1.0, nan, 2.0, nan, 0.0], [3.0, 1.0, 2.0, 0.0, 5.0]], (1,)),
        ("kthvalue", [[1.0, nan, 2.0, nan, 0.0]], (4, 1)),
    ]
    for name, data, args in cases:
        a = getattr(ae.tensor(data), name)(*args)
        t = getattr(torch.tensor(data), name)(*args)
        np.testing.assert_array_equal(a.values.numpy(), t.values.numpy(), err_msg=name)
        np.testing.assert_array_equal(a.indices.numpy(), t.indices.numpy(), err_msg=name)
    for data in ([1.0, nan, 2.0], [4.0, 1.0, 3.0, 2.0], []):
        a, t = ae.tensor(data).median(), torch.tensor(data).median()
        np.testing.assert_array_equal(a.numpy(), t.numpy())


def test_median_of_every_element_shares_ties_like_torch():
    check_op(
        lambda x: x.median(), lambda x: x.median(), [], inputs=[np.array([[2.0, 1.0], [2.0, 5.0]])]
    )
