"""Scatter, index and masked ops beyond _index.py; sorting and searching."""

from __future__ import annotations
