"""An Engine's lifetime: what ``async with ae.Engine()`` opens and closes."""

from __future__ import annotations

import contextvars
from time import perf_counter
from typing import TYPE_CHECKING

import anyio

from ..core import AutogradError
from . import _blas
from ._seeded import SeededSlots
from ._settings import _block, loop_engine, set_loop_engine
from ._share import loop_share

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["LAG_PROBE_PERIOD", "close_engine", "open_engine"]

#: the Engine whose queues serve backwards of this task (innermost block);
#: its settings are read through ``_settings._block``, which a nested
#: backward moved to a thread of its own keeps while it drops this one (the
#: queues belong to the caller's loop, the settings do not)
_engine_var: contextvars.ContextVar[Engine | None] = contextvars.ContextVar(
    "aengine_engine", default=None
)

#: seconds between two loop-lag probes of an Engine
LAG_PROBE_PERIOD = 0.01

ERR_CLOSED_WHILE_RUNNING = (
    "the ae.Engine serving this backward was closed while it ran; keep the "
    "`async with ae.Engine()` block open until every backward started in it "
    "has finished"
)


async def open_engine(eng: Engine) -> None:
    """``Engine.__aenter__``: its task group, its context, the loop's Engine, the BLAS cap."""
    if eng._entered:
        raise RuntimeError("an Engine can be entered only once; create a new ae.Engine()")
    eng._entered = True
    choices = eng._explore = loop_share().choices  # NOTE [Choice points]
    if choices is not None and eng.max_inflight is not None:
        eng._admission = SeededSlots(eng.max_inflight, choices)
    tg = anyio.create_task_group()
    await tg.__aenter__()
    eng._tg = tg
    eng._closed = False
    eng._tokens = [(_engine_var, _engine_var.set(eng)), (_block, _block.set(eng))]
    # workers start from the Engine's context, not from the context of
    # whichever backward first used a device (its graph task, modes...)
    eng._ctx = contextvars.copy_context()
    share = eng._share = loop_share()
    eng._share_base = (share.slices, share.overran)
    if not eng._ephemeral:
        if loop_engine() is None:
            set_loop_engine(eng)
        if eng.blas_threads is not None:
            _blas.cap(eng.blas_threads)
            eng._capped = True
        if choices is None:  # a periodic timer would only slow virtual time down
            tg.start_soon(_probe_lag, eng, name="aengine-loop-lag-probe")


async def close_engine(eng: Engine, exc: BaseException | None) -> None:
    """``Engine.__aexit__``: fail the backwards left on its workers, cancel them, wait."""
    eng._closed = True
    for var, token in reversed(eng._tokens):
        var.reset(token)
    eng._tokens = []
    if not eng._ephemeral and loop_engine() is eng:
        set_loop_engine(None)
    if eng._capped:
        eng._capped = False
        _blas.uncap()
    # Backwards still waiting on our workers cannot finish: fail them.
    for gt in list(eng._inflight):
        gt.fail(None, AutogradError(ERR_CLOSED_WHILE_RUNNING))
        eng._wake(gt)
    tg = eng._tg
    eng._tg = None
    tg.cancel_scope.cancel()
    try:
        # the workers are cancelled; wait for them (a kernel running in a
        # thread finishes first).  The body's exception is not passed in,
        # so it propagates as is, never wrapped in an exception group.
        await tg.__aexit__(None, None, None)
    except BaseException:
        if exc is None:
            raise


async def _probe_lag(eng: Engine) -> None:
    """Record how late a periodic timer fires: the loop's worst lag."""
    period = LAG_PROBE_PERIOD
    while True:
        start = perf_counter()
        await anyio.sleep(period)
        lag = perf_counter() - start - period
        if lag > eng._worst_lag:
            eng._worst_lag = lag
