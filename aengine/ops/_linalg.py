"""Matrix products: matmul (PyTorch's 1-d, batched and broadcasting rules), mm, dot.

As in PyTorch, both operands must have the same dtype: a matrix product
never promotes (a float32 weight times a float64 input raises instead of
silently computing in float64).  Elementwise ops do promote.
"""

from __future__ import annotations

import string
import warnings
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..tensors._creation import tensor_input
from ..tensors._tensor import Tensor
from . import _arith, _index, _reduce, _shape
from ._core import GradOps, ShapeError, as_tensor_arg, node_class, record, same_device
from ._forward import multilinear
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "matmul",
    "mm",
    "dot",
    "bmm",
    "mv",
    "vdot",
    "outer",
    "addmm",
    "addmv",
    "baddbmm",
    "einsum",
    "tensordot",
    "kron",
    "cross",
    "trace",
    "vecdot",
    "MatrixShapeError",
]


class MatrixShapeError(ShapeError):
    """Operands of a matrix product whose shapes (or dtypes) do not fit.

    A RuntimeError as PyTorch raises, and a ValueError as aengine's matrix
    products raised before the operator table (both ``except`` clauses catch it).
    """


def _same_dtype(a: Tensor, b: Tensor) -> None:
    """PyTorch's matrix products take one dtype: no promotion (RuntimeError as PyTorch)."""
    da, db = a.data.dtype, b.data.dtype
    if da == db:
        return
    if a.data.ndim == 1 and b.data.ndim == 1:
        raise MatrixShapeError(
            f"dot : expected both vectors to have same dtype, but found {da} and {db}; "
            f"convert one first, e.g. b.to(ae.{da})"
        )
    raise MatrixShapeError(
        f"expected m1 and m2 to have the same dtype, but got: {da} != {db}; convert one "
        f"first, e.g. b.to(ae.{da})"
    )


def _matmul_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    a, b = s
    need = n.needs
    ga = gb = None
    if a.ndim == 1 and b.ndim == 1:  # dot product: g is 0-d
        return (g * b if need[0] else None, g * a if need[1] else None)
    if a.ndim == 1:  # (k) @ (..., k, m) -> (..., m)
        if need[0]:
            ga = F.matmul(F.expand_dims(g, -2), F.swapaxes(b, -1, -2))  # (..., 1, k)
            ga = F.sum_to(F.reshape(ga, (*ga.shape[:-2], ga.shape[-1])), a.shape)
        if need[1]:
            gb = F.expand_dims(a, -1) * F.expand_dims(g, -2)  # (..., k, m)
            gb = F.sum_to(gb, b.shape)
        return (ga, gb)
    if b.ndim == 1:  # (..., n, k) @ (k) -> (..., n)
        if need[0]:
            ga = F.expand_dims(g, -1) * b  # (..., n, k)
            ga = F.sum_to(ga, a.shape)
        if need[1]:
            gb = F.matmul(F.swapaxes(a, -1, -2), F.expand_dims(g, -1))  # (..., k, 1)
            gb = F.sum_to(F.reshape(gb, gb.shape[:-1]), b.shape)
        return (ga, gb)
    if need[0]:
        ga = F.sum_to(F.matmul(g, F.swapaxes(b, -1, -2)), a.shape)
    if need[1]:
        gb = F.sum_to(F.matmul(F.swapaxes(a, -1, -2), g), b.shape)
    return (ga, gb)


#: a product's backward costs about this many elementwise operations per
#: multiply-add of its forward (two products of the same size, against the
#: cheapest transcendental kernels): NOTE [Kernel offload policy]
_MACS_PER_ELEMENT = 16


def _product(cls: Any, out: Any, dev: Any, a: Tensor, b: Tensor, k: int) -> Tensor:
    """Record a matrix product whose inner dimension is ``k``.

    Its node's ``numel``, the measure of its kernel's cost from which the
    runtime decides to run it off the event loop, counts the product's
    work: the result's size times ``k`` over ``_MACS_PER_ELEMENT``, not the
    result's size alone (a 64x512 result of a 512-deep product costs as
    much as an elementwise kernel of a million elements).
    """
    t = record(cls, out, dev, (a, b), (a, b))
    node = t._fn
    if node is not None and k > _MACS_PER_ELEMENT:
        node.numel = t.data.size * k // _MACS_PER_ELEMENT
    return t


_PRODUCT_JVP = multilinear(lambda a, xs: matmul(xs[0], xs[1]))
MmBackward0 = node_class("MmBackward0", _matmul_rule, jvp=_PRODUCT_JVP)
MvBackward0 = node_class("MvBackward0", _matmul_rule, jvp=_PRODUCT_JVP)
DotBackward0 = node_class("DotBackward0", _matmul_rule, jvp=_PRODUCT_JVP)


