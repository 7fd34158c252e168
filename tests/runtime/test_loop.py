"""Which event loop runs here (aengine/_loop.py, NOTE [Detecting the event loop])."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest
import sniffio

from aengine.runtime._loop import async_library, asyncio_cancelling, loop_running


def test_no_loop_no_library() -> None:
    assert async_library() is None
    assert not loop_running()
    assert not asyncio_cancelling()


@pytest.mark.anyio
async def test_the_running_library_is_named(anyio_backend: str) -> None:
    assert async_library() == anyio_backend
    assert loop_running()


def test_a_plain_asyncio_task_is_seen() -> None:
    async def main() -> str | None:
        return async_library()

    assert asyncio.run(main()) == "asyncio"


def test_an_asyncio_callback_outside_any_task_is_not_an_async_context() -> None:
    # as sniffio says: a loop runs, but no task does
    seen: list[str | None] = []
    loop = asyncio.new_event_loop()
    try:
        loop.call_soon(lambda: seen.append(async_library()))
        loop.call_soon(loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    assert seen == [None]


def test_a_library_that_announces_itself_to_sniffio_is_named() -> None:
    token = sniffio.current_async_library_cvar.set("someloop")
    try:
        assert async_library() == "someloop"
    finally:
        sniffio.current_async_library_cvar.reset(token)
    assert async_library() is None


def test_sniffio_is_a_dependency() -> None:
    # anyio no longer requires it; without it no loop was ever detected
    requires = importlib.metadata.requires("aengine") or []
    assert any(r.replace(" ", "").startswith("sniffio") for r in requires), requires
