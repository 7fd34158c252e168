"""Device ready queues, their workers, and ``ae.Engine``.

# NOTE [Device queues]
# The CPU queue belongs to the graph task and is drained by the task that
# awaits the backward (``run_async`` in _drivers.py).  Every other device (``sim:N``,
# ``cuda:N``) has ONE queue per Engine, shared by all graph tasks, drained by
# the device's worker tasks:
#
# * A node's device: ``node.dev`` (an op's result's device, an
#   AccumulateGrad's variable's device), cpu when None (GraphRoot, custom
#   Functions).  The hot loop of ``GraphTask.run`` hands every node off the
#   Engine's ``home`` (cpu) to ``Engine.dispatch`` (NOTE [Where a node runs]
#   in aengine/core/_graph_task.py); successors routed by ``GraphTask.route`` (the
#   general path, and every node a device worker runs) go through
#   ``GraphTask.push`` -> ``Scheduler.push``, which sends device nodes to their
#   queue and cpu nodes to the owner's heap, waking the owner.  (A device node
#   made ready by the owner's hot loop waits in the owner's heap until it is
#   popped, i.e. behind the ready cpu nodes PyTorch's cpu thread would also
#   run first; checking devices while routing would cost every cpu node.)
# * Inside a device queue each graph task keeps its own heap, ordered as the
#   owner's (sequence_nr, larger first; one graph task has one depth); the
#   graph tasks with ready work take turns node by node (round robin), so a
#   long backward never holds back short ones on the same device.
# * A worker runs nodes until its time slice is over, then yields to the
#   loop.  It runs a node with the owner's code (``GraphTask.run_node``):
#   inline (apply, release, route) or the general path for hooks, captures,
#   accumulation, anomaly mode and offloaded kernels.  A worker that must
#   wait inside a node (an offloaded kernel, an async hook, a nested
#   backward) is replaced while it waits, so its queue keeps draining; the
#   surplus workers leave once the queue is empty.
# * Everything here runs on the event loop thread; only ``node.apply`` of
#   offloaded kernels runs in worker threads (NOTE [Kernel offload policy]).
# * ``inflight[gt]`` counts gt's nodes in device queues or running on a
#   worker; the owner waits for a wake-up while its heap is empty and that
#   count is not zero.  When a graph task ends (done, failed, cancelled) its
#   queued nodes are dropped and a node still running finishes into nothing:
#   staged gradients are only committed by the owner on success.
"""

from __future__ import annotations

import contextvars
import functools
import os
import weakref
from collections.abc import Awaitable, Callable
from time import perf_counter
from types import TracebackType
from typing import Any, TypeVar

import anyio
from anyio.lowlevel import RunVar, checkpoint, checkpoint_if_cancelled

from ..core import (
    ERR_BACKWARD_TWICE,
    YIELD,
    AutogradError,
    GraphTask,
    Node,
)
from ..core._modes import _grad_enabled
from ..tensors import CPU, Device
from . import _blas
from ._calls import Call, CallBook, unlimited
from ._checks import check_int, check_seconds, check_sim_latency
from ._choice import Choices
from ._loop import yield_slice
from ._offload import DEFAULT_OFFLOAD_MIN_ELEMENTS, NEVER, run_kernel
from ._queues import DeviceQueue, SeededQueue
from ._seeded import SeededSlots
from ._settings import (
    DEFAULT_REENTRANT_DEPTH_LIMIT,
    DEFAULT_TIME_SLICE,
    _block,
    loop_engine,
    set_loop_engine,
)
from ._share import FifoSlots, LoopShare, loop_share
from ._stats import EngineStats
from ._threaded import IN_THREAD, TO_THREAD, movable, run_slice, starts_heavy

__all__ = [
    "Engine",
    "EngineStats",
    "LAZY",
    "NEED_ENGINE",
    "current_engine",
    "node_device",
    "scheduler_for",
    "mark_released",
    "cancelled_graph_error",
    "worker_name",
]

#: returned by ``Scheduler.dispatch`` when an async backward without an
#: Engine meets its first non-cpu node: the driver opens a short-lived Engine
NEED_ENGINE = object()

