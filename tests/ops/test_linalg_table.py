"""Linear algebra beyond what the table's harness expresses (tests/ops/test_table.py).

- gradcheck and gradgradcheck (finite differences) of the factorisations
  that read one triangle (cholesky, eigh), through a symmetric input;
- gradgradcheck of the primitives (the harness compares second
  derivatives with torch, not with finite differences) and of einsum's
  special cases (diagonals, ellipses, size-1 broadcasting);
- the signs of eigenvectors and singular vectors (NOTE [Signs of
  eigenvectors and singular vectors] in aengine/ops/_decomp.py);
- errors raised in the backward (qr's modes), warnings, exception classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.ops._decomp import LinAlgError
from aengine.ops._linalg import MatrixShapeError


def _leaf(a: np.ndarray) -> ae.Tensor:
    return ae.tensor(np.asarray(a, dtype=np.float64)).requires_grad_(True)


def _sym(x: ae.Tensor) -> ae.Tensor:
    return (x + x.mT) * 0.5


def _check(fn: Callable[..., Any], *arrays: np.ndarray) -> None:
    xs = tuple(_leaf(a) for a in arrays)
    assert ae.sync.gradcheck(fn, xs, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert ae.sync.gradgradcheck(fn, xs, eps=1e-6, atol=1e-5, rtol=1e-3)


RNG = np.random.default_rng(7)


def _spd(n: int) -> np.ndarray:
    x = RNG.uniform(-1, 1, (n, n))
    return x @ x.T + n * np.eye(n)


def _wc(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape) + shape[-1] * np.eye(shape[-1])


def _sv(r: int, c: int) -> np.ndarray:
    u, _ = np.linalg.qr(RNG.standard_normal((r, r)))
    v, _ = np.linalg.qr(RNG.standard_normal((c, c)))
    s = np.zeros((r, c))
    for i in range(min(r, c)):
        s[i, i] = min(r, c) + 1.0 - i
    return u @ s @ v


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_finite_differences(upper: bool) -> None:
    _check(lambda x: ae.linalg.cholesky(_sym(x), upper=upper), _spd(3))


def test_eigh_finite_differences() -> None:
    q, _ = np.linalg.qr(RNG.standard_normal((4, 4)))
    a = (q * np.array([-2.0, 0.5, 1.5, 3.0])) @ q.T

    def fn(x: ae.Tensor) -> Any:
        L, V = ae.linalg.eigh(_sym(x))
        return L, V

    _check(fn, a)


@pytest.mark.parametrize(
    ("name", "fn", "arrays"),
    [
        ("inv", lambda a: ae.linalg.inv(a), (_wc(3, 3),)),
        ("det", lambda a: ae.linalg.det(a), (_wc(2, 3, 3),)),
        ("slogdet", lambda a: ae.linalg.slogdet(a).logabsdet, (_wc(3, 3),)),
        ("solve", lambda a, b: ae.linalg.solve(a, b), (_wc(3, 3), RNG.uniform(-1, 1, (3, 2)))),
        ("solve vector", lambda a, b: ae.linalg.solve(a, b), (_wc(2, 3, 3), RNG.uniform(-1, 1, 3))),
        ("qr tall", lambda a: tuple(ae.linalg.qr(a)), (RNG.uniform(-1, 1, (4, 3)),)),
        ("qr wide", lambda a: tuple(ae.linalg.qr(a)), (RNG.uniform(-1, 1, (3, 5)),)),
        ("svd tall", lambda a: tuple(ae.linalg.svd(a, full_matrices=False)), (_sv(4, 3),)),
        ("svd wide", lambda a: tuple(ae.linalg.svd(a, full_matrices=False)), (_sv(3, 4),)),
        ("pinv tall", lambda a: ae.linalg.pinv(a), (_sv(4, 3),)),
        ("pinv wide", lambda a: ae.linalg.pinv(a), (_sv(3, 4),)),
        (
            "solve_triangular",
            lambda a, b: ae.linalg.solve_triangular(a, b, upper=True, left=False),
            (_wc(3, 3), RNG.uniform(-1, 1, (2, 3))),
        ),
        (
            "solve_triangular unit",
            lambda a, b: ae.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
            (_wc(3, 3), RNG.uniform(-1, 1, (3, 2))),
        ),
        (
            "lstsq",
            lambda a, b: ae.linalg.lstsq(a, b, driver="gelsd")[:2],
            (_sv(5, 3), RNG.uniform(-1, 1, (5, 2))),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_decomposition_finite_differences(name: str, fn: Any, arrays: Any) -> None:
    _check(fn, *arrays)


@pytest.mark.parametrize(
    ("eq", "shapes"),
    [
        ("ii->i", [(3, 3)]),
        ("iij,jk->ik", [(3, 3, 2), (2, 2)]),
        ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
        ("ij,jk->ik", [(3, 1), (4, 2)]),
        ("ij,k->i", [(3, 4), (2,)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("bii,bi->b", [(2, 3, 3), (2, 3)]),
    ],
)
def test_einsum_finite_differences(eq: str, shapes: list[tuple[int, ...]]) -> None:
    _check(lambda *xs: ae.einsum(eq, *xs), *[RNG.uniform(-1, 1, s) for s in shapes])


def test_eigenvector_and_singular_vector_signs() -> None:
    a = _spd(4)
    _, V = ae.linalg.eigh(ae.tensor(a))
    v = V.numpy()
    top = v[np.argmax(np.abs(v), axis=0), np.arange(4)]
    assert (top > 0).all()
    b = _sv(4, 3)
    U, S, Vh = ae.linalg.svd(ae.tensor(b))
    u = U.numpy()
    top = u[np.argmax(np.abs(u), axis=0), np.arange(4)]
    assert (top > 0).all()
    rebuilt = (u[:, :3] * S.numpy()) @ Vh.numpy()
    np.testing.assert_allclose(rebuilt, b, atol=1e-12)


def test_svd_reconstructs() -> None:
    a = RNG.uniform(-1, 1, (2, 4, 3))
    U, S, Vh = ae.linalg.svd(ae.tensor(a), full_matrices=False)
    np.testing.assert_allclose((U.numpy() * S.numpy()[..., None, :]) @ Vh.numpy(), a, atol=1e-12)


def test_qr_backward_errors_as_torch() -> None:
    x = ae.tensor(RNG.uniform(-1, 1, (4, 3))).requires_grad_(True)
    Q, R = ae.linalg.qr(x, mode="r")
    assert Q.shape == (0,)
    with pytest.raises(RuntimeError, match="mode='r'"):
        ae.sync.grad([R.sum()], [x])
    Q, R = ae.linalg.qr(x, mode="complete")
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        ae.sync.grad([Q.sum()], [x])


def test_exception_classes() -> None:
    with pytest.raises(LinAlgError, match="singular"):
        ae.linalg.inv(ae.ones(2, 2))
    assert issubclass(LinAlgError, RuntimeError)
    # the matrix products' shape errors: torch's RuntimeError, aengine's earlier ValueError
    with pytest.raises(RuntimeError):
        ae.mm(ae.ones(3), ae.ones(3, 2))
    with pytest.raises(ValueError):
        ae.mm(ae.ones(3), ae.ones(3, 2))
    assert issubclass(MatrixShapeError, RuntimeError) and issubclass(MatrixShapeError, ValueError)


def test_cross_without_dim_warns_as_torch() -> None:
    a, b = ae.tensor([[1.0, 0.0, 0.0]]), ae.tensor([[0.0, 1.0, 0.0]])
    with pytest.warns(UserWarning, match="without specifying the dim"):
        out = ae.cross(a, b)
    assert out.tolist() == [[0.0, 0.0, 1.0]]


def test_addmm_beta_zero_ignores_nan() -> None:
    inp = ae.tensor([[float("nan")]])
    out = ae.addmm(inp, ae.ones(1, 2), ae.ones(2, 1), beta=0)
    assert out.tolist() == [[2.0]]