def matmul(a: Any, other: Any) -> Tensor:
    """Matrix product ``a @ other`` (1-d, 2-d, batched and broadcast as PyTorch).

    Both operands must have the same dtype: as in PyTorch a float32 matrix
    times a float64 one raises (convert one with ``.to(dtype)``).

    Example::

        >>> import aengine as ae
        >>> (ae.ones(2, 3) @ ae.ones(3)).tolist()
        [3.0, 3.0]
    """
    if not isinstance(a, Tensor):
        a = as_tensor_arg(a, other if isinstance(other, Tensor) else None)
    if not isinstance(other, Tensor):
        other = as_tensor_arg(other, a)
    na, nb = a.data.ndim, other.data.ndim
    if na == 0 or nb == 0:
        raise MatrixShapeError(
            f"both arguments to matmul need to be at least 1D, but they are "
            f"{na}D and {nb}D; use * for scalars"
        )
    dev = same_device(a, other)
    ka = a.data.shape[-1]
    kb = other.data.shape[-2] if nb > 1 else other.data.shape[0]
    if ka != kb:
        raise MatrixShapeError(
            f"matmul: shapes {tuple(a.data.shape)} and {tuple(other.data.shape)} cannot be "
            f"multiplied ({ka} != {kb})"
        )
    if a.data.dtype != other.data.dtype:
        _same_dtype(a, other)
    if na == 2:
        cls = MmBackward0 if nb == 2 else MvBackward0 if nb == 1 else MmBackward0
    else:
        cls = DotBackward0 if na == 1 and nb == 1 else MmBackward0
    return _product(cls, a.data @ other.data, dev, a, other, ka)


