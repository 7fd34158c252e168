"""Shared fixtures: every async test runs under asyncio and under trio."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _seed() -> None:
    ae.manual_seed(0)
    np.random.seed(0)


def torch_or_skip():  # type: ignore[no-untyped-def]
    """Import torch (the oracle) or skip the test with a visible reason."""
    return pytest.importorskip(
        "torch", reason="torch 2.13.0 (CPU) is not installed: oracle comparison skipped"
    )
