"""In-place operators: add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ relu_, ``x[idx] = v``.

Each one mutates ``t.data``, bumps the version counter and, when history is
recorded, makes the node of its out-of-place twin (applied to the old value
of ``t``) the new history of ``t`` or, for a view, of its base.  See NOTE
[In-place and history] and NOTE [Views and CopySlices] in ``_inplace.py``.

``put_flat`` / ``take_flat`` are the differentiable primitives CopySlices and
``x[idx] = v`` use to write a region of a gradient (by flat positions).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..core._errors import AutogradError
from ..tensors import _views
from ..tensors._creation import zeros_like
from ..tensors._dtype import get_default_dtype, result_dtype
from ..tensors._tensor import _NUMBERS, Tensor
from ..tensors._views import (
    check_inplace,
    commit_inplace,
    has_internal_overlap,
    snapshot,
    stale_view_requires_grad,
)
from ._arith import (
    AddBackward0,
    AddScalarBackward,
    ClampBackward1,
    DivBackward0,
    DivScalarBackward,
    MulBackward0,
    MulScalarBackward,
    SubBackward0,
    SubScalarBackward,
    clamp,
)
from ._core import ELEMENTWISE, GradOps, as_tensor_arg, node_class, record, record_one, same_device
from ._index import SelectBackward0, _basic, _index_error, _parse, ints_first
from ._unary import relu_grad

__all__ = [
    "add_",
    "sub_",
    "mul_",
    "div_",
    "zero_",
    "fill_",
    "copy_",
    "clamp_",
    "relu_",
    "setitem",
    "put_flat",
    "take_flat",
]

_SCALARS = (int, float, bool)


# -- put_flat / take_flat: writing and reading a region by flat positions --------------------
def _put_flat_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    pos, accumulate = n.attrs
    need = n.needs
    gx = None
    if need[0]:
        gx = g if accumulate else F.put_flat(g, pos, 0.0)
    return (gx, F.take_flat(g, pos) if need[1] else None)


def _put_flat_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    tx, tv = ts
    if tx is None:
        tx = zeros_like(ins[0])
    return put_flat(tx, attrs[0], tv if tv is not None else 0.0, attrs[1])


PutFlatBackward0 = node_class("PutFlatBackward0", _put_flat_rule, jvp=_put_flat_jvp)
TakeFlatBackward0 = node_class(
    "TakeFlatBackward0",
    lambda F, g, s, n: (F.put_flat(F.zeros(n.attrs[1], g), n.attrs[0], g, True),),
    jvp=lambda ts, ins, out, a, s: take_flat(ts[0], a[0]),
)


def put_flat(x: Tensor, pos: Any, v: Any, accumulate: bool = False) -> Tensor:
    """A copy of ``x`` whose elements at flat positions ``pos`` are ``v`` (or have ``v`` added).

    ``pos`` is an integer array of the backend; ``v`` a Tensor broadcasting
    to its shape, or a scalar.  Without ``accumulate`` repeated positions
    keep the last value; the gradient of ``v`` is ``g`` at ``pos`` either way
    (PyTorch's index_put).

    Example::

        >>> import aengine as ae, numpy as np
        >>> from aengine.ops._inplace_ops import put_flat
        >>> put_flat(ae.zeros(2, 2), np.array([1, 2]), 5.0).tolist()
        [[0.0, 5.0], [5.0, 0.0]]
    """
    xp = x._device.backend.xp
    out = xp.array(x.data, order="C", copy=True)
    flat = out.reshape(-1)
    vt = v if v.__class__ is Tensor else None
    val = v.data if vt is not None else v
    if accumulate:
        xp.add.at(flat, pos, val)
    else:
        flat[pos] = val
    return record(PutFlatBackward0, out, x._device, (x, vt), attrs=(pos, accumulate), bcast=True)


def take_flat(x: Tensor, pos: Any) -> Tensor:
    """The elements of ``x`` at flat positions ``pos`` (an integer array), shaped like ``pos``."""
    xp = x._device.backend.xp
    out = xp.asarray(x.data.reshape(-1)[pos])
    return record_one(TakeFlatBackward0, out, x._device, x, 1, (pos, x.data.shape))


# -- operands ------------------------------------------------------------------------------
def _operand(t: Tensor, other: Any) -> Any:
    if other.__class__ is Tensor or isinstance(other, (Tensor, *_SCALARS)):
        return other
    return as_tensor_arg(other, t)


def _check_shape(t: Tensor, shape: tuple[int, ...]) -> None:
    tshape = t.data.shape
    if shape == tshape:
        return
    try:
        b = np.broadcast_shapes(tshape, shape)
    except ValueError:
        raise ValueError(
            f"the operand of shape {list(shape)} cannot be broadcast to the shape "
            f"{list(tshape)} of the tensor modified in place"
        ) from None
    if b != tshape:
        raise ValueError(
            f"output with shape {list(tshape)} doesn't match the broadcast shape {list(b)}"
        )


def _check_operand(t: Tensor, other: Any, true_div: bool = False) -> None:
    """Shape and dtype checks of ``t.op_(other)``: the result must fit in ``t``."""
    td = t.data.dtype
    if other.__class__ is Tensor:
        if other._device is not t._device:
            same_device(t, other)
        od = other.data
        if od.shape != t.data.shape:
            _check_shape(t, od.shape)
        if od.dtype == td and (td.kind in "fc" or not true_div):
            return
    elif td.kind == "f" and other.__class__ is not complex:
        return  # a real scalar always fits a floating tensor
    rd = result_dtype(t, other)
    if true_div and rd.kind not in "fc":
        rd = get_default_dtype()
    if not np.can_cast(rd, t.data.dtype, casting="same_kind"):
        raise TypeError(
            f"result type {rd} can't be cast to the desired output type {t.data.dtype}; "
            "use the out-of-place op, or convert the tensor first"
        )


def _keep_self_dtype(r: Tensor, t: Tensor, other: Any) -> None:
    """Cast the gradient for self back to ``t``'s dtype when ``other`` promotes it."""
    node = r._fn
    if node is None or other.__class__ is not Tensor or other.data.dtype == t.data.dtype:
        return
    meta = list(node.meta or (None,) * len(node))  # type: ignore[attr-defined]
    meta[0] = (t.data.shape, t.data.dtype)
    node.meta = tuple(meta)  # type: ignore[attr-defined]


# -- add_ / sub_ / mul_ / div_ ----------------------------------------------------------------
def _binary_(t: Tensor, other: Any, ufunc: str, clss: tuple[Any, Any], saves: bool) -> Tensor:
    """``t.op_(other)``; ``saves``: whether the op saves its operands (mul_, div_)."""
    other = _operand(t, other)
    _check_operand(t, other, ufunc == "true_divide")
    r = None
    if check_inplace(t, other):
        dev = t._device
        if other.__class__ is Tensor:
            if saves:
                # NOTE [What a binary op saves]: the old self is read (so copied) only for
                # other's gradient, other only for self's gradient (and for div, other's)
                other_rg = other._rg or (
                    other._view_meta is not None and stale_view_requires_grad(other)
                )
                snap = snapshot(t, other_rg)
                r = record(clss[0], t.data, dev, (snap, other), (snap, other), bcast=True)
                if _views._before_inplace is not None:  # ``other`` may be ``t``: saved just now
                    _views._before_inplace(t)  # (NOTE [Mutation of saved tensors])
            else:
                r = record(clss[0], t.data, dev, (snapshot(t, False), other), bcast=True)
            _keep_self_dtype(r, t, other)
        else:
            attrs = other if saves else None
            r = record(clss[1], t.data, dev, (snapshot(t, False), other), attrs=attrs)
    val = other.data if other.__class__ is Tensor else other
    dev = t._device
    xp = (dev._backend or dev.backend).xp
    getattr(xp, ufunc)(t.data, val, out=t.data, casting="unsafe")
    return commit_inplace(t, r)


def add_(self: Tensor, other: Any) -> Tensor:
    """``self += other`` in place (broadcasting ``other``); returns ``self``.

    Example::

        >>> import aengine as ae
        >>> x = ae.zeros(2)
        >>> x.add_(1.5).tolist(), x._version
        ([1.5, 1.5], 1)
    """
    return _binary_(self, other, "add", (AddBackward0, AddScalarBackward), False)


def sub_(self: Tensor, other: Any) -> Tensor:
    """``self -= other`` in place; returns ``self``."""
    return _binary_(self, other, "subtract", (SubBackward0, SubScalarBackward), False)


def mul_(self: Tensor, other: Any) -> Tensor:
    """``self *= other`` in place; returns ``self``."""
    return _binary_(self, other, "multiply", (MulBackward0, MulScalarBackward), True)


def div_(self: Tensor, other: Any) -> Tensor:
    """``self /= other`` in place (true division); returns ``self``."""
    return _binary_(self, other, "true_divide", (DivBackward0, DivScalarBackward), True)


# -- zero_ / fill_ / copy_ --------------------------------------------------------------------
ZeroBackward0 = node_class("ZeroBackward0", lambda F, g, s, n: (F.zeros_like(g),), jvp=ELEMENTWISE)
FillBackward2 = node_class("FillBackward2", lambda F, g, s, n: (F.zeros_like(g),), jvp=ELEMENTWISE)
FillBackward3 = node_class(
    "FillBackward3",
    lambda F, g, s, n: (F.zeros_like(g) if n.needs[0] else None, g if n.needs[1] else None),
    jvp=ELEMENTWISE,
)


def _copy_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    need = n.needs
    gsrc = None
    if need[1]:
        gsrc = g if n.attrs is None else F.to_device(g, n.attrs)
    return (F.zeros_like(g) if need[0] else None, gsrc)


CopyBackwards = node_class("CopyBackwards", _copy_rule, jvp=ELEMENTWISE)


def zero_(self: Tensor) -> Tensor:
    """Set every element to 0 in place; returns ``self``."""
    r = None
    if check_inplace(self, overlap=False):  # one value everywhere: fine on an expanded tensor
        r = record(ZeroBackward0, self.data, self._device, (snapshot(self, False),))
    self.data[...] = 0
    return commit_inplace(self, r)


def fill_(self: Tensor, value: Any) -> Tensor:
    """Set every element to ``value`` (a number or a 0-d tensor) in place; returns ``self``.

    As PyTorch, filling an expanded tensor with a number is fine (every
    element reads the value), with a tensor it raises the overlap error.
    """
    if not isinstance(value, (Tensor, *_NUMBERS)):
        raise TypeError(
            f"fill_(): argument 'value' must be a number or a 0-d tensor, not "
            f"{type(value).__name__}"
        )
    return _fill(self, value, False)


def _fill(self: Tensor, value: Any, overlap: bool) -> Tensor:
    """``fill_``; ``overlap``: raise the overlap error for an expanded ``self`` (as copy_)."""
    if isinstance(value, Tensor):
        if value.data.ndim:
            raise ValueError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.data.ndim} dimensions."
            )
        r = None
        if check_inplace(self, value):
            snap = snapshot(self, False)
            r = record(FillBackward3, self.data, self._device, (snap, value), bcast=True)
        self.data[...] = self._device.backend.to_numpy(value.data).item()
        return commit_inplace(self, r)
    r = None
    if check_inplace(self, overlap=overlap):
        r = record(FillBackward2, self.data, self._device, (snapshot(self, False),))
    self.data[...] = value
    return commit_inplace(self, r)


