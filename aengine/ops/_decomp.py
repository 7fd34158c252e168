"""ae.linalg: factorisations, solves, inverses, determinants and least squares.

Each function is a primitive: its forward is the backend's ``xp.linalg``
kernel (numpy.linalg, cupy.linalg), its gradient rule torch's formula
(FunctionsManual.cpp), written against ``F`` with ``F.solve`` and
``F.matmul`` so that second derivatives come from the same rule.
Triangular and diagonal masks are constants of the backend (``xp.tri``,
``xp.eye``) that multiply, so no extra op is needed for ``tril``/``triu``.

# NOTE [Signs of eigenvectors and singular vectors]
# An eigenvector or a pair of singular vectors is defined up to its sign,
# and LAPACK builds differ in the sign they return (numpy's OpenBLAS and
# torch's MKL do, on the same matrix).  aengine fixes it: the entry of
# largest magnitude of each eigenvector, and of each left singular vector
# (its right one flips with it), is positive.  The rules are the same for
# either sign (the gradient of a function of the vectors flips with them),
# so the table compares torch's results normalised the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from ..core import SavedTensor, _saved_hooks
from ..tensors._creation import tensor_input
from ..tensors._tensor import Tensor
from . import _linalg, _reduce, _shape
from ._core import (
    GradOps,
    Reduction,
    as_tensor_arg,
    node_class,
    record,
    record_multi,
    same_device,
    wrap,
)
from ._table import ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "inv",
    "solve",
    "solve_matrix",
    "det",
    "slogdet",
    "cholesky",
    "qr",
    "eigh",
    "svd",
    "pinv",
    "solve_triangular",
    "lstsq",
    "LinAlgError",
    "SlogdetResult",
    "EighResult",
    "SVDResult",
    "QRResult",
    "LstsqResult",
]


class LinAlgError(RuntimeError):
    """A matrix the factorisation or solve cannot handle (singular, not positive-definite).

    A RuntimeError, as ``torch.linalg.LinAlgError``.
    """


class SlogdetResult(NamedTuple):
    """``linalg.slogdet``'s result (torch.return_types.linalg_slogdet)."""

    sign: Tensor
    logabsdet: Tensor


class EighResult(NamedTuple):
    """``linalg.eigh``'s result (torch.return_types.linalg_eigh)."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    """``linalg.svd``'s result (torch.return_types.linalg_svd)."""

    U: Tensor
    S: Tensor
    Vh: Tensor


class QRResult(NamedTuple):
    """``linalg.qr``'s result (torch.return_types.linalg_qr)."""

    Q: Tensor
    R: Tensor


class LstsqResult(NamedTuple):
    """``linalg.lstsq``'s result (torch.return_types.linalg_lstsq)."""

    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


# --- helpers -----------------------------------------------------------------


def _mT(F: GradOps, x: Any) -> Any:
    return F.swapaxes(x, -1, -2)


def _eye(n: Any, k: int, like: Any) -> Any:
    """The identity of size ``k`` in ``like``'s dtype, on node ``n``'s backend."""
    return n.dev.backend.xp.eye(k, dtype=like.dtype)


def _tri(n: Any, rows: int, cols: int, k: int, like: Any) -> Any:
    """Ones on and below diagonal ``k`` (``xp.tri``), in ``like``'s dtype."""
    return n.dev.backend.xp.tri(rows, cols, k, dtype=like.dtype)


def _matrix_arg(A: Any, name: str, arg: str = "A", square: bool = True) -> Tensor:
    """``A`` checked as torch.linalg checks it: a floating batch of (square) matrices."""
    t: Tensor = A if A.__class__ is Tensor else tensor_input(A, name, arg)
    d = t.data
    if d.ndim < 2:
        raise RuntimeError(
            f"{name}: The input tensor {arg} must have at least 2 dimensions; "
            f"got a {d.ndim}-D tensor (add dimensions with unsqueeze)"
        )
    if d.dtype.kind != "f":
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {d.dtype}; "
            "convert it first, e.g. A.double()"
        )
    if square and d.shape[-1] != d.shape[-2]:
        raise RuntimeError(
            f"{name}: {arg} must be batches of square matrices, but they are "
            f"{d.shape[-2]} by {d.shape[-1]} matrices"
        )
    return t


def _rhs_arg(A: Tensor, B: Any, name: str) -> Tensor:
    B = B if B.__class__ is Tensor else tensor_input(B, name, "B")
    same_device(A, B)
    if B.data.dtype != A.data.dtype:
        raise RuntimeError(
            f"{name}: Expected A and B to have the same dtype, but found A of type "
            f"{A.data.dtype} and B of type {B.data.dtype} instead; convert one first"
        )
    return B  # type: ignore[no-any-return]


