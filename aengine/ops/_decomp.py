"""ae.linalg: factorisations, solves, inverses, determinants and norms."""

from __future__ import annotations
