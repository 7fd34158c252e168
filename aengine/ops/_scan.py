"""Scans (cumsum, cumprod, logcumsumexp, cummax, cummin) and statistics by dimension."""

from __future__ import annotations
