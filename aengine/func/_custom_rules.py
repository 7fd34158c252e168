"""The batching rules of their own (the ``custom`` kind of NOTE [Batching rule kinds] in _rules.py).

Matmul, linear, conv2d, reshapes and views, indexing, joining, class losses,
dropout, max/min and the others whose batch dimension moves in a way of their
own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops._table import TABLE
from ..tensors import Tensor
from ..tensors._creation import ones
from ._batched import Level, VmapError, wrap
from ._rule_kinds import (
    Rule,
    _Binder,
    _dims,
    _expanded,
    _fast,
    _fast_bias,
    _is,
    _lift,
    _no_other_batched,
    _op,
    _pointwise,
    _reduction,
    _shift,
)

__all__ = ["CUSTOM", "custom"]

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
