"""Elementwise special functions (erf, lgamma, digamma...) and the other new unary ops."""

from __future__ import annotations
