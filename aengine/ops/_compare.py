"""Comparisons and logical ops: bool tensors, never part of the graph."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..tensors._creation import tensor_input
from ..tensors._tensor import NUMERIC_KINDS, Tensor, _what
from ._core import wrap
from ._shape import _norm_dim
from ._table import ALL, ErrorCase, Maker, OpInfo, Sample, batching, register

__all__ = [
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_not",
    "any",
    "all",
]


_NUMBER = (int, float, complex)  # bool is an int, numpy's float64 a float


def operand(x: Any, like: Tensor, name: str, arg: str) -> Any:
    """The value of ``name``'s operand ``arg`` that is not exactly a Tensor, next to ``like``.

    A number stays as it is and an array-like of numbers becomes an array of
    ``like``'s backend; anything else (a str, None, an object) is a TypeError,
    as PyTorch's (which takes a Tensor or a number).  Called only for an
    operand that is not a Tensor, so a Tensor operand pays nothing for it.
    """
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, _NUMBER):
        return x
    arr = None
    if x is not None and not isinstance(x, (str, bytes)):
        arr = like._device.backend.asarray(x)
        if arr.dtype.kind in NUMERIC_KINDS:
            return arr
    if isinstance(x, (str, bytes)) or (arr is not None and arr.ndim):
        what = _what(x, arr)  # "str 'a'", the first element that is no number...
    else:
        what = type(x).__name__
    raise TypeError(f"{name}(): argument '{arg}' must be a Tensor or a number, not {what}")


def _cmp(name: str, fn: Any) -> tuple[Any, Any]:
    """The function ``name`` and its Python operator (``x == y``, ``x & y``...)."""

    def op(a: Any, other: Any) -> Tensor:
        if a.__class__ is Tensor:
            t, av = a, a.data
        else:
            t = a if isinstance(a, Tensor) else other
            if not isinstance(t, Tensor):
                t = tensor_input(a, name)  # neither operand is a Tensor: raises
            av = operand(a, t, name, "input")
        ov = other.data if other.__class__ is Tensor else operand(other, t, name, "other")
        return wrap(fn(av, ov), t._device)

    def operator(a: Tensor, other: Any) -> Any:
        # As PyTorch's: an operand the function refuses gives NotImplemented, so
        # that Python falls back (``x == None`` is False, ``x < "a"`` a TypeError).
        if other.__class__ is Tensor:
            ov = other.data
        elif isinstance(other, _NUMBER):
            ov = other
        else:
            try:
                ov = operand(other, a, name, "other")
            except TypeError:
                return NotImplemented
        return wrap(fn(a.data, ov), a._device)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}`` comparison: a bool tensor without gradient."
    return op, operator


eq, _eq = _cmp("eq", lambda a, b: a == b)
ne, _ne = _cmp("ne", lambda a, b: a != b)
lt, _lt = _cmp("lt", lambda a, b: a < b)
le, _le = _cmp("le", lambda a, b: a <= b)
gt, _gt = _cmp("gt", lambda a, b: a > b)
ge, _ge = _cmp("ge", lambda a, b: a >= b)
logical_and, _and = _cmp("logical_and", lambda a, b: (a != 0) & (b != 0))
logical_or, _or = _cmp("logical_or", lambda a, b: (a != 0) | (b != 0))

_WHAT = {
    "eq": ("input == other", "[True, False]"),
    "ne": ("input != other", "[False, True]"),
    "lt": ("input < other", "[False, False]"),
    "le": ("input <= other", "[True, False]"),
    "gt": ("input > other", "[False, True]"),
    "ge": ("input >= other", "[True, True]"),
    "logical_and": ("both are nonzero", "[True, False]"),
    "logical_or": ("either is nonzero", "[True, True]"),
}
for _fn in (eq, ne, lt, le, gt, ge, logical_and, logical_or):
    _what_, _result = _WHAT[_fn.__name__]
    _fn.__doc__ = (
        f"True where {_what_}, elementwise with broadcasting (a bool tensor, no gradient).\n\n"
        "    Example::\n\n        >>> import aengine as ae\n"
        f"        >>> ae.{_fn.__name__}(ae.tensor([1.0, 2.0]), ae.tensor([1.0, 0.0])).tolist()\n"
        f"        {_result}\n    "
    )

#: the Python operators of Tensor (attached in _methods.py)
OPERATORS = {
    "__eq__": _eq,
    "__ne__": _ne,
    "__lt__": _lt,
    "__le__": _le,
    "__gt__": _gt,
    "__ge__": _ge,
    "__and__": _and,
    "__or__": _or,
}


def logical_not(a: Tensor) -> Tensor:
    """True where an element is zero (logical not): a bool tensor without gradient.

    Example::

        >>> import aengine as ae
        >>> ae.logical_not(ae.tensor([0.0, 2.0])).tolist()
        [True, False]
    """
    if a.__class__ is not Tensor:
        a = tensor_input(a, "logical_not")
    return wrap(a._device.backend.xp.logical_not(a.data), a._device)


def _any_all(a: Tensor, dim: Any, keepdim: Any, name: str) -> Tensor:
    """``any`` / ``all`` over ``dim`` (every dimension when None), as PyTorch's."""
    if not isinstance(keepdim, bool):
        raise TypeError(
            f"{name}(): argument 'keepdim' must be a bool, not {type(keepdim).__name__}"
        )
    data = a.data
    xp = a._device.backend.xp
    fn = xp.any if name == "any" else xp.all
    axes = None
    if dim is not None:
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        axes = tuple(_norm_dim(d, data.ndim) for d in dims)
        if len(set(axes)) != len(axes):
            raise ValueError(f"dim {dim} appears multiple times in the list of dims")
        if not data.ndim:
            axes = None
    out = fn(data, axis=axes, keepdims=keepdim and data.ndim > 0)
    if data.dtype == xp.uint8:  # as PyTorch: uint8 in, uint8 out
        out = out.astype(data.dtype)
    return wrap(out, a._device)


