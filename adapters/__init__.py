"""Array backends and integrations, installed as ``aengine.adapters``.

A backend gives the operators everything they need of an array library:
the array module (``xp``), conversions to and from host numpy arrays, dtype
mapping, and the raw (non-recording) ops namespace used by backward formulas
when no graph is being built.  Backends are imported lazily: a missing
optional one names the pip extra that installs it.
"""

from __future__ import annotations

from ._backend import Backend, backend_for, register_backend

__all__ = ["Backend", "backend_for", "register_backend"]
