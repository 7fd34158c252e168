"""Installing vmap's dispatchers: the public namespaces' table functions made batch-aware.

NOTE [vmap by physical translation] in _batched.py says why this happens at
the first ``vmap`` call and not at import.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from ..ops._table import TABLE, OpInfo
from ._batched import BatchedTensor, dispatch

__all__ = ["install"]

_install_lock = threading.Lock()
_installed = False


def _dispatcher(info: OpInfo) -> Callable[..., Any]:
    fn = info.fn
    name = info.name

    def op(*args: Any, **kwargs: Any) -> Any:
        for a in args:
            if a.__class__ is BatchedTensor:
                return dispatch(name, args, kwargs)
            if (a.__class__ is list or a.__class__ is tuple) and any(
                b.__class__ is BatchedTensor for b in a
            ):
                return dispatch(name, args, kwargs)
        if kwargs:
            for a in kwargs.values():
                if a.__class__ is BatchedTensor:
                    return dispatch(name, args, kwargs)
        return fn(*args, **kwargs)

    op.__name__ = fn.__name__
    op.__qualname__ = fn.__qualname__
    op.__doc__ = fn.__doc__
    op.__wrapped__ = fn  # type: ignore[attr-defined]
    op._ae_vmap_dispatcher = True  # type: ignore[attr-defined]
    op.__module__ = fn.__module__
    return op


def install() -> None:
    """Make the public namespaces' table functions dispatch to batching rules (once)."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        modules = {
            "": sys.modules.get("aengine"),
            "nn.functional": sys.modules.get("aengine.nn.functional"),
            "linalg": sys.modules.get("aengine.linalg"),
            "special": sys.modules.get("aengine.special"),
        }
        for info in TABLE.values():
            mod = modules.get(info.namespace)
            if mod is not None and getattr(mod, info.short, None) is info.fn:
                setattr(mod, info.short, _dispatcher(info))
        _installed = True
