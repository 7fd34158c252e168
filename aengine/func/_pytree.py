"""Nested containers of tensors (tuples, lists, dicts, named tuples): flatten and rebuild."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "Spec"]

#: ("leaf",) | ("none",) | (kind, aux, children specs)
Spec = tuple[Any, ...]
_LEAF: Spec = ("leaf",)


def tree_flatten(tree: Any) -> tuple[list[Any], Spec]:
    """The leaves of ``tree`` in order, and its structure.

    >>> tree_flatten({"a": 1, "b": (2, 3)})[0]
    [1, 2, 3]
    """
    leaves: list[Any] = []
    spec = _flatten(tree, leaves)
    return leaves, spec


def _flatten(tree: Any, leaves: list[Any]) -> Spec:
    if tree is None:
        return ("none",)
    cls = tree.__class__
    if cls is tuple or cls is list:
        return (cls, None, tuple(_flatten(x, leaves) for x in tree))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return ("namedtuple", cls, tuple(_flatten(x, leaves) for x in tree))
    if isinstance(tree, dict):
        keys = list(tree)
        return (dict, (cls, keys), tuple(_flatten(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return _LEAF


def tree_unflatten(leaves: list[Any], spec: Spec) -> Any:
    """Rebuild the structure ``spec`` from ``leaves`` (the inverse of ``tree_flatten``)."""
    it = iter(leaves)
    return _build(it, spec)


def _build(it: Any, spec: Spec) -> Any:
    kind = spec[0]
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    children = [_build(it, s) for s in spec[2]]
    if kind is tuple:
        return tuple(children)
    if kind is list:
        return children
    if kind == "namedtuple":
        return spec[1](*children)
    cls, keys = spec[1]
    return (
        cls(zip(keys, children, strict=True))
        if cls is not dict
        else dict(zip(keys, children, strict=True))
    )


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with ``fn`` applied to every leaf."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def num_leaves(spec: Spec) -> int:
    """How many leaves a structure holds."""
    if spec[0] == "leaf":
        return 1
    if spec[0] == "none":
        return 0
    return sum(num_leaves(s) for s in spec[2])
