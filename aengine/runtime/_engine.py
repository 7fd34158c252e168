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
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio
from anyio.lowlevel import checkpoint_if_cancelled

from ..core import YIELD, AutogradError, GraphTask, Node
from ..tensors import CPU, Device
from . import _blas
from ._calls import Call, CallBook, unlimited
from ._checks import check_engine_settings
from ._choice import Choices
from ._lazy import LAZY, NEED_ENGINE, _Lazy, default_threads, node_device
from ._lifetime import close_engine, open_engine
from ._offload import NEVER, Box, run_kernel
from ._queues import DeviceQueue
from ._released import ERR_CANCELLED_GRAPH, cancelled_graph_error, mark_released
from ._settings import DEFAULT_REENTRANT_DEPTH_LIMIT, loop_engine
from ._share import FifoSlots, LoopShare
from ._stats import EngineStats
from ._threaded import IN_THREAD, TO_THREAD, movable, run_slice, starts_heavy
from ._workers import open_queue, worker_name

__all__ = [
    "ERR_CANCELLED_GRAPH",
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

#: the Engine whose queues serve backwards of this task (innermost block);
#: its settings are read through ``_settings._block``, which a nested
#: backward moved to a thread of its own keeps while it drops this one (the
#: queues belong to the caller's loop, the settings do not)
_engine_var: contextvars.ContextVar[Engine | None] = contextvars.ContextVar(
    "aengine_engine", default=None
)


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


def scheduler_for(gt: GraphTask) -> Engine | _Lazy:
    """The scheduler an async backward uses: the current Engine, else the lazy one."""
    eng = current_engine()
    return LAZY if eng is None else eng


T = TypeVar("T")


def _slice_in_thread(box: Box) -> Any:
    """``run_slice`` of the boxed graph task (NOTE [Nothing of a backward stays in a worker thread])."""
    return box.call(run_slice)


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
      whole compute: its forward, ``ae.sync.grad``, an optimizer step);
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
        s = check_engine_settings(  # each named: a wrong one fails now, not in a backward
            time_slice,
            max_inflight,
            offload,
            offload_threshold,
            offload_threads,
            offload_backward,
            blas_threads,
            reentrant_depth_limit,
            reentrant_overflow,
            workers_per_device,
            sim_latency,
            on_node,
        )
        self.reentrant_overflow = s.reentrant_overflow
        self.time_slice = s.time_slice
        self.max_inflight = s.max_inflight
        self.offload = s.offload
        self.offload_threshold = s.offload_threshold
        #: the Scheduler protocol's facts (NOTE [The scheduler protocol])
        self.home = CPU
        self.offload_min = s.offload_threshold if s.offload else NEVER
        self.offload_threads = s.offload_threads or default_threads()
        self.offload_backward = s.offload_backward and s.offload
        self.blas_threads = s.blas_threads
        self.reentrant_depth_limit = s.reentrant_depth_limit
        self.workers_per_device = s.workers_per_device
        self.sim_latency = s.sim_latency
        self.on_node = s.on_node
        self._ephemeral = _ephemeral
        self._admission = FifoSlots(s.max_inflight) if s.max_inflight is not None else None
        self._init_state()

    def _init_state(self) -> None:
        """The state of a new Engine: closed, nothing queued, nothing counted."""
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
        # NOTE [Admission]: the top-level backwards admitted and running (the
        # places: ``_admission``, None for no limit)
        self._admitted: set[GraphTask] = set()
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

    # -- lifetime (_lifetime.py) --------------------------------------------------------------
    async def __aenter__(self) -> Engine:
        await open_engine(self, _engine_var)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        await close_engine(self, exc)
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

        A backward ``fn`` runs with ``ae.sync.grad`` or ``ae.sync.backward``
        is one of this Engine's: counted in ``stats()``, admitted under
        ``max_inflight``, stopped at its next time slice when the caller is
        cancelled (see NOTE [A backward inside engine.run] in _calls.py).

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
        if self._explore is not None:  # NOTE [Threads under the explorer] (ae.testing)
            return await self._explore.in_thread(functools.partial(fn, *args, **kwargs))
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
            box = Box(gt)
            try:
                step = await anyio.to_thread.run_sync(_slice_in_thread, box, limiter=limiter)
            finally:
                box.empty()  # NOTE [Nothing of a backward stays in a worker thread]
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
            q = self._queues[dev] = open_queue(self, dev)
        return q