def copy_(self: Tensor, src: Any) -> Tensor:
    """Copy ``src`` (broadcast, converted to ``self``'s dtype and device) into ``self``.

    Gradients flow to ``src``; the old value of ``self`` gets none.

    Example::

        >>> import aengine as ae
        >>> x = ae.zeros(2, 2)
        >>> x.copy_(ae.tensor([1.0, 2.0])).tolist()
        [[1.0, 2.0], [1.0, 2.0]]
    """
    if not isinstance(src, Tensor):
        src = as_tensor_arg(src, self)
    _check_shape(self, src.data.shape)
    dev = self._device
    r = None
    if check_inplace(self, src):
        src_dev = None if src._device is dev else src._device
        r = record(
            CopyBackwards, self.data, dev, (snapshot(self, False), src), attrs=src_dev, bcast=True
        )
    data = src.data
    if src._device is not dev:
        data = dev.backend.from_numpy(src._device.backend.to_numpy(data))
    self.data[...] = data
    return commit_inplace(self, r)


# -- clamp_ / relu_ ---------------------------------------------------------------------------
ReluBackward0 = node_class(
    "ReluBackward0", lambda F, g, s, n: (relu_grad(F, g, s[0]),), jvp=ELEMENTWISE
)


def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """Limit values to [min, max] in place; returns ``self``."""
    if min is None and max is None:
        raise ValueError("clamp needs at least one of min or max")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor_(self, min, max)
    for bound in (min, max):
        if bound is not None:
            _check_operand(self, bound)
    r = None
    if check_inplace(self):
        snap = snapshot(self, True)  # the rule masks by the old values
        r = record(ClampBackward1, self.data, self._device, (snap,), (snap,), attrs=(min, max))
    self._device.backend.xp.clip(self.data, min, max, out=self.data)
    return commit_inplace(self, r)


