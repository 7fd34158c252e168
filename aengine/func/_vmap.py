"""``vmap``: the function run once on the whole batch, each op by its batching rule.

See NOTE [vmap by physical translation] in _batched.py; the transform's
generator runs inside any other transform's (NOTE [Transforms defined once,
run by either driver] in _transforms.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tensors import Tensor
from ._batched import BatchedTensor, push_level, wrap_levels
from ._install import install
from ._pytree import tree_flatten, tree_unflatten
from ._transforms import Gen, call

__all__ = ["_vmap_gen"]


# -- vmap ------------------------------------------------------------------------------------------
def _vmap_gen(
    func: Callable[..., Any],
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable[..., Gen]:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}"
        )
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    where = f"vmap({getattr(func, '__name__', repr(func))}, in_dims={in_dims}, ...)(<inputs>)"
    if not callable(func):
        raise TypeError(f"vmap(func): Expected `func` to be a callable, got {type(func)}")

    def gen(*args: Any, **kwargs: Any) -> Gen:
        install()
        leaves, dims = _in_leaves(args, in_dims, where)
        size = _batch_size(leaves, dims, where)
        if chunk_size is None or chunk_size >= size:
            return (
                yield from _vmap_once(
                    func, args, kwargs, leaves, dims, size, out_dims, randomness, where
                )
            )
        chunks = []
        for start in range(0, size, chunk_size):
            stop = min(start + chunk_size, size)
            sl = [
                x if d is None else x.narrow(d, start, stop - start)
                for x, d in zip(leaves, dims, strict=True)
            ]
            chunks.append(
                (
                    yield from _vmap_once(
                        func, args, kwargs, sl, dims, stop - start, out_dims, randomness, where
                    )
                )
            )
        return _cat_chunks(chunks, out_dims)

    return gen


def _batch_size(leaves: list[Any], dims: list[Any], where: str) -> int:
    """The size of the mapped dims (the same for every mapped input; at least one)."""
    size: int | None = None
    for x, d in zip(leaves, dims, strict=True):
        if d is None:
            continue
        if not isinstance(x, Tensor):
            raise ValueError(
                f"{where}: Got in_dim={d} for an input but the input is of type "
                f"{type(x)}. We cannot vmap over non-Tensor arguments, please use None "
                "as the respective in_dim"
            )
        if not -max(x.ndim, 1) <= d < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(
                f"{where}: Got in_dim={d} for some input, but that input is a Tensor of "
                f"dimensionality {x.ndim} so expected in_dim to satisfy "
                f"-{x.ndim} <= in_dim < {x.ndim}."
            )
        n = x.shape[d]
        if size is not None and n != size:
            raise ValueError(
                f"{where}: Expected all tensors to have the same size in the mapped "
                f"dimension, got sizes {[x.shape[d] for x, d in zip(leaves, dims, strict=True) if d is not None]} "
                "for the mapped dimension"
            )
        size = n
    if size is None:
        raise ValueError(
            f"{where}: vmap must have at least one non-None value in in_dims and at least one "
            "Tensor input to vmap over"
        )
    return size


def _cat_chunks(chunks: list[Any], out_dims: Any) -> Any:
    # here: only the chunked path joins results
    from ..ops import cat

    flat = [tree_flatten(c) for c in chunks]
    spec = flat[0][1]
    n = len(flat[0][0])
    dims = _out_dims_flat(out_dims, n, chunks[0])
    out = []
    for i in range(n):
        parts = [f[0][i] for f in flat]
        out.append(parts[0] if dims[i] is None else cat(parts, dims[i]))
    return tree_unflatten(out, spec)


def _in_leaves(args: tuple[Any, ...], in_dims: Any, where: str) -> tuple[list[Any], list[Any]]:
    if isinstance(in_dims, int) or in_dims is None:
        leaves, _ = tree_flatten(args)
        return leaves, [in_dims] * len(leaves)
    if not isinstance(in_dims, (tuple, list)):
        raise ValueError(
            f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching "
            f"the structure of inputs, got: {type(in_dims)}."
        )
    if len(in_dims) != len(args):
        raise ValueError(
            f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has "
            f"structure {len(in_dims)} but inputs has structure {len(args)}."
        )
    out: list[Any] = []
    dims: list[Any] = []
    for a, d in zip(args, in_dims, strict=True):
        out += tree_flatten(a)[0]
        try:
            dims += _prefix_dims(d, a, "in_dims")
        except ValueError:
            raise ValueError(
                f"{where}: in_dims is not compatible with the structure of `inputs`: {d!r} does "
                "not match its argument (give an int, None, or a structure with one entry per part)"
            ) from None
    return out, dims


def _prefix_dims(dims: Any, tree: Any, what: str) -> list[Any]:
    """One dim per leaf of ``tree``: ``dims`` is an int, None, or a structure that is a prefix of it."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(tree_flatten(tree)[0])
    if isinstance(dims, (tuple, list)):
        if isinstance(tree, (tuple, list)) and len(tree) == len(dims):
            return [
                d
                for sub_d, sub in zip(dims, tree, strict=True)
                for d in _prefix_dims(sub_d, sub, what)
            ]
        if len(dims) == 1 and not isinstance(tree, (tuple, list)):
            return _prefix_dims(dims[0], tree, what)
    if isinstance(dims, dict) and isinstance(tree, dict) and set(dims) == set(tree):
        return [d for k in tree for d in _prefix_dims(dims[k], tree[k], what)]
    raise ValueError(
        f"vmap: {what} is not compatible with the structure of the {what.split('_')[0]}puts: "
        f"{dims!r} does not match it (give an int, None, or a structure with one entry per part)"
    )


def _out_dims_flat(out_dims: Any, n: int, tree: Any = None) -> list[Any]:
    if tree is None:
        return [out_dims] * n
    return _prefix_dims(out_dims, tree, "out_dims")


def _vmap_once(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    leaves: list[Any],
    dims: list[Any],
    size: int,
    out_dims: Any,
    randomness: str,
    where: str,
) -> Gen:
    with push_level(size, randomness) as lvl:
        new_leaves = []
        for x, d in zip(leaves, dims, strict=True):
            if d is None:
                new_leaves.append(x)
            else:
                v = x if d % x.ndim == 0 else x.movedim(d, 0)
                new_leaves.append(wrap_levels(v, [lvl]))
        _, spec = tree_flatten(args)
        new_args = tree_unflatten(new_leaves, spec)
        out = yield from call(func, new_args, kwargs)
    out_leaves, out_spec = tree_flatten(out)
    odims = _out_dims_flat(out_dims, len(out_leaves), out)
    res = []
    for o, d in zip(out_leaves, odims, strict=True):
        if not isinstance(o, Tensor):
            raise ValueError(
                f"{where}: `{getattr(func, '__name__', 'f')}` must only return Tensors, got type "
                f"{type(o)}. Did you mean to set out_dims= to None for output?"
                if d is not None
                else f"{where}: got a non-Tensor output {type(o)}"
            )
        batched = o.__class__ is BatchedTensor and o._lvl is lvl
        if d is None:
            if batched:
                raise ValueError(
                    f"{where}: out_dims=None for an output that is batched: each sample has its "
                    "own value; give an int out_dim"
                )
            res.append(o)
            continue
        v = o._v if batched else o.unsqueeze(0).expand(size, *o.shape)  # type: ignore[attr-defined]
        nd = v.ndim
        if not -nd <= d < nd:
            raise ValueError(
                f"{where}: out_dims={d} is out of range for an output of {nd - 1} dims"
            )
        res.append(v if d % nd == 0 else v.movedim(0, d))
    return tree_unflatten(res, out_spec)