def _tensor_arg(x: Any, name: str, what: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(
            f"{name}(): argument '{what}' must be Tensor, not {type(x).__name__}; "
            "convert it with ae.tensor(...)"
        )


def mm(a: Tensor, mat2: Tensor) -> Tensor:
    """The product of two matrices (2-D tensors only, same dtype), as ``torch.mm``.

    Example::

        >>> import aengine as ae
        >>> ae.mm(ae.ones(2, 3), ae.ones(3, 4)).shape
        (2, 4)
    """
    _tensor_arg(a, "mm", "input")
    _tensor_arg(mat2, "mm", "mat2")
    if a.data.ndim != 2:
        raise MatrixShapeError(
            f"self must be a matrix, got a {a.data.ndim}-D tensor; use ae.matmul"
        )
    if mat2.data.ndim != 2:
        raise MatrixShapeError(
            f"mat2 must be a matrix, got a {mat2.data.ndim}-D tensor; use ae.matmul"
        )
    (n, k), (kb, m) = a.data.shape, mat2.data.shape
    if k != kb:
        raise MatrixShapeError(f"mat1 and mat2 shapes cannot be multiplied ({n}x{k} and {kb}x{m})")
    dev = same_device(a, mat2)
    if a.data.dtype != mat2.data.dtype:
        _same_dtype(a, mat2)
    return _product(MmBackward0, a.data @ mat2.data, dev, a, mat2, k)


def dot(a: Tensor, tensor: Tensor) -> Tensor:
    """The dot product of two 1-D tensors of one dtype (a 0-d tensor), as ``torch.dot``.

    Example::

        >>> import aengine as ae
        >>> ae.dot(ae.tensor([1.0, 2.0]), ae.tensor([3.0, 4.0])).item()
        11.0
    """
    _tensor_arg(a, "dot", "input")
    _tensor_arg(tensor, "dot", "tensor")
    na, nb = a.data.ndim, tensor.data.ndim
    if na != 1 or nb != 1:
        raise MatrixShapeError(
            f"1D tensors expected, but got {na}D and {nb}D tensors; use ae.matmul for others"
        )
    if a.data.dtype != tensor.data.dtype:
        _same_dtype(a, tensor)
    sa, sb = a.data.shape[0], tensor.data.shape[0]
    if sa != sb:
        raise MatrixShapeError(
            f"inconsistent tensor size, expected tensor [{sa}] and src [{sb}] to have the same "
            f"number of elements, but got {sa} and {sb} elements respectively"
        )
    dev = same_device(a, tensor)
    return _product(DotBackward0, a.data @ tensor.data, dev, a, tensor, sa)


# --- more matrix products (composites of the ops above) -----------------------


def _dims_error(name: str, arg: str, want: int, x: Tensor) -> MatrixShapeError:
    return MatrixShapeError(
        f"{name}: {arg} must be a {want}-D tensor, but got a {x.data.ndim}-D tensor "
        f"of shape {tuple(x.data.shape)}"
    )


def _same_dtypes(name: str, *xs: Tensor) -> None:
    dts = [x.data.dtype for x in xs]
    if any(d != dts[0] for d in dts[1:]):
        names = ", ".join(str(d) for d in dts)
        raise MatrixShapeError(
            f"{name}: input tensors must have the same dtype, but got {names}; "
            "convert them first, e.g. b.to(a.dtype)"
        )


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors (b, n, k) @ (b, k, m), as ``torch.bmm``.

    Example::

        >>> import aengine as ae
        >>> ae.bmm(ae.ones(2, 3, 4), ae.ones(2, 4, 5)).shape
        (2, 3, 5)
    """
    _tensor_arg(input, "bmm", "input")
    _tensor_arg(mat2, "bmm", "mat2")
    if input.data.ndim != 3:
        raise _dims_error("bmm", "batch1", 3, input)
    if mat2.data.ndim != 3:
        raise _dims_error("bmm", "batch2", 3, mat2)
    (b, _, k), (b2, k2, _) = input.data.shape, mat2.data.shape
    if b != b2 or k != k2:
        raise MatrixShapeError(
            f"bmm: expected batch1 and batch2 of shapes (b, n, k) and (b, k, m), but got "
            f"{tuple(input.data.shape)} and {tuple(mat2.data.shape)}"
        )
    _same_dtypes("bmm", input, mat2)
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product of a 2-D and a 1-D tensor, as ``torch.mv``.

    Example::

        >>> import aengine as ae
        >>> ae.mv(ae.ones(2, 3), ae.ones(3)).tolist()
        [3.0, 3.0]
    """
    _tensor_arg(input, "mv", "input")
    _tensor_arg(vec, "mv", "vec")
    if input.data.ndim != 2:
        raise _dims_error("mv", "input", 2, input)
    if vec.data.ndim != 1:
        raise _dims_error("mv", "vec", 1, vec)
    (n, k), (k2,) = input.data.shape, vec.data.shape
    if k != k2:
        raise MatrixShapeError(f"size mismatch, got input ({n}), mat ({n}x{k}), vec ({k2})")
    _same_dtypes("mv", input, vec)
    return matmul(input, vec)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors (the first conjugated: real tensors as ``dot``).

    Example::

        >>> import aengine as ae
        >>> ae.vdot(ae.tensor([1.0, 2.0]), ae.tensor([3.0, 4.0])).item()
        11.0
    """
    _tensor_arg(input, "vdot", "input")
    _tensor_arg(other, "vdot", "other")
    return dot(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors: ``input[i] * vec2[j]`` (dtypes promote).

    Example::

        >>> import aengine as ae
        >>> ae.outer(ae.tensor([1.0, 2.0]), ae.tensor([1.0, 10.0, 100.0])).tolist()
        [[1.0, 10.0, 100.0], [2.0, 20.0, 200.0]]
    """
    _tensor_arg(input, "outer", "input")
    _tensor_arg(vec2, "outer", "vec2")
    for x, arg in ((input, "self"), (vec2, "vec2")):
        if x.data.ndim != 1:
            raise MatrixShapeError(
                f"outer: Expected 1-D argument {arg}, but got {x.data.ndim}-D; "
                "flatten it first or use ae.matmul"
            )
    return _arith.mul(_shape.unsqueeze(input, 1), vec2)


def _scalar_arg(value: Any, like: Tensor, name: str, what: str) -> Any:
    """``beta``/``alpha``: a number (an int for integer tensors, as torch casts it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}(): argument '{what}' must be a number, not {type(value).__name__}")
    if like.data.dtype.kind in "biu":
        return int(value)
    return value


def _add_scaled(name: str, input: Tensor, prod: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta * input + alpha * prod`` (``input`` ignored when beta is 0, as torch)."""
    _tensor_arg(input, name, "input")
    beta = _scalar_arg(beta, prod, name, "beta")
    alpha = _scalar_arg(alpha, prod, name, "alpha")
    if input.data.dtype != prod.data.dtype:
        raise MatrixShapeError(
            f"{name}: self and mat2 must have the same dtype, but got {input.data.dtype} "
            f"and {prod.data.dtype}; convert input first, e.g. input.to(mat1.dtype)"
        )
    shape = tuple(prod.data.shape)
    ishape = tuple(input.data.shape)
    if len(ishape) > len(shape) or any(a not in (1, b) for a, b in zip(ishape[::-1], shape[::-1])):
        raise MatrixShapeError(
            f"{name}: input of shape {ishape} does not broadcast to the product's shape {shape}"
        )
    if alpha != 1:
        prod = _arith.mul(prod, alpha)
    if beta == 0:
        return prod
    return _arith.add(input if beta == 1 else _arith.mul(input, beta), prod)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices, as ``torch.addmm``.

    ``input`` broadcasts to the product's shape; with ``beta=0`` it is
    ignored (its NaNs do not propagate).

    Example::

        >>> import aengine as ae
        >>> ae.addmm(ae.ones(2), ae.ones(2, 3), ae.ones(3, 2), alpha=2.0).tolist()
        [[7.0, 7.0], [7.0, 7.0]]
    """
    _tensor_arg(mat1, "addmm", "mat1")
    _tensor_arg(mat2, "addmm", "mat2")
    if mat1.data.ndim != 2:
        raise _dims_error("addmm", "mat1", 2, mat1)
    if mat2.data.ndim != 2:
        raise _dims_error("addmm", "mat2", 2, mat2)
    return _add_scaled("addmm", input, mm(mat1, mat2), beta, alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)`` for a matrix and a vector, as ``torch.addmv``.

    Example::

        >>> import aengine as ae
        >>> ae.addmv(ae.ones(2), ae.ones(2, 3), ae.ones(3), beta=0.5).tolist()
        [3.5, 3.5]
    """
    return _add_scaled("addmv", input, mv(mat, vec), beta, alpha)


def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``, as ``torch.baddbmm``.

    Example::

        >>> import aengine as ae
        >>> ae.baddbmm(ae.zeros(2, 1, 1), ae.ones(2, 1, 3), ae.ones(2, 3, 1)).tolist()
        [[[3.0]], [[3.0]]]
    """
    return _add_scaled("baddbmm", input, bmm(batch1, batch2), beta, alpha)


# --- einsum ------------------------------------------------------------------

_LETTERS = string.ascii_letters


def _einsum_error(msg: str) -> MatrixShapeError:
    return MatrixShapeError(f"einsum(): {msg}")


def _einsum_parse(equation: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, with each ``...`` spelled in letters.

    Checks the equation against the operands' shapes as torch does (every
    subscript a letter, one per dimension, sizes that agree or are 1).
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(shapes):
        raise _einsum_error("fewer operands were provided than specified in the equation")
    if len(terms) < len(shapes):
        raise _einsum_error("more operands were provided than specified in the equation")
    for i, c in enumerate(eq):
        if c not in _LETTERS and c not in ".,->":
            raise _einsum_error(
                f"invalid subscript given at index {i} in the equation string, "
                "subscripts must be in [a-zA-Z]"
            )
    ells: list[int] = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        body = term.replace("...", "", 1)
        if "." in body:
            raise _einsum_error(f"found '.' for operand {k} that is not part of any ellipsis")
        if len(body) < len(term):
            n = len(shape) - len(body)
            if n < 0:
                raise _einsum_error(
                    f"the number of subscripts in the equation ({len(body)}) is more than the "
                    f"number of dimensions ({len(shape)}) for operand {k}"
                )
        else:
            if len(term) != len(shape):
                raise _einsum_error(
                    f"the number of subscripts in the equation ({len(term)}) does not match "
                    f"the number of dimensions ({len(shape)}) for operand {k} and no "
                    "ellipsis was given"
                )
            n = 0
        ells.append(n)
    free = [c for c in _LETTERS if c not in eq]
    e = max(ells, default=0)
    ell = "".join(free[:e])
    new_terms = [t.replace("...", ell[e - n :]) for t, n in zip(terms, ells)]
    if arrow:
        if "." in rhs.replace("...", "", 1):
            raise _einsum_error("found '.' for output that is not part of any ellipsis")
        out = rhs.replace("...", ell)
        seen = "".join(new_terms)
        for i, c in enumerate(out):
            if c in out[:i]:
                raise _einsum_error(f"output subscript {c} appears more than once in the output")
            if c not in seen:
                raise _einsum_error(
                    f"output subscript {c} does not appear in the equation for any input operand"
                )
    else:
        counts = Counter("".join(t.replace("...", "") for t in terms))
        once = sorted(c for c, k in counts.items() if k == 1)
        out = (ell if "..." in lhs else "") + "".join(once)
    sizes: dict[str, int] = {}
    for k, (term, shape) in enumerate(zip(new_terms, shapes)):
        mine: dict[str, int] = {}
        for c, d in zip(term, shape):
            if c in mine and mine[c] != d:
                raise _einsum_error(
                    f"subscript {c} is repeated for operand {k} but the sizes don't match, "
                    f"{mine[c]} != {d}"
                )
            mine[c] = d
            old = sizes.get(c)
            if old is not None and old != d and 1 not in (old, d):
                raise _einsum_error(
                    f"subscript {c} has size {d} for operand {k} which does not broadcast "
                    f"with previously seen size {old}"
                )
            if old is None or old == 1:
                sizes[c] = d
    return new_terms, out


def _einsum_grad(F: GradOps, g: Any, s: Any, terms: list[str], out: str, i: int, dev: Any) -> Any:
    """The gradient of operand ``i`` of ``einsum(terms -> out)``: itself an einsum.

    The contraction of the incoming gradient with the other operands gives
    the operand's distinct subscripts that occur elsewhere; a subscript only
    the operand has (summed in the forward) is broadcast back, a size-1
    dimension that broadcast is summed, and a repeated subscript (a
    diagonal) is spread onto its diagonal by a constant mask.
    """
    term = terms[i]
    shape = tuple(s[i].shape)
    others = [t for j, t in enumerate(terms) if j != i]
    avail = set(out).union(*others)
    uniq = "".join(c for k, c in enumerate(term) if term.index(c) == k)
    keep = "".join(c for c in uniq if c in avail)
    size = {c: shape[term.index(c)] for c in uniq}
    eq = ",".join([out, *others]) + "->" + keep
    gk = F.einsum(eq, g, *[v for j, v in enumerate(s) if j != i])
    axes = tuple(k for k, c in enumerate(keep) if size[c] == 1 and gk.shape[k] != 1)
    if axes:
        gk = F.sum(gk, axes, keepdims=True)
    for k, c in enumerate(uniq):
        if c not in avail:
            gk = F.expand_dims(gk, k)
    ushape = tuple(size[c] for c in uniq)
    if tuple(gk.shape) != ushape:
        gk = F.broadcast_to(gk, ushape)
    if len(uniq) == len(term):
        return gk
    xp = dev.backend.xp
    mask = xp.ones(shape, dtype=bool)
    nd = len(shape)
    for p, c in enumerate(term):
        q = term.index(c)
        if q != p:
            gk = F.expand_dims(gk, p)
            ip = xp.arange(shape[p]).reshape((-1,) + (1,) * (nd - p - 1))
            iq = xp.arange(shape[q]).reshape((-1,) + (1,) * (nd - q - 1))
            mask = mask & (ip == iq)
    return gk * mask.astype(gk.dtype)


def _einsum_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    terms, out = n.attrs
    return tuple(
        _einsum_grad(F, g, s, terms, out, i, n.dev) if need else None
        for i, need in enumerate(n.needs)
    )


EinsumBackward0 = node_class(
    "EinsumBackward0",
    _einsum_rule,
    jvp=multilinear(lambda a, xs: einsum(",".join(a[0]) + "->" + a[1], *xs)),
)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation over the operands' subscripts, as ``torch.einsum``.

    ``equation`` names each operand's dimensions with letters (``...`` for
    broadcast dimensions); ``->`` names the result's, else they are the
    letters that occur once, in alphabetical order.  The operands may also
    come as one list.  Differentiable to any order (its gradients are einsums).

    Example::

        >>> import aengine as ae
        >>> ae.einsum("ij,jk->ik", ae.ones(2, 3), ae.ones(3, 4)).shape
        (2, 4)
        >>> ae.einsum("ii", ae.eye(3)).item()
        3.0
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise _einsum_error("must provide at least one operand")
    ops = [tensor_input(x, "einsum", f"operands[{k}]") for k, x in enumerate(operands)]
    dev = ops[0]._device
    for x in ops[1:]:
        same_device(ops[0], x)
    dt = ops[0].data.dtype
    for x in ops[1:]:
        if x.data.dtype != dt:
            raise _einsum_error(
                f"expected all operands to have the same dtype, but got {dt} and "
                f"{x.data.dtype}; convert them first, e.g. b.to(a.dtype)"
            )
    terms, out = _einsum_parse(equation, [tuple(x.data.shape) for x in ops])
    xp = dev.backend.xp
    res = xp.einsum(",".join(terms) + "->" + out, *[x.data for x in ops], optimize=len(ops) > 1)
    if res.dtype != dt:
        res = res.astype(dt)
    return record(EinsumBackward0, res, dev, tuple(ops), tuple(ops), attrs=(terms, out))


def tensordot(a: Tensor, b: Tensor, dims: Any = 2, out: Any = None) -> Tensor:
    """Contract ``a``'s and ``b``'s dimensions given by ``dims``, as ``torch.tensordot``.

    ``dims`` an int ``d``: the last ``d`` dimensions of ``a`` with the first
    ``d`` of ``b``; or a pair of lists (or ints): those dimensions of each.

    Example::

        >>> import aengine as ae
        >>> ae.tensordot(ae.ones(2, 3, 4), ae.ones(3, 4, 5)).shape
        (2, 5)
        >>> ae.tensordot(ae.ones(2, 3), ae.ones(3, 2), dims=([0], [1])).shape
        (3, 3)
    """
    _tensor_arg(a, "tensordot", "a")
    _tensor_arg(b, "tensordot", "b")
    if out is not None:
        raise TypeError("tensordot(): out= is not supported; use the result")
    na, nb = a.data.ndim, b.data.ndim
    if isinstance(dims, bool) or not isinstance(dims, (int, list, tuple)):
        raise TypeError(
            f"tensordot(): argument 'dims' must be an int or a pair of lists of ints, "
            f"not {type(dims).__name__}"
        )
    if isinstance(dims, int):
        if dims < 0:
            raise MatrixShapeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(na, nb):
            raise MatrixShapeError(
                f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}"
            )
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        if len(dims) != 2:
            raise MatrixShapeError("tensordot expects dims to be a pair of lists of dimensions")
        da, db = (list(d) if isinstance(d, (list, tuple)) else [d] for d in dims)
        if len(da) != len(db):
            raise MatrixShapeError("both dimension lists should have same length")
        da = [_shape._norm_dim(d, na) for d in da]
        db = [_shape._norm_dim(d, nb) for d in db]
    for x, y in zip(da, db):
        sx, sy = a.data.shape[x], b.data.shape[y]
        if sx != sy:
            raise MatrixShapeError(
                f"contracted dimensions need to match, but first has size {sx} in dim {x} "
                f"and second has size {sy} in dim {y}"
            )
    if a.data.dtype != b.data.dtype:
        raise MatrixShapeError(
            f"both inputs should have same dtype, got {a.data.dtype} and {b.data.dtype}"
        )
    la = _LETTERS[:na]
    lb = list(_LETTERS[na : na + nb])
    for x, y in zip(da, db):
        lb[y] = la[x]
    res = "".join(c for k, c in enumerate(la) if k not in da) + "".join(
        c for k, c in enumerate(lb) if k not in db
    )
    return einsum(f"{la},{''.join(lb)}->{res}", a, b)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product of two tensors (dimensions aligned on the right), as ``torch.kron``.

    Example::

        >>> import aengine as ae
        >>> ae.kron(ae.eye(2), ae.ones(2, 2)).tolist()[0]
        [1.0, 1.0, 0.0, 0.0]
    """
    _tensor_arg(input, "kron", "input")
    _tensor_arg(other, "kron", "other")
    nd = max(input.data.ndim, other.data.ndim)
    sa = (1,) * (nd - input.data.ndim) + tuple(input.data.shape)
    sb = (1,) * (nd - other.data.ndim) + tuple(other.data.shape)
    ia = tuple(v for d in sa for v in (d, 1))
    ib = tuple(v for d in sb for v in (1, d))
    prod = _arith.mul(_shape.reshape(input, ia), _shape.reshape(other, ib))
    return _shape.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


def cross(input: Tensor, other: Tensor, dim: Any = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (shapes broadcast), as ``torch.cross``.

    As torch, ``dim=None`` takes the first dimension of size 3, with a
    deprecation warning: pass ``dim`` (or use ``dim=-1``, ``linalg.cross``'s).

    Example::

        >>> import aengine as ae
        >>> ae.cross(ae.tensor([1.0, 0.0, 0.0]), ae.tensor([0.0, 1.0, 0.0]), dim=0).tolist()
        [0.0, 0.0, 1.0]
    """
    _tensor_arg(input, "cross", "input")
    _tensor_arg(other, "cross", "other")
    sa, sb = tuple(input.data.shape), tuple(other.data.shape)
    if len(sa) != len(sb):
        raise MatrixShapeError(
            f"linalg.cross: inputs must have the same number of dimensions, got {len(sa)} "
            f"and {len(sb)}; add dimensions with unsqueeze"
        )
    try:
        shape = tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        raise MatrixShapeError(
            f"linalg.cross: inputs of shapes {sa} and {sb} do not broadcast"
        ) from None
    if dim is None:
        found = [k for k, d in enumerate(sa) if d == 3]
        if not found:
            raise MatrixShapeError("no dimension of size 3 in input; pass dim=")
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\n"
            "Please either pass the dim explicitly or simply use torch.linalg.cross.",
            UserWarning,
            stacklevel=2,
        )
        d = found[0] + len(shape) - len(sa)
    else:
        d = _shape._norm_dim(dim, len(shape))
    la = sa[d - len(shape) + len(sa)] if d - len(shape) + len(sa) >= 0 else 1
    lb = sb[d - len(shape) + len(sb)] if d - len(shape) + len(sb) >= 0 else 1
    if la != 3 or lb != 3:
        raise MatrixShapeError(
            f"linalg.cross: inputs dimension {d} must have length 3. Got {la} and {lb}"
        )
    if input.data.dtype != other.data.dtype:
        raise MatrixShapeError(
            f"linalg.cross: expected both inputs to have the same dtype, but got "
            f"{input.data.dtype} and {other.data.dtype}"
        )
    a = _shape.broadcast_to(input, shape) if sa != shape else input
    b = _shape.broadcast_to(other, shape) if sb != shape else other
    xp = input._device.backend.xp
    i1 = Tensor._make(xp.asarray([1, 2, 0]), False, input._device)
    i2 = Tensor._make(xp.asarray([2, 0, 1]), False, input._device)
    a1, a2 = _index.index_select(a, d, i1), _index.index_select(a, d, i2)
    b1, b2 = _index.index_select(b, d, i1), _index.index_select(b, d, i2)
    return _arith.sub(_arith.mul(a1, b2), _arith.mul(a2, b1))


def trace(input: Tensor) -> Tensor:
    """The sum of the main diagonal of a 2-D tensor (integers give int64), as ``torch.trace``.

    Example::

        >>> import aengine as ae
        >>> ae.trace(ae.eye(3)).item()
        3.0
    """
    _tensor_arg(input, "trace", "input")
    if input.data.ndim != 2:
        raise MatrixShapeError(
            f"trace: expected a matrix, but got tensor with dim {input.data.ndim}"
        )
    n, m = input.data.shape
    eye = input._device.backend.xp.eye(n, m, dtype=input.data.dtype)
    return _reduce.sum(_arith.mul(input, eye))


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of vectors along ``dim`` (shapes broadcast), as ``torch.linalg.vecdot``.

    Example::

        >>> import aengine as ae
        >>> ae.linalg.vecdot(ae.ones(2, 3), ae.ones(3)).tolist()
        [3.0, 3.0]
    """
    _tensor_arg(x, "linalg.vecdot", "x")
    _tensor_arg(y, "linalg.vecdot", "y")
    if x.data.dtype != y.data.dtype:
        raise MatrixShapeError(
            f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
            f"{x.data.dtype} and y of type {y.data.dtype} instead"
        )
    return _reduce.sum(_arith.mul(x, y), dim)


# --- the table ---------------------------------------------------------------


def _matmul_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(4, 2)), note="2-D")
    yield Sample((m.arr(4), m.arr(4)), note="1-D @ 1-D")
    yield Sample((m.arr(4), m.arr(2, 4, 3)), note="1-D @ batched")
    yield Sample((m.arr(2, 3, 4), m.arr(4)), note="batched @ 1-D")
    yield Sample((m.arr(3, 4), m.arr(4)), note="2-D @ 1-D")
    yield Sample((m.arr(2, 3, 4), m.arr(2, 4, 2)), note="batched")
    yield Sample((m.arr(2, 1, 3, 4), m.arr(3, 4, 2)), note="broadcast batch dims")
    yield Sample((m.arr(3, 4), m.arr(2, 4, 5)), note="2-D @ batched")
    yield Sample((m.arr(0, 4), m.arr(4, 2)), note="empty")


def _matmul_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(), m.arr(2)), match="at least 1D")
    yield ErrorCase((m.arr(2, 3), m.arr(2, 3)), match="cannot be multiplied")