def _batch(name: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise RuntimeError(
            f"{name}: the batch dimensions {a} and {b} of A and B do not broadcast"
        ) from None


def _lapack(name: str, msg: str, fn: Any, *args: Any, **kw: Any) -> Any:
    """``fn(*args, **kw)``, a backend kernel, with numpy's LinAlgError as torch's."""
    try:
        return fn(*args, **kw)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{name}: {msg}") from None


def _signs(xp: Any, V: Any) -> Any:
    """+1 or -1 per column of ``V`` (..., m, k): the sign of its largest-magnitude entry.

    NOTE [Signs of eigenvectors and singular vectors].
    """
    idx = xp.argmax(xp.abs(V), axis=-2)[..., None, :]
    top = xp.take_along_axis(V, idx, axis=-2)
    return xp.where(top < 0, -1.0, 1.0).astype(V.dtype)


def _record_outputs(
    cls: type[Any], outs: list[Any], dev: Any, A: Tensor, attrs: Any
) -> list[Tensor]:
    """``record_multi`` of a decomposition of ``A`` whose rule reads its outputs."""
    ts = record_multi(cls, outs, dev, (A,), (), attrs)
    node: Any = ts[0]._fn
    if node is not None and node.__class__ is cls:
        node.saved = tuple(SavedTensor(t, True) for t in ts)
        node.versions = (0,) * len(ts)
        _saved_hooks.pack_node(node, ts)  # NOTE [Saved-tensor hooks]
    return ts


# --- inv, solve, det, slogdet ------------------------------------------------


def _inv_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (ainv,) = s
    t = _mT(F, ainv)
    return (-F.matmul(t, F.matmul(g, t)),)


LinalgInvExBackward0 = node_class(
    "LinalgInvExBackward0",
    _inv_rule,
    jvp=lambda ts, ins, out, a, s: -_linalg.matmul(out, _linalg.matmul(ts[0], out)),
)


def inv(A: Tensor) -> Tensor:
    """The inverse of a square matrix (or of each in a batch), as ``torch.linalg.inv``.

    Raises a RuntimeError (LinAlgError) for a singular matrix.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.inv(ae.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    A = _matrix_arg(A, "linalg.inv")
    xp = A._device.backend.xp
    out = _lapack(
        "linalg.inv",
        "The inversion could not be completed because the input matrix is singular.",
        xp.linalg.inv,
        A.data,
    )
    return record(LinalgInvExBackward0, out, A._device, (A,), save_output=True)


def _solve_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    A, X = s
    vector, bshape = n.attrs
    if vector:
        g = F.expand_dims(g, -1)
        X = F.expand_dims(X, -1)
    gB = F.solve(_mT(F, A), g)
    gA = None
    if n.needs[0]:
        gA = F.sum_to(-F.matmul(gB, _mT(F, X)), tuple(A.shape))
    if not n.needs[1]:
        return (gA, None)
    if vector:
        gB = F.reshape(gB, tuple(gB.shape[:-1]))
    return (gA, F.sum_to(gB, bshape))


def _solve_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    # X = A^-1 B: dX = A^-1 (tB - tA X)
    A = ins[0]
    vector = attrs[0]
    X = _shape.unsqueeze(out, -1) if vector else out
    rhs = None
    if ts[1] is not None:
        rhs = _shape.unsqueeze(ts[1], -1) if vector else ts[1]
    if ts[0] is not None:
        r = -_linalg.matmul(ts[0], X)
        rhs = r if rhs is None else rhs + r
    dX = solve_matrix(A, rhs)
    return _shape.squeeze(dX, -1) if vector else dX


LinalgSolveExBackward0 = node_class("LinalgSolveExBackward0", _solve_rule, jvp=_solve_jvp)


def _solve(A: Tensor, B: Tensor, vector: bool, name: str) -> Tensor:
    a, b = A.data, B.data
    if vector:
        b = b[..., None]
    n = a.shape[-1]
    if b.ndim < 2 or b.shape[-2] != n:
        raise RuntimeError(
            f"{name}: Incompatible shapes of A and B for the equation AX = B "
            f"({a.shape[-2]}x{a.shape[-1]} and {'x'.join(map(str, b.shape[-2:]))})"
        )
    _batch(name, a.shape[:-2], b.shape[:-2])
    raw = A._device.backend.raw
    out = _lapack(name, "The solver failed because the input matrix is singular.", raw.solve, a, b)
    if vector:
        out = out[..., 0]
    return record(
        LinalgSolveExBackward0,
        out,
        A._device,
        (A, B),
        (A,),
        attrs=(vector, tuple(B.data.shape)),
        save_output=True,
    )


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A @ X = B`` (``X @ A = B`` with ``left=False``), as torch.

    ``A`` a square matrix or a batch; ``B`` a batch of matrices, or of
    vectors when it has one dimension fewer than ``A`` (or is 1-D).  Batch
    dimensions broadcast.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.solve(ae.tensor([[2.0, 0.0], [0.0, 4.0]]), ae.tensor([1.0, 1.0])).tolist()
        [0.5, 0.25]
    """
    A = _matrix_arg(A, "torch.linalg.solve")
    B = _rhs_arg(A, B, "torch.linalg.solve")
    if not left:
        if B.data.ndim < 2:
            raise RuntimeError("torch.linalg.solve: with left=False, B must be a matrix")
        return _linalg_mT(solve(_linalg_mT(A), _linalg_mT(B)))
    b = B.data
    vector = b.ndim == 1 or (b.ndim == A.data.ndim - 1 and b.shape == A.data.shape[:-1])
    return _solve(A, B, vector, "torch.linalg.solve")


def _linalg_mT(x: Tensor) -> Tensor:
    return _shape.transpose(x, -2, -1)


def solve_matrix(A: Tensor, B: Any) -> Tensor:
    """``linalg.solve`` with ``B`` always a (batch of) matrix: ``F.solve`` of the rules."""
    B = as_tensor_arg(B, A)
    return _solve(A, B, False, "torch.linalg.solve")


def _det_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's linalg_det_backward for an invertible A: solve(A^T, g * det * I)
    A, d = s
    c = F.expand_dims(F.expand_dims(g * d, -1), -1)
    return (F.solve(_mT(F, A), c * _eye(n, A.shape[-1], A)),)


# forward mode: a weight per element of the matrix, summed over it (NOTE [JVP rules])
_MATRIX = Reduction(lambda a: ((-2, -1), False))
LinalgDetBackward0 = node_class("LinalgDetBackward0", _det_rule, jvp=_MATRIX)


def det(A: Tensor) -> Tensor:
    """The determinant of a square matrix (or of each in a batch), as ``torch.linalg.det``.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.det(ae.tensor([[2.0, 1.0], [1.0, 3.0]])).item()
        5.0
    """
    A = _matrix_arg(A, "linalg.det")
    xp = A._device.backend.xp
    out = xp.linalg.det(A.data)
    return record(LinalgDetBackward0, out, A._device, (A,), (A,), save_output=True)


def _logabsdet_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    (A,) = s
    c = F.expand_dims(F.expand_dims(g, -1), -1)
    return (F.solve(_mT(F, A), c * _eye(n, A.shape[-1], A)),)


LinalgSlogdetBackward0 = node_class("LinalgSlogdetBackward0", _logabsdet_rule, jvp=_MATRIX)


def slogdet(A: Tensor) -> SlogdetResult:
    """The sign and the log of the absolute value of the determinant, as ``torch.linalg.slogdet``.

    A named tuple ``(sign, logabsdet)``; only ``logabsdet`` is differentiable
    (the sign of a real determinant is locally constant).

    Example::

        >>> import aengine as ae
        >>> sign, logabsdet = ae.linalg.slogdet(ae.tensor([[-2.0, 0.0], [0.0, 1.0]]))
        >>> sign.item(), round(logabsdet.item(), 4)
        (-1.0, 0.6931)
    """
    A = _matrix_arg(A, "linalg.slogdet")
    dev = A._device
    sign, logabs = dev.backend.xp.linalg.slogdet(A.data)
    t = record(LinalgSlogdetBackward0, logabs, dev, (A,), (A,))
    return SlogdetResult(wrap(sign, dev), t)


# --- cholesky, qr ------------------------------------------------------------


def _cholesky_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's cholesky_backward: gA = L^-T phi(L^T gL) L^-1, phi symmetrising tril
    (L,) = s
    if n.attrs:  # upper: the factor saved is U = L^T
        L, g = _mT(F, L), _mT(F, g)
    k = L.shape[-1]
    P = F.matmul(_mT(F, L), g) * _tri(n, k, k, 0, g)
    P = 0.5 * (P + _mT(F, P * _tri(n, k, k, -1, g)))
    X = F.solve(_mT(F, L), P)  # L^-T P
    return (_mT(F, F.solve(_mT(F, L), _mT(F, X))),)  # X L^-1


def _cholesky_jvp(ts: Any, ins: Any, out: Tensor, upper: Any, s: Any) -> Any:
    # torch's cholesky_jvp: dL = L phi(L^-1 dA L^-T), phi the lower triangle, half diagonal
    L = _shape.transpose(out, -1, -2) if upper else out
    k = L.data.shape[-1]
    Y = solve_matrix(L, ts[0])
    X = _shape.transpose(solve_matrix(L, _shape.transpose(Y, -1, -2)), -1, -2)
    phi = np.tril(np.ones((k, k), dtype=out.data.dtype)) - 0.5 * np.eye(k, dtype=out.data.dtype)
    dL = _linalg.matmul(L, X * Tensor._make(out._device.backend.asarray(phi), False, out._device))
    return _shape.transpose(dL, -1, -2) if upper else dL


LinalgCholeskyExBackward0 = node_class(
    "LinalgCholeskyExBackward0", _cholesky_rule, jvp=_cholesky_jvp
)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor ``L`` of a symmetric positive-definite ``A = L @ L.mT``, as torch.

    ``upper=True`` gives ``U = L.mT`` (``A = U.mT @ U``).  Only the lower
    triangle of ``A`` is read.  A matrix that is not positive-definite raises
    a RuntimeError (LinAlgError).

    Example::

        >>> import aengine as ae
        >>> ae.linalg.cholesky(ae.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
        [[2.0, 0.0], [1.0, 2.0]]
    """
    A = _matrix_arg(A, "linalg.cholesky")
    xp = A._device.backend.xp
    out = _lapack(
        "linalg.cholesky",
        "The factorization could not be completed because the input is not positive-definite.",
        xp.linalg.cholesky,
        A.data,
    )
    if upper:
        out = xp.ascontiguousarray(xp.swapaxes(out, -1, -2))
    return record(LinalgCholeskyExBackward0, out, A._device, (A,), attrs=upper, save_output=True)


_QR_MODES = ("reduced", "complete", "r")
_QR_R_ERROR = (
    "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
    "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
    "linalg.qr."
)


def _qr_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's linalg_qr_backward
    gQ, gR = g
    Q, R = s
    m, k = Q.shape[-2], R.shape[-1]
    if n.attrs == "complete" and m > k:
        raise RuntimeError(
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."
        )
    if gQ is None and gR is None:
        return (None,)
    if gQ is None:
        gA = F.matmul(gR, _mT(F, R))
    elif gR is None:
        gA = -F.matmul(_mT(F, Q), gQ)
    else:
        gA = F.matmul(gR, _mT(F, R)) - F.matmul(_mT(F, Q), gQ)
    if m >= k:
        T = gA * (1.0 - _tri(n, k, k, -1, gA))  # triu
        S = T + _mT(F, T)
        S = S - 0.5 * S * _eye(n, k, S)
        gA = F.matmul(Q, S)
        if gQ is not None:
            gA = gA + gQ
        return (_mT(F, F.solve(R, _mT(F, gA))),)  # gA R^-T
    X = -gA
    Y = (X - _mT(F, X)) * _tri(n, m, m, 0, X)
    gA = F.matmul(Q, Y)
    R1 = F.getitem(R, (Ellipsis, slice(None), slice(None, m)))
    gA = _mT(F, F.solve(R1, _mT(F, gA)))  # gA R1^-T
    gA = F.cat([gA, F.zeros((*gA.shape[:-1], k - m), gA)], -1)
    if gR is not None:
        gA = gA + F.matmul(Q, gR)
    return (gA,)


def _qr_r_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    raise RuntimeError(_QR_R_ERROR)


LinalgQrBackward0 = node_class("LinalgQrBackward0", _qr_rule, num_outputs=2)
LinalgQrRBackward0 = node_class("LinalgQrBackward0", _qr_r_rule)


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """The QR decomposition ``A = Q @ R`` (Q orthonormal columns, R upper triangular), as torch.

    ``mode``: ``'reduced'`` (Q of shape (m, k), R (k, n), k = min(m, n)),
    ``'complete'`` (Q square) or ``'r'`` (only R; Q is an empty tensor, and R
    is not differentiable, as in torch).  A named tuple ``(Q, R)``.

    Example::

        >>> import aengine as ae
        >>> Q, R = ae.linalg.qr(ae.tensor([[3.0, 1.0], [4.0, 2.0]]))
        >>> [round(v, 4) for v in R[0].tolist()]
        [-5.0, -2.2]
    """
    A = _matrix_arg(A, "linalg.qr", square=False)
    if mode not in _QR_MODES:
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
            "'r', or 'complete'"
        )
    dev = A._device
    xp = dev.backend.xp
    if mode == "r":
        r = xp.linalg.qr(A.data, mode="r")
        q = xp.zeros((0,), dtype=A.data.dtype)
        return QRResult(
            wrap(q, dev),
            record(LinalgQrRBackward0, r, dev, (A,)),
        )
    q, r = xp.linalg.qr(A.data, mode=mode)
    Q, R = _record_outputs(LinalgQrBackward0, [q, r], dev, A, mode)
    return QRResult(Q, R)


# --- eigh, svd, pinv ---------------------------------------------------------


def _eigh_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's linalg_eig_backward, is_hermitian=True
    gL, gV = g
    L, V = s
    if gL is None and gV is None:
        return (None,)
    if gV is None:
        return (F.matmul(V * F.expand_dims(gL, -2), _mT(F, V)),)
    k = V.shape[-1]
    I = _eye(n, k, V)  # noqa: E741
    VhgV = F.matmul(_mT(F, V), gV)
    VhgV = 0.5 * (VhgV - _mT(F, VhgV))
    E = F.expand_dims(L, -2) - F.expand_dims(L, -1) + I
    ret = VhgV / E
    if gL is not None:
        ret = ret + F.expand_dims(gL, -1) * I
    return (F.matmul(V, F.matmul(ret, _mT(F, V))),)


LinalgEighBackward0 = node_class("LinalgEighBackward0", _eigh_rule, num_outputs=2)


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix, as ``torch.linalg.eigh``.

    Only the triangle ``UPLO`` (``'L'`` or ``'U'``) of ``A`` is read.  A named
    tuple ``(eigenvalues, eigenvectors)``, the eigenvectors in the columns.
    Gradients assume distinct eigenvalues.  Each eigenvector's sign is
    fixed: its entry of largest magnitude is positive (torch returns
    LAPACK's sign, which depends on the build).

    Example::

        >>> import aengine as ae
        >>> ae.linalg.eigh(ae.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
        [1.0, 2.0]
    """
    A = _matrix_arg(A, "linalg.eigh")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    dev = A._device
    xp = dev.backend.xp
    w, v = xp.linalg.eigh(A.data, UPLO=UPLO)
    if v.size:
        v = v * _signs(xp, v)
    L, V = _record_outputs(LinalgEighBackward0, [w, v], dev, A, None)
    return EighResult(L, V)


def _svd_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's svd_backward (the real case); full_matrices: the first k vectors
    gU, gS, gVh = g
    U, S, Vh = s
    k = S.shape[-1]
    if n.attrs:  # full_matrices
        cols = (Ellipsis, slice(None), slice(None, k))
        rows = (Ellipsis, slice(None, k), slice(None))
        U, Vh = F.getitem(U, cols), F.getitem(Vh, rows)
        gU = F.getitem(gU, cols) if gU is not None else None
        gVh = F.getitem(gVh, rows) if gVh is not None else None
    m, nn = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        if gS is None:
            return (None,)
        if m >= nn:
            return (F.matmul(U, F.expand_dims(gS, -1) * Vh),)
        return (F.matmul(U * F.expand_dims(gS, -2), Vh),)
    I = _eye(n, k, S)  # noqa: E741
    S2 = S * S
    E = F.expand_dims(S2, -2) - F.expand_dims(S2, -1) + I
    Sr, Sc = F.expand_dims(S, -2), F.expand_dims(S, -1)
    if gU is not None:
        UhgU = F.matmul(_mT(F, U), gU)
        UhgU = UhgU - _mT(F, UhgU)
    if gVh is not None:
        VhgV = F.matmul(Vh, _mT(F, gVh))
        VhgV = VhgV - _mT(F, VhgV)
    if gU is not None and gVh is not None:
        ret = (UhgU * Sr + Sc * VhgV) / E
    elif gU is not None:
        ret = (UhgU / E) * Sr
    else:
        ret = Sc * (VhgV / E)
    if gS is not None:
        ret = ret + F.expand_dims(gS, -1) * I
    if m > nn and gU is not None:
        gA = F.matmul(U, ret)
        gUSinv = gU / Sr
        gA = gA + gUSinv - F.matmul(U, F.matmul(_mT(F, U), gUSinv))
        return (F.matmul(gA, Vh),)
    if m < nn and gVh is not None:
        gA = F.matmul(ret, Vh)
        SinvgVh = gVh / Sc
        gA = gA + SinvgVh - F.matmul(F.matmul(SinvgVh, _mT(F, Vh)), Vh)
        return (F.matmul(U, gA),)
    if m >= nn:
        return (F.matmul(U, F.matmul(ret, Vh)),)
    return (F.matmul(F.matmul(U, ret), Vh),)


LinalgSvdBackward0 = node_class("LinalgSvdBackward0", _svd_rule, num_outputs=3)


def svd(A: Tensor, full_matrices: bool = True, *, driver: Any = None) -> SVDResult:
    """The singular value decomposition ``A = U @ diag(S) @ Vh``, as ``torch.linalg.svd``.

    A named tuple ``(U, S, Vh)``, ``S`` descending.  ``full_matrices=False``
    gives U (m, k) and Vh (k, n) with k = min(m, n).  Gradients (as torch's)
    assume distinct singular values, and, for a non-square A, a full rank;
    with ``full_matrices=True`` only the first k columns of U and rows of Vh
    take a gradient, as torch.  Each pair of singular vectors has a fixed
    sign: the entry of largest magnitude of each column of U is positive
    (torch returns LAPACK's sign, which depends on the build).  ``driver``
    (a cuSOLVER choice in torch) is accepted and ignored.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.svd(ae.tensor([[3.0, 0.0], [0.0, -4.0]])).S.tolist()
        [4.0, 3.0]
    """
    A = _matrix_arg(A, "linalg.svd", square=False)
    dev = A._device
    xp = dev.backend.xp
    u, sv, vh = xp.linalg.svd(A.data, full_matrices=bool(full_matrices))
    k = sv.shape[-1]
    if k:
        u, vh = u.copy(), vh.copy()
        sg = _signs(xp, u[..., :, :k])
        u[..., :, :k] *= sg
        vh[..., :k, :] *= xp.swapaxes(sg, -1, -2)
        if u.shape[-1] > k:
            u[..., :, k:] *= _signs(xp, u[..., :, k:])
        if vh.shape[-2] > k:
            vh[..., k:, :] *= xp.swapaxes(_signs(xp, xp.swapaxes(vh[..., k:, :], -1, -2)), -1, -2)
    U, S, Vh = _record_outputs(LinalgSvdBackward0, [u, sv, vh], dev, A, bool(full_matrices))
    return SVDResult(U, S, Vh)


def _pinv_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's pinv_backward
    A, P = s
    m, k = A.shape[-2], A.shape[-1]
    Ph, gh = _mT(F, P), _mT(F, g)
    if m <= k:
        K = F.matmul(gh, P)
        KPh = F.matmul(K, Ph)
        return (
            -_mT(F, F.matmul(P, K))
            + KPh
            - F.matmul(F.matmul(A, P), KPh)
            + F.matmul(F.matmul(Ph, P), gh - F.matmul(K, A)),
        )
    K = F.matmul(P, gh)
    PhK = F.matmul(Ph, K)
    return (
        -_mT(F, F.matmul(K, P))
        + F.matmul(F.matmul(gh - F.matmul(A, K), P), Ph)
        + PhK
        - F.matmul(F.matmul(PhK, P), A),
    )


LinalgPinvBackward0 = node_class("LinalgPinvBackward0", _pinv_rule)


def _tolerance(xp: Any, sv: Any, shape: tuple[int, ...], atol: Any, rtol: Any) -> Any:
    """torch's cut-off for small singular values: max(atol, rtol * largest)."""
    if rtol is None:
        rtol = np.finfo(sv.dtype).eps * max(shape[-2:]) if not atol else 0.0
    top = sv[..., :1] if sv.shape[-1] else xp.zeros((*sv.shape[:-1], 1), dtype=sv.dtype)
    return xp.maximum(float(atol or 0.0), float(rtol) * top)


def pinv(
    A: Tensor,
    rcond: Any = None,
    hermitian: bool = False,
    *,
    atol: Any = None,
    rtol: Any = None,
) -> Tensor:
    """The Moore-Penrose pseudo-inverse, as ``torch.linalg.pinv``.

    Singular values below ``max(atol, rtol * largest)`` count as zero
    (``rtol`` by default ``eps * max(m, n)``; ``rcond`` is the old name of
    ``rtol``).  ``hermitian`` is accepted; the result is computed by an SVD
    either way.  The gradient (torch's) assumes a constant rank.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.pinv(ae.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    A = _matrix_arg(A, "linalg.pinv", square=False)
    if rcond is not None:
        rtol = rcond
    dev = A._device
    xp = dev.backend.xp
    u, sv, vh = xp.linalg.svd(A.data, full_matrices=False)
    tol = _tolerance(xp, sv, A.data.shape, atol, rtol)
    safe = xp.where(sv > tol, sv, 1.0)
    sinv = xp.where(sv > tol, 1.0 / safe, 0.0).astype(sv.dtype)
    out = xp.matmul(xp.swapaxes(vh, -1, -2), sinv[..., :, None] * xp.swapaxes(u, -1, -2))
    return record(LinalgPinvBackward0, out, dev, (A,), (A,), save_output=True)


# --- solve_triangular, lstsq -------------------------------------------------


def _triangle(n: Any, A: Any, upper: bool, unit: bool) -> tuple[Any, Any]:
    """The mask of ``A``'s triangle that is read, and the unit diagonal (or None)."""
    k = A.shape[-1]
    off = 1 if unit else 0
    mask = 1.0 - _tri(n, k, k, off - 1, A) if upper else _tri(n, k, k, -off, A)
    return mask, (_eye(n, k, A) if unit else None)


def _solve_triangular_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    # torch's linalg_solve_triangular_backward
    A, X = s
    upper, left, unit, bshape = n.attrs
    mask, eye = _triangle(n, A, upper, unit)
    T = A * mask if eye is None else A * mask + eye
    if left:
        gB = F.solve(_mT(F, T), g)
    else:
        gB = _mT(F, F.solve(T, _mT(F, g)))
    gA = None
    if n.needs[0]:
        gA = -F.matmul(gB, _mT(F, X)) if left else -F.matmul(_mT(F, X), gB)
        gA = F.sum_to(gA * mask, tuple(A.shape))
    return (gA, F.sum_to(gB, bshape) if n.needs[1] else None)


LinalgSolveTriangularBackward0 = node_class(
    "LinalgSolveTriangularBackward0", _solve_triangular_rule
)


class _Dev:
    """What ``_triangle`` reads of a node: the device."""

    def __init__(self, dev: Any) -> None:
        self.dev = dev


def solve_triangular(
    A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """The solution of ``A @ X = B`` (``X @ A = B`` with ``left=False``) for triangular ``A``.

    As ``torch.linalg.solve_triangular``: ``upper`` (keyword, required) says
    which triangle of ``A`` is read; ``unitriangular`` takes its diagonal as
    ones.  ``B`` is a (batch of) matrix; batch dimensions broadcast.

    Example::

        >>> import aengine as ae
        >>> A = ae.tensor([[2.0, 0.0], [1.0, 1.0]])
        >>> ae.linalg.solve_triangular(A, ae.tensor([[2.0], [2.0]]), upper=False).tolist()
        [[1.0], [1.0]]
    """
    name = "linalg.solve_triangular"
    A = _matrix_arg(A, name)
    B = _rhs_arg(A, B, name)
    a, b = A.data, B.data
    if b.ndim < 2:
        raise RuntimeError(
            f"{name}: The input tensor B must have at least 2 dimensions; "
            f"got a {b.ndim}-D tensor (use B.unsqueeze(-1) for a vector)"
        )
    k = a.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != k:
        raise RuntimeError(
            f"{name}: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({a.shape[-2]}x{k} and "
            f"{b.shape[-2]}x{b.shape[-1]})"
        )
    _batch(name, a.shape[:-2], b.shape[:-2])
    dev = A._device
    mask, eye = _triangle(_Dev(dev), a, bool(upper), bool(unitriangular))
    t = a * mask if eye is None else a * mask + eye
    raw = dev.backend.raw
    msg = "The solver failed because the input matrix is singular."
    if left:
        out = _lapack(name, msg, raw.solve, t, b)
    else:
        sw = dev.backend.xp.swapaxes
        out = sw(_lapack(name, msg, raw.solve, sw(t, -1, -2), sw(b, -1, -2)), -1, -2)
    attrs = (bool(upper), bool(left), bool(unitriangular), tuple(b.shape))
    return record(
        LinalgSolveTriangularBackward0, out, dev, (A, B), (A,), attrs=attrs, save_output=True
    )


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: Any = None, *, driver: Any = None) -> LstsqResult:
    """The least-squares solution of ``A @ X = B``, as ``torch.linalg.lstsq`` on the CPU.

    A named tuple ``(solution, residuals, rank, singular_values)`` with
    torch's CPU conventions per ``driver`` (default ``'gelsy'``):
    ``residuals`` (the squared residuals) only when m > n, A has full rank
    and the driver is not gelsy; ``rank`` except for gels;
    ``singular_values`` for gelsd and gelss; otherwise empty tensors.  The
    solution is ``pinv(A) @ B`` (the minimum-norm one); its gradient is
    torch's, which assumes a full-rank A.

    Example::

        >>> import aengine as ae
        >>> A = ae.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> ae.linalg.lstsq(A, ae.tensor([[1.0], [2.0], [3.0]])).solution.tolist()
        [[1.0], [2.0]]
    """
    name = "torch.linalg.lstsq"
    A = _matrix_arg(A, name, square=False)
    B = _rhs_arg(A, B, name)
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError(
            f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
            f"got {driver!r}"
        )
    a, b = A.data, B.data
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    m, n = a.shape[-2], a.shape[-1]
    rows = b.shape[-1] if vector else b.shape[-2] if b.ndim > 1 else None
    if rows != m:
        raise RuntimeError(
            f"{name}: input.size(-2) should match other.size(-2), got {m} and {rows}"
        )
    B2 = _shape.unsqueeze(B, -1) if vector else B
    P = pinv(A, rtol=rcond)
    X = _linalg.matmul(P, B2)
    dev = A._device
    xp = dev.backend.xp
    sv = xp.linalg.svd(a, compute_uv=False)
    tol = _tolerance(xp, sv, a.shape, None, rcond)
    rank = (sv > tol).sum(axis=-1).astype(np.int64)
    empty = Tensor._make(xp.zeros((0,), dtype=a.dtype), False, dev)
    residuals = empty
    if m > n and driver != "gelsy" and bool((rank == n).all()):
        r = _linalg.matmul(A, X) - B2
        residuals = _reduce.sum(r * r, -2)
    rank_t = Tensor._make(
        xp.asarray(rank) if driver != "gels" else xp.zeros((0,), np.int64), False, dev
    )
    sv_t = Tensor._make(xp.asarray(sv), False, dev) if driver in ("gelsd", "gelss") else empty
    solution = _shape.reshape(X, tuple(X.data.shape[:-1])) if vector else X
    return LstsqResult(solution, residuals, rank_t, sv_t)


# --- the table ---------------------------------------------------------------


def _spd(m: Maker, *shape: int) -> np.ndarray:
    """A symmetric positive-definite matrix (or batch): X X^T + n I."""
    x = m.float_arr(*shape)
    k = shape[-1]
    return np.asarray(x @ np.swapaxes(x, -1, -2) + k * np.eye(k), dtype=x.dtype)


def _wc(m: Maker, *shape: int) -> np.ndarray:
    """A well-conditioned square matrix (or batch): random + n I."""
    x = m.float_arr(*shape)
    return np.asarray(x + shape[-1] * np.eye(shape[-1]), dtype=x.dtype)


def _sym(m: Maker, *shape: int) -> np.ndarray:
    """A symmetric matrix with well-separated eigenvalues."""
    k = shape[-1]
    q, _ = np.linalg.qr(m.float_arr(*shape))
    w = np.arange(1, k + 1) * 1.5 - k / 2.0
    x = (q * w) @ np.swapaxes(q, -1, -2)
    return np.asarray((x + np.swapaxes(x, -1, -2)) / 2, dtype=m.dtype if m.floating else "float64")


def _inv_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_wc(m, 3, 3),))
    yield Sample((_wc(m, 2, 4, 4),), note="batched")
    yield Sample((_wc(m, 1, 1),), note="1x1")


