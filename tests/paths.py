"""Where the tests find the checkout's files (docs, examples, benchmarks)."""

from __future__ import annotations

from pathlib import Path

#: the checkout's root folder
ROOT = Path(__file__).resolve().parent.parent
