"""vmap's batched tensors, the active vmap levels, and the dispatch of ops to batching rules.

# NOTE [vmap by physical translation]
# A ``BatchedTensor`` is the value one sample sees inside ``vmap``: its
# *logical* shape is a sample's, its *physical* value ``_v`` holds every
# sample along dim 0 (``in_dims`` is moved there on entry).  An op called
# with a batched argument runs its batching rule (the ``batch`` column of the
# operator table; aengine/func/_rules.py) which calls ordinary aengine ops on
# the physical values, so the autograd graph recorded is an ordinary graph of
# physical tensors: every rule is differentiable, and a backward of it needs
# no batching at all.  Nested vmaps nest wrappers: the physical value of a
# level is a plain Tensor or a BatchedTensor of an outer level (levels
# decrease going inward; the outer level's samples are the outer physical
# dim), and an op is handled at the innermost level among its arguments,
# whose rule's ops dispatch again for the outer ones.
#
# ``grad`` (and the other reverse transforms) under vmap differentiate with
# respect to their inputs *expanded* along every active level's batch
# (``to_levels``): a parameter shared by every sample becomes a stride-0
# tensor of shape (B, *shape), one copy per sample, so the one backward of
# the physical graph gives per-sample gradients -- the gradient of the sum
# of the samples' losses with respect to sample b's own copy is the gradient
# of sample b's loss.  Linear and convolution layers recognise such an
# expanded weight (``_same``) and compute the forward with the shared weight
# (one matrix product for the batch) and the per-sample weight gradients in
# one batched product (aengine/func/_persample.py).
#
# Why this design: torch batches the backward too (each gradient formula
# runs under vmap), which here would need a batched variant of every rule
# and of the engine's buffers; translating the forward and expanding the
# weights leaves the backward, the engine and every gradient rule as they
# are, and makes the per-sample weight gradients the batched products a
# per-sample-gradient library would write by hand (docs/performance.md has
# the measurements against torch.func and against one backward per sample).
#
# Dispatch: a BatchedTensor is a ``Tensor`` subclass, so ``plain * batched``
# reaches its reflected operator first (Python's rule for subclasses), and
# its methods are the table's methods made dispatching.  Free functions
# (``ae.exp(x)``, ``ae.nn.functional.linear(x, w)``) are the operators
# themselves, which know nothing of vmap; the first ``vmap`` call replaces
# each table function in the public namespaces (``aengine``,
# ``aengine.nn.functional``, ``aengine.linalg``, ``aengine.special``) by a
# dispatcher that calls the operator unchanged when no argument is batched
# (``install`` in _install.py).  Programs that never call vmap keep the
# operators with no wrapper frame on their hot path (a wrapper measured 0.1-0.2 us a call,
# about a tenth of a small op's cost); programs that do pay one Python call
# per free-function op.  A function imported by name before the first vmap
# (``from aengine import exp``) is the bare operator: given a BatchedTensor
# it raises naming the way out (``BatchedTensor.data``).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..ops._table import TABLE, OpInfo
from ..tensors import Tensor
from ._levels import _LEVELS, CREATE_GRAPH, GRAD_DEPTH, Level, VmapError, active_levels, push_level

__all__ = [
    "BatchedTensor",
    "Level",
    "active_levels",
    "push_level",
    "wrap",
    "to_levels",
    "wrap_levels",
    "levels_of",
    "dispatch",
    "VmapError",
    "GRAD_DEPTH",
    "CREATE_GRAPH",
]


class BatchedTensor(Tensor):
    """A sample's view of a batch inside ``ae.func.vmap`` (NOTE [vmap by physical translation]).

    ``shape``, ``ndim``, ``dtype`` and ``device`` are a sample's; its
    operators and methods run the ops' batching rules.  It exists only while
    its vmap runs: the function's results are unwrapped on the way out.

    Example::

        >>> import aengine as ae
        >>> ae.sync.func.vmap(lambda x: x.shape)(ae.ones(3, 2))  # doctest: +SKIP
        (2,)
    """

    __slots__ = ("_v", "_lvl", "_same")

    _v: Tensor
    _lvl: Level
    #: every sample holds the same value (a tensor expanded by a transform)
    _same: bool

    # -- a sample's metadata ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._v.shape[1:])

    def size(self, dim: int | None = None, *, axis: int | None = None) -> Any:
        shape = self.shape
        if axis is not None:
            dim = axis
        if dim is None:
            return shape
        return shape[dim]

    @property
    def ndim(self) -> int:
        return self._v.ndim - 1

    def dim(self) -> int:
        return self._v.ndim - 1

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    @property
    def dtype(self) -> Any:
        return self._v.dtype

    @property
    def device(self) -> Any:
        return self._v.device

    @property
    def _device(self) -> Any:  # type: ignore[override]
        return self._v._device

    @property
    def requires_grad(self) -> bool:
        return self._v.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    @property
    def grad_fn(self) -> Any:
        return self._v.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._v.is_leaf

    def is_floating_point(self) -> bool:
        return self._v.is_floating_point()

    @property
    def data(self) -> Any:
        # an operator reached without dispatch (see NOTE [vmap by physical translation]):
        # name the nearest caller that is an operator of the table
        frame: Any = sys._getframe(1)
        op = frame.f_code.co_name
        codes = {getattr(info.fn, "__code__", None) for info in TABLE.values()}
        for _ in range(6):
            if frame is None:
                break
            if frame.f_code in codes:  # an operator (a family's shared closure says its name)
                named = frame.f_locals.get("name")
                op = named if isinstance(named, str) else frame.f_code.co_name
                break
            frame = frame.f_back
        raise VmapError(
            f"{op}() got a vmap-batched tensor through a reference that does not dispatch to "
            "batching rules (a function imported by name before the first vmap call, a method "
            "of an unbatched tensor given a batched one, or an internal helper): call it as "
            f"ae.{op}(...) / ae.nn.functional.{op}(...), or as a method of the batched tensor"
        )

    def __repr__(self) -> str:
        return f"BatchedTensor(shape={self.shape}, level={self._lvl.depth}, value={self._v!r})"

    def __bool__(self) -> bool:
        raise VmapError(
            "a batched tensor has no single truth value inside vmap (data-dependent control "
            "flow): use ae.where(...) to select per sample"
        )

    def item(self) -> Any:
        raise VmapError(
            "item() of a batched tensor inside vmap: each sample has its own value; "
            "return the tensor from the vmapped function instead"
        )

    def tolist(self) -> Any:
        raise VmapError("tolist() of a batched tensor inside vmap; return the tensor instead")

    def numpy(self) -> Any:
        raise VmapError("numpy() of a batched tensor inside vmap; return the tensor instead")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise VmapError(
            "a batched tensor cannot become an array inside vmap: return the tensor from the "
            "vmapped function; if an operator got it (a method of an unbatched tensor given a "
            "batched one, a function imported by name before the first vmap), call ae.<op>(...) "
            "or the batched tensor's method instead"
        )

    def __iter__(self) -> Any:
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise VmapError("a batched tensor cannot be copied inside vmap")

    def detach(self) -> Tensor:
        return _new(self._v.detach(), self._lvl, self._same)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        raise VmapError(
            "requires_grad_() on a batched tensor inside vmap: use ae.func.grad / vjp inside "
            "the vmapped function to differentiate"
        )

    def backward(self, *args: Any, **kwargs: Any) -> Any:
        raise VmapError(
            "backward() inside vmap: use ae.func.grad (or vjp) inside the vmapped function, "
            "e.g. vmap(grad(loss))"
        )

    def _inplace(self, *args: Any, **kwargs: Any) -> Any:
        raise VmapError(
            "in-place operations on batched tensors are not supported inside ae.func.vmap; "
            "use the out-of-place op (x = x + y instead of x += y)"
        )

    __setitem__ = _inplace
    __iadd__ = __isub__ = __imul__ = __itruediv__ = _inplace

    # dunders: the ops' batching rules (reflected ones with the operands swapped)
    def __add__(self, other: Any, *, alpha: Any = 1) -> Any:  # type: ignore[override]
        return dispatch("add", (self, other), {"alpha": alpha} if alpha != 1 else {})

    def __radd__(self, other: Any, *, alpha: Any = 1) -> Any:  # type: ignore[override]
        return dispatch("add", (other, self), {})

    def __sub__(self, other: Any, *, alpha: Any = 1) -> Any:  # type: ignore[override]
        return dispatch("sub", (self, other), {"alpha": alpha} if alpha != 1 else {})

    def __rsub__(self, other: Any) -> Any:
        return dispatch("sub", (_const(other, self), self), {})

    def __mul__(self, other: Any) -> Any:
        return dispatch("mul", (self, other), {})

    def __rmul__(self, other: Any) -> Any:
        return dispatch("mul", (other, self), {})

    def __truediv__(self, other: Any, *, rounding_mode: str | None = None) -> Any:  # type: ignore[override]
        kw = {"rounding_mode": rounding_mode} if rounding_mode is not None else {}
        return dispatch("div", (self, other), kw)

    def __rtruediv__(self, other: Any) -> Any:
        return dispatch("div", (_const(other, self), self), {})

    def __pow__(self, exponent: Any) -> Any:
        return dispatch("pow", (self, exponent), {})

    def __rpow__(self, other: Any) -> Any:
        return dispatch("pow", (_const(other, self), self), {})

    def __matmul__(self, other: Any) -> Any:
        return dispatch("matmul", (self, other), {})

    def __rmatmul__(self, other: Any) -> Any:
        return dispatch("matmul", (other, self), {})

    def __neg__(self) -> Any:
        return dispatch("neg", (self,), {})

    def __abs__(self) -> Any:
        return dispatch("abs", (self,), {})

    def __invert__(self) -> Any:
        return dispatch("logical_not", (self,), {})

    def __eq__(self, other: Any) -> Any:
        return dispatch("eq", (self, other), {})

    def __ne__(self, other: Any) -> Any:
        return dispatch("ne", (self, other), {})

    def __lt__(self, other: Any) -> Any:
        return dispatch("lt", (self, other), {})

    def __le__(self, other: Any) -> Any:
        return dispatch("le", (self, other), {})

    def __gt__(self, other: Any) -> Any:
        return dispatch("gt", (self, other), {})

    def __ge__(self, other: Any) -> Any:
        return dispatch("ge", (self, other), {})

    def __and__(self, other: Any) -> Any:
        return dispatch("logical_and", (self, other), {})

    def __or__(self, other: Any) -> Any:
        return dispatch("logical_or", (self, other), {})

    def __getitem__(self, index: Any) -> Any:
        return dispatch("__getitem__", (self, index), {})

    # hand-written Tensor methods with a rule here
    def view(self, *shape: Any) -> Any:
        return dispatch("view", (self, *shape), {})

    def reshape(self, *shape: Any) -> Any:
        return dispatch("reshape", (self, *shape), {})

    def view_as(self, other: Any) -> Any:
        return dispatch("reshape", (self, tuple(other.shape)), {})

    def reshape_as(self, other: Any) -> Any:
        return dispatch("reshape", (self, tuple(other.shape)), {})

    def expand_as(self, other: Any) -> Any:
        return dispatch("expand", (self, tuple(other.shape)), {})

    def to(self, *args: Any, **kwargs: Any) -> Any:
        return _new(self._v.to(*args, **kwargs), self._lvl, self._same)

    def float(self) -> Any:
        return _new(self._v.float(), self._lvl, self._same)

    def double(self) -> Any:
        return _new(self._v.double(), self._lvl, self._same)

    def type_as(self, other: Any) -> Any:
        return _new(self._v.to(dtype=other.dtype), self._lvl, self._same)

    @property
    def T(self) -> Any:
        return dispatch("permute", (self, tuple(range(self.ndim - 1, -1, -1))), {})

    @property
    def mT(self) -> Any:
        return dispatch("transpose", (self, -2, -1), {})


def _const(value: Any, like: BatchedTensor) -> Any:
    """A number as the left operand of a reflected op (the op takes a Tensor first)."""
    if isinstance(value, Tensor):
        return value
    # here: creation is a tensors-layer helper
    from ..tensors._creation import full

    return full((), value, dtype=like.dtype)


_new_bt = object.__new__


def _new(v: Tensor, lvl: Level, same: bool = False) -> BatchedTensor:
    t = _new_bt(BatchedTensor)
    t._v = v
    t._lvl = lvl
    t._same = same
    return t


def wrap(v: Any, lvl: Level, same: bool = False) -> Any:
    """``v`` (physical, batch at dim 0) as a BatchedTensor of ``lvl``; tuples and None kept."""
    if isinstance(v, Tensor):
        return _new(v, lvl, same)
    if isinstance(v, tuple):
        vals = [wrap(x, lvl) for x in v]
        return type(v)(*vals) if hasattr(v, "_fields") else tuple(vals)
    if isinstance(v, list):
        return [wrap(x, lvl) for x in v]
    return v


def levels_of(x: Any) -> list[Level]:
    """The levels ``x`` is batched at, outermost first."""
    out: list[Level] = []
    while x.__class__ is BatchedTensor:
        out.append(x._lvl)
        x = x._v
    out.reverse()
    return out


def to_levels(x: Tensor, levels: Sequence[Level]) -> Tensor:
    """The plain physical tensor of ``x`` with one leading dim per level of ``levels``.

    ``x``'s own levels must be among ``levels``; a level it is not batched at
    is added by expanding (a stride-0 view: every sample sees the same value).
    """
    present = levels_of(x)
    core = x
    while core.__class__ is BatchedTensor:
        core = core._v
    for lvl in present:
        if lvl not in levels:
            raise VmapError(
                "a batched tensor of a vmap that has ended was used (a value captured from "
                "one vmapped call used in another): return it from the vmapped function"
            )
    logical = core.ndim - len(present)
    if len(present) == len(levels):
        return core
    # insert the missing levels' dims, then expand them
    pos = 0
    sizes: list[int] = []
    for lvl in levels:
        if pos < len(present) and present[pos] is lvl:
            pos += 1
        else:
            core = core.unsqueeze(len(sizes))
        sizes.append(lvl.size)
    return core.expand(*sizes, *core.shape[len(levels) :]) if logical >= 0 else core


def wrap_levels(core: Any, levels: Sequence[Level], same: bool = False) -> Any:
    """The inverse of ``to_levels``: wrap a physical tensor once per level (outermost first)."""
    t = core
    for i, lvl in enumerate(levels):
        t = _new(t, lvl, same and i == len(levels) - 1)
    return t


# -- dispatch -----------------------------------------------------------------------------------
#: op name -> rule(info, lvl, args, kwargs) (filled by _rules)
RULES: dict[str, Callable[..., Any]] = {}
#: rule kind -> maker(info, spec) -> rule
KINDS: dict[str, Callable[[OpInfo | None, str], Callable[..., Any]]] = {}
_compiled: dict[str, Callable[..., Any]] = {}


def _innermost(args: Sequence[Any], kwargs: dict[str, Any]) -> Level | None:
    best: Level | None = None
    for a in itertools.chain(args, kwargs.values()):
        if a.__class__ is BatchedTensor:
            if best is None or a._lvl.depth > best.depth:
                best = a._lvl
        elif a.__class__ is list or a.__class__ is tuple:
            for b in a:
                if b.__class__ is BatchedTensor and (best is None or b._lvl.depth > best.depth):
                    best = b._lvl
    return best


def _rule_for(name: str) -> Callable[..., Any]:
    rule = _compiled.get(name)
    if rule is not None:
        return rule
    rule = RULES.get(name)
    if rule is None:
        info = TABLE.get(name)
        spec = getattr(info, "batch", None) if info is not None else None
        if spec is None:
            raise VmapError(
                f"vmap: the operator {name!r} has no batching rule; compute it outside vmap, "
                "or over a loop of samples (ae.stack([f(x) for x in xs]))"
            )
        kind, _, params = spec.partition(":")
        rule = KINDS[kind](info, params)
    _compiled[name] = rule
    return rule


def dispatch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run op ``name`` on arguments of which some are batched (its batching rule)."""
    lvl = _innermost(args, kwargs)
    if lvl is None:  # (a rule's inner call with nothing batched left)
        return _plain_fn(name)(*args, **kwargs)
    if lvl not in _LEVELS.get():
        raise VmapError(
            f"{name}(): a batched tensor of a vmap that has ended was used (a value captured "
            "from one vmapped call used in another): return it from the vmapped function"
        )
    return _rule_for(name)(lvl, args, kwargs)


def _plain_fn(name: str) -> Callable[..., Any]:
    if name == "__getitem__":
        return Tensor.__getitem__
    if name in ("view", "reshape"):
        return getattr(Tensor, name)  # type: ignore[no-any-return]
    return TABLE[name].fn


# -- the methods --------------------------------------------------------------------------------
def _method(info: OpInfo) -> Callable[..., Any]:
    name = info.name

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return dispatch(name, (self, *args), kwargs)

    method.__name__ = info.method_name or info.short
    return method


def _bind_methods() -> None:
    for info in TABLE.values():
        mname = info.method_name
        if mname is not None and mname not in vars(BatchedTensor):
            setattr(BatchedTensor, mname, _method(info))


_bind_methods()
