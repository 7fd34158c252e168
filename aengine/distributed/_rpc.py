"""Distributed backward over RPC (PyTorch's FAST mode), on any process group.

# NOTE [Distributed backward]
# ``serve(group)`` runs this rank's agent: one listener task per other rank
# reads that rank's messages (channel "rpc"), and each request runs in a task
# of its own, in the agent's task group (so a rank's part of a backward runs
# under whatever Engine that rank opened around ``serve``).  Requests:
#
# * ``call``: run ``fn(*args)`` here.  The caller records its tensor
#   arguments as a *send point* of its context (their gradient will come back
#   from here); here each tensor argument becomes a fresh leaf, a *recv
#   point* (its gradient goes back to the caller's send point), and ``fn``'s
#   results a send point of this rank, whose results on the caller are recv
#   points.  Points are numbered by the rank that owns them.
# * ``grad``: the gradients of a send point's tensors.  This rank's *part*:
#   one ``ae.grad`` from those tensors to every leaf they reach (FAST mode:
#   dependencies are counted per part, never across ranks); gradients of
#   ordinary leaves accumulate in the context, those of recv points are sent
#   on to their owners, and the request is answered when every part it
#   started answered.  ``ctx.backward(roots)`` is a part started from roots.
# * ``release``: the caller's context ended: wait for this rank's requests
#   of that context, release the ranks it reached in turn, forget it.
#
# Every request is matched to its answer by a number, never by arrival order.
# A failed request is answered with the error, which the caller raises as
# RemoteError naming the rank (a chain of calls names every rank it passed).
# A cancelled request sends ``cancel``, which cancels the remote task and,
# through it, the requests it made.  A rank that fails aborts the group
# (NOTE [Abort]): every waiting rank raises RankFailedError.  Leaving
# ``context()`` waits for the context's requests and releases, and leaving
# ``serve`` waits until every rank leaves (the group's barrier), so that
# nobody's messages go unanswered.
"""

from __future__ import annotations

import contextvars
import inspect
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import numpy as np

from .. import _autograd
from ..core import AccumulateGrad, AutogradError, Node, enable_grad
from ..tensors import Tensor
from ._group import ProcessGroup, RankFailedError, describe_error

__all__ = ["DistContext", "RemoteError", "context", "current_context", "rpc", "serve"]

_agent: contextvars.ContextVar[_Agent | None] = contextvars.ContextVar(
    "aengine_rpc_agent", default=None
)
_context: contextvars.ContextVar[DistContext | None] = contextvars.ContextVar(
    "aengine_dist_context", default=None
)


class RemoteError(AutogradError):
    """What another rank raised while serving a request (``rank`` names it).

    Example::

        >>> import aengine as ae
        >>> str(ae.distributed.RemoteError(2, "ValueError: bad input (in rpc of f)"))
        'on rank 2: ValueError: bad input (in rpc of f)'
    """

    def __init__(self, rank: int, text: str) -> None:
        super().__init__(f"on rank {rank}: {text}")
        self.rank = rank


class _Reply:
    __slots__ = ("answer", "event")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.answer: tuple[bool, Any] | None = None


