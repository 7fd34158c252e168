"""The Tensor: an array of a backend plus its place in the autograd graph.

# NOTE [Tensor fields]
# ``data`` is the backend array (numpy or CuPy); it is always an array, never
# a numpy scalar.  ``_rg`` is requires_grad, ``_fn`` the grad_fn (None for
# leaves), ``output_nr`` the index among its grad_fn's outputs.  ``_vc`` is the
# version counter, a one-element list shared by a base and all its views and
# bumped by every in-place op; a tensor never modified in place, viewed or
# saved as an output has the shared tuple ``ZERO_VC`` instead (NOTE [The
# shared zero version counter]).  ``_base`` is the tensor a view was taken from
# (always a non-view) and ``_view_fn`` rebuilds the view from the base (used
# when an in-place op on the view rewrites the base's history, see _views.py).
# ``_creation`` says how a view was made when that restricts in-place use
# (e.g. "multi_output:SplitBackward0", "no_grad", "inference"), else None.
# ``_acc`` weakly refers to the AccumulateGrad node of a leaf.
"""

from __future__ import annotations

import builtins
import threading
import warnings
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import (
    ZERO_VC,
    AccumulateGrad,
    AutogradError,
    Node,
    RemovableHandle,
    _unawaited,
    bind_tensor_type,
    describe,
    own_vc,
)
from ..core._graph import _add_hook, current_version, detach_vc, set_history
from ..core._modes import _grad_enabled, _inference
from ._device import CPU, Device
from ._dtype import (
    bool_,
    default_complex,
    get_default_dtype,
    int64,
    is_floating,
    promote_types,
)
from ._fields import TensorFields
from ._views import refresh_view_grad_fn

__all__ = ["Tensor", "describe", "own_vc", "ZERO_VC"]

_acc_lock = threading.Lock()


_NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during ae.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If "
    "you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead."
)


#: the kinds of numpy dtypes a tensor holds: bool, integers, floating, complex
NUMERIC_KINDS = "biufc"
_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


_PY_NUMBERS = frozenset((bool, int, float, complex))


def infer_dtype(data: Any) -> Any:
    """The dtype PyTorch gives ``data`` created without a dtype; None: numpy's.

    Python numbers give the default dtypes (NOTE [The default dtype] in
    _dtype.py); a list or tuple the promotion (``promote_types``) of its
    items' dtypes, where numpy scalars, arrays and Tensors keep theirs
    (``[np.float64(1), 2.0]`` is float64, ``[np.float32(1), 2.0]`` float32).
    None for anything else (a numpy array or scalar keeps its dtype) and for
    items that are not numbers (numpy's conversion then reports them).
    """
    cls = data.__class__
    if cls is float:
        return get_default_dtype()
    if cls is int:
        return int64
    if cls is bool:
        return bool_
    if cls is complex:
        return default_complex()
    if cls is not list and cls is not tuple:
        return None
    py: set[type] = set()
    dts: list[Any] = []
    stack = [data]
    while stack:
        seq = stack.pop()
        kinds = set(map(type, seq))  # one pass in C for a flat row of numbers
        if kinds <= _PY_NUMBERS:
            py |= kinds
            continue
        for item in seq:
            c = item.__class__
            if c in _PY_NUMBERS:
                py.add(c)
            elif c is list or c is tuple:
                stack.append(item)
            elif isinstance(item, Tensor):
                dts.append(item.data.dtype)
            elif isinstance(item, (np.ndarray, np.generic)):
                dts.append(item.dtype)
            else:
                return None
    best: Any = None
    if complex in py:
        best = default_complex()
    elif float in py or (not py and not dts):  # [] is the default dtype too
        best = get_default_dtype()
    elif int in py:
        best = int64
    elif py:
        best = bool_
    for dt in dts:
        best = dt if best is None else promote_types(best, dt)
    return best


