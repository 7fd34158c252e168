"""The batching rules' kinds (NOTE [Batching rule kinds] in _rules.py) and the helpers rules share."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..ops._table import OpInfo
from ..tensors import Tensor
from ._batched import CREATE_GRAPH, BatchedTensor, Level, VmapError, dispatch, wrap

Rule = Callable[[Level, tuple[Any, ...], dict[str, Any]], Any]


def _op(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call op ``name`` (dispatching again for outer levels' batched tensors)."""
    return dispatch(name, args, kwargs)


def _is(x: Any, lvl: Level) -> bool:
    return x.__class__ is BatchedTensor and x._lvl is lvl


def _lift(x: Any, lvl: Level, nd: int) -> Any:
    """The physical value of a batched ``x`` with ``nd`` logical dims (singletons after B)."""
    if not _is(x, lvl):
        return x
    v = x._v
    k = v.ndim - 1
    if k < nd:
        shape = tuple(v.shape)
        v = v.reshape(shape[0], *([1] * (nd - k)), *shape[1:])
    return v


def _expanded(x: Any, lvl: Level) -> Any:
    """``x``'s physical value, expanded along the batch when it is not batched at ``lvl``."""
    if _is(x, lvl):
        return x._v
    return x.unsqueeze(0).expand(lvl.size, *x.shape)


def _fast(w: Any, lvl: Level) -> bool:
    """Whether ``w`` is a weight every sample shares, for NOTE [Per-sample gradients of a shared weight]."""
    return _is(w, lvl) and w._same and w._v.__class__ is Tensor and not CREATE_GRAPH.get()


def _fast_bias(b: Any, lvl: Level) -> bool:
    return b is None or (not _is(b, lvl) and b.__class__ is Tensor) or _fast(b, lvl)


def _ndim(x: Any) -> int:
    return x.ndim if isinstance(x, Tensor) else 0


def _shift(d: Any, nd: int) -> Any:
    if isinstance(d, (list, tuple)):
        return type(d)(_shift(e, nd) for e in d)
    n = max(nd, 1)
    if not -n <= d < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})"
        )
    return d % n + 1


def _no_other_batched(name: str, lvl: Level, items: Sequence[Any]) -> None:
    for a in items:
        if _is(a, lvl) or (isinstance(a, (list, tuple)) and any(_is(b, lvl) for b in a)):
            raise VmapError(
                f"vmap: {name}() is batched only over its first argument; another of its "
                "tensor arguments is batched here (compute it outside vmap, or pass that "
                "argument with in_dims=None)"
            )


class _Binder:
    """``inspect.Signature.bind(...).arguments`` without its cost (a rule's hot path).

    The arguments given, by parameter name (defaults are not filled in); a
    call the signature does not take is bound by ``inspect`` to raise its
    TypeError.
    """

    __slots__ = ("sig", "positional", "names")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.sig = inspect.signature(fn)
        self.positional: list[str] = []
        for p in self.sig.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                break
            self.positional.append(p.name)
        self.names = set(self.sig.parameters)

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self.positional) or not self.names.issuperset(kwargs):
            return dict(self.sig.bind(*args, **kwargs).arguments)
        out = dict(zip(self.positional, args))
        for k, v in kwargs.items():
            if k in out:
                self.sig.bind(*args, **kwargs)  # raises "multiple values for argument"
            out[k] = v
        return out

    def default(self, name: str) -> Any:
        p = self.sig.parameters.get(name)
        return inspect.Parameter.empty if p is None else p.default


def _bind(info: OpInfo) -> _Binder:
    return _Binder(info.fn)


# -- kinds --------------------------------------------------------------------------------------
def _pointwise(info: OpInfo | None, params: str) -> Rule:
    name = info.name if info is not None else params

    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        nd = 0
        for a in (*args, *kwargs.values()):
            if isinstance(a, Tensor):
                nd = max(nd, a.ndim)
        a2 = [_lift(a, lvl, nd) for a in args]
        k2 = {k: _lift(v, lvl, nd) for k, v in kwargs.items()}
        return wrap(_op(name, *a2, **k2), lvl)

    return rule