class _Agent:
    """One rank's RPC agent (``serve``): it owns the contexts of this rank."""

    def __init__(self, group: ProcessGroup, tg: anyio.abc.TaskGroup) -> None:
        self.group = group
        self.rank = group.rank
        self.tg = tg
        self.ids = itertools.count()
        self.pending: dict[int, _Reply] = {}
        self.running: dict[tuple[int, int], anyio.CancelScope] = {}
        self.contexts: dict[tuple[int, int], DistContext] = {}
        self.failure: BaseException | None = None

    # -- requests out ----------------------------------------------------------------------
    async def request(self, dst: int, kind: str, body: Any) -> Any:
        if self.failure is not None:
            raise self.failure
        msg_id = next(self.ids)
        reply = self.pending[msg_id] = _Reply()
        try:
            await self.group.send_message((kind, msg_id, body), dst, "rpc")
            await reply.event.wait()
        except BaseException:
            if not reply.event.is_set() and self.failure is None:
                with anyio.CancelScope(shield=True):  # the remote task must not go on alone
                    try:
                        await self.group.send_message(("cancel", msg_id, None), dst, "rpc")
                    except Exception:
                        pass  # the group failed: the remote task ends with it
            raise
        finally:
            self.pending.pop(msg_id, None)
        if reply.answer is None:
            assert self.failure is not None  # only a failure wakes a reply without an answer
            raise self.failure
        ok, value = reply.answer
        if not ok:
            raise RemoteError(dst, value)
        return value

    # -- requests in -----------------------------------------------------------------------
    async def listen(self, src: int) -> None:
        try:
            while True:
                kind, msg_id, body = await self.group.recv_message(src, "rpc")
                if kind == "reply":
                    reply = self.pending.get(msg_id)
                    if reply is not None:
                        reply.answer = body
                        reply.event.set()
                elif kind == "cancel":
                    scope = self.running.get((src, msg_id))
                    if scope is not None:
                        scope.cancel()
                else:
                    self.tg.start_soon(self.answer, src, kind, msg_id, body)
        except RankFailedError as exc:
            self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        for reply in self.pending.values():
            reply.event.set()

    async def answer(self, src: int, kind: str, msg_id: int, body: Any) -> None:
        handlers: dict[str, Callable[..., Awaitable[Any]]] = {
            "call": self.on_call,
            "grad": self.on_grad,
            "release": self.on_release,
        }
        handler = handlers[kind]
        with anyio.CancelScope() as scope:
            self.running[(src, msg_id)] = scope
            try:
                answer: tuple[bool, Any] = (True, await handler(src, *body))
            except Exception as exc:
                answer = (False, describe_remote(exc))
            finally:
                del self.running[(src, msg_id)]
            try:
                await self.group.send_message(("reply", msg_id, answer), src, "rpc")
            except RankFailedError as exc:
                self.fail(exc)
        # cancelled: the caller is gone, nobody waits for an answer

    def context_for(self, key: tuple[int, int]) -> DistContext:
        ctx = self.contexts.get(key)
        if ctx is None:
            ctx = self.contexts[key] = DistContext(self, key)
        return ctx

    async def on_call(self, src: int, key: tuple[int, int] | None, point: int, fn: Any,
                      args: list[Any]) -> Any:  # fmt: skip
        ctx = self.context_for(key) if key is not None else None
        tensors = []
        for i, a in enumerate(args):
            if isinstance(a, _Array):
                t = Tensor._make(a.data, requires_grad=a.requires_grad and ctx is not None)
                if t.requires_grad and ctx is not None:
                    ctx.recv_points[t] = (src, point, i)
                tensors.append(t)
            else:
                tensors.append(a)
        token = _context.set(ctx)
        try:
            with enable_grad():
                out = fn(*tensors)
                if inspect.isawaitable(out):
                    out = await out
        except Exception as exc:
            raise _Wrapped(f"{describe_error(exc)} (in rpc of {_name(fn)})") from exc
        finally:
            _context.reset(token)
        single = not isinstance(out, tuple | list)
        outs = [out] if single else list(out)
        sent = None
        if ctx is not None and any(isinstance(o, Tensor) and o.requires_grad for o in outs):
            sent = next(self.ids)
            ctx.send_points[sent] = [o if isinstance(o, Tensor) else None for o in outs]
        return single, sent, [_pack(o) for o in outs]

    async def on_grad(self, src: int, key: tuple[int, int], point: int, grads: list[Any],
                      retain_graph: bool) -> None:  # fmt: skip
        ctx = self.contexts.get(key)
        if ctx is None:
            raise AutogradError(f"context {key} is not known on rank {self.rank} (released?)")
        tensors = ctx.send_points.get(point)
        if tensors is None:
            raise AutogradError(f"no rpc result {point} in context {key} on rank {self.rank}")
        await ctx.run_part(tensors, grads, retain_graph)

    async def on_release(self, src: int, key: tuple[int, int]) -> None:
        ctx = self.contexts.get(key)
        if ctx is not None:
            await ctx.release()


