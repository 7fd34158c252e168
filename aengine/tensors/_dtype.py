"""dtypes: aengine uses numpy's dtype objects (``ae.float32 is np.dtype('float32')``)."""

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
    "as_dtype",
    "is_floating",
    "result_dtype",
    "default_float",
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
default_float = float64


def as_dtype(dtype: Any) -> np.dtype[Any] | None:
    """Normalise a dtype argument (``None``, a dtype, a name, a Python type)."""
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"not a dtype: {dtype!r}") from exc


def is_floating(dtype: Any) -> bool:
    """True for floating (and complex) dtypes, the only ones that take gradients."""
    return dtype.kind in "fc"


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


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
                return zero if czero > cdim else dim
            if ca != cb:
                return da if ca > cb else db
            return np.promote_types(da, db)
        return _with_scalar(a.data.dtype, b)
    return _with_scalar(b.data.dtype, a)


def _with_scalar(dtype: Any, scalar: Any) -> Any:
    kind = dtype.kind
    if isinstance(scalar, bool):
        return dtype
    if isinstance(scalar, int):
        return int64 if kind == "b" else dtype
    if isinstance(scalar, float):
        return dtype if kind in "fc" else default_float
    if isinstance(scalar, complex):
        return dtype if kind == "c" else np.dtype("complex128")
    return np.result_type(dtype, scalar)
