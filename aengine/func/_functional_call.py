"""``functional_call``: run a module with parameters and buffers given in a dict."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ..nn import Module
from ..tensors import Tensor

__all__ = ["functional_call"]

# one lock per module: the swap is visible to every thread that runs it
_locks: weakref.WeakKeyDictionary[Module, threading.RLock] = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def _lock_of(module: Module) -> threading.RLock:
    with _locks_lock:
        lock = _locks.get(module)
        if lock is None:
            lock = _locks[module] = threading.RLock()
        return lock


def _owner(module: Module, name: str) -> tuple[Module, str]:
    *path, attr = name.split(".")
    mod = module
    for p in path:
        sub = mod._modules.get(p)
        if sub is None:
            raise AttributeError(
                f"functional_call: {type(module).__name__} has no submodule {'.'.join(path)!r} "
                f"(from the key {name!r})"
            )
        mod = sub
    return mod, attr


def _tied_names(module: Module) -> dict[str, list[str]]:
    """For each parameter or buffer reachable under several names: name -> the other names."""
    by_id: dict[int, list[str]] = {}
    for key in ("_parameters", "_buffers"):
        for mname, m in module.named_modules(remove_duplicate=False):
            for n, v in getattr(m, key).items():
                if v is not None:
                    by_id.setdefault(id(v), []).append(f"{mname}.{n}" if mname else n)
    out: dict[str, list[str]] = {}
    for names in by_id.values():
        uniq = list(dict.fromkeys(names))
        if len(uniq) > 1:
            for n in uniq:
                out[n] = [m for m in uniq if m != n]
    return out


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the dict's.

    As torch.func.functional_call: keys are the names of ``named_parameters``
    / ``named_buffers`` ("0.weight"); a tuple of dicts is merged (a key in two
    raises); ``tie_weights`` makes a weight tied to a replaced one (the same
    Parameter under two names) take the replacement too; ``strict`` requires
    the dicts to name every parameter and buffer and nothing else.  The
    module's own tensors are put back afterwards.  The replacement is made on
    the module object, so concurrent calls on one module take turns (a lock
    per module).  Plain code: the same function in ``ae.func`` and
    ``ae.sync.func``.

    Example::

        >>> import aengine as ae
        >>> lin = ae.nn.Linear(2, 1)
        >>> params = {"weight": ae.ones(1, 2), "bias": ae.zeros(1)}
        >>> ae.func.functional_call(lin, params, (ae.tensor([[1.0, 2.0]]),)).tolist()
        [[3.0]]
    """
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: expected an ae.nn.Module, got {type(module).__name__}")
    merged = _merged(parameter_and_buffer_dicts)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = {} if kwargs is None else kwargs
    with _lock_of(module):
        if tie_weights:
            _add_tied(module, merged)
        if strict:
            _check_strict(module, merged)
        for v in merged.values():
            if v is not None and not isinstance(v, Tensor):
                raise TypeError(
                    f"functional_call: the values must be Tensors, got {type(v).__name__}"
                )
        undo: list[tuple[dict[str, Any], str, Any, bool]] = []
        try:
            _swap_in(module, merged, undo)
            return module(*args, **kwargs)
        finally:
            _restore(undo)


def _merged(dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One dict of the replacements (a key in two of the dicts raises)."""
    if isinstance(dicts, Mapping):
        return dict(dicts)
    if not isinstance(dicts, Sequence):
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(dicts)}"
        )
    merged: dict[str, Any] = {}
    for d in dicts:
        if not isinstance(d, Mapping):
            raise ValueError(
                "Expected all elements of parameter_and_buffer_dicts to be dictionaries"
            )
        dup = [k for k in d if k in merged]
        if dup:
            raise ValueError(
                f"{dup[0]} appeared in multiple dictionaries; behavior of functional call "
                "is ambiguous"
            )
        merged.update(d)
    return merged


def _add_tied(module: Module, merged: dict[str, Any]) -> None:
    """Give each name tied to a replaced one the same replacement (two different ones raise)."""
    tied = _tied_names(module)
    for name in list(merged):
        for other in tied.get(name, ()):
            if other in merged and merged[other] is not merged[name]:
                raise ValueError(
                    f"functional_call got multiple values for keys {sorted([name, other])}, "
                    "which are tied. Consider using tie_weights=False"
                )
            merged.setdefault(other, merged[name])


def _check_strict(module: Module, merged: dict[str, Any]) -> None:
    """``strict``: the replacements name every parameter and buffer, and nothing else."""
    known = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    known |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
    missing = sorted(known - set(merged))
    unexpected = sorted(set(merged) - known)
    if missing or unexpected:
        parts = []
        if unexpected:
            parts.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
        if missing:
            parts.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
        raise RuntimeError(
            f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(parts)
        )


def _swap_in(
    module: Module, merged: dict[str, Any], undo: list[tuple[dict[str, Any], str, Any, bool]]
) -> None:
    """Put the replacements in place, noting in ``undo`` what each one replaced."""
    for name, value in merged.items():
        owner, attr = _owner(module, name)
        for store in (owner._parameters, owner._buffers):
            if attr in store:
                undo.append((store, attr, store[attr], True))
                store[attr] = value
                break
        else:
            undo.append((owner.__dict__, attr, owner.__dict__.get(attr), attr in owner.__dict__))
            owner.__dict__[attr] = value


def _restore(undo: list[tuple[dict[str, Any], str, Any, bool]]) -> None:
    """Put back what ``_swap_in`` replaced, last first."""
    for store, attr, old, had in reversed(undo):
        if had:
            store[attr] = old
        else:
            store.pop(attr, None)