def _clamp_tensor_(self: Tensor, lo: Any, hi: Any) -> Tensor:
    """clamp_ with tensor bounds: the out-of-place clamp (several nodes) written back."""
    rec = check_inplace(self, lo, hi)
    if rec and self._base is not None and self._view_meta is not None:
        raise AutogradError(
            "clamp_ with tensor bounds on a view is not supported while recording history; "
            "use the out-of-place clamp: v = v.clamp(min, max)"
        )
    r = clamp(snapshot(self, True), lo, hi)
    _check_shape(self, r.data.shape)
    self.data[...] = r.data
    return commit_inplace(self, r if rec else None)


def relu_(self: Tensor) -> Tensor:
    """``max(self, 0)`` in place; returns ``self``."""
    r = None
    if check_inplace(self):
        r = record(
            ReluBackward0, self.data, self._device, (snapshot(self, False),), save_output=True
        )
    xp = self._device.backend.xp
    xp.maximum(self.data, 0, out=self.data, casting="unsafe")
    return commit_inplace(self, r)


# -- x[idx] = v -------------------------------------------------------------------------------
def _index_put_rule(F: GradOps, g: Any, s: Any, n: Any) -> Any:
    attrs = n.attrs
    pos = attrs[2]
    if pos is None:  # flat positions of the indexed elements, computed once
        idx, shape = attrs[0], attrs[1]
        xp = n.dev.backend.xp
        pos = attrs[2] = xp.arange(int(np.prod(shape))).reshape(shape)[idx]
    need = n.needs
    return (
        F.put_flat(g, pos, 0.0) if need[0] else None,
        F.take_flat(g, pos) if need[1] else None,
    )