def _square_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3),), match="square")
    yield ErrorCase((m.arr(3),), match="at least 2 dimensions")
    yield ErrorCase((m.arr(2, 2).astype("int64"),), match="floating point")


def _inv_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from _square_errors(m)
    yield ErrorCase((np.ones((2, 2), dtype=m.dtype),), match="singular")


def _solve_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_wc(m, 3, 3), m.arr(3, 2)))
    yield Sample((_wc(m, 3, 3), m.arr(3)), note="vector")
    yield Sample((_wc(m, 2, 3, 3), m.arr(2, 3)), note="batch of vectors")
    yield Sample((_wc(m, 2, 3, 3), m.arr(3, 4)), note="broadcast B")
    yield Sample((_wc(m, 3, 3), m.arr(2, 3, 1)), note="broadcast A")
    yield Sample((_wc(m, 3, 3), m.arr(2, 3)), {"left": False}, note="left=False")


def _solve_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((_wc(m, 3, 3), m.arr(2, 2)), match="Incompatible shapes")
    yield ErrorCase((np.ones((2, 2), dtype=m.dtype), m.arr(2)), match="singular")
    yield ErrorCase((m.arr(2, 3), m.arr(2)), match="square")


def _det_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_wc(m, 3, 3),))
    yield Sample((_wc(m, 2, 3, 3),), note="batched")
    yield Sample((m.arr(3, 3) - 3 * np.eye(3, dtype=m.dtype),), note="negative determinant")