#: the Engine whose queues serve backwards of this task (innermost block);
#: its settings are read through ``_settings._block``, which a nested
#: backward moved to a thread of its own keeps while it drops this one (the
#: queues belong to the caller's loop, the settings do not)
_engine_var: contextvars.ContextVar[Engine | None] = contextvars.ContextVar(
    "aengine_engine", default=None
)
_worker_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "aengine_worker", default=None
)

ERR_CANCELLED_GRAPH = (
    "Trying to backward through a graph whose saved tensors were freed by a previous "
    "backward through it that was cancelled or failed part way (retain_graph=False frees "
    "the saved values of every node that already ran). Build the graph again (run the "
    "forward again), or pass retain_graph=True to a backward that may be cancelled or "
    "fail so that the graph can be used again."
)

#: nodes whose saved tensors were freed by a backward that did not complete
_released_by_failure: weakref.WeakSet[Node] = weakref.WeakSet()


def current_engine() -> Engine | None:
    """The Engine serving backwards started here, or None.

    The innermost ``async with ae.Engine()`` block of this task, else the
    Engine serving this event loop (the first one opened on it and still
    open: a request handler gets the Engine its app opened in its lifespan).

    Example::

        >>> import aengine as ae, anyio
        >>> async def main():
        ...     async with ae.Engine() as engine:
        ...         return ae.current_engine() is engine
        >>> anyio.run(main)
        True
    """
    eng = _engine_var.get()
    if eng is not None and not eng._closed:
        return eng
    return loop_engine()  # type: ignore[no-any-return]


def worker_name() -> str:
    """The name of the device worker running here (``'sim:0#0'``), else ``'owner'``."""
    return _worker_var.get() or "owner"


def node_device(node: Node) -> Device:
    """The device whose queue runs ``node`` (see NOTE [Device queues])."""
    dev = node.dev
    return CPU if dev is None else dev


# -- marking graphs freed by a failed backward -------------------------------------------------


def mark_released(gt: GraphTask) -> None:
    """Remember the nodes a failed/cancelled non-retaining backward freed."""
    roots = gt.roots
    if not roots:
        return
    stack: list[Node] = []
    for t in roots:
        fn = getattr(t, "grad_fn", None)
        if fn is not None:
            stack.append(fn)
    seen: set[Node] = set(stack)
    while stack:
        node = stack.pop()
        if getattr(node, "saved", ()) is None:
            _released_by_failure.add(node)
        for nxt in node:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)


def cancelled_graph_error(gt: GraphTask, exc: BaseException) -> BaseException | None:
    """The clear error for a backward through a graph freed by a failed backward."""
    node = gt.error_node
    if (
        node is not None
        and isinstance(exc, AutogradError)
        and str(exc) == ERR_BACKWARD_TWICE
        and node in _released_by_failure
    ):
        return AutogradError(ERR_CANCELLED_GRAPH)
    return None


# -- where a node runs ------------------------------------------------------------------------


def _loop_limiter() -> anyio.CapacityLimiter:
    """The kernel-thread limiter of the running event loop (backwards without an Engine)."""
    try:
        return _LIMITER_VAR.get()
    except LookupError:
        lim = anyio.CapacityLimiter(_default_threads())
        _LIMITER_VAR.set(lim)
        return lim


_LIMITER_VAR: RunVar[anyio.CapacityLimiter] = RunVar("aengine_cpu_limiter")


class _Lazy:
    """Scheduler of an async backward without an Engine (cpu only until proven otherwise).

    The first non-cpu node makes ``dispatch`` return NEED_ENGINE: the driver
    then opens a short-lived Engine and continues inside it, so a cpu-only
    graph never pays for task groups.  Heavy kernels run in threads of the
    loop's own limiter.
    """

    __slots__ = ()
    home = CPU
    offload_min = DEFAULT_OFFLOAD_MIN_ELEMENTS

    def node_hook(self) -> None:
        return None

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        gt.keep(node, buffer)

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        if node_device(node) is CPU:
            return False
        gt.keep(node, buffer)
        return NEED_ENGINE

    def busy(self, gt: GraphTask) -> bool:
        return False

    def release(self, gt: GraphTask) -> None:
        pass

    async def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        return await run_kernel(node, inputs, gt.create_graph, _loop_limiter())