def _mm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(4, 2)))
    yield Sample((m.arr(1, 5), m.arr(5, 1)))
    yield Sample((m.arr(0, 3), m.arr(3, 2)), note="empty")


def _mm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), m.arr(3, 2)), match="must be a matrix")
    yield ErrorCase((m.arr(2, 3), m.arr(2, 3)), match="cannot be multiplied")
    yield ErrorCase(
        (m.arr(2, 3).astype("float32"), m.arr(3, 2).astype("float64")),
        match="same dtype",
        note="float32 and float64: no promotion",
    )


def _dot_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(5), m.arr(5)))
    yield Sample((m.arr(0), m.arr(0)), note="empty")


def _dot_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 2), m.arr(2, 2)), match="1D tensors expected")
    yield ErrorCase((m.arr(2), m.arr(3)), match="inconsistent tensor size")


def _bmm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), m.arr(2, 4, 5)))
    yield Sample((m.arr(1, 1, 3), m.arr(1, 3, 1)))


def _bmm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), m.arr(4, 5)), match="3-D tensor")
    yield ErrorCase((m.arr(2, 3, 4), m.arr(3, 4, 5)), match="batch1 and batch2")


def _mv_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(4)))
    yield Sample((m.arr(1, 1), m.arr(1)))


def _mv_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 4), m.arr(3)), match="size mismatch")
    yield ErrorCase((m.arr(4), m.arr(4)), match="2-D tensor")


