"""One explored run: ``await fn()`` on a backend under the explorer's choices, in virtual time.

# NOTE [Deterministic runs]
# One run is deterministic when every source of order in it is fixed by the
# seed:
#
# * aengine's own choices come from ``Choices`` (NOTE [Choice points] in
#   aengine/runtime/_choice.py); no compute thread runs (kernels and
#   ``engine.run`` stay on the loop) and no slice ends by the wall clock.
# * Time is virtual, so simulated latencies and timeouts cost no wall time
#   and fire in an order fixed by the program: trio's ``MockClock`` with
#   ``autojump_threshold=0``; for asyncio the ``looptime`` library's event
#   loop (a mixin on asyncio's own loop class that keeps a fake clock and
#   jumps it to the next timer when the loop is idle; well kept, and not a
#   loop of our own: asyncio's scheduling is untouched).
# * trio reorders each batch of runnable tasks with a module-level
#   ``random.Random`` (``trio._core._run._r``), and a batch's own order
#   depends on which timer of a tie fires first (trio breaks deadline ties
#   by object address).  A run seeds that generator with its seed and turns
#   on trio's deterministic mode (``_ALLOW_DETERMINISTIC_SCHEDULING``: each
#   batch is sorted by task creation order, then shuffled by the seeded
#   generator), and restores both afterwards: what trio's own Hypothesis
#   plugin does.  Private names of trio: if a version lacks them, trio runs
#   are refused with a clear error rather than being silently unreproducible.
#   asyncio's ready queue is FIFO: deterministic already.  An exhaustive run
#   does not shuffle trio's batches at all (each runs in its sorted order,
#   as asyncio's FIFO does): its schedules then differ only by the
#   explorer's answers, and "every schedule within the bound" means that.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..runtime._choice import Choices
from ..runtime._seeded import SeededShare
from ..runtime._share import swap_share
from ._loops import view_for
from ._threads import explored_to_thread, patched_to_thread

__all__ = ["RunTimeout"]


class RunTimeout(AssertionError):
    """An explored run did not finish within ``run_limit`` seconds of virtual time (a deadlock?).

    Example::

        >>> import aengine as ae, anyio
        >>> async def waits_forever():
        ...     await anyio.Event().wait()
        >>> try:
        ...     ae.testing.explore(waits_forever, seeds=1, backend="trio")
        ... except ae.testing.ScheduleFailure as failure:
        ...     print(type(failure.__cause__).__name__)
        RunTimeout
    """


class _Last(threading.local):
    """The choices of the last run started in this thread (for ``trace()``)."""

    def __init__(self) -> None:
        self.choices: Choices | None = None


_last = _Last()


class _Limit(threading.local):
    seconds = 600.0


_limit = _Limit()


def _run_once(fn: Callable[[], Awaitable[Any]], backend: str, choices: Choices) -> Any:
    """Run ``fn`` once under ``choices`` on ``backend`` in virtual time (NOTE [Deterministic runs])."""
    _last.choices = choices
    choices.threads = explored_to_thread
    choices.run_limit = _limit.seconds
    old_share = swap_share(SeededShare(choices))
    try:
        with patched_to_thread():
            if backend == "trio":
                result = _run_trio(fn, choices)
            else:
                opts = {"loop_factory": _virtual_loop}
                result = anyio.run(
                    _main, fn, choices, backend, backend="asyncio", backend_options=opts
                )
    except BaseException:
        if choices.mismatch is not None:
            raise choices.mismatch from None
        raise
    finally:
        swap_share(old_share)
        choices.loop = None
    if choices.mismatch is not None:
        raise choices.mismatch
    return result


def _needs(backend: str) -> Any:
    """What runs of ``backend`` need, imported: trio's run module, or looptime.

    Asked before any run, so a missing library is reported as such, not as
    a failing schedule.
    """
    if backend == "trio":
        try:
            # local: trio is optional, and only trio runs need it (its
            # seedable scheduler: NOTE [Deterministic runs])
            from trio._core import _run as trio_run
        except ImportError:
            raise ImportError(
                "ae.testing on trio needs trio: pip install 'aengine[testing]', or pass "
                "backend='asyncio'"
            ) from None
        if not hasattr(trio_run, "_r") or not hasattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING"):
            raise RuntimeError(
                "this trio version has no seedable scheduler (trio._core._run._r), so its runs "
                "cannot be replayed; use trio 0.25 to 0.35, or pass backend='asyncio'"
            )
        return trio_run
    try:
        # local: optional, and only asyncio runs need it
        import looptime
    except ImportError:
        raise ImportError(
            "ae.testing on asyncio needs the looptime library (virtual time): "
            "pip install 'aengine[testing]', or pass backend='trio'"
        ) from None
    return looptime


def _run_trio(fn: Callable[[], Awaitable[Any]], choices: Choices) -> Any:
    trio_run = _needs("trio")
    # local: optional (``_needs`` checked that it imports)
    import trio.testing

    rng = trio_run._r
    state = rng.getstate()
    sorted_batches = trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    rng.seed(choices.seed)
    trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True
    if choices.strategy == "exhaustive":
        trio_run._r = _Unshuffled()  # NOTE [Deterministic runs]: batches in a fixed order
    try:
        clock = trio.testing.MockClock(autojump_threshold=0)
        return anyio.run(
            _main, fn, choices, "trio", backend="trio", backend_options={"clock": clock}
        )
    finally:
        trio_run._r = rng
        trio_run._ALLOW_DETERMINISTIC_SCHEDULING = sorted_batches
        rng.setstate(state)


class _Unshuffled(random.Random):
    """trio's generator for exhaustive runs: a batch keeps its sorted order (no shuffle)."""

    def shuffle(self, x: Any) -> None:
        pass


def _virtual_loop() -> Any:
    return _needs("asyncio").new_event_loop(noop_cycles=1)


async def _main(fn: Callable[[], Awaitable[Any]], choices: Choices, backend: str) -> Any:
    choices.loop = view_for(backend)  # NOTE [Compute takes virtual time]
    limit = choices.run_limit
    # virtual time: a run whose tasks all wait for each other jumps straight here
    with anyio.CancelScope(deadline=anyio.current_time() + limit) as timer:
        with anyio.CancelScope() as scope:
            choices.cancel = scope.cancel  # Faults.cancel
            return await fn()
        return None  # cancelled by an injected fault, and nothing else went wrong
    if timer.cancelled_caught:
        raise RunTimeout(
            f"the explored run did not finish within {limit:g} s of virtual time: its tasks "
            "wait for each other (a deadlock) or for something that never comes; pass "
            "run_limit= to explore if it really takes longer"
        )
    return None