def any(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """True where any element (along ``dim``, an int or a tuple) is nonzero; no gradient.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[1.0, 0.0], [0.0, 0.0]])
        >>> (x > 0).any().item(), (x > 0).any(dim=1).tolist()
        (True, [True, False])
    """
    if a.__class__ is not Tensor:
        a = tensor_input(a, "any")
    return _any_all(a, dim, keepdim, "any")


def all(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """True where every element (along ``dim``, an int or a tuple) is nonzero; no gradient.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([[1.0, 2.0], [0.0, 3.0]])
        >>> (x > 0).all().item(), (x > 0).all(dim=1).tolist()
        (False, [True, False])
    """
    if a.__class__ is not Tensor:
        a = tensor_input(a, "all")
    return _any_all(a, dim, keepdim, "all")


# -- the table's entries (NOTE [The operator table]) --------------------------------------------
def _compare_samples(m: Maker) -> Iterator[Sample]:
    a = m.arr(3, 4)
    b = m.arr(3, 4)
    b[0] = a[0]  # some equal elements
    yield Sample((a, b))
    yield Sample((a, m.arr(4)), note="broadcast")
    yield Sample((a, a[1, 2].item()), note="tensor and number")
    yield Sample((m.arr(), m.arr(2)), note="0-d")
    yield Sample((m.arr(0, 2), m.arr(2)), note="empty")


def _compare_errors(m: Maker) -> Iterator[ErrorCase]:
    yield ErrorCase((m.arr(2, 3), "a"), exc=TypeError, match="must be a Tensor or a number")


def _logical_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.mask(3, 4), m.mask(3, 4)), note="bools")
    yield Sample((m.arr(3, 4, low=-1, high=2), m.arr(4, low=-1, high=2)), note="nonzero is true")
    yield Sample((m.mask(3, 1), m.mask(1, 4)), note="broadcast")


def _logical_not_samples(m: Maker) -> Iterator[Sample]:
    yield Sample((m.mask(3, 4),))
    yield Sample((m.arr(3, 4, low=-1, high=2),), note="nonzero is true")
    yield Sample((m.mask(),), note="0-d")


register(
    *(
        OpInfo(
            fn.__name__,
            fn,
            _compare_samples,
            method=True,
            dtypes=ALL,
            grad=False,
            errors=_compare_errors,
        )
        for fn in (eq, ne, lt, le, gt, ge)
    ),
    OpInfo("logical_and", logical_and, _logical_samples, method=True, dtypes=ALL, grad=False),
    OpInfo("logical_or", logical_or, _logical_samples, method=True, dtypes=ALL, grad=False),
    OpInfo("logical_not", logical_not, _logical_not_samples, method=True, dtypes=ALL, grad=False),
)

# how vmap moves the batch dimension through each op (NOTE [Batching rule kinds] in
# aengine/func/_rules.py)
batching(
    {
        "eq": "pointwise",
        "ne": "pointwise",
        "lt": "pointwise",
        "le": "pointwise",
        "gt": "pointwise",
        "ge": "pointwise",
        "logical_and": "pointwise",
        "logical_or": "pointwise",
        "logical_not": "pointwise",
        "any": "dim:dim",
        "all": "dim:dim",
    }
)