def _outer_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3), m.arr(4)))
    yield Sample((m.arr(1), m.arr(0)), note="empty")


def _outer_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 2), m.arr(2)), match="1-D argument")


def _addmm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 2), m.arr(3, 4), m.arr(4, 2)))
    yield Sample((m.arr(2), m.arr(3, 4), m.arr(4, 2)), {"beta": 2, "alpha": 3}, note="broadcast")
    yield Sample((m.arr(3, 1), m.arr(3, 4), m.arr(4, 2)), {"beta": 0.5, "alpha": -1.5})
    yield Sample((m.arr(3, 2), m.arr(3, 4), m.arr(4, 2)), {"beta": 0}, note="beta=0")


def _addmm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3, 2), m.arr(4), m.arr(4, 2)), match="mat1 must be a 2-D")
    yield ErrorCase((m.arr(3, 3), m.arr(3, 4), m.arr(4, 2)), match="does not broadcast")


def _addmv_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3), m.arr(3, 4), m.arr(4)))
    yield Sample((m.arr(1), m.arr(3, 4), m.arr(4)), {"beta": 2, "alpha": -1}, note="broadcast")
    yield Sample((m.arr(3), m.arr(3, 4), m.arr(4)), {"beta": 0, "alpha": 0.5}, note="beta=0")