def _to_array(data: Any, dtype: Any, dev: Device, copy: bool = True) -> Any:
    """``data`` as an array of ``dev``'s backend, checked to hold numbers.

    Without ``dtype`` the dtype is PyTorch's (``infer_dtype``).
    """
    backend = dev.backend
    inferred = False
    if dtype is None and data.__class__ is not np.ndarray:
        dtype = infer_dtype(data)
        inferred = dtype is not None
    if isinstance(data, Tensor):
        src = data._device.backend
        arr = data.data if src is backend else backend.from_numpy(src.to_numpy(data.data))
    elif isinstance(data, (list, tuple)) and any(isinstance(d, Tensor) for d in _flat(data)):
        arr = _unwrap(data)  # nested lists of numbers, converted below
    else:
        arr = data
    xp = backend.xp
    try:
        out = xp.array(arr, dtype=dtype, copy=True) if copy else backend.asarray(arr, dtype=dtype)
    except OverflowError as exc:  # a Python int too large for ``dtype``
        if inferred and dtype == int64:
            raise ValueError(_OVERFLOW) from exc
        raise ValueError(
            f"value cannot be converted to {dtype} without overflow; pass a dtype "
            "that holds it (e.g. dtype=ae.float64)"
        ) from exc
    except ValueError:  # numpy's "inhomogeneous shape": say where, as PyTorch
        ragged = _ragged(arr) if isinstance(arr, (list, tuple)) else None
        if ragged is None:
            raise
        raise ragged from None
    kind = out.dtype.kind
    if kind == "O":  # Python objects: not numbers, or ints numpy could not fit
        out = _from_objects(data, out, xp, copy, backend)
    elif kind not in NUMERIC_KINDS:
        raise TypeError(
            f"a tensor holds numbers (bool, int, float, complex), not {_what(data, out)}: "
            "convert the data first"
        )
    elif kind == "u" and dtype is None and isinstance(data, (int, list, tuple)):
        # Python ints are int64 (as PyTorch): numpy made uint64 of one above its range
        raise ValueError(_OVERFLOW)
    return out


_OVERFLOW = (
    "value cannot be converted to int64 without overflow (an int outside "
    "[-2**63, 2**63 - 1]); pass floats or dtype=ae.float64"
)


def _ragged(data: list[Any] | tuple[Any, ...]) -> Exception | None:
    """The error PyTorch gives nested sequences of unequal lengths or depths; None if even.

    The shape is read along the first elements, as PyTorch does; the first
    sequence that differs from it (depth first) is reported.
    """
    seqs = (list, tuple, np.ndarray)
    shape: list[int] = []
    item: Any = data
    while isinstance(item, seqs) and not (isinstance(item, np.ndarray) and item.ndim == 0):
        shape.append(len(item))
        if not len(item):
            break
        item = item[0]
    hint = "nested lists must have equal lengths (pad them, or make a tensor of each)"
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        seq, dim = stack.pop()
        is_seq = isinstance(seq, seqs) and not (isinstance(seq, np.ndarray) and seq.ndim == 0)
        if dim == len(shape):
            if is_seq:
                return TypeError(
                    f"must be real number, not {type(seq).__name__}: a sequence at dim {dim}, "
                    f"where the first elements hold numbers; {hint}"
                )
            continue
        if not is_seq:
            return TypeError(
                f"not a sequence: expected a sequence of length {shape[dim]} at dim {dim}, "
                f"got {type(seq).__name__} {seq!r:.20}; {hint}"
            )
        if len(seq) != shape[dim]:
            return ValueError(
                f"expected sequence of length {shape[dim]} at dim {dim} (got {len(seq)}); {hint}"
            )
        stack.extend((item, dim + 1) for item in reversed(seq))
    return None


def _what(data: Any, out: Any) -> str:
    if isinstance(data, (str, bytes)):
        return f"{type(data).__name__} {data[:20]!r}"
    if isinstance(data, (list, tuple)):
        for d in _flat(data):
            if not isinstance(d, _NUMBERS) and not isinstance(d, Tensor):
                return f"{type(d).__name__} {d!r:.20}"
    return f"{type(data).__name__} of dtype {out.dtype}"