def _cholesky_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_spd(m, 3, 3),))
    yield Sample((_spd(m, 2, 3, 3),), note="batched")
    yield Sample((_spd(m, 4, 4),), {"upper": True}, note="upper")


def _cholesky_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from _square_errors(m)
    yield ErrorCase((-np.eye(2, dtype=m.dtype),), match="positive-definite")


def _qr_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(4, 3),), note="tall")
    yield Sample((m.arr(3, 3),), note="square")
    yield Sample((m.arr(3, 5),), note="wide")
    yield Sample((m.arr(2, 4, 3),), note="batched")
    yield Sample((m.arr(3, 5),), {"mode": "complete"}, note="complete, wide")
    yield Sample((m.arr(3, 3),), {"mode": "complete"}, note="complete, square")
    yield Sample((m.arr(5, 3),), {"mode": "complete"}, grad=(), note="complete, tall")
    yield Sample((m.arr(4, 3),), {"mode": "r"}, grad=(), note="mode='r' (not differentiable)")


def _qr_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 3),), {"mode": "bad"}, match="unrecognized mode")
    yield ErrorCase((m.arr(3),), match="at least 2 dimensions")


def _eigh_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_sym(m, 3, 3),))
    yield Sample((_sym(m, 2, 4, 4),), note="batched")
    yield Sample((_sym(m, 3, 3),), {"UPLO": "U"}, note="UPLO='U'")