def _addmv_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(3), m.arr(3, 4), m.arr(3)), match="size mismatch")


def _baddbmm_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 2), m.arr(2, 3, 4), m.arr(2, 4, 2)))
    yield Sample((m.arr(3, 1), m.arr(2, 3, 4), m.arr(2, 4, 2)), {"beta": 0.5, "alpha": 2})
    yield Sample((m.arr(2, 3, 2), m.arr(2, 3, 4), m.arr(2, 4, 2)), {"beta": 0}, note="beta=0")


def _baddbmm_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3, 2), m.arr(3, 4), m.arr(2, 4, 2)), match="3-D tensor")


def _einsum_samples(m: Maker) -> Iterator[Sample]:
    yield Sample(("ij,jk->ik", m.arr(3, 4), m.arr(4, 2)), grad=(1, 2), note="matmul")
    yield Sample(("bij,bjk->bik", m.arr(2, 3, 4), m.arr(2, 4, 2)), grad=(1, 2), note="batched")
    yield Sample(("ij,jk", m.arr(3, 4), m.arr(4, 2)), grad=(1, 2), note="implicit output")
    yield Sample(("ii->i", m.arr(3, 3)), grad=(1,), note="diagonal")
    yield Sample(("ii", m.arr(3, 3)), grad=(1,), note="trace")
    yield Sample(("bii->b", m.arr(2, 3, 3)), grad=(1,), note="batched trace")
    yield Sample(("i,j->ij", m.arr(3), m.arr(4)), grad=(1, 2), note="outer")
    yield Sample(("ij->", m.arr(3, 4)), grad=(1,), note="sum")
    yield Sample(("ij,ij->i", m.arr(3, 4), m.arr(3, 4)), grad=(1, 2), note="row dots")
    yield Sample(("ijk->kji", m.arr(2, 3, 4)), grad=(1,), note="permutation")
    yield Sample(("ij,j->", m.arr(3, 4), m.arr(4)), grad=(1, 2), note="j and i summed")
    yield Sample(("ij,k->i", m.arr(3, 4), m.arr(2)), grad=(1, 2), note="a subscript of one")
    yield Sample(
        ("...ij,...jk->...ik", m.arr(2, 1, 3, 4), m.arr(5, 4, 2)), grad=(1, 2), note="ellipsis"
    )
    yield Sample(("ij,jk->ik", m.arr(3, 1), m.arr(4, 2)), grad=(1, 2), note="size-1 broadcast")
    yield Sample(("ij,jk,kl->il", m.arr(2, 3), m.arr(3, 4), m.arr(4, 2)), grad=(1, 2, 3))
    yield Sample(("iij,jk->ik", m.arr(3, 3, 2), m.arr(2, 2)), grad=(1, 2), note="diagonal @")
    yield Sample(("ij,jk->ik", [m.arr(2, 3), m.arr(3, 2)]), grad=(1,), note="operands as a list")


