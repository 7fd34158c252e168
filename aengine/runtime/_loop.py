"""The event loop: which async library runs one here, and how the engine yields to it.

# NOTE [Detecting the event loop]
# sniffio answers (a dependency of ours: anyio no longer requires it, and
# without it every answer was None, even inside asyncio).  Asked where no
# loop runs, ``sniffio.current_async_library`` raises, and the exception
# costs a noticeable share of a small ``ae.sync.grad``, which asks every call:
# so the cases where no loop can run are answered first, from what sniffio
# itself reads (the name trio and others set, and asyncio's running loop).
"""

from __future__ import annotations

import contextvars
import math
import sys
from time import perf_counter
from typing import Any

import sniffio
from anyio.lowlevel import checkpoint as _checkpoint
from anyio.lowlevel import checkpoint_if_cancelled as _checkpoint_if_cancelled

__all__ = [
    "async_library",
    "loop_here",
    "loop_running",
    "asyncio_cancelling",
    "yield_slice",
    "end_checkpoint",
]


def async_library() -> str | None:
    """The async library running the current task (``"asyncio"``, ``"trio"``...), else None."""
    name = sniffio.thread_local.name or sniffio.current_async_library_cvar.get()
    if name is not None:
        return name
    asyncio = sys.modules.get("asyncio")
    if asyncio is None or asyncio._get_running_loop() is None:
        return None  # no loop in this thread: sniffio would raise
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:  # a loop, but outside any task (a callback)
        return None


def loop_here() -> str | None:
    """``"trio"`` or ``"asyncio"`` when that event loop runs in this thread, else None.

    # NOTE [Is a loop running here]
    # Not the same question as ``async_library`` (which library runs this
    # task, as sniffio says): whether an event loop runs in this *thread*,
    # i.e. whether an async entry point may be called here (the entry points
    # ask on every call).  Two reads: the name trio sets in
    # its thread for the whole run (``sniffio.thread_local``) and asyncio's
    # running loop of this thread (an asyncio callback, outside any task,
    # counts).  Unlike sniffio's context variable, which anyio sets and
    # ``asyncio.to_thread`` copies into a worker thread, neither leaks into
    # threads: a worker thread of a running loop has no loop.  (Where
    # sniffio's variable did leak, ``anyio.run`` refuses to start a loop,
    # so ``loop_running``, which decides between awaiting async user code and
    # running it in a loop of its own, keeps sniffio's answer.)
    """
    name = sniffio.thread_local.name
    if name:
        return str(name)
    asyncio = sys.modules.get("asyncio")  # not imported: no asyncio loop can run
    if asyncio is not None and asyncio._get_running_loop() is not None:
        return "asyncio"
    return None


def loop_running() -> bool:
    """Whether an async library runs the current task (else ``anyio.run`` may start one)."""
    return async_library() is not None


def asyncio_cancelling() -> bool:
    """True when asyncio's ``Task.cancel`` was called on the task running here.

    Cheaper than ``async_library()`` (a hot path: the end of every short
    ``await ae.grad``): without the asyncio module loaded no asyncio loop runs.
    """
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    loop = asyncio._get_running_loop()
    if loop is None:
        return False
    task = asyncio.current_task(loop)
    return task is not None and task.cancelling() > 0


#: when the current task last yielded to the loop inside the engine (perf_counter)
_last_yield: contextvars.ContextVar[float] = contextvars.ContextVar(
    "aengine_last_yield", default=-math.inf
)


async def end_checkpoint(time_slice: float) -> None:
    """The checkpoint of a backward that finished without yielding.

    # NOTE [The checkpoint of a short backward]
    # Every ``await ae.backward/grad`` sees cancellation, as trio's own
    # functions do.  A backward that finished within its first time slice
    # also lets the other tasks run, unless this task already yielded inside
    # the engine less than a time slice ago: then it only checks for
    # cancellation (``checkpoint_if_cancelled``; and asyncio's own
    # ``Task.cancel``).  When it does yield, it yields as between two slices
    # (NOTE [Yielding a time slice]): after one checkpoint a task woken by
    # its timer meanwhile would run only one or two slices later.  A loop of
    # small backwards thus yields once per time slice, as one long backward
    # does, instead of paying an event-loop iteration (more than a 1-node
    # backward costs) per call.  The time since the engine's last
    # yield in this task bounds the time the task ran without yielding from
    # above, so no task holds the loop longer than a slice (plus one
    # backward) this way.
    """
    if perf_counter() - _last_yield.get() < time_slice:
        # not asyncio's Task.cancel either (``asyncio_cancelling``, inlined: the
        # end of every short ``await ae.grad``)
        asyncio: Any = sys.modules.get("asyncio")
        loop = None if asyncio is None else asyncio._get_running_loop()
        task = None if loop is None else asyncio.current_task(loop)
        if task is None or not task.cancelling():
            await _checkpoint_if_cancelled()
            return
    # as between slices: the tasks woken meanwhile (a timer, I/O) run first
    await yield_slice()


async def yield_slice() -> None:
    """Let every task that became ready during the slice run before resuming.

    # NOTE [Yielding a time slice]
    # One checkpoint is not enough for the task that became ready while the
    # slice ran.  asyncio runs a woken sleeper two loop iterations after its
    # timer expired (the timer handle sets a future; the future schedules the
    # task), an I/O waiter likewise (reader callback, then the task), while a
    # task that yields with ``sleep(0)`` runs in the next iteration: after one
    # checkpoint the backward would run one more slice, often two, before a
    # sleeper woken during the first one (seen in the sleeper's p99 wake-up
    # delay).
    # trio runs each batch in a random order, so half of the time the
    # backward's next slice came first.  Resuming three asyncio iterations
    # (two trio batches) later lets them all go first: a task woken during a
    # slice waits for the rest of that slice only.  The extra iterations cost
    # a small share of a long backward.
    """
    await _checkpoint()
    await _checkpoint()
    if async_library() == "asyncio":
        await _checkpoint()
    _last_yield.set(perf_counter())