def _eigh_errors(m: Maker) -> Iterator[ErrorCase]:
    yield from _square_errors(m)
    yield ErrorCase((m.arr(2, 2),), {"UPLO": "X"}, match="UPLO")


def _distinct_sv(m: Maker, *shape: int) -> np.ndarray:
    """A matrix with well-separated singular values (5, 4, 3...)."""
    r, c = shape[-2], shape[-1]
    k = min(r, c)
    u, _ = np.linalg.qr(m.float_arr(*shape[:-2], r, r))
    v, _ = np.linalg.qr(m.float_arr(*shape[:-2], c, c))
    s = np.zeros((*shape[:-2], r, c))
    for i in range(k):
        s[..., i, i] = k + 1.0 - i
    return np.asarray(u @ s @ v, dtype=m.dtype if m.floating else "float64")


def _svd_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_distinct_sv(m, 4, 3),), {"full_matrices": False}, note="tall")
    yield Sample((_distinct_sv(m, 3, 3),), note="square")
    yield Sample((_distinct_sv(m, 3, 5),), {"full_matrices": False}, note="wide")
    yield Sample((_distinct_sv(m, 2, 4, 3),), {"full_matrices": False}, note="batched")
    yield Sample((_distinct_sv(m, 4, 3),), note="full_matrices, tall")
    yield Sample((_distinct_sv(m, 3, 4),), note="full_matrices, wide")