LAZY = _Lazy()


def _default_threads() -> int:
    return max(2, os.cpu_count() or 2)


def scheduler_for(gt: GraphTask) -> Engine | _Lazy:
    """The scheduler an async backward uses: the current Engine, else the lazy one."""
    eng = current_engine()
    return LAZY if eng is None else eng


T = TypeVar("T")


#: seconds between two loop-lag probes of an Engine
LAG_PROBE_PERIOD = 0.01


class Engine:
    """The scheduler serving every backward of an event loop or of a block.

    ``async with ae.Engine() as engine:`` opens one task group.  Every
    ``await ae.backward/grad`` started inside the block, and, once it is
    open, every one started by any task of the same event loop that has no
    Engine of its own (a web server's request handlers: open the Engine in
    the app's lifespan), uses its settings and its queues:

    * the backwards on the loop take turns, one time slice at a time between
      two turns of the event loop, however many are in flight (NOTE [The
      loop's share]), so other tasks stay responsive under load;
    * ``max_inflight`` bounds how many run at once, the others waiting in
      order (NOTE [Admission]);
    * heavy kernels run in compute threads (one per core by default), so the
      backwards of concurrent requests use every core; ``await
      engine.run(fn, *args)`` runs a function there too (a request's
      forward);
    * each non-cpu device used (``sim:N``, ``cuda:N``) gets a ready queue
      shared by all backwards and ``workers_per_device`` worker tasks.

    Without an Engine a cpu backward runs as well (an async backward that
    meets a non-cpu node opens a short-lived Engine of its own).  Leaving the
    block cancels the workers; backwards still waiting on them fail with an
    AutogradError.  ``ae.current_engine()`` is the Engine serving the caller;
    ``engine.stats()`` says what it has done.

    Settings (each checked here: a wrong one raises at once, naming it):

    * ``time_slice``: seconds a backward or a worker runs before it yields to
      the event loop (default ``DEFAULT_TIME_SLICE``, 1 ms).
    * ``max_inflight``: backwards (top-level ones) running at once; the
      others wait, cancellably, in the order they came (default None: no
      limit).
    * ``offload``: run heavy kernels in compute threads (default True);
      ``offload_threshold``: the size, in elements touched, from which a
      node's kernel counts as heavy (NOTE [Kernel offload policy]);
      ``offload_threads``: compute threads per device (default: the number
      of cores, at least 2), shared by offloaded kernels and ``engine.run``;
      ``offload_backward``: once a backward meets a heavy cpu node, run the
      rest of it in a compute thread when nothing in it needs the event
      loop (no hooks, no ``async def`` backward; NOTE [A backward in a
      compute thread]; default True).
    * ``blas_threads``: BLAS/OpenMP pool size while the Engine is open
      (default 1: the compute threads give the parallelism; NOTE [BLAS
      threads]); None leaves the pools as they are.
    * ``reentrant_depth_limit``: nested graph tasks on one stack before a
      nested backward moves off it (default 60, PyTorch's MAX_DEPTH);
      ``reentrant_overflow``: where a nested *async* backward goes then:
      "thread" (default: a new OS thread with its own event loop) or "task"
      (a fresh task of this loop, which keeps loop-bound objects usable).
    * ``workers_per_device``: worker tasks per device queue (default 1).
    * ``sim_latency``: seconds each node on a ``sim`` device waits before it
      runs, to simulate a slow device (a float, or a dict by device name).
    * ``on_node``: debug callable ``(node, where)`` called before each node runs,
      ``where`` being the worker's name (``'sim:0#0'``) or ``'owner'``.

    A web service opens one Engine in its lifespan (the complete, tested
    examples are in the repository's ``examples/`` folder)::

        import contextlib, aengine as ae
        from fastapi import FastAPI

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with ae.Engine(max_inflight=64):
                yield      # every request handler's backward uses it

        app = FastAPI(lifespan=lifespan)

    Example (trio)::

        >>> import aengine as ae, trio
        >>> async def main():
        ...     async with ae.Engine():
        ...         x = ae.ones(3, requires_grad=True)
        ...         y = (x.to("sim:0") * 2).sum()
        ...         await ae.backward(y)
        ...     return x.grad.tolist()
        >>> trio.run(main)
        [2.0, 2.0, 2.0]
    """

    def __init__(
        self,
        *,
        time_slice: float | None = None,
        max_inflight: int | None = None,
        offload: bool = True,
        offload_threshold: int | None = None,
        offload_threads: int | None = None,
        offload_backward: bool = True,
        blas_threads: int | None = 1,
        reentrant_depth_limit: int = DEFAULT_REENTRANT_DEPTH_LIMIT,
        reentrant_overflow: str = "thread",
        workers_per_device: int = 1,
        sim_latency: float | dict[str, float] = 0.0,
        on_node: Callable[[Node, str], Any] | None = None,
        _ephemeral: bool = False,
    ) -> None:
        # every setting is checked here, naming it: a wrong one fails now, not in a backward
        if time_slice is None:
            time_slice = DEFAULT_TIME_SLICE
        time_slice = check_seconds("time_slice", time_slice)
        if not time_slice > 0:
            raise ValueError(f"time_slice must be a positive number of seconds, got {time_slice}")
        if max_inflight is not None:
            max_inflight = check_int("max_inflight", max_inflight, 1)
        if not isinstance(offload, bool):
            raise TypeError(f"offload must be a bool, got {type(offload).__name__} {offload!r}")
        if offload_threshold is None:
            offload_threshold = DEFAULT_OFFLOAD_MIN_ELEMENTS
        offload_threshold = check_int("offload_threshold", offload_threshold, 0)
        if offload_threads is not None:
            offload_threads = check_int("offload_threads", offload_threads, 1)
        if not isinstance(offload_backward, bool):
            raise TypeError(
                "offload_backward must be a bool, got "
                f"{type(offload_backward).__name__} {offload_backward!r}"
            )
        if blas_threads is not None:
            blas_threads = check_int("blas_threads", blas_threads, 1)
        reentrant_depth_limit = check_int("reentrant_depth_limit", reentrant_depth_limit, 1)
        if not isinstance(reentrant_overflow, str):
            raise TypeError(
                "reentrant_overflow must be 'thread' or 'task', got "
                f"{type(reentrant_overflow).__name__} {reentrant_overflow!r}"
            )
        if reentrant_overflow not in ("thread", "task"):
            raise ValueError(
                f"reentrant_overflow must be 'thread' or 'task', got {reentrant_overflow!r}"
            )
        self.reentrant_overflow = reentrant_overflow
        workers_per_device = check_int("workers_per_device", workers_per_device, 1)
        sim_latency = check_sim_latency(sim_latency)
        if on_node is not None and not callable(on_node):
            raise TypeError(
                "on_node must be a callable (node, where) or None, got "
                f"{type(on_node).__name__} {on_node!r}"
            )
        self.time_slice = time_slice
        self.max_inflight = max_inflight
        self.offload = offload
        self.offload_threshold = offload_threshold
        #: the Scheduler protocol's facts (NOTE [The scheduler protocol])
        self.home = CPU
        self.offload_min = self.offload_threshold if self.offload else NEVER
        self.offload_threads = offload_threads or _default_threads()
        self.offload_backward = offload_backward and offload
        self.blas_threads = blas_threads
        self.reentrant_depth_limit = int(reentrant_depth_limit)
        self.workers_per_device = int(workers_per_device)
        self.sim_latency = sim_latency
        self.on_node = on_node
        self._ephemeral = _ephemeral
        self._queues: dict[Device, DeviceQueue] = {}
        self._inflight: dict[GraphTask, int] = {}
        self._waiters: dict[GraphTask, anyio.Event] = {}
        self._cpu_limiter: anyio.CapacityLimiter | None = None
        self._runs_limiter: anyio.CapacityLimiter | None = None
        #: the sync backwards adopted by engine.run calls (NOTE [A backward inside engine.run])
        self._book = CallBook()
        self._tg: Any = None
        self._tokens: list[Any] = []
        self._ctx = contextvars.Context()
        self._closed = True
        self._entered = False
        self._capped = False
        # NOTE [Admission]: the top-level backwards admitted and running, and
        # the places (None: no limit)
        self._admitted: set[GraphTask] = set()
        self._admission = FifoSlots(max_inflight) if max_inflight is not None else None
        # stats: outcomes, kernels, the share's counts when we opened
        self._done_ok = self._failed = self._cancelled = 0
        self._kernels = self._calls = self._moved = 0
        #: whether a graph task may move to a compute thread (asked once each)
        self._movable: dict[GraphTask, bool] = {}
        self._worst_lag = 0.0
        self._share: LoopShare | None = None
        self._share_base = (0, 0)
        #: the seeded choices of an explored run (ae.testing), None otherwise
        self._explore: Choices | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"<aengine.Engine {state} devices={[str(d) for d in self._queues]}>"

    @property
    def devices(self) -> list[Device]:
        """The devices whose queues this Engine has started."""
        return list(self._queues)

    # -- lifetime -----------------------------------------------------------------------------
    async def __aenter__(self) -> Engine:
        if self._entered:
            raise RuntimeError("an Engine can be entered only once; create a new ae.Engine()")
        self._entered = True
        choices = self._explore = loop_share().choices  # NOTE [Choice points]
        if choices is not None and self.max_inflight is not None:
            self._admission = SeededSlots(self.max_inflight, choices)
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._closed = False
        self._tokens = [(_engine_var, _engine_var.set(self)), (_block, _block.set(self))]
        # workers start from the Engine's context, not from the context of
        # whichever backward first used a device (its graph task, modes...)
        self._ctx = contextvars.copy_context()
        share = self._share = loop_share()
        self._share_base = (share.slices, share.overran)
        if not self._ephemeral:
            if loop_engine() is None:
                set_loop_engine(self)
            if self.blas_threads is not None:
                _blas.cap(self.blas_threads)
                self._capped = True
            if choices is None:  # a periodic timer would only slow virtual time down
                tg.start_soon(self._probe_lag, name="aengine-loop-lag-probe")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._closed = True
        for var, token in reversed(self._tokens):
            var.reset(token)
        self._tokens = []
        if not self._ephemeral and loop_engine() is self:
            set_loop_engine(None)
        if self._capped:
            self._capped = False
            _blas.uncap()
        # Backwards still waiting on our workers cannot finish: fail them.
        for gt in list(self._inflight):
            gt.fail(
                None,
                AutogradError(
                    "the ae.Engine serving this backward was closed while it ran; keep the "
                    "`async with ae.Engine()` block open until every backward started in it "
                    "has finished"
                ),
            )
            self._wake(gt)
        tg = self._tg
        self._tg = None
        tg.cancel_scope.cancel()
        try:
            # the workers are cancelled; wait for them (a kernel running in a
            # thread finishes first).  The body's exception is not passed in,
            # so it propagates as is, never wrapped in an exception group.
            await tg.__aexit__(None, None, None)
        except BaseException:
            if exc is None:
                raise
        return False

    # -- the public calls -----------------------------------------------------------------------
    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in one of the Engine's compute threads; return its result.

        For the work of a request that would hold the event loop: the forward
        of a model made of large kernels runs here while the loop serves
        other tasks, and the kernels of concurrent requests run on every core
        (numpy releases the GIL inside them).  ``fn`` sees a copy of the
        caller's context (grad mode, ``ae.no_grad()``...), so the graph it
        records is the caller's to differentiate.  Cancelling the caller waits
        for ``fn`` to return (a thread cannot be stopped), then raises.

        Example::

            >>> import aengine as ae, anyio
            >>> async def main():
            ...     async with ae.Engine() as engine:
            ...         w = ae.ones(2, 2, requires_grad=True)
            ...         y = await engine.run(lambda x: (x @ w).sum(), ae.ones(3, 2))
            ...         (g,) = await ae.grad(y, [w])
            ...         return g.tolist()
            >>> anyio.run(main)
            [[3.0, 3.0], [3.0, 3.0]]
        """
        if not callable(fn):
            raise TypeError(
                f"engine.run(fn, *args) takes a callable first, got {type(fn).__name__} {fn!r}"
            )
        if self._closed:
            raise AutogradError(
                "engine.run() was called on a closed ae.Engine; call it inside the "
                "`async with ae.Engine()` block"
            )
        self._calls += 1
        if self._explore is not None:  # no thread in an explored run (NOTE [Choice points])
            await checkpoint()
            return contextvars.copy_context().run(functools.partial(fn, *args, **kwargs))
        # its sync backwards are the Engine's (NOTE [A backward inside engine.run])
        result = await Call(self).run(fn, args, kwargs)
        # cancelled while fn ran: its result is dropped, the cancellation raised
        await checkpoint_if_cancelled()
        return result

    def stats(self) -> EngineStats:
        """What this Engine has done since it opened (see ``EngineStats``)."""
        depth = {"cpu": 0 if self._share is None else len(self._share.waiters)}
        for dev, q in self._queues.items():
            depth[str(dev)] = sum(len(r) for r in q.queues.values())
        share = self._share
        slices = overran = 0
        if share is not None:
            slices = share.slices - self._share_base[0]
            overran = share.overran - self._share_base[1]
        book = self._book
        return EngineStats(
            backwards_done=self._done_ok + book.done,
            backwards_failed=self._failed + book.failed,
            backwards_cancelled=self._cancelled + book.cancelled,
            backwards_inflight=len(self._admitted) + book.running,
            backwards_waiting=0 if self._admission is None else len(self._admission.waiters),
            queue_depth=depth,
            kernels_offloaded=self._kernels,
            backwards_in_threads=self._moved,
            calls_run=self._calls,
            slices=slices,
            slices_overran=overran,
            worst_loop_lag=self._worst_lag,
            blas_threads=_blas.current_cap(),
        )

    # -- the Scheduler protocol (aengine.core) and the drivers' calls ---------------------------
    def node_hook(self) -> Callable[[Node], None] | None:
        """The ``on_node`` debug callable as a graph task's node hook, or None."""
        on_node = self.on_node
        if on_node is None:
            return None
        return lambda node: on_node(node, worker_name())

    def admit(self, gt: GraphTask) -> Awaitable[None] | None:
        """Admit a backward before it runs; an awaitable when it must wait for a place.

        # NOTE [Admission]
        # ``max_inflight`` bounds the top-level backwards running at once
        # (a nested backward belongs to a running one and is never held
        # back: it would wait for its own parent).  The places are
        # ``FifoSlots`` (_share.py), as the loop's share: the others wait in
        # the order they came; a backward that ends hands its place to the
        # first waiter directly, so no newcomer takes it meanwhile.  A
        # waiter cancelled before its turn leaves the line; one cancelled
        # as its turn came passes the place on.
        """
        if gt.depth:
            return None
        slots = self._admission
        if slots is None or slots.try_take():
            self._admitted.add(gt)
            return None
        return self._wait_admission(gt, slots)

    async def _wait_admission(self, gt: GraphTask, slots: FifoSlots) -> None:
        try:
            await slots.take()
        except BaseException as exc:  # it ends before it ran: counted all the same
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                self._cancelled += 1
            else:
                self._failed += 1
            raise
        self._admitted.add(gt)

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        """Queue a node that became ready on the general path."""
        if gt.error is not None or gt.done:
            return
        dev = node.dev
        if dev is not None and dev is not CPU:
            self._put(gt, node, buffer, dev)
            return
        gt.keep(node, buffer)
        self._wake(gt)

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        """Send a node that left the owner's hot loop to its device queue; False if cpu's."""
        dev = node_device(node)
        if dev is CPU:
            if self.offload_backward and node.numel >= self.offload_min:
                ok = self._movable.get(gt)
                if ok is None:
                    ok = self._movable[gt] = movable(gt)
                if ok and gt not in self._inflight:
                    gt.keep(node, buffer)  # it runs first, in the thread
                    return TO_THREAD
            return False
        self._put(gt, node, buffer, dev)
        return None

    def starts_in_thread(self, gt: GraphTask) -> bool:
        """Whether ``gt`` starts in a compute thread (NOTE [A backward in a compute thread])."""
        return self.offload_backward and starts_heavy(gt, self.offload_min)

    async def in_thread(self, gt: GraphTask) -> Any:
        """Run ``gt`` in a compute thread until it drains or needs the loop; its last step.

        See NOTE [A backward in a compute thread].
        """
        self._moved += 1
        detach = gt.detach
        limiter = self._cpu()
        while True:
            gt.attach(IN_THREAD, detach)
            try:
                step = await anyio.to_thread.run_sync(run_slice, gt, limiter=limiter)
            finally:
                gt.attach(self, detach)
            # the thread cannot be interrupted: a cancellation is seen between slices
            await checkpoint_if_cancelled()
            if step is not YIELD:
                return step

    def busy(self, gt: GraphTask) -> bool:
        """True while some of gt's nodes are queued on or run by device workers."""
        return gt in self._inflight

    async def wait(self, gt: GraphTask) -> None:
        """Wait (owner) until a device worker queued a cpu node or finished."""
        ev = anyio.Event()
        self._waiters[gt] = ev
        try:
            await ev.wait()
        finally:
            if self._waiters.get(gt) is ev:
                del self._waiters[gt]

    def release(self, gt: GraphTask) -> None:
        """gt ended: drop its queued device nodes, count it, free its place."""
        for q in self._queues.values():
            n = q.discard(gt)
            if n:
                self._done(gt, n)
        self._waiters.pop(gt, None)
        self._movable.pop(gt, None)
        if gt in self._admitted:
            self._admitted.discard(gt)
            err = gt.error
            if err is None:
                self._done_ok += 1
            elif isinstance(err, anyio.get_cancelled_exc_class()):
                self._cancelled += 1
            else:
                self._failed += 1
            if self._admission is not None:
                self._admission.give()

    async def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        """Run an offloaded node's apply in a compute thread (the device's limiter)."""
        dev = node_device(node)
        if dev is CPU:
            self._kernels += 1
            return await run_kernel(node, inputs, gt.create_graph, self._cpu())
        q = self._queue(dev)
        if q.inline:  # a GPU: launched here, on its worker (NOTE [Kernel offload policy])
            if q.select is None:
                return node.apply(inputs, gt.create_graph)
            with q.select():
                return node.apply(inputs, gt.create_graph)
        self._kernels += 1
        return await run_kernel(node, inputs, gt.create_graph, q.limiter)

    # -- internals ------------------------------------------------------------------------------
    def _cpu(self) -> anyio.CapacityLimiter:
        lim = self._cpu_limiter
        if lim is None:
            lim = self._cpu_limiter = anyio.CapacityLimiter(self.offload_threads)
        return lim

    def _run_limiter(self) -> anyio.CapacityLimiter:
        """The threads of engine.run calls: unbounded, each call holds a ``_cpu()`` token."""
        lim = self._runs_limiter
        if lim is None:
            lim = self._runs_limiter = unlimited()
        return lim

    async def _probe_lag(self) -> None:
        """Record how late a periodic timer fires: the loop's worst lag."""
        period = LAG_PROBE_PERIOD
        while True:
            start = perf_counter()
            await anyio.sleep(period)
            lag = perf_counter() - start - period
            if lag > self._worst_lag:
                self._worst_lag = lag

    def _put(self, gt: GraphTask, node: Node, buffer: list[Any], dev: Device) -> None:
        if self._closed:
            raise AutogradError(
                f"a backward reached a node on {dev} after its ae.Engine was closed; run "
                "backwards inside the `async with ae.Engine()` block"
            )
        self._queue(dev).put(gt, node, buffer)
        self._inflight[gt] = self._inflight.get(gt, 0) + 1

    def _done(self, gt: GraphTask, n: int = 1) -> None:
        left = self._inflight.get(gt, 0) - n
        if left > 0:
            self._inflight[gt] = left
        else:
            self._inflight.pop(gt, None)
        self._wake(gt)

    def _wake(self, gt: GraphTask) -> None:
        ev = self._waiters.pop(gt, None)
        if ev is not None:
            ev.set()

    def _queue(self, dev: Device) -> DeviceQueue:
        q = self._queues.get(dev)
        if q is None:
            lat = self.sim_latency
            latency = 0.0
            if dev.type == "sim":
                latency = lat.get(str(dev), 0.0) if isinstance(lat, dict) else float(lat)
            if self._explore is None:
                q = DeviceQueue(dev, self.workers_per_device, self.offload_threads, latency)
            else:
                q = SeededQueue(
                    dev, self.workers_per_device, self.offload_threads, latency, self._explore
                )
            self._queues[dev] = q
            for _ in range(self.workers_per_device):
                self._spawn(q)
        return q

    def _spawn(self, q: DeviceQueue) -> None:
        q.workers += 1
        name = f"{q.dev}#{next(q.names)}"
        self._ctx.run(self._tg.start_soon, self._worker, q, name, name=f"aengine-worker-{name}")

    async def _worker(self, q: DeviceQueue, name: str) -> None:
        _worker_var.set(name)
        share = loop_share()
        time_slice = self.time_slice
        explore = self._explore
        if explore is not None:
            time_slice = 0.0  # a slice of one node; whether to yield is a choice
        held = False  # the loop's share: taken per slice, never held across an await
        start = 0.0
        try:
            while True:
                if not q.rr:
                    if q.workers - q.blocked > q.target:
                        return  # a replacement whose worker came back
                    ev = q.event
                    if ev is None:
                        ev = q.event = anyio.Event()
                    await ev.wait()
                    continue
                while q.rr:
                    gt, node, buffer = q.take()
                    if gt.error is not None or gt.done:
                        self._done(gt)
                        continue
                    if q.latency:
                        if held:
                            held = False
                            share.count(start, time_slice)
                            share.give()
                        await anyio.sleep(q.pause())
                        if gt.error is not None or gt.done:
                            self._done(gt)
                            continue
                    if not held:
                        if not share.try_take():
                            await share.take()
                        held = True
                        start = perf_counter()
                    share.running = True
                    try:
                        step = self._start(q, gt, node, buffer)
                    finally:
                        share.running = False
                    if step is not None:
                        held = False
                        share.count(start, time_slice)
                        share.give()
                        await self._wait(q, gt, step)
                    elif perf_counter() - start > time_slice:
                        break
                if held:  # the slice is over (NOTE [The loop's share])
                    share.count(start, time_slice)
                    if q.rr:
                        if explore is not None and not explore.yield_here(explore.label(gt)):
                            start = perf_counter()
                            continue
                        await yield_slice()  # holding it: NOTE [Yielding a time slice]
                        if share.waiters:
                            held = False
                            share.give()
                        else:
                            start = perf_counter()
                        continue
                    held = False
                    share.give()
                await checkpoint()
        finally:
            if held:
                share.give()
            q.workers -= 1

    def _start(
        self, q: DeviceQueue, gt: GraphTask, node: Node, buffer: list[Any]
    ) -> Awaitable[Any] | None:
        """Run one node of ``gt`` on this worker, as the owner would; what to await, if any."""
        t2 = _grad_enabled.set(gt.create_graph)
        step = None
        try:
            with gt.as_current():
                if q.select is None:
                    step = gt.run_node(node, buffer)
                else:
                    with q.select():  # cuda: this device, in this thread
                        step = gt.run_node(node, buffer)
        finally:
            _grad_enabled.reset(t2)
            if step is None:
                self._done(gt)
        return step

    async def _wait(self, q: DeviceQueue, gt: GraphTask, step: Awaitable[Any]) -> None:
        """Wait inside a node (kernel, async hook, nested backward); replaced meanwhile."""
        cancelled = anyio.get_cancelled_exc_class()
        q.blocked += 1
        if q.workers - q.blocked < q.target:
            self._spawn(q)  # (the new worker starts in no graph task's context)
        try:
            with gt.as_current():
                t2 = _grad_enabled.set(gt.create_graph)
                try:
                    await step
                    if self._explore is not None:
                        await self._explore.resume()  # waiters resume in a seeded order
                finally:
                    _grad_enabled.reset(t2)
        except cancelled:
            raise  # this worker is cancelled (the Engine closes)
        except BaseException:
            # recorded on gt (GraphTask.fail), KeyboardInterrupt and
            # SystemExit too: the owner raises them as they are
            pass
        finally:
            q.blocked -= 1
            self._done(gt)