def _einsum_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase(("ij,jk->ik", m.arr(2, 2)), match="fewer operands")
    yield ErrorCase(("ijk,jk->ik", m.arr(2, 2), m.arr(2, 2)), match="number of subscripts")
    yield ErrorCase(("ij,jk->ik", m.arr(2, 3), m.arr(2, 2)), match="does not broadcast")
    yield ErrorCase(("ij,jk->iz", m.arr(2, 2), m.arr(2, 2)), match="output subscript z")
    yield ErrorCase(("i1,jk->ik", m.arr(2, 2), m.arr(2, 2)), match="invalid subscript")


def _tensordot_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3, 4), m.arr(3, 4, 5)), note="dims=2")
    yield Sample((m.arr(2, 3), m.arr(3, 4)), {"dims": 1})
    yield Sample((m.arr(2, 3), m.arr(4, 5)), {"dims": 0}, note="outer")
    yield Sample((m.arr(2, 3, 4), m.arr(4, 2, 5)), {"dims": ([0, 2], [1, 0])})
    yield Sample((m.arr(3, 4), m.arr(4, 3)), {"dims": ([-1], [-2])}, note="negative dims")


def _tensordot_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), m.arr(2, 2)), {"dims": 1}, match="need to match")
    yield ErrorCase((m.arr(2, 3), m.arr(3, 2)), {"dims": -1}, match="dims >= 0")