def _from_objects(data: Any, out: Any, xp: Any, copy: bool, backend: Any) -> Any:
    """An object array made from ``data``: its numbers, or the error that says why not.

    numpy makes an object array of Python ints beyond int64 (PyTorch: an
    overflow error), also mixed with floats (PyTorch: floats).
    """
    if isinstance(data, np.ndarray):
        raise TypeError(
            "can't convert a numpy array of dtype object: a tensor holds numbers (bool, int, "
            "float, complex); convert it first, e.g. arr.astype(np.float64)"
        )
    items = out.ravel().tolist() if out.ndim else [out.item()]
    for item in items:
        if not isinstance(item, _NUMBERS):
            raise TypeError(
                f"a tensor holds numbers (bool, int, float, complex), not "
                f"{type(item).__name__}: convert the data first"
            )
    if any(isinstance(i, (complex, np.complexfloating)) for i in items):
        dt = "complex128"
    elif any(isinstance(i, (float, np.floating)) for i in items):
        dt = "float64"
    else:
        raise ValueError(_OVERFLOW)  # only ints, and one numpy could not fit
    values = out.tolist()
    return xp.array(values, dtype=dt) if copy else backend.asarray(values, dtype=dt)


def _flat(data: Any) -> Any:
    for d in data:
        if isinstance(d, (list, tuple)):
            yield from _flat(d)
        else:
            yield d


def _unwrap(data: Any) -> Any:
    if isinstance(data, Tensor):
        return data.detach().tolist()
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


if TYPE_CHECKING:  # the table's methods, declared for type checkers (bound by aengine.ops)
    from ._table_methods import TableMethods as _TableMethods
else:
    _TableMethods = object