def _svd_torch(torch: Any) -> Any:
    """torch.linalg.svd with aengine's signs (NOTE [Signs of eigenvectors and singular vectors])."""

    def fn(A: Any, full_matrices: bool = True) -> Any:
        U, S, Vh = torch.linalg.svd(A, full_matrices=full_matrices)
        k = S.shape[-1]

        def signs(V: Any) -> Any:
            idx = V.detach().abs().argmax(dim=-2, keepdim=True)
            top = V.detach().gather(-2, idx)
            return torch.where(top < 0, -1.0, 1.0).to(V.dtype)

        sg = signs(U[..., :, :k])
        parts_u = [U[..., :, :k] * sg]
        parts_v = [Vh[..., :k, :] * sg.mT]
        if U.shape[-1] > k:
            parts_u.append(U[..., :, k:] * signs(U[..., :, k:]))
        if Vh.shape[-2] > k:
            parts_v.append(Vh[..., k:, :] * signs(Vh[..., k:, :].mT).mT)
        return torch.cat(parts_u, -1), S, torch.cat(parts_v, -2)

    return fn


def _eigh_torch(torch: Any) -> Any:
    """torch.linalg.eigh with aengine's signs of eigenvectors."""

    def fn(A: Any, UPLO: str = "L") -> Any:
        L, V = torch.linalg.eigh(A, UPLO=UPLO)
        idx = V.detach().abs().argmax(dim=-2, keepdim=True)
        top = V.detach().gather(-2, idx)
        return L, V * torch.where(top < 0, -1.0, 1.0).to(V.dtype)

    return fn


