"""Binary elementwise ops beyond the arithmetic of _arith.py (atan2, hypot, lerp...)."""

from __future__ import annotations