class Tensor(TensorFields, _TableMethods):
    """An n-dimensional array that records operations for autograd.

    Create tensors with :func:`aengine.tensor` and friends; operations on
    tensors that require grad build the backward graph, and
    ``await loss.backward()`` (or ``ae.sync.backward(loss)``) fills ``.grad``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> y = (x * x).sum()
        >>> ae.sync.backward(y)
        >>> x.grad.tolist()
        [2.0, 4.0]
    """

    __slots__ = ()

    _grad: Tensor | None
    _base: Tensor | None
    _device: Device  # (the core's TensorBase says Any: it knows no Device)

    __array_priority__ = 1000  # numpy defers binary operators to Tensor

    def __init__(self, data: Any, *, requires_grad: bool = False, device: Any = None) -> None:
        dev = CPU if device is None else Device(device)
        self.data = _to_array(data, None, dev)
        self._init_fields(dev)
        if requires_grad is not False:
            self.requires_grad_(requires_grad)

    def _init_fields(self, dev: Device) -> None:
        self._rg = False
        self._fn: Node | None = None
        self.output_nr = 0
        self._vc: list[int] | tuple[int] = ZERO_VC
        self._device = dev

    @staticmethod
    def _make(data: Any, requires_grad: bool = False, dev: Device = CPU) -> Tensor:
        """Fast constructor from a backend array (no checks, no copy)."""
        t = object.__new__(Tensor)
        t.data = data
        t._rg = requires_grad
        t._fn = None
        t.output_nr = 0
        t._vc = ZERO_VC
        t._device = dev
        return t

    # -- metadata -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, a tuple of ints."""
        return self.data.shape  # type: ignore[no-any-return]

    def size(self, dim: int | None = None, *, axis: int | None = None) -> Any:
        """The shape, or its length along ``dim`` (``axis`` is an alias)."""
        if axis is not None:
            if dim is not None:
                raise TypeError("size(): got both 'dim' and its alias 'axis'; pass only one")
            dim = axis
        shape = self.data.shape
        if dim is None:
            return shape
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"size(): argument 'dim' must be an int, not {type(dim).__name__}")
        n = len(shape)
        if not n:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        if not -n <= dim < n:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                f"but got {dim})"
            )
        return shape[dim]

    @property
    def dtype(self) -> Any:
        """The element type (a numpy dtype, e.g. ``ae.float32``)."""
        return self.data.dtype

    @property
    def device(self) -> Device:
        """The device holding the data (``ae.device('cpu')``...)."""
        return self._device

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.data.ndim  # type: ignore[no-any-return]

    def dim(self) -> int:
        """Number of dimensions."""
        return self.data.ndim  # type: ignore[no-any-return]

    def numel(self) -> int:
        """Number of elements."""
        return int(self.data.size)

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.data.shape[0])

    def is_floating_point(self) -> bool:
        """True for floating dtypes."""
        return is_floating(self.data.dtype)

    def is_inference(self) -> bool:
        """True for tensors created in :class:`aengine.inference_mode`."""
        return self._inference

    # -- autograd attributes ---------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this tensor (settable on leaves).

        A view requires grad when its base does, also when it was made before
        an in-place op gave the base a history, and also when it was made in
        no_grad or inference mode (as in PyTorch, such a view has no grad_fn;
        aengine records nothing for ops on it, where PyTorch records a node
        whose gradient reaches no tensor).
        """
        if self._rg:
            return True
        base = self._base
        return base is not None and base._rg and self._view_meta is not None

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if flag.__class__ is not bool:  # PyTorch: a RuntimeError with this text
            raise TypeError(f"requires_grad must be a bool, not {type(flag).__name__}")
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place on a leaf; returns ``self``."""
        if requires_grad.__class__ is not bool:  # PyTorch's text
            raise TypeError(
                "requires_grad_(): argument 'requires_grad' must be bool, not "
                f"{type(requires_grad).__name__}"
            )
        if self._fn is not None:
            if requires_grad:
                return self
            raise AutogradError(
                "you can only change requires_grad flags of leaf variables. If you want to "
                "use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach()."
            )
        if requires_grad and not is_floating(self.data.dtype):
            raise AutogradError(
                f"only Tensors of floating point dtype can require gradients, got {self.data.dtype}; "
                "convert first, e.g. ae.tensor(data, dtype=ae.float64, requires_grad=True)"
            )
        if requires_grad and self._inference and not _inference.get():
            raise AutogradError(
                "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
            )
        self._rg = bool(requires_grad)
        return self

    @property
    def grad_fn(self) -> Node | None:
        """The node that created this tensor (None for leaves)."""
        if self._view_meta is not None:
            refresh_view_grad_fn(self)
        return self._fn

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded op."""
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient (None until a backward reaches this leaf).

        Reading it on a non-leaf that does not retain grad warns, as PyTorch
        does: such a tensor's ``.grad`` is never populated.
        """
        g = self._grad
        if g is None and self._fn is not None and not self._retains:
            warnings.warn(_NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        if _unawaited.ever_dropped:  # NOTE [A backward never awaited]
            _unawaited.raise_if_dropped()
        return g

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        # PyTorch's checks and texts (python_variable.cpp, THPVariable_set_grad)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    "assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value is self:
                raise AutogradError("can't assign Variable as its own grad")
            if value.data.dtype != self.data.dtype:
                raise AutogradError(
                    f"attempting to assign a gradient with dtype '{value.data.dtype}' to a "
                    f"tensor with dtype '{self.data.dtype}'. Please ensure that the gradient "
                    "and the tensor have the same dtype"
                )
            if value._device is not self._device:
                dv, ds = value._device, self._device
                if dv.type != ds.type:
                    where = f"with device type '{dv.type}' to a tensor with device type '{ds.type}'"
                else:
                    where = (
                        f"located on device with index '{dv.index}' to a tensor located on "
                        f"device with index '{ds.index}'"
                    )
                raise AutogradError(
                    f"attempting to assign a gradient {where}. Please ensure that the gradient "
                    "and the tensor are on the same device"
                )
            if value.data.shape != self.data.shape:
                raise AutogradError(
                    f"attempting to assign a gradient of size '{list(value.data.shape)}' to a "
                    f"tensor of size '{list(self.data.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size"
                )
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        """True when :meth:`retain_grad` was called on this non-leaf."""
        return self._retains

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor during backward."""
        if not self._rg:
            raise AutogradError("can't retain_grad on Tensor that has requires_grad=False")
        fn = self.grad_fn
        if fn is None or self._retains:
            return
        self._retains = True
        fn._retain_output(self.output_nr, self)

    @property
    def _version(self) -> int:
        return current_version(self)

    def _is_view(self) -> bool:
        # As PyTorch: an inference tensor tracks no views (its views share its
        # memory, but nothing of autograd's view logic applies to them)
        return self._base is not None and not self._inference

    def _grad_accumulator(self) -> AccumulateGrad:
        acc = self._acc() if self._acc is not None else None
        if acc is None:
            # A leaf has one accumulator while any graph holds it: two threads
            # recording on the same leaf must not make two (PyTorch locks too).
            with _acc_lock:
                acc = self._acc() if self._acc is not None else None
                if acc is None:
                    if not self._rg:
                        raise AutogradError(
                            "a tensor that does not require grad has no grad accumulator"
                        )
                    acc = AccumulateGrad(self)
                    self._acc = weakref.ref(acc)
        return acc

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Run ``hook(grad)`` when this tensor's gradient is computed.

        A returned tensor replaces the gradient.  Works on leaves and
        non-leaves; may be an ``async def`` under the async engine.

        Example::

            >>> import aengine as ae
            >>> x = ae.ones(2, requires_grad=True)
            >>> h = x.register_hook(lambda g: g * 10)
            >>> ae.sync.backward(x.sum())
            >>> x.grad.tolist()
            [10.0, 10.0]
        """
        if not self._rg:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        fn = self.grad_fn
        if fn is not None:
            return fn._register_tensor_pre_hook(self.output_nr, hook)
        if self._hooks is None:
            self._hooks = {}
        return _add_hook(self._hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> RemovableHandle:
        """Run ``hook(tensor)`` after ``.grad`` of this leaf was updated."""
        if not self._rg:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise AutogradError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return _add_hook(self._post_acc_hooks, hook)

    # -- conversion ----------------------------------------------------------------------
    def detach(self) -> Tensor:
        """A tensor sharing data and version counter, cut from the graph."""
        t = Tensor._make(self.data, False, self._device)
        t._vc = own_vc(self)
        t._inference = self._inference
        return t

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A copy of a leaf: its data, requires_grad, ``.grad`` and parameter mark (as torch).

        Only leaves can be copied so, as in torch (a copy of a non-leaf would
        need its graph).
        """
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment. If you were attempting to deepcopy a module, "
                "this may be because of a torch.nn.utils.weight_norm usage"
            )
        if id(self) in memo:
            found: Tensor = memo[id(self)]
            return found
        t = Tensor._make(self.data.copy(), False, self._device)
        memo[id(self)] = t
        if self._rg:
            t.requires_grad_(True)
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        for mark in ("_is_param", "_is_buffer"):
            if mark in self.__dict__:
                t.__dict__[mark] = self.__dict__[mark]
        return t

    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place (not allowed on views)."""
        if self._base is not None:
            raise AutogradError("Can't detach views in-place. Use detach() instead.")
        if self._fn is not None:
            # a saved value of its old graph now fails to unpack, as in PyTorch
            # (NOTE [Saved tensors detached in place] in aengine/core/_graph.py)
            detach_vc(self)
        set_history(self, None, 0, False)
        return self

    def numpy(self) -> Any:
        """The data as a numpy array (shares memory on the cpu)."""
        if _grad_enabled.get() and self.requires_grad:  # as PyTorch: fine under no_grad
            raise AutogradError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        return self._device.backend.to_numpy(self.data)

    def item(self) -> Any:
        """The single value of a one-element tensor as a Python number."""
        if self.data.size != 1:
            raise ValueError(
                f"a Tensor with {self.data.size} elements cannot be converted to Scalar"
            )
        return self.data.item()

    def tolist(self) -> Any:
        """The data as (nested) Python lists."""
        return self._device.backend.to_numpy(self.data).tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.data.size != 1:
            many = "more than one value" if self.data.size else "no values"
            raise ValueError(
                f"Boolean value of Tensor with {many} is ambiguous; use t.any() or t.all()"
            )
        return bool(self.data.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        arr = self._device.backend.to_numpy(self.data)
        return np.asarray(arr, dtype=dtype)

    def __repr__(self) -> str:
        body = repr(self._device.backend.to_numpy(self.data))
        body = body[body.index("(") + 1 : body.rindex(")")] if "(" in body else body
        extras = []
        if self._device is not CPU:
            extras.append(f"device='{self._device}'")
        if self._fn is not None:
            extras.append(f"grad_fn=<{self._fn.name()}>")
        elif self._rg or (self._base is not None and self.requires_grad):
            extras.append("requires_grad=True")
        suffix = "".join(", " + e for e in extras)
        return f"tensor({body}{suffix})"

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self) -> Any:
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.data.shape[0]))

    def __reduce__(self) -> Any:
        raise TypeError("pickling aengine tensors is not supported; pickle t.detach().numpy()")

    # The methods of the operators (sum, reshape, __add__...) are the functions
    # of aengine.ops, assigned to the class by ops/_methods.py; these
    # declarations give type checkers their signatures.
    if TYPE_CHECKING:

        def __add__(self, other: Any, *, alpha: Any = ...) -> Tensor: ...
        def __radd__(self, other: Any, *, alpha: Any = ...) -> Tensor: ...
        def __sub__(self, other: Any, *, alpha: Any = ...) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any, *, rounding_mode: str | None = ...) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __pow__(self, exponent: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __matmul__(self, other: Any) -> Tensor: ...
        def __rmatmul__(self, other: Any) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __eq__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, other: Any) -> Tensor: ...  # type: ignore[override]
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...
        def __and__(self, other: Any) -> Tensor: ...
        def __or__(self, other: Any) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
        def __getitem__(self, index: Any) -> Tensor: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...
        def add(self, other: Any, *, alpha: Any = ...) -> Tensor: ...
        def sub(self, other: Any, *, alpha: Any = ...) -> Tensor: ...
        def mul(self, other: Any) -> Tensor: ...
        def div(self, other: Any, *, rounding_mode: str | None = ...) -> Tensor: ...
        def pow(self, exponent: Any) -> Tensor: ...
        def neg(self) -> Tensor: ...
        def maximum(self, other: Any) -> Tensor: ...
        def minimum(self, other: Any) -> Tensor: ...
        def clamp(self, min: Any = None, max: Any = None) -> Tensor: ...
        def matmul(self, other: Any) -> Tensor: ...
        def exp(self) -> Tensor: ...
        def log(self) -> Tensor: ...
        def sqrt(self) -> Tensor: ...
        def sin(self) -> Tensor: ...
        def cos(self) -> Tensor: ...
        def tanh(self) -> Tensor: ...
        def sigmoid(self) -> Tensor: ...
        def relu(self) -> Tensor: ...
        def square(self) -> Tensor: ...
        def log1p(self) -> Tensor: ...
        def expm1(self) -> Tensor: ...
        def abs(self) -> Tensor: ...
        def sign(self) -> Tensor: ...
        def sum(
            self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
        ) -> Tensor: ...
        def mean(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor: ...
        def prod(
            self,
            dim: int | None = None,
            keepdim: bool = False,
            *,
            dtype: Any = None,
            axis: int | None = None,
        ) -> Tensor: ...
        def amax(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor: ...
        def amin(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor: ...
        def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any: ...
        def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any: ...
        def var(
            self,
            dim: Any = None,
            unbiased: bool | None = None,
            keepdim: bool = False,
            *,
            correction: float | None = None,
            axis: Any = None,
        ) -> Tensor: ...
        def std(
            self,
            dim: Any = None,
            unbiased: bool | None = None,
            keepdim: bool = False,
            *,
            correction: float | None = None,
            axis: Any = None,
        ) -> Tensor: ...
        def logsumexp(
            self, dim: Any = None, keepdim: bool = False, *, axis: Any = None
        ) -> Tensor: ...
        def softmax(self, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor: ...
        def log_softmax(
            self, dim: Any = None, dtype: Any = None, *, axis: Any = None
        ) -> Tensor: ...
        def norm(
            self, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None
        ) -> Tensor: ...
        def reshape(self, *shape: Any) -> Tensor: ...
        def view(self, *shape: Any) -> Tensor: ...
        def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor: ...
        def permute(self, *dims: Any) -> Tensor: ...
        def transpose(self, dim0: int, dim1: int) -> Tensor: ...
        def expand(self, *sizes: Any) -> Tensor: ...
        def broadcast_to(self, shape: Any) -> Tensor: ...
        def squeeze(self, dim: Any = None, *, axis: Any = None) -> Tensor: ...
        def unsqueeze(self, dim: Any = None, *, axis: Any = None) -> Tensor: ...
        def clone(self) -> Tensor: ...
        def contiguous(self) -> Tensor: ...
        def to(self, device: Any = None, dtype: Any = None, *, copy: bool = False) -> Tensor: ...
        def cpu(self) -> Tensor: ...
        def mm(self, mat2: Tensor) -> Tensor: ...
        def dot(self, tensor: Tensor) -> Tensor: ...
        def eq(self, other: Any) -> Tensor: ...
        def ne(self, other: Any) -> Tensor: ...
        def lt(self, other: Any) -> Tensor: ...
        def le(self, other: Any) -> Tensor: ...
        def gt(self, other: Any) -> Tensor: ...
        def ge(self, other: Any) -> Tensor: ...
        def any(self, dim: Any = None, keepdim: bool = False) -> Tensor: ...
        def all(self, dim: Any = None, keepdim: bool = False) -> Tensor: ...
        def view_as(self, other: Tensor) -> Tensor: ...
        def reshape_as(self, other: Tensor) -> Tensor: ...
        def expand_as(self, other: Tensor) -> Tensor: ...
        def float(self) -> Tensor: ...
        def double(self) -> Tensor: ...
        def type_as(self, other: Tensor) -> Tensor: ...
        def add_(self, other: Any) -> Tensor: ...
        def sub_(self, other: Any) -> Tensor: ...
        def mul_(self, other: Any) -> Tensor: ...
        def div_(self, other: Any) -> Tensor: ...
        def zero_(self) -> Tensor: ...
        def fill_(self, value: Any) -> Tensor: ...
        def copy_(self, src: Any) -> Tensor: ...
        def clamp_(self, min: Any = None, max: Any = None) -> Tensor: ...
        def relu_(self) -> Tensor: ...
        def __iadd__(self, other: Any) -> Tensor: ...  # type: ignore[misc]  # no alpha=, rounding_mode=
        def __isub__(self, other: Any) -> Tensor: ...  # type: ignore[misc]  # no alpha=, rounding_mode=
        def __imul__(self, other: Any) -> Tensor: ...
        def __itruediv__(self, other: Any) -> Tensor: ...  # type: ignore[misc]  # no alpha=, rounding_mode=
        def select(self, dim: Any = None, index: Any = None, *, axis: Any = None) -> Tensor: ...
        def narrow(
            self, dim: Any = None, start: Any = None, length: Any = None, *, axis: Any = None
        ) -> Tensor: ...
        def index_select(
            self, dim: Any = None, index: Any = None, *, axis: Any = None
        ) -> Tensor: ...
        def gather(self, dim: Any = None, index: Any = None, *, axis: Any = None) -> Tensor: ...
        def take_along_dim(
            self, indices: Any, dim: int | None = None, *, axis: int | None = None
        ) -> Tensor: ...
        def masked_fill(self, mask: Any, value: Any) -> Tensor: ...
        def split(self, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]: ...
        def chunk(
            self, chunks: int, dim: Any = None, *, axis: Any = None
        ) -> tuple[Tensor, ...]: ...
        def unbind(self, dim: Any = None, *, axis: Any = None) -> tuple[Tensor, ...]: ...
        def backward(  # runs now where no event loop runs, else awaitable (_autograd.py)
            self,
            gradient: Tensor | None = None,
            retain_graph: bool | None = None,
            create_graph: bool = False,
            inputs: Any = None,
        ) -> Awaitable[None]: ...
        @property
        def T(self) -> Tensor: ...
        @property
        def mT(self) -> Tensor: ...
        def cuda(self, device: Any = None) -> Tensor: ...
        def bernoulli(
            self, p: builtins.float | None = None, *, generator: Any = None
        ) -> Tensor: ...
        def multinomial(
            self, num_samples: int, replacement: bool = False, *, generator: Any = None
        ) -> Tensor: ...
        def type(self, dtype: Any = None) -> Any: ...
        def half(self) -> Tensor: ...
        def long(self) -> Tensor: ...
        # last: in the class body these names shadow the builtins of the annotations above
        def int(self) -> Tensor: ...
        def bool(self) -> Tensor: ...


bind_tensor_type(Tensor, CPU)  # NOTE [The core and the Tensor]