def _pinv_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_distinct_sv(m, 4, 3),), note="tall")
    yield Sample((_distinct_sv(m, 3, 3),), note="square")
    yield Sample((_distinct_sv(m, 3, 5),), note="wide")
    yield Sample((_distinct_sv(m, 2, 4, 3),), note="batched")
    yield Sample((_distinct_sv(m, 4, 3),), {"rtol": 0.1}, note="rtol")


def _pinv_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3),), match="at least 2 dimensions")


def _tri_sample(m: Maker, *shape: int, upper: bool) -> np.ndarray:
    x = _wc(m, *shape)
    return np.triu(x) if upper else np.tril(x)


def _solve_triangular_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_tri_sample(m, 3, 3, upper=True), m.arr(3, 2)), {"upper": True})
    yield Sample((_tri_sample(m, 3, 3, upper=False), m.arr(3, 2)), {"upper": False})
    yield Sample((_wc(m, 3, 3), m.arr(3, 2)), {"upper": True}, note="reads one triangle")
    yield Sample((_wc(m, 3, 3), m.arr(2, 3)), {"upper": False, "left": False}, note="left=False")
    yield Sample(
        (_wc(m, 3, 3), m.arr(3, 2)), {"upper": False, "unitriangular": True}, note="unitriangular"
    )
    yield Sample((_wc(m, 2, 3, 3), m.arr(3, 1)), {"upper": True}, note="broadcast B")


