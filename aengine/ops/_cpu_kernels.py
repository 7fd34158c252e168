"""Faster numpy kernels for large arrays: erf, gelu, a masked gradient, cumsum, trailing sums.

# NOTE [A float32 erf for numpy]
# scipy.special.erf evaluates the float64 Cephes erf element by element
# (about 20 ns an element, 20 ms for a million): most of the time of ``erf``.
# For large float32 arrays on numpy these kernels evaluate instead a
# rational approximation ``erf(x) = x P(x^2) / Q(x^2)`` (P and Q of degree
# 6, x clamped to +-4, where erf rounds to +-1 in float32) in float64, in
# chunks that stay in the cache, rounding once to float32 at the end.  Its
# relative error is below 1e-9 (the coefficients come from a weighted
# linearised least-squares fit of erf(x) / x on [0, 4]), so the float32
# result is the correctly rounded erf but for rare ties of half an ulp
# (tests/ops/test_cpu_kernels.py checks a dense float32 grid of [-6, 6]
# within 0.52 ulp of float64 erf); beyond the clamp it is exactly +-1.  The
# numerator and the denominator are one product: their coefficients times
# the rows of powers of z (a BLAS call where Horner's scheme would take 24
# passes over the chunk; the monomials lose nothing in float64 here, the
# terms being of one sign or small).  gelu has a float32 kernel of its
# own (NOTE [A float32 gelu for numpy]).
#
# Other dtypes, small arrays (where the chunk loop's calls would cost more
# than scipy's kernel) and other backends (CuPy's erf is a fast GPU kernel)
# keep ``backend.special.erf``: ``fast(a)`` says which.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "fast",
    "erf32",
    "gelu32",
    "gelu32_grad",
    "where_zero",
    "cumsum_last",
    "SCAN_MIN_SIZE",
    "sum_trailing",
    "sum_leading",
    "max_trailing",
    "SUM_MIN_SIZE",
]

#: arrays smaller than this keep scipy's erf and numpy's where (a call each, cheaper there)
_MIN_SIZE = 4096
#: elements per chunk: the chunk's float64 buffers (9 rows of it) stay in the L2 cache
_CHUNK = 1 << 15
#: beyond this |x|, float32 erf(x) is +-1 (erf(4) = 1 - 1.5e-8, clear of the rounding midpoint
#: 1 - 3e-8)
_CLAMP = 4.0
#: the coefficients of P (row 0) and Q (row 1) of powers 0 to 6 of z = x * x
_PQ = np.array(
    [
        [
            1.1283791681050155,
            0.16674375508263936,
            0.05090588719180668,
            0.0029477960345031884,
            0.000304969811168492,
            -3.3740747588815184e-07,
            -4.511424561257636e-08,
        ],
        [
            1.0,
            0.48110617630549163,
            0.10548263463689118,
            0.013472901780711468,
            0.0010372524083195312,
            4.076740152791686e-05,
            -6.257690144836244e-07,
        ],
    ]
)


def fast(a: Any) -> bool:
    """Whether ``a`` takes ``erf32``: a numpy float32 array of at least ``_MIN_SIZE`` elements."""
    return a.__class__ is np.ndarray and a.dtype == np.float32 and a.size >= _MIN_SIZE


def erf32(a: Any, out: Any = None) -> Any:
    """erf of a float32 numpy array (``fast(a)``), as float32 (NOTE [A float32 erf for numpy]).

    The result goes to ``out`` (a float32 array of ``a``'s shape, which may be
    ``a`` itself: each chunk is read before it is written) where it is
    C-contiguous, else to a new array; the result is returned.
    """
    src = a.reshape(-1)
    if out is None or not out.flags.c_contiguous:
        out = np.empty(a.shape, np.float32)
    dst = out.reshape(-1)
    n = src.size
    m = min(n, _CHUNK)
    x, powers, pq = np.empty(m), np.empty((7, m)), np.empty((2, m))
    powers[0] = 1.0
    for i in range(0, n, m):
        j = min(i + m, n)
        if j - i < m:  # the last, shorter chunk
            m = j - i
            x, powers, pq = x[:m], np.ascontiguousarray(powers[:, :m]), pq[:, :m]
        np.clip(src[i:j], -_CLAMP, _CLAMP, out=x)  # (float32 in, float64 out)
        z = np.multiply(x, x, out=powers[1])
        for k in range(2, 7):
            np.multiply(powers[k - 1], z, out=powers[k])
        p, q = np.matmul(_PQ, powers, out=pq)  # P and Q in one product
        p *= x
        np.divide(p, q, out=dst[i:j])  # (rounded once, to float32)
    return out


# NOTE [A float32 gelu for numpy]
# Exact gelu, ``x * Phi(x)`` (Phi: the normal CDF), took two erf32 calls a
# step for each layer (forward and backward), each ~40 float64 passes over
# the array, and the backward's float64 chunk buffers (2.6 MB) made the
# peak of a transformer's training step.  For large float32 arrays gelu
# and its gradient are float32 kernels of their own, evaluated in chunks
# that stay in the L2 cache (their temporaries are two chunks):
#
#   Phi(x) = 1 / (1 + exp(x T(x^2))),
#
# T a polynomial of degree 6 (Horner's scheme, float32), fitted to
# -logit(Phi(x)) / x on [0, 5.5] (weighted least squares, iterated to the
# minimax of Phi's error; the fit is within 3e-8 and the float32 evaluation
# dominates).  One exp and a division replace erf's rational, and Phi of a
# negative x keeps its relative accuracy (``1 + erf`` loses it).  gelu is
# ``x / (1 + exp(x T))``; its gradient ``Phi(x) + x phi(x)`` takes phi's
# exact ``exp(-x^2 / 2) / sqrt(2 pi)``, whose ``x^2`` is T's.  On a dense
# grid the results are within 5 ulp of float64 for x > -1, 18 ulp for
# x > -2, 170 ulp for x > -3, and 6e-7 absolute everywhere (torch's own
# float32 gelu, whose erf is a short approximation: 5, 38 and 2200 ulp,
# 1.2e-6; tests/ops/test_cpu_kernels.py).  Beyond the fit T keeps growing
# (its leading coefficient is positive, x T(x^2) is 18.2 at 5.5 and rises):
# for x >= 5.5 exp(-x T) < 3e-8, so gelu is x exactly (as torch's); below
# -5.5 the result is under 1e-7 in magnitude and reaches -0.0 (torch's
# value) by x = -8, where exp overflows to inf.  nan gives nan; inf gives
# inf (as aengine's small-array formula; torch's kernel gives nan) and -inf
# nan (as torch's).
#: -T's coefficients, from x^0 to x^12: Phi(x) = 1 / (1 + exp(x * sum(c_k x^2k)))
_GELU_T = (
    -1.595770001411438,
    -0.07266560941934586,
    6.464213220169768e-05,
    0.00011082308628829196,
    -7.96557742432924e-06,
    2.672558707672579e-07,
    -3.585704844155657e-09,
)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: elements per chunk of the gelu kernels: their chunk-sized operands stay in the L2 cache
_GELU_CHUNK = 1 << 15


def _gelu_denominator(x: Any, z: Any, t: Any) -> None:
    """``t = 1 + exp(x T(z))``, Phi(x)'s denominator, for ``z = x * x`` (chunks of float32)."""
    c = _GELU_T
    np.multiply(z, c[6], out=t)
    for k in range(5, 0, -1):
        t += c[k]
        t *= z
    t += c[0]
    t *= x
    np.exp(t, out=t)  # (inf for x below about -8: Phi is 0)
    t += 1.0


