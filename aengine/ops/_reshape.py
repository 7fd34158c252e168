"""Shape ops beyond _shape.py and _join.py (flip, roll, tril, diag, repeat...)."""

from __future__ import annotations