def _dims(info: OpInfo | None, params: str, insert: bool = False) -> Rule:
    assert info is not None
    name = info.name
    bind = _bind(info)
    sig = bind.sig
    first = next(iter(sig.parameters))
    # "dim" (None: every dim) or "dim=0" (None: that default, as torch's)
    fallback: dict[str, Any] = {}
    names = []
    for p in (q for q in params.split(",") if q):
        n, eq, d = p.partition("=")
        names.append(n)
        if eq:
            fallback[n] = int(d)
    if "dim" in names and "axis" in sig.parameters:
        names.append("axis")  # numpy's alias of dim
    defaults = {n: sig.parameters[n].default for n in names if n in sig.parameters}

    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        arguments = bind(args, kwargs)
        x = arguments[first]
        _no_other_batched(name, lvl, [v for k, v in arguments.items() if k != first])
        if not _is(x, lvl):
            raise VmapError(f"vmap: {name}() needs its first argument batched here")
        v = x._v
        nd = x.ndim + (1 if insert else 0)
        flat = False
        for n in names:
            d = arguments.get(n, defaults.get(n))
            if d is inspect.Parameter.empty or (n == "axis" and d is None):
                continue
            if d is None and n in fallback:
                d = fallback[n]
            if d is None:  # over every dim: the sample's dims folded into one
                v = v.reshape(v.shape[0], -1)
                arguments[n] = 1
                flat = True
                continue
            arguments[n] = _shift(d, nd)
        arguments[first] = v
        out = _op(name, **arguments)
        if flat and arguments.get("keepdim"):
            out = out.reshape(out.shape[0], *([1] * x.ndim))
        return wrap(out, lvl)

    return rule


def _leading(info: OpInfo | None, params: str) -> Rule:
    assert info is not None
    name = info.name
    k = int(params or "-1")

    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x = args[0]
        _no_other_batched(name, lvl, [*args[1:], *kwargs.values()])
        if not _is(x, lvl):
            raise VmapError(f"vmap: {name}() needs its first argument batched here")
        v = x._v
        if k < 0 or x.ndim == k:  # the op takes the batch as its own leading dim
            return wrap(_op(name, v, *args[1:], **kwargs), lvl)
        shape = tuple(v.shape)
        lead = shape[: len(shape) - k]
        out = _op(name, v.reshape(-1, *shape[len(shape) - k :]), *args[1:], **kwargs)
        if isinstance(out, tuple):
            return wrap(type(out)(*(o.reshape(*lead, *o.shape[1:]) for o in out)), lvl)
        return wrap(out.reshape(*lead, *out.shape[1:]), lvl)

    return rule


def _reduce_per_sample(loss: Any, reduction: str) -> Any:
    if reduction == "none":
        return loss
    dims = tuple(range(1, loss.ndim))
    if not dims:
        return loss
    if reduction == "batchmean":  # kl_div: the sum over a sample's first dim's size
        return loss.sum(dims) / loss.shape[1]
    return loss.sum(dims) if reduction == "sum" else loss.mean(dims)


def _loss(info: OpInfo | None, params: str) -> Rule:
    assert info is not None
    bind = _bind(info)
    pointwise = _pointwise(info, params)

    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        arguments = bind(args, kwargs)
        reduction = _reduction(arguments)
        arguments["reduction"] = "none"
        for legacy in ("size_average", "reduce"):
            arguments.pop(legacy, None)
        for k in ("input", "target"):  # of one shape, as the loss checks
            v = arguments.get(k)
            if isinstance(v, Tensor) and not _is(v, lvl):
                arguments[k] = _wrap1(_expanded(v, lvl), lvl)
        out = pointwise(lvl, (), arguments)
        return wrap(_reduce_per_sample(out._v, reduction), lvl)

    return rule


def _wrap1(v: Any, lvl: Level) -> Any:
    return wrap(v, lvl)


def _reduction(arguments: dict[str, Any]) -> str:
    if arguments.get("size_average") is not None or arguments.get("reduce") is not None:
        raise VmapError("vmap: the legacy size_average/reduce arguments: pass reduction= instead")
    return str(arguments.get("reduction", "mean"))
