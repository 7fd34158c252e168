"""An Engine's lifetime: what ``async with ae.Engine()`` opens and closes."""

from __future__ import annotations

import contextvars
from time import perf_counter
from typing import Any, Protocol

import anyio

from ..core import AutogradError, GraphTask
from . import _blas
from ._choice import Choices
from ._seeded import SeededSlots
from ._settings import EngineSettings, _block, loop_engine, set_loop_engine
from ._share import FifoSlots, LoopShare, loop_share

__all__ = ["LAG_PROBE_PERIOD", "close_engine", "open_engine"]


class _Engine(EngineSettings, Protocol):
    """What opening and closing see of an Engine (``ae.Engine``, the one implementation;
    a Protocol so that this module imports nothing of _engine.py)."""

    _entered: bool
    _explore: Choices | None
    _admission: FifoSlots | None
    _tg: Any
    _tokens: list[Any]
    _ctx: contextvars.Context
    _share: LoopShare | None
    _share_base: tuple[int, int]
    _capped: bool
    _worst_lag: float

    @property
    def max_inflight(self) -> int | None: ...
    @property
    def blas_threads(self) -> int | None: ...
    @property
    def _ephemeral(self) -> bool: ...
    @property
    def _inflight(self) -> dict[GraphTask, int]: ...
    def _wake(self, gt: GraphTask) -> None: ...


#: seconds between two loop-lag probes of an Engine
LAG_PROBE_PERIOD = 0.01

ERR_CLOSED_WHILE_RUNNING = (
    "the ae.Engine serving this backward was closed while it ran; keep the "
    "`async with ae.Engine()` block open until every backward started in it "
    "has finished"
)


async def open_engine(eng: _Engine, current: contextvars.ContextVar[Any]) -> None:
    """``Engine.__aenter__``: its task group, its context, the loop's Engine, the BLAS cap.

    ``current``: the variable naming the Engine of this task (``_engine_var``).
    """
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
    eng._tokens = [(current, current.set(eng)), (_block, _block.set(eng))]
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


async def close_engine(eng: _Engine, exc: BaseException | None) -> None:
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


async def _probe_lag(eng: _Engine) -> None:
    """Record how late a periodic timer fires: the loop's worst lag."""
    period = LAG_PROBE_PERIOD
    while True:
        start = perf_counter()
        await anyio.sleep(period)
        lag = perf_counter() - start - period
        if lag > eng._worst_lag:
            eng._worst_lag = lag