def _index_put_jvp(ts: Any, ins: Any, out: Tensor, attrs: Any, s: Any) -> Any:
    tx, tv = ts
    idx, shape = attrs[0], attrs[1]
    pos = np.arange(int(np.prod(shape))).reshape(shape)[idx]
    if tx is None:
        tx = zeros_like(ins[0])
    return put_flat(tx, out._device.backend.asarray(pos), tv if tv is not None else 0.0)


IndexPutBackward0 = node_class("IndexPutBackward0", _index_put_rule, jvp=_index_put_jvp)


_WARN_INDEX_PUT = (
    "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
    "performing this operation. This also applies to advanced indexing e.g. tensor[indices] = "
    "tensor"
)
_WARN_MASKED_FILL = (
    "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
    "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = "
    "scalar"
)


def _warn_expanded(t: Tensor, idx: tuple[Any, ...], value: Any) -> None:
    """PyTorch's warnings for ``t[idx] = value`` on an expanded ``t`` (it writes through).

    A single boolean mask with one value is PyTorch's masked_fill_, which warns too.
    """
    data = t.data
    if not (data.strides and 0 in data.strides and has_internal_overlap(data)):
        return
    warnings.warn(_WARN_INDEX_PUT, UserWarning, stacklevel=4)
    rest = [i for i in idx if i.__class__ is not slice and i is not Ellipsis]
    one = value.data.size == 1 if value.__class__ is Tensor else True
    if one and len(rest) == 1 and getattr(getattr(rest[0], "dtype", None), "kind", "") == "b":
        warnings.warn(_WARN_MASKED_FILL, UserWarning, stacklevel=4)


def _index_put_(t: Tensor, idx: tuple[Any, ...], value: Any) -> Tensor:
    _warn_expanded(t, idx, value)
    r = None
    if check_inplace(t, value, overlap=False):
        vt = value if value.__class__ is Tensor else None
        r = record(
            IndexPutBackward0,
            t.data,
            t._device,
            (snapshot(t, False), vt),
            attrs=[idx, t.data.shape, None],
            bcast=True,
        )
    val = value.data if value.__class__ is Tensor else value
    try:
        t.data[idx] = val
    except IndexError as exc:
        raise _index_error(exc, t) from None
    except ValueError as exc:
        raise ValueError(f"shape mismatch in x[idx] = v: {exc}") from None
    return commit_inplace(t, r)


def setitem(self: Tensor, index: Any, value: Any) -> None:
    """``self[index] = value`` in place (``value`` a Tensor or a number, broadcast).

    A basic index writes through a view (``self[index].copy_(value)``, whose
    history becomes a CopySlices of ``self``); an advanced one records
    IndexPutBackward0, as PyTorch does.  Repeated advanced indices keep the
    last value written.

    Example::

        >>> import aengine as ae
        >>> x = ae.zeros(3)
        >>> x[1:] = ae.tensor([1.0, 2.0])
        >>> x.tolist()
        [0.0, 1.0, 2.0]
    """
    if not isinstance(value, (Tensor, *_SCALARS)):
        value = as_tensor_arg(value, self)
    elif isinstance(value, Tensor):
        same_device(self, value)
    idx, cls, has_int = _parse(self, index)[:3]
    if cls is not None:
        view = _basic(self, idx, cls)
        if isinstance(value, Tensor):
            copy_(view, value)
        else:
            _fill(view, value, True)  # PyTorch copies a number in: expanded regions raise
        return
    target = self
    if has_int:
        first, idx = ints_first(idx)
        target = _basic(self, first, SelectBackward0)
    _index_put_(target, idx, value)
