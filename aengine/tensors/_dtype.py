"""dtypes: aengine uses numpy's dtype objects (``ae.float32 is np.dtype('float32')``).

# NOTE [The default dtype]
# As in PyTorch, Python floats (alone, in lists, mixed with ints) become the
# default floating dtype, float32 unless ``set_default_dtype`` changed it;
# Python ints become int64, bools bool, complex numbers the complex dtype of
# the default (complex64 for float32, complex128 for float64); numpy arrays,
# numpy scalars and Tensors keep their dtype.  Creation functions without a
# dtype (zeros, ones, rand, linspace, eye...) give the default, and so does
# an op that turns integers into floats (``int_tensor * 2.5``).  The setting
# is process-wide (PyTorch's is global too): read it with
# ``get_default_dtype()`` where it is needed, never copy it into a constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import TensorBase

__all__ = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool_",
    "complex64",
    "complex128",
    "as_dtype",
    "is_floating",
    "result_dtype",
    "promote_types",
    "get_default_dtype",
    "set_default_dtype",
    "default_complex",
]

float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
bool_ = np.dtype("bool")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

_default_dtype = float32  # process-wide, as PyTorch's (NOTE [The default dtype])


def get_default_dtype() -> np.dtype[Any]:
    """The default floating dtype (float32 unless :func:`set_default_dtype` changed it).

    Example::

        >>> import aengine as ae
        >>> ae.get_default_dtype()
        dtype('float32')
        >>> ae.tensor([1.0, 2.0]).dtype
        dtype('float32')
    """
    return _default_dtype


def set_default_dtype(d: Any) -> None:
    """Set the default floating dtype (``ae.float16``, ``ae.float32`` or ``ae.float64``).

    It is what Python floats become (``ae.tensor(1.5)``), what creation
    functions give without ``dtype=`` (``ae.zeros``, ``ae.rand``...), and what
    integer tensors become in float arithmetic (``int_tensor * 2.5``).  The
    setting is process-wide, as PyTorch's: it holds for every thread and task
    from this call on, so set it once at start-up rather than around a block
    of code.  Only floating dtypes are accepted (TypeError otherwise, as
    PyTorch).

    Example::

        >>> import aengine as ae
        >>> ae.set_default_dtype(ae.float64)
        >>> ae.tensor([1.0]).dtype
        dtype('float64')
        >>> ae.set_default_dtype(ae.float32)
    """
    global _default_dtype
    dt = as_dtype(d)
    if dt is None or dt.kind != "f":
        raise TypeError(
            f"only floating-point types are supported as the default type, got {d!r}; "
            "pass ae.float16, ae.float32 or ae.float64"
        )
    _default_dtype = dt


def default_complex() -> np.dtype[Any]:
    """The complex dtype matching the default dtype (complex128 for float64, else complex64)."""
    return complex128 if _default_dtype == float64 else complex64


def as_dtype(dtype: Any) -> np.dtype[Any] | None:
    """Normalise a dtype argument (``None``, a dtype, a name, a Python type)."""
    if dtype is None:
        return None
    try:
        d: np.dtype[Any] = np.dtype(dtype)
        return d
    except TypeError as exc:
        raise TypeError(f"not a dtype: {dtype!r}") from exc


def is_floating(dtype: Any) -> bool:
    """True for floating (and complex) dtypes, the only ones that take gradients."""
    return dtype.kind in "fc"


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def promote_types(a: Any, b: Any) -> Any:
    """PyTorch's ``promote_types``: the higher category wins, else numpy's promotion.

    Unlike numpy, an integer and a floating dtype give the floating one
    (``int64`` and ``float32`` give ``float32``, numpy says ``float64``).
    """
    if a == b:
        return a
    ca, cb = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if ca != cb:
        if (ca == 3 and cb == 2) or (cb == 3 and ca == 2):  # complex with float: widest of both
            return np.promote_types(a, b)
        return a if ca > cb else b
    return np.promote_types(a, b)


def result_dtype(a: Any, b: Any) -> Any:
    """The dtype of a binary op on tensors or scalars, by PyTorch's rules.

    A dimensioned tensor wins over a 0-d tensor of the same or a lower
    category, and a Python scalar only lifts the category (a float scalar
    times an int tensor gives the default float dtype).
    """
    if isinstance(a, TensorBase):
        if isinstance(b, TensorBase):
            da, db = a.data.dtype, b.data.dtype
            if da == db:
                return da
            ca, cb = _CATEGORY[da.kind], _CATEGORY[db.kind]
            za, zb = a.data.ndim == 0, b.data.ndim == 0
            if za != zb:
                (dim, cdim), (zero, czero) = ((db, cb), (da, ca)) if za else ((da, ca), (db, cb))
                if czero <= cdim:
                    return dim
                return promote_types(zero, dim) if czero == 3 and cdim == 2 else zero
            return promote_types(da, db)
        return _with_scalar(a.data.dtype, b)
    return _with_scalar(b.data.dtype, a)


def _with_scalar(dtype: Any, scalar: Any) -> Any:
    """A tensor of ``dtype`` with a Python (or numpy) scalar, by PyTorch's rules.

    The scalar lifts only the category: ``int * 2.5`` gives the default
    dtype, ``float32 * 1j`` complex64, ``float64 * 1j`` complex128, ``int *
    1j`` the default complex dtype.  numpy scalars count as Python numbers
    of their kind, as in PyTorch.
    """
    kind = dtype.kind
    if isinstance(scalar, (bool, np.bool_)):
        return dtype
    if isinstance(scalar, (int, np.integer)):
        return int64 if kind == "b" else dtype
    if isinstance(scalar, (float, np.floating)):
        return dtype if kind in "fc" else _default_dtype
    if isinstance(scalar, (complex, np.complexfloating)):
        if kind == "c":
            return dtype
        if kind == "f":
            return complex128 if dtype == float64 else complex64
        return default_complex()
    return np.result_type(dtype, scalar)