class _Wrapped(Exception):
    """An error of user code run for another rank, with the text that rank sees."""

    def __str__(self) -> str:
        return str(self.args[0])


def describe_remote(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, _Wrapped) else describe_error(exc)


class _Array:
    """A tensor as it travels: its data and whether it requires grad."""

    __slots__ = ("data", "requires_grad")

    def __init__(self, data: Any, requires_grad: bool) -> None:
        self.data = data
        self.requires_grad = requires_grad

    def __reduce__(self) -> Any:
        return (_Array, (self.data, self.requires_grad))


def _pack(x: Any) -> Any:
    if isinstance(x, Tensor):
        return _Array(np.array(x.detach().data, copy=True), x.requires_grad)
    return x


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


class DistContext:
    """One distributed backward's context on one rank (``ae.distributed.context()``).

    ``await ctx.backward(roots)`` runs the backward across the ranks that
    ``rpc`` calls of this context reached; ``ctx.get_gradients()`` gives this
    rank's gradients (``.grad`` is not touched), as PyTorch's
    ``dist_autograd``.  See ``context`` for an example.
    """

    def __init__(self, agent: _Agent, key: tuple[int, int]) -> None:
        self.agent = agent
        self.key = key
        self.grads: dict[Tensor, Any] = {}
        self.send_points: dict[int, list[Tensor | None]] = {}
        self.recv_points: dict[Tensor, tuple[int, int, int]] = {}
        self.peers: set[int] = set()
        self.inflight = 0
        self.idle = anyio.Event()
        self.idle.set()

    # -- the public side -------------------------------------------------------------------
    async def backward(self, roots: Sequence[Tensor], retain_graph: bool = False) -> None:
        """Run the backward from scalar ``roots`` across every rank the context reached."""
        roots = list(roots)
        for r in roots:
            if not isinstance(r, Tensor) or r.numel() != 1 or not r.requires_grad:
                raise AutogradError(
                    "ctx.backward takes scalar tensors that require grad (a loss per root)"
                )
        await self.run_part(roots, [np.ones_like(r.data) for r in roots], retain_graph)

    def get_gradients(self) -> dict[Tensor, Tensor]:
        """This rank's gradients of this context: leaf tensor -> gradient."""
        return {t: Tensor._make(g) for t, g in self.grads.items()}

    # -- the agent's side ------------------------------------------------------------------
    def track(self) -> Any:
        return _Inflight(self)

    async def run_part(self, tensors: Sequence[Any], grads: list[Any], retain: bool) -> None:
        """This rank's part of the backward from ``tensors`` (NOTE [Distributed backward])."""
        with self.track():
            outgoing: dict[tuple[int, int], dict[int, Any]] = {}
            roots, root_grads = [], []
            for t, g in zip(tensors, grads):
                if isinstance(t, Tensor) and g is not None and t.requires_grad:
                    if t.grad_fn is None:
                        self.deliver(t, g, outgoing)  # a leaf sent on as it was
                    else:
                        roots.append(t)
                        root_grads.append(Tensor._make(np.asarray(g, dtype=t.data.dtype)))
            if roots:
                leaves = _leaves_of([t.grad_fn for t in roots])
                if leaves:
                    res = await _autograd.grad(
                        roots, leaves, root_grads, retain_graph=retain, allow_unused=True
                    )
                    for leaf, g in zip(leaves, res):
                        if g is not None:
                            self.deliver(leaf, g.data, outgoing)
            await self.send_out(outgoing, retain)

    def deliver(
        self, leaf: Tensor, g: Any, outgoing: dict[tuple[int, int], dict[int, Any]]
    ) -> None:
        """A gradient for a leaf: kept here, or queued for the rank the leaf came from."""
        point = self.recv_points.get(leaf)
        if point is None:
            old = self.grads.get(leaf)
            self.grads[leaf] = np.array(g, copy=True) if old is None else old + g
            return
        outgoing.setdefault(point[:2], {})[point[2]] = g

    async def send_out(self, outgoing: dict[tuple[int, int], dict[int, Any]], retain: bool) -> None:
        """Send the gradients of recv points to their owners; wait for their parts."""
        if not outgoing:
            return
        errors: list[Exception] = []

        async def send(owner: int, body: Any) -> None:
            try:
                await self.agent.request(owner, "grad", body)
            except Exception as exc:  # the first error is raised, as the engine's
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for (owner, point), by_index in outgoing.items():
                grads = [by_index.get(i) for i in range(max(by_index) + 1)]
                tg.start_soon(send, owner, (self.key, point, grads, retain))
        if errors:
            raise errors[0]

    async def release(self) -> None:
        """Wait for this context's requests, release the ranks it reached, forget it."""
        await self.idle.wait()
        for peer in sorted(self.peers):
            await self.agent.request(peer, "release", (self.key,))
        self.agent.contexts.pop(self.key, None)

    async def __aenter__(self) -> DistContext:
        self._token = _context.set(self)
        return self

    async def __aexit__(self, typ: Any, exc: BaseException | None, tb: Any) -> None:
        _context.reset(self._token)
        if exc is None:
            await self.release()
            return
        with anyio.CancelScope(shield=True):  # the other ranks must forget it too
            try:
                await self.release()
            except Exception:
                pass  # the group failed as well: the error that ends the block says more