def _solve_triangular_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((_wc(m, 3, 3), m.arr(2, 2)), {"upper": True}, match="Incompatible shapes")
    yield ErrorCase((_wc(m, 3, 3), m.arr(3, 2)), exc=TypeError, match="upper", torch_same=True)


def _lstsq_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((_distinct_sv(m, 5, 3), m.arr(5, 2)), note="tall, gelsy")
    yield Sample((_distinct_sv(m, 5, 3), m.arr(5)), note="vector B")
    yield Sample((_distinct_sv(m, 3, 3), m.arr(3, 2)), note="square")
    yield Sample((_distinct_sv(m, 2, 5, 3), m.arr(2, 5, 2)), note="batched")
    yield Sample((_distinct_sv(m, 5, 3), m.arr(5, 2)), {"driver": "gelsd"}, note="gelsd")
    yield Sample((_distinct_sv(m, 5, 3), m.arr(5, 2)), {"driver": "gels"}, note="gels")
    yield Sample((_distinct_sv(m, 5, 3), m.arr(5, 2)), {"driver": "gelss"}, note="gelss")


def _lstsq_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(5, 3), m.arr(4, 2)), match="should match")
    yield ErrorCase((m.arr(5, 3), m.arr(5, 2)), {"driver": "bad"}, match="driver")


_SIGN_NOTE = (
    "Eigenvectors/singular vectors have a fixed sign (the entry of largest magnitude of "
    "each column of the vectors is positive), where torch returns its LAPACK's; the tests "
    "compare with torch's results normalised the same way."
)

register(
    OpInfo("linalg.inv", inv, _inv_samples, errors=_inv_errors),
    OpInfo(
        "linalg.solve",
        solve,
        _solve_samples,
        errors=_solve_errors,
        notes="``left=False`` is solved as the transposed left system.",
    ),
    OpInfo(
        "linalg.det",
        det,
        _det_samples,
        errors=_square_errors,
        notes="The gradient is torch's for an invertible matrix (solve with A^T); torch "
        "switches to an SVD formula at singular matrices, aengine does not.",
    ),
    OpInfo("linalg.slogdet", slogdet, _det_samples, errors=_square_errors),
    OpInfo(
        "linalg.cholesky",
        cholesky,
        _cholesky_samples,
        errors=_cholesky_errors,
        gradcheck=False,
        notes="gradcheck off: the factor reads one triangle of A, the gradient is symmetric "
        "(as torch's); tests/ops/test_linalg_table.py checks it on symmetric perturbations.",
    ),
    OpInfo(
        "linalg.qr",
        qr,
        _qr_samples,
        forward_ad=False,
        errors=_qr_errors,
        notes="Q and R are LAPACK's (geqrf), the same signs as torch's.",
    ),
    OpInfo(
        "linalg.eigh",
        eigh,
        _eigh_samples,
        forward_ad=False,
        torch=_eigh_torch,
        errors=_eigh_errors,
        gradcheck=False,
        notes=_SIGN_NOTE + " gradcheck off: only one triangle is read; "
        "tests/ops/test_linalg_table.py checks it on symmetric perturbations.",
    ),
    OpInfo(
        "linalg.svd",
        svd,
        _svd_samples,
        forward_ad=False,
        torch=_svd_torch,
        errors=_pinv_errors,
        tol={"float32": (1e-3, 1e-4)},
        notes=_SIGN_NOTE + " ``driver`` is ignored.",
    ),
    OpInfo(
        "linalg.pinv",
        pinv,
        _pinv_samples,
        forward_ad=False,
        errors=_pinv_errors,
        tol={"float32": (1e-3, 1e-4)},
        notes="Computed by an SVD also for ``hermitian=True``.",
    ),
    OpInfo(
        "linalg.solve_triangular",
        solve_triangular,
        _solve_triangular_samples,
        forward_ad=False,
        errors=_solve_triangular_errors,
        notes="The forward solves the masked triangle with the backend's general solver.",
    ),
    OpInfo(
        "linalg.lstsq",
        lstsq,
        _lstsq_samples,
        forward_ad=False,
        errors=_lstsq_errors,
        tol={"float32": (1e-3, 1e-4)},
        notes="torch's CPU results per driver; the solution is pinv(A) @ B, its gradient "
        "torch's (full-rank A).",
    ),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "linalg.inv": "leading:-1",
        "linalg.det": "leading:-1",
        "linalg.slogdet": "leading:-1",
        "linalg.cholesky": "leading:-1",
        "linalg.qr": "leading:-1",
        "linalg.eigh": "leading:-1",
        "linalg.svd": "leading:-1",
        "linalg.pinv": "leading:-1",
    }
)