def gelu32(a: Any) -> Any:
    """Exact gelu of a float32 numpy array (``fast(a)``), a new C-contiguous float32 array.

    NOTE [A float32 gelu for numpy].
    """
    src = np.ascontiguousarray(a).reshape(-1)
    out = np.empty(a.shape, np.float32)
    dst = out.reshape(-1)
    n = src.size
    m = min(n, _GELU_CHUNK)
    z, t = np.empty(m, np.float32), np.empty(m, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(0, n, m):
            j = min(i + m, n)
            x = src[i:j]
            if j - i < m:
                z, t = z[: j - i], t[: j - i]
            np.multiply(x, x, out=z)
            _gelu_denominator(x, z, t)
            np.divide(x, t, out=dst[i:j])
    return out


def gelu32_grad(a: Any, g: Any) -> Any:
    """``g * (Phi(a) + a phi(a))``, exact gelu's gradient, for float32 numpy ``a`` (``fast(a)``).

    A new float32 array of ``a``'s shape (NOTE [A float32 gelu for numpy]); ``g``
    may be of any layout or broadcastable shape.
    """
    src = np.ascontiguousarray(a).reshape(-1)
    out = np.empty(a.shape, np.float32)
    dst = out.reshape(-1)
    fused = (
        g.__class__ is np.ndarray
        and g.dtype == np.float32
        and g.shape == a.shape
        and g.flags.c_contiguous
    )
    gs = g.reshape(-1) if fused else None
    n = src.size
    m = min(n, _GELU_CHUNK)
    z, t = np.empty(m, np.float32), np.empty(m, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(0, n, m):
            j = min(i + m, n)
            x = src[i:j]
            if j - i < m:
                z, t = z[: j - i], t[: j - i]
            np.multiply(x, x, out=z)
            _gelu_denominator(x, z, t)
            np.divide(1.0, t, out=t)  # Phi(x)
            z *= -0.5
            np.exp(z, out=z)
            z *= x
            z *= _INV_SQRT_2PI  # x phi(x)
            if gs is None:
                np.add(t, z, out=dst[i:j])
            else:
                t += z
                np.multiply(t, gs[i:j], out=dst[i:j])
    if gs is None:
        out *= g
    return out


def where_zero(mask: Any, g: Any) -> Any:
    """``where(mask, g, 0)`` for a large numpy float array ``g`` (None for other arrays).

    # NOTE [A branch-free masked gradient]
    # numpy's ``where`` branches on each element: on a random mask (relu's
    # backward: half the inputs positive) mispredictions make it ~8 ms for 2M
    # float32, against ~1 ms here: the mask as integers 0 / -1 (all bits set)
    # ANDed with the bits of ``g``.  Exactly ``where``'s values (+0.0 where the
    # mask is False), unlike ``g * mask``, which turns an inf or a nan of ``g``
    # under a False into nan.
    """
    if g.__class__ is not np.ndarray or g.size < _MIN_SIZE or g.dtype.kind != "f":
        return None  # (small: numpy's where, one call)
    bits = np.dtype(f"i{g.dtype.itemsize}")
    r = mask.astype(bits)
    np.negative(r, out=r)
    np.bitwise_and(r, g.view(bits), out=r)
    return r.view(g.dtype)


# NOTE [A blocked cumsum]
# numpy's cumsum along a contiguous axis adds one element at a time (~3.5 ns
# an element: 3.5 ms for 1M float32); along another axis it walks the array
# across cache lines (worse).  For large float arrays scanned along their
# last axis, in blocks of ``_SCAN_BLOCK`` elements: the scan within every
# block is one product with a triangular matrix of ones (BLAS, all blocks
# at once), then each block adds the running total of the blocks before it
# (a cumsum of the block totals, 1 / _SCAN_BLOCK of the data).  The sums
# are grouped differently (by block: closer to the exact prefix sums than
# the one-by-one float32 additions, which torch's kernel, accumulating in
# float64, also is).  A product would spread an inf or a nan over its block
# (inf * 0), so arrays that hold one take numpy's scan.
_SCAN_BLOCK = 32
#: the smallest array and scanned axis that take the blocked scan
SCAN_MIN_SIZE = 1 << 16
_SCAN_MIN_LEN = 4 * _SCAN_BLOCK


def cumsum_last(a: Any, reverse: bool) -> Any:
    """cumsum of numpy ``a`` along its last axis (from the end if ``reverse``), or None.

    The blocked scan of NOTE [A blocked cumsum] where it applies: a C-contiguous
    float32 / float64 array of at least ``SCAN_MIN_SIZE`` elements, its last
    axis at least ``_SCAN_MIN_LEN`` long and a multiple of ``_SCAN_BLOCK``, and
    all finite.  None otherwise (the caller takes numpy's cumsum).
    """
    b = _SCAN_BLOCK
    if (
        a.__class__ is not np.ndarray
        or a.dtype.type not in (np.float32, np.float64)
        or a.size < SCAN_MIN_SIZE
        or a.shape[-1] < _SCAN_MIN_LEN
        or a.shape[-1] % b
        or not a.flags.c_contiguous
        or not np.isfinite(a).all()
    ):
        return None
    ones = np.ones((b, b), a.dtype)
    # column j of the product sums the block's elements i <= j (reversed: i >= j)
    tri = np.tril(ones) if reverse else np.triu(ones)
    out = np.matmul(a.reshape(-1, b), tri).reshape(-1, a.shape[-1] // b, b)
    if reverse:  # the totals of the blocks after each block, added to it
        after = np.cumsum(out[:, :0:-1, 0], axis=1)[:, ::-1]
        out[:, :-1] += after[:, :, None]
    else:  # the totals of the blocks before each block
        before = np.cumsum(out[:, :-1, -1], axis=1)
        out[:, 1:] += before[:, :, None]
    return out.reshape(a.shape)


# NOTE [A faster float sum over trailing dims]
# numpy's float sum (pairwise, 8 scalar accumulators over blocks of 128)
# runs at ~5 G elements/s; its einsum reduces with SIMD accumulators, 2-3x
# faster but, alone, with an error that grows with the row (one accumulator
# adds row / 64 terms in turn).  Large sums over the trailing dims of a
# C-contiguous float array take both: einsum within blocks of 128 to 512
# elements (a divisor of the summed size), then numpy's pairwise sum of the
# blocks' sums.  The error stays that of numpy's sum (a few terms in turn,
# then a tree); the rounding differs in the last bits.
#
# Short rows are the other slow case: numpy's reduce along the last axis
# costs ~0.1 us a row whatever its length (57 us for 512 rows of 64, the
# statistics of a layer norm; as much for a softmax's rows), and its sum
# over the leading axes (a norm's weight gradient) walks row by row too.
# Sums of rows of at most 512 elements (64 rows or more: fewer cost numpy
# less than the product's call), and column sums of as many C-contiguous
# rows, are one matrix-vector product with a vector of ones (BLAS, ~3 us
# there): SIMD accumulators over the row, the error of the einsum blocks
# above.
_SUM_BLOCKS = range(512, 127, -1)
#: the smallest array that takes the blocked sum (smaller: numpy's sum as it is)
SUM_MIN_SIZE = 1 << 16
#: the longest rows (and columns' rows) summed by a product with ones
_ROW_MAX = 512
#: ... when there are at least this many of them (fewer: numpy's sum costs less than the call)
_ROW_MIN = 64
_ONES: dict[tuple[int, Any], Any] = {}


def _ones(n: int, dtype: Any) -> Any:
    """A read-only float vector of ``n`` ones (cached: the norms take the same few sizes)."""
    key = (n, dtype)
    v = _ONES.get(key)
    if v is None:
        v = np.ones(n, dtype)
        v.flags.writeable = False
        if len(_ONES) < 64:
            _ONES[key] = v
    return v


def _summable(a: Any) -> bool:
    """A numpy float32 / float64 C-contiguous array with elements: the sums' fast paths."""
    return (
        a.__class__ is np.ndarray
        and a.dtype.type in (np.float32, np.float64)
        and a.size > 0
        and a.flags.c_contiguous
    )


def sum_leading(a: Any, lead: int) -> Any:
    """``a.sum(axis=tuple(range(lead)))``: the sum over the first ``lead`` dims (a new array).

    A product with ones where NOTE [A faster float sum...] applies (rows of at
    most ``_ROW_MAX`` elements), else numpy's sum.
    """
    inner = math.prod(a.shape[lead:])
    if lead == 0 or not _summable(a) or inner > _ROW_MAX or a.size < _ROW_MIN * inner:
        return a.sum(axis=tuple(range(lead)))
    rows = a.size // inner
    return (_ones(rows, a.dtype) @ a.reshape(rows, inner)).reshape(a.shape[lead:])


def sum_trailing(a: Any, dims: tuple[int, ...], keepdims: bool) -> Any:
    """``a.sum(axis=dims, keepdims=keepdims)``, blocked where NOTE [A faster float sum...] applies.

    That is: a numpy float32 / float64 C-contiguous array, ``dims`` its last
    dims (in order), and either their size at most ``_ROW_MAX`` (a product
    with ones) or the array of at least ``SUM_MIN_SIZE`` elements and their
    size a multiple of a block size (128 to 512).
    """
    if (
        a.size < _ROW_MIN
        or not dims
        or not _summable(a)
        or dims != tuple(range(a.ndim - len(dims), a.ndim))
    ):
        return a.sum(axis=dims, keepdims=keepdims)
    nd, k = a.ndim, len(dims)
    inner = math.prod(a.shape[nd - k :])
    lead = a.shape[: nd - k]
    if inner <= _ROW_MAX and a.size >= _ROW_MIN * inner:
        out = a.reshape(-1, inner) @ _ones(inner, a.dtype)
        return out.reshape(lead + (1,) * k if keepdims else lead)
    block = next((b for b in _SUM_BLOCKS if inner % b == 0), 0)
    if a.size < SUM_MIN_SIZE or not block:
        return a.sum(axis=dims, keepdims=keepdims)
    blocks = np.einsum("ijk->ij", a.reshape(-1, inner // block, block))
    out = blocks.sum(axis=1)
    return out.reshape(lead + (1,) * k if keepdims else lead)


#: rows of at most this many elements take ``max_trailing``'s transposed maximum
_MAX_ROW = 64
#: ... when there are at least this many of them
_MAX_ROWS = 256


def max_trailing(a: Any, dims: tuple[int, ...]) -> Any:
    """``a.max(axis=dims, keepdims=True)`` over trailing ``dims``; faster for many short rows.

    numpy's maximum along the last axis costs ~0.1 us a row (188 us for a
    softmax over 2048 rows of 16: the attention weights of a small
    transformer); over the rows of the transposed copy it is one vectorised
    pass per column (about 4x faster there).  The same values, nan included.
    """
    if (
        a.size < _MAX_ROWS
        or not dims
        or not _summable(a)
        or dims != tuple(range(a.ndim - len(dims), a.ndim))
    ):
        return a.max(axis=dims, keepdims=True)
    k = len(dims)
    inner = math.prod(a.shape[a.ndim - k :])
    rows = a.size // inner
    if inner > _MAX_ROW or rows < _MAX_ROWS:
        return a.max(axis=dims, keepdims=True)
    m = np.ascontiguousarray(a.reshape(rows, inner).T).max(axis=0)
    return m.reshape(a.shape[: a.ndim - k] + (1,) * k)
