"""A griffe extension for the API reference: each public name keeps its own docstring.

griffe documents what ``inspect.unwrap`` returns.  The entry points made from
one generator definition (``ae.grad``, ``ae.backward``, ``ae.gradcheck``...)
carry ``__wrapped__``, so griffe would show the generator's (missing)
docstring instead of the entry point's.  This puts back, for every name in
``aengine.__all__``, the docstring the object itself has at runtime.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


class RuntimeDocstrings(griffe.Extension):
    """Give each public object of a package the docstring it has at runtime."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        module = importlib.import_module(pkg.path)
        for name in getattr(module, "__all__", ()):
            member = pkg.members.get(name)
            doc = getattr(getattr(module, name, None), "__doc__", None)
            if member is None or not doc:
                continue
            try:
                target = member.final_target if member.is_alias else member
            except griffe.AliasResolutionError:
                continue
            if target.docstring is None or not target.docstring.value:
                target.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=target)
