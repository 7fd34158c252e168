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
