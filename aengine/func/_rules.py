"""Batching rules: how each op of the table moves the batch dimension under vmap.

# NOTE [Batching rule kinds]
# The ``batch`` column of an ``OpInfo`` names the rule of the op, as a kind
# and its parameters (``"kind:params"``); the kinds are interpreted here,
# in the transforms' layer, so the operator table (which may not import it)
# only says how the batch dimension moves:
#
# - ``pointwise``: elementwise with broadcasting; a batched operand of lower
#   rank than the others gets singleton dims after its batch dim, so the
#   samples broadcast as one sample's operands do.
# - ``dim:p1,p2``: the named parameters are dims of the first argument (an
#   int, a sequence, or None for "all dims"); they move up by one.  Other
#   tensor arguments must not be batched.  ``newdim:p`` is the same for a dim
#   counted in the result, one more than the input has (unsqueeze).
# - ``leading:k``: the op works on the last ``k`` dims of its first argument
#   and takes any number of leading ones (``-1``: it broadcasts over every
#   leading dim, as linear's input or layer_norm's): the samples are folded
#   into the leading dims and unfolded after.  Other tensor arguments must not
#   be batched (ops with a rule of their own handle those).
# - ``loss``: an elementwise loss: computed with ``reduction='none'`` by the
#   pointwise rule, then reduced per sample.
# - ``custom``: a rule of its own, in ``CUSTOM`` below (matmul, linear,
#   conv2d, reshape, indexing, cross entropy...).
#
# An op without a ``batch`` entry raises VmapError naming it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..ops._table import TABLE, OpInfo
from ..tensors import Tensor
from ._batched import CREATE_GRAPH, KINDS, RULES, BatchedTensor, Level, VmapError, dispatch, wrap

__all__ = ["CUSTOM"]

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


KINDS.update(
    pointwise=_pointwise,
    dim=_dims,
    newdim=lambda info, params: _dims(info, params, insert=True),
    leading=_leading,
    loss=_loss,
    custom=lambda info, params: CUSTOM[info.name if info is not None else params],
)


# -- custom rules -----------------------------------------------------------------------------
CUSTOM: dict[str, Rule] = {}


def custom(*names: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        for n in names:
            CUSTOM[n] = fn
        return fn

    return deco


def _shape_arg(args: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


@custom("reshape", "view")
def _reshape(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, *rest = args
    shape = _shape_arg(tuple(rest) or (kwargs.get("shape"),))
    v = x._v
    return wrap(v.reshape(v.shape[0], *shape), lvl)


@custom("permute")
def _permute(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, *rest = args
    dims = _shape_arg(tuple(rest) or (kwargs.get("dims"),))
    nd = x.ndim
    return wrap(x._v.permute(0, *(_shift(d, nd) for d in dims)), lvl)


@custom("expand", "broadcast_to")
def _expand(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, *rest = args
    sizes = _shape_arg(tuple(rest) or (kwargs.get("size", kwargs.get("shape")),))
    v = _lift(x, lvl, len(sizes))
    return wrap(v.expand(v.shape[0], *sizes), lvl)


@custom("squeeze")
def _squeeze(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis"))
    v = x._v
    shape = tuple(x.shape)
    if dim is None:
        return wrap(v.reshape(v.shape[0], *(s for s in shape if s != 1)), lvl)
    return wrap(v.squeeze(_shift(dim, x.ndim)), lvl)


@custom("__getitem__")
def _getitem(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, index = args
    idx = index if isinstance(index, tuple) else (index,)
    advanced = [i for i, e in enumerate(idx) if isinstance(e, (Tensor, list)) or hasattr(e, "ndim")]
    for i in advanced:
        if _is(idx[i], lvl):
            raise VmapError(
                "vmap: indexing with a batched index tensor is not supported; use "
                "ae.gather / ae.take_along_dim (with a batching rule) instead"
            )
    if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise VmapError(
            "vmap: indexing with advanced indices separated by slices is not supported inside "
            "vmap (their dims would move before the batch dim)"
        )
    if not _is(x, lvl):
        raise VmapError("vmap: indexing an unbatched tensor with batched indices")
    return wrap(x._v[(slice(None), *idx)], lvl)


def _join(is_stack: bool) -> Rule:
    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tensors = args[0] if args else kwargs["tensors"]
        dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
        nd = max(t.ndim for t in tensors)
        phys = [_expanded(t, lvl) for t in tensors]
        d = _shift(dim, nd + 1 if is_stack else nd)
        return wrap(_op("stack" if is_stack else "cat", phys, d), lvl)

    return rule


CUSTOM["stack"] = _join(True)
CUSTOM["cat"] = CUSTOM["concat"] = CUSTOM["concatenate"] = _join(False)


@custom("matmul", "linalg.matmul", "mm", "bmm", "mv", "dot")
def _matmul(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a, b = args[0], args[1]
    a1, b1 = a.ndim == 1, b.ndim == 1
    if a1 or b1:  # vectors as matrices of one row / one column, squeezed after
        r = _matmul(lvl, (a.unsqueeze(0) if a1 else a, b.unsqueeze(-1) if b1 else b), kwargs)
        if b1:
            r = r.squeeze(-1)
        return r.squeeze(-1 if b1 else -2) if a1 else r
    if _is(a, lvl) and _fast(b, lvl) and b.ndim == 2:
        # here: the per-sample Functions import the rules' helpers
        from ._persample import shared_linear

        return wrap(shared_linear(a._v, b._v.transpose(1, 2), None), lvl)
    nd = max(a.ndim, b.ndim)
    return wrap(_op("matmul", _lift(a, lvl, nd), _lift(b, lvl, nd)), lvl)


@custom("nn.functional.linear")
def _linear(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, w, *rest = args
    bias = rest[0] if rest else kwargs.get("bias")
    if not _is(w, lvl) and not _is(bias, lvl):
        return wrap(_op("nn.functional.linear", x._v, w, bias), lvl)
    if _is(x, lvl) and _fast(w, lvl) and w.ndim == 2 and _fast_bias(bias, lvl):
        # here: see _matmul (the per-sample Functions import the rules' helpers)
        from ._persample import shared_linear

        b = bias._v if bias is not None and _is(bias, lvl) else bias
        return wrap(shared_linear(x._v, w._v, b), lvl)
    out = _matmul(lvl, (x, w.mT if w.ndim == 2 else w), {})
    return out if bias is None else out + bias


@custom("nn.functional.conv2d")
def _conv2d(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a = _CONV2D(args, kwargs)
    x, w, bias = a["input"], a["weight"], a.get("bias")
    stride, padding, dilation = a.get("stride", 1), a.get("padding", 0), a.get("dilation", 1)
    groups = a.get("groups", 1)
    three = x.ndim == 3  # an unbatched (C, H, W) input
    if not _is(w, lvl) and not _is(bias, lvl):
        v = x._v
        shape = tuple(v.shape)
        v4 = v if three else v.reshape(-1, *shape[2:])
        out = _op("nn.functional.conv2d", v4, w, bias, stride, padding, dilation, groups)
        return wrap(out if three else out.reshape(*shape[:2], *out.shape[1:]), lvl)
    if _is(x, lvl) and _fast(w, lvl) and groups == 1 and _fast_bias(bias, lvl):
        # here: see _matmul (the per-sample Functions import the rules' helpers)
        from ._persample import shared_conv2d

        b = bias._v if bias is not None and _is(bias, lvl) else bias
        v = x._v
        shape = tuple(v.shape)
        v4 = v if three else v.reshape(-1, *shape[2:])
        out = shared_conv2d(v4, w._v, b, stride, padding, dilation, lvl.size)
        return wrap(out if three else out.reshape(*shape[:2], *out.shape[1:]), lvl)
    # weights per sample: one grouped convolution over the samples (torch's rule)
    B = lvl.size
    xv = _expanded(x, lvl)  # (B, C, H, W) or (B, N, C, H, W)
    if three:
        xv = xv.unsqueeze(1)
    n, c = xv.shape[1], xv.shape[2]
    xg = xv.movedim(0, 1).reshape(n, B * c, *xv.shape[3:])
    wv = _expanded(w, lvl)
    wg = wv.reshape(B * wv.shape[1], *wv.shape[2:])
    out = _op("nn.functional.conv2d", xg, wg, None, stride, padding, dilation, groups * B)
    out = out.reshape(n, B, wv.shape[1], *out.shape[2:]).movedim(1, 0)
    if bias is not None:
        out = out + _expanded(bias, lvl).reshape(B, 1, -1, 1, 1)
    return wrap(out.squeeze(1) if three else out, lvl)


_CONV2D = _Binder(TABLE["nn.functional.conv2d"].fn)


def _class_loss(name: str) -> Rule:
    bind = _Binder(TABLE[name].fn)

    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        a = bind(args, kwargs)
        reduction = _reduction(a)
        inp, target = a["input"], a["target"]
        weight = a.get("weight")
        ignore = a.get("ignore_index", -100)
        _no_other_batched(name, lvl, [weight])
        iv = _expanded(inp, lvl)
        tv = _expanded(target, lvl)
        B = lvl.size
        probs = target.dtype.kind == "f" and target.ndim == inp.ndim
        if inp.ndim == 1:  # (C,) per sample: the samples are the N of one call
            iv2, tv2, rest = iv, tv, ()
        else:
            iv2 = iv.reshape(B * iv.shape[1], *iv.shape[2:])
            tv2 = tv.reshape(B * tv.shape[1], *tv.shape[2:])
            rest = (iv.shape[1], *iv.shape[3:])
        extra = {k: v for k, v in a.items() if k not in ("input", "target", "reduction")}
        extra.pop("size_average", None)
        extra.pop("reduce", None)
        le = _op(name, iv2, tv2, **{**extra, "reduction": "none"})
        le = le.reshape(B, *rest)
        if reduction == "none":
            return wrap(le, lvl)
        dims = tuple(range(1, le.ndim))
        total = le.sum(dims) if dims else le
        if reduction == "sum":
            return wrap(total, lvl)
        if probs:
            n = 1
            for s in le.shape[1:]:
                n *= s
            return wrap(total / n, lvl)
        keep = (tv != ignore).to(dtype=le.dtype)
        if weight is not None:  # the weighted mean: over the samples' class weights
            keep = keep * weight[tv.clamp(0, weight.shape[0] - 1)]
        den = keep.reshape(B, -1).sum(1)
        return wrap(total / den, lvl)

    return rule


CUSTOM["nn.functional.cross_entropy"] = _class_loss("nn.functional.cross_entropy")
CUSTOM["nn.functional.nll_loss"] = _class_loss("nn.functional.nll_loss")


@custom("nn.functional.dropout")
def _dropout(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a = _Binder(TABLE["nn.functional.dropout"].fn)(args, kwargs)
    x, p, training = a["input"], a.get("p", 0.5), a.get("training", True)
    if a.get("inplace"):
        raise VmapError("vmap: dropout(inplace=True) on a batched tensor; use inplace=False")
    if not training or p == 0:
        return x
    if lvl.randomness == "error":
        raise VmapError(
            "vmap: called random operation while in randomness error mode. Please either use "
            "the 'same' or 'different' randomness flags on vmap or perform the randomness "
            "operation out of vmap"
        )
    if lvl.randomness == "different":
        return wrap(_op("nn.functional.dropout", x._v, p, True), lvl)
    # here: a mask of one sample's shape
    from ..tensors._creation import ones

    mask = _op("nn.functional.dropout", ones(*x.shape, dtype=x.dtype), p, True)
    return wrap(x._v * mask, lvl)


def _maxmin(name: str) -> Rule:
    with_dim = None

    def rule(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        nonlocal with_dim
        dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis"))
        if isinstance(dim, Tensor):  # max(x, other): elementwise
            return _pointwise(None, "maximum" if name == "max" else "minimum")(lvl, args, {})
        if dim is None:  # the value over every element
            return _op("amax" if name == "max" else "amin", args[0])
        if with_dim is None:
            with_dim = _dims(TABLE[name], "dim")
        return with_dim(lvl, args, kwargs)

    return rule


CUSTOM["max"] = _maxmin("max")
CUSTOM["min"] = _maxmin("min")


@custom("t")
def _t(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x = args[0]
    return x if x.ndim < 2 else x.transpose(0, 1)


@custom("outer")
def _outer(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a, b = args[0], args[1]
    return a.unsqueeze(-1) * b


@custom("take_along_dim")
def _take_along_dim(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a = _Binder(TABLE["take_along_dim"].fn)(args, kwargs)
    x, indices = a["x"], a["indices"]
    dim = a.get("dim", a.get("axis"))
    if dim is None:
        raise VmapError("vmap: take_along_dim without dim (over the flattened tensor): give dim")
    nd = max(x.ndim, indices.ndim)
    d = _shift(dim, nd)
    return wrap(_op("take_along_dim", _lift(x, lvl, nd), _lift(indices, lvl, nd), d), lvl)


@custom("einsum")
def _einsum(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    eq, *ops = args
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    eq = eq.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if not arrow:  # torch's implicit output: the letters seen once, in order
        letters = [c for c in lhs if c.isalpha()]
        out = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1)
        )
    free = next(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in eq)
    new_terms = [free + t if _is(o, lvl) else t for t, o in zip(terms, ops, strict=True)]
    phys = [o._v if _is(o, lvl) else o for o in ops]
    return wrap(_op("einsum", ",".join(new_terms) + "->" + free + out, *phys), lvl)


@custom("trace")
def _trace(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0].diagonal().sum(-1)


@custom("nn.functional.cosine_similarity")
def _cosine_similarity(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a = _Binder(TABLE["nn.functional.cosine_similarity"].fn)(args, kwargs)
    x1, x2 = a.pop("x1"), a.pop("x2")
    nd = max(x1.ndim, x2.ndim)
    a["dim"] = _shift(a.get("dim", 1), nd)
    return wrap(
        _op("nn.functional.cosine_similarity", _lift(x1, lvl, nd), _lift(x2, lvl, nd), **a), lvl
    )


@custom("gather")
def _gather(lvl: Level, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    a = _Binder(TABLE["gather"].fn)(args, kwargs)
    x, index = a["x"], a["index"]
    dim = a.get("dim", a.get("axis"))
    return wrap(_op("gather", _expanded(x, lvl), _shift(dim, x.ndim), _expanded(index, lvl)), lvl)


def register_rules() -> None:
    """Add custom rules to RULES for names that are not table entries (indexing, view)."""
    RULES["__getitem__"] = CUSTOM["__getitem__"]
    RULES["view"] = CUSTOM["view"]
    RULES["reshape"] = CUSTOM["reshape"]


register_rules()