def _kron_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(2, 3), m.arr(3, 2)))
    yield Sample((m.arr(3), m.arr(2)), note="1-D")
    yield Sample((m.arr(2, 3), m.arr(4)), note="different ndim")
    yield Sample((m.arr(2, 1, 2), m.arr(2, 2)), note="3-D with 2-D")


def _cross_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3), m.arr(3)), {"dim": 0})
    yield Sample((m.arr(4, 3), m.arr(4, 3)), {"dim": 1})
    yield Sample((m.arr(3, 4), m.arr(3, 4)), {"dim": 0})
    yield Sample((m.arr(2, 3), m.arr(1, 3)), {"dim": -1}, note="broadcast")
    yield Sample((m.arr(2, 3, 2), m.arr(2, 3, 2)), {"dim": -2})


def _cross_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 4), m.arr(2, 4)), {"dim": 1}, match="must have length 3")
    yield ErrorCase((m.arr(2, 3), m.arr(3)), {"dim": -1}, match="same number of dimensions")


def _trace_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 3),))
    yield Sample((m.arr(2, 4),), note="wide")
    yield Sample((m.arr(4, 2),), note="tall")


def _trace_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 2, 2),), match="expected a matrix")


def _vecdot_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.arr(3, 4), m.arr(3, 4)))
    yield Sample((m.arr(2, 4), m.arr(4)), note="broadcast")
    yield Sample((m.arr(4, 3), m.arr(4, 3)), {"dim": 0})


register(
    OpInfo("matmul", matmul, _matmul_samples, method=True, dtypes=ALL, errors=_matmul_errors),
    OpInfo(
        "linalg.matmul",
        matmul,
        _matmul_samples,
        dtypes=ALL,
        notes="The same function as ``ae.matmul``.",
    ),
    OpInfo("mm", mm, _mm_samples, method=True, dtypes=ALL, errors=_mm_errors),
    OpInfo("dot", dot, _dot_samples, method=True, dtypes=ALL, errors=_dot_errors),
    OpInfo("bmm", bmm, _bmm_samples, method=True, dtypes=ALL, errors=_bmm_errors),
    OpInfo("mv", mv, _mv_samples, method=True, dtypes=ALL, errors=_mv_errors),
    OpInfo("vdot", vdot, _dot_samples, method=True, dtypes=ALL, errors=_dot_errors),
    OpInfo("outer", outer, _outer_samples, method=True, dtypes=ALL, errors=_outer_errors),
    OpInfo("addmm", addmm, _addmm_samples, method=True, dtypes=ALL, errors=_addmm_errors),
    OpInfo("addmv", addmv, _addmv_samples, method=True, dtypes=ALL, errors=_addmv_errors),
    OpInfo("baddbmm", baddbmm, _baddbmm_samples, method=True, dtypes=ALL, errors=_baddbmm_errors),
    OpInfo("einsum", einsum, _einsum_samples, dtypes=ALL, errors=_einsum_errors),
    OpInfo("tensordot", tensordot, _tensordot_samples, dtypes=ALL, errors=_tensordot_errors),
    OpInfo("kron", kron, _kron_samples, method=True, dtypes=ALL),
    OpInfo(
        "cross",
        cross,
        _cross_samples,
        method=True,
        dtypes=ALL,
        errors=_cross_errors,
        notes="``dim=None`` takes the first dimension of size 3 and warns, as torch.",
    ),
    OpInfo("trace", trace, _trace_samples, method=True, dtypes=ALL, errors=_trace_errors),
    OpInfo("linalg.vecdot", vecdot, _vecdot_samples),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "matmul": "custom",
        "linalg.matmul": "custom",
        "mm": "custom",
        "dot": "custom",
        "bmm": "custom",
        "mv": "custom",
        "outer": "custom",
        "einsum": "custom",
        "trace": "custom",
    }
)
