"""A griffe extension for the API reference: each public name keeps its own docstring and result.

griffe documents what ``inspect.unwrap`` returns.  The entry points made from
one generator definition (``ae.grad``, ``ae.backward``, ``ae.gradcheck``...)
carry ``__wrapped__``, so griffe would show the generator's (missing)
docstring instead of the entry point's, and the generator's result type
(``Generator[GraphTask, None, X]``) instead of what awaiting the entry point
gives (``X``, the ``__signature__`` the entry point has at runtime).  This
puts back, for every name in ``__all__`` of the package and of its public
modules (``aengine.sync``...), the docstring and the result type the object
itself has at runtime.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


class RuntimeDocstrings(griffe.Extension):
    """Give each public object of a package the docstring and result type it has at runtime."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for module in _public_modules(pkg):
            _restore(module)


def _public_modules(pkg: griffe.Module) -> list[griffe.Module]:
    """``pkg`` and its public submodules, recursively."""
    out = [pkg]
    for name, member in pkg.members.items():
        if not name.startswith("_") and not member.is_alias and member.is_module:
            out.extend(_public_modules(member))  # type: ignore[arg-type]
    return out


def _restore(mod: griffe.Module) -> None:
    try:
        module = importlib.import_module(mod.path)
    except ImportError:
        return
    for name in getattr(module, "__all__", ()):
        member = mod.members.get(name)
        obj = getattr(module, name, None)
        if member is None or obj is None:
            continue
        try:
            target = member.final_target if member.is_alias else member
        except griffe.AliasResolutionError:
            continue
        doc = getattr(obj, "__doc__", None)
        if doc and (target.docstring is None or not target.docstring.value):
            target.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=target)
        own = getattr(obj, "__dict__", {}).get("__signature__")
        if own is not None and isinstance(target, griffe.Function):
            result = own.return_annotation
            if result is not inspect.Signature.empty:
                target.returns = (
                    result if isinstance(result, str) else inspect.formatannotation(result)
                )