class _Inflight:
    def __init__(self, ctx: DistContext) -> None:
        self.ctx = ctx

    def __enter__(self) -> None:
        ctx = self.ctx
        if ctx.inflight == 0:
            ctx.idle = anyio.Event()
        ctx.inflight += 1

    def __exit__(self, *exc: object) -> None:
        ctx = self.ctx
        ctx.inflight -= 1
        if ctx.inflight == 0:
            ctx.idle.set()


def _leaves_of(nodes: list[Node | None]) -> list[Tensor]:
    """The leaves that require grad reached from ``nodes`` (iterative: deep graphs)."""
    seen: set[Node] = set()
    stack = [n for n in nodes if n is not None]
    leaves: list[Tensor] = []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if isinstance(node, AccumulateGrad):
            leaves.append(node.variable)  # type: ignore[arg-type]
            continue
        stack.extend(n for n in node if n is not None and n not in seen)
    return leaves


def _current_agent(what: str) -> _Agent:
    agent = _agent.get()
    if agent is None:
        raise AutogradError(
            f"{what} needs this rank's RPC agent: call it inside "
            "`async with ae.distributed.serve(group):`"
        )
    return agent


@asynccontextmanager
async def serve(group: ProcessGroup) -> AsyncIterator[None]:
    """Answer the other ranks' ``rpc`` calls and backward parts while inside.

    Every rank of ``group`` enters it (the rank that drives the work and the
    ranks that only serve alike); leaving waits until every rank leaves, so
    that no request goes unanswered.  If the block raises or is cancelled,
    the group is aborted: the other ranks raise RankFailedError naming this
    rank (NOTE [Distributed backward]).

    Example::

        >>> import anyio, aengine as ae
        >>> async def rank(group):
        ...     async with ae.distributed.serve(group):
        ...         if group.rank == 0:
        ...             return (await ae.distributed.rpc(1, ae.square, ae.tensor(3.0))).item()
        >>> async def main():
        ...     out = []
        ...     async with anyio.create_task_group() as tg:
        ...         for g in ae.distributed.local_groups(2):
        ...             tg.start_soon(lambda g: _keep(out, rank(g)), g)
        ...     return out
        >>> async def _keep(out, coro):
        ...     out.append(await coro)
        >>> sorted(anyio.run(main), key=str)
        [9.0, None]
    """
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"serve expects a process group, got {type(group).__name__}")
    if _agent.get() is not None:
        raise AutogradError("serve: this task already serves a group; serve it once per rank")
    barrier = group.new_tag("serve")
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        agent = _Agent(group, tg)
        token = _agent.set(agent)
        try:
            for src in range(group.world_size):
                if src != group.rank:
                    tg.start_soon(agent.listen, src)
            try:
                yield
                await group.start(barrier, np.zeros(1), "sum").wait()  # every rank is done
            except BaseException as exc:
                group.abort(exc)
                failure = exc  # raised below as it is, not inside the task group's ExceptionGroup
        finally:
            _agent.reset(token)
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


def context() -> DistContext:
    """A distributed autograd context: ``async with ae.distributed.context() as ctx``.

    ``rpc`` calls made inside record their send and recv points in it;
    ``await ctx.backward([loss])`` runs the backward across the ranks, each
    rank's part in its own task (under that rank's Engine); gradients are
    kept per context (``ctx.get_gradients()``), not in ``.grad``.  Leaving
    it waits for its outstanding requests and makes every rank it reached
    forget it.  Needs ``serve(group)`` (see there).

    Example::

        >>> import anyio, aengine as ae
        >>> async def rank(group, w):
        ...     async with ae.distributed.serve(group):
        ...         if group.rank == 0:
        ...             async with ae.distributed.context() as ctx:
        ...                 y = await ae.distributed.rpc(1, ae.mul, w, w)
        ...                 await ctx.backward([y.sum()])
        ...                 return ctx.get_gradients()[w].tolist()
        >>> async def main():
        ...     w = ae.tensor([1.0, 2.0], requires_grad=True)
        ...     out = []
        ...     async def run(g):
        ...         out.append(await rank(g, w))
        ...     async with anyio.create_task_group() as tg:
        ...         for g in ae.distributed.local_groups(2):
        ...             tg.start_soon(run, g)
        ...     return [r for r in out if r is not None]
        >>> anyio.run(main)
        [[2.0, 4.0]]
    """
    agent = _current_agent("ae.distributed.context()")
    key = (agent.rank, next(agent.ids))
    ctx = agent.contexts[key] = DistContext(agent, key)
    return ctx


def current_context() -> DistContext | None:
    """The context this code runs in: the one ``async with`` entered here, or, in a
    function that ``rpc`` runs on another rank, that rank's part of the caller's
    context (so ``current_context().get_gradients()`` reads that rank's gradients).

    Example::

        >>> import aengine as ae
        >>> ae.distributed.current_context() is None
        True
    """
    return _context.get()


async def rpc(to: int, fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on rank ``to`` and return its result (a Tensor or a tuple).

    Tensor arguments and results travel by value.  Inside ``context()`` the
    call is recorded, so that ``ctx.backward`` sends gradients through it
    (NOTE [Distributed backward]).  ``fn`` may be ``async def``.  An error
    raised there is raised here as RemoteError naming the rank; cancelling
    this call cancels the remote one.  See ``context`` for an example.
    """
    agent = _current_agent("ae.distributed.rpc")
    agent.group._check_rank(to, "to")
    if to == agent.rank:
        raise ValueError(f"rpc to rank {to}, this rank itself: call the function directly")
    if not callable(fn):
        raise TypeError(f"rpc expects a callable, got {type(fn).__name__}")
    ctx = _context.get()
    point = next(agent.ids)
    if ctx is None:
        body = (None, point, fn, [_pack(a) for a in args])
        single, _, outs = await agent.request(to, "call", body)
        return _unpack(outs, single, None, to, None)
    with ctx.track():
        ctx.peers.add(to)
        if any(isinstance(a, Tensor) and a.requires_grad for a in args):
            ctx.send_points[point] = [a if isinstance(a, Tensor) else None for a in args]
        single, sent, outs = await agent.request(
            to, "call", (ctx.key, point, fn, [_pack(a) for a in args])
        )
        return _unpack(outs, single, ctx, to, sent)


def _unpack(outs: list[Any], single: bool, ctx: DistContext | None, owner: int,
            sent: int | None) -> Any:  # fmt: skip
    res = []
    for i, o in enumerate(outs):
        if isinstance(o, _Array):
            t = Tensor._make(o.data, requires_grad=o.requires_grad and sent is not None)
            if ctx is not None and sent is not None and t.requires_grad:
                ctx.recv_points[t] = (owner, sent, i)
            res.append(t)
        else:
            res.append(o)
    return res[0] if single else tuple(res)
