"""Ranks whose messages go through Ray actors: one actor per rank.

# NOTE [Ray groups]
# Each rank has an actor (async, so one waiting call does not block the
# others): it holds the messages sent to its rank, and rank 0's actor also
# meets the contributions of every collective (NOTE [Collectives by tag]).
# A rank's group holds the handles of all the actors; it pickles, so a Ray
# task or actor on another machine can be handed its rank's group.  Actor
# methods never raise for a failed group: they answer ``("failed", rank,
# reason)``, turned into RankFailedError here, so that Ray's wrapping of
# remote errors does not hide which rank failed.  ``abort`` tells every
# actor at once (fire and forget: it is called from synchronous code, such
# as a backward's end).  Under asyncio an ObjectRef is awaited directly;
# under trio a worker thread waits on it in short ``ray.wait`` steps, so a
# cancelled wait frees its thread within one step.
#
# Ray is imported on first use, never by ``import aengine``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable
from typing import Any

import anyio

from ..runtime import async_library
from ._group import ProcessGroup, RankFailedError, combine, describe_error, mismatch

__all__ = ["RayGroup", "ray_groups", "import_ray"]

#: seconds a trio wait blocks in ``ray.wait`` before it checks whether it was cancelled
POLL = 0.02

_actor_class: Any = None
_waits_lock = threading.Lock()
#: waits on an ObjectRef in worker threads now (tests check that none is left)
active_thread_waits = 0


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError naming the extra to install."""
    try:
        # local: ray is an optional dependency, and `import aengine` must not load it
        import ray
    except ImportError as exc:
        raise ImportError(
            "ae.distributed.ray_groups needs Ray, which is not installed: "
            "pip install 'aengine[ray]'"
        ) from exc
    return ray


class _RankActor:
    """The actor of one rank (runs inside Ray's asyncio loop, in a Ray worker: asyncio here)."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size
        self.slots: dict[Hashable, list[Any]] = {}  # tag -> [arrays, count, op, event, answer]
        self.boxes: dict[tuple[int, str], list[Any]] = {}  # (src, channel) -> messages
        self.box_events: dict[tuple[int, str], Any] = {}
        self.failure: tuple[str, int, str] | None = None

    def ping(self) -> int:
        return self.rank

    async def contribute(self, tag: Hashable, rank: int, array: Any, op: str) -> Any:
        if self.failure is not None:
            return self.failure
        slot = self.slots.get(tag)
        if slot is None:
            slot = self.slots[tag] = [[None] * self.world_size, 0, op, asyncio.Event(), None]
        if slot[2] != op:
            slot[4] = ("error", mismatch(tag, rank, op, slot[2]))
        slot[0][rank] = array
        slot[1] += 1
        if slot[1] == self.world_size:
            del self.slots[tag]
            if slot[4] is None:
                try:
                    slot[4] = ("ok", combine(slot[0], op))
                except ValueError as exc:
                    slot[4] = ("error", str(exc))
            slot[0] = []
            slot[3].set()
        else:
            await slot[3].wait()
        return self.failure if slot[4] is None else slot[4]

    async def put(self, src: int, channel: str, message: Any) -> Any:
        if self.failure is not None:
            return self.failure
        key = (src, channel)
        self.boxes.setdefault(key, []).append(message)
        ev = self.box_events.pop(key, None)
        if ev is not None:
            ev.set()
        return ("ok", None)

    async def take(self, src: int, channel: str) -> Any:
        key = (src, channel)
        while True:
            if self.failure is not None:
                return self.failure
            box = self.boxes.get(key)
            if box:
                return ("ok", box.pop(0))
            ev = self.box_events.get(key)
            if ev is None:
                ev = self.box_events[key] = asyncio.Event()
            await ev.wait()

    def abort(self, rank: int, reason: str) -> None:
        if self.failure is not None:
            return
        self.failure = ("failed", rank, reason)
        for slot in self.slots.values():
            slot[3].set()
        for ev in self.box_events.values():
            ev.set()
        self.box_events.clear()


def _actor() -> Any:
    global _actor_class
    if _actor_class is None:
        _actor_class = import_ray().remote(_RankActor)
    return _actor_class


async def _get(ref: Any) -> Any:
    """The value of an ObjectRef, awaited without blocking the loop (asyncio or trio)."""
    ray = import_ray()
    if async_library() == "asyncio":
        try:
            return await ref
        except BaseException:
            ray.cancel(ref)  # a cancelled wait must not take a message later
            raise
    stop = threading.Event()

    def wait() -> Any:
        global active_thread_waits
        with _waits_lock:
            active_thread_waits += 1
        try:
            while not stop.is_set():
                ready, _ = ray.wait([ref], timeout=POLL)
                if ready:
                    return ray.get(ref)
            return None
        finally:
            with _waits_lock:
                active_thread_waits -= 1

    done = False
    try:
        res = await anyio.to_thread.run_sync(wait, abandon_on_cancel=True)
        done = True
        return res
    finally:
        stop.set()  # a cancelled wait's thread ends within one POLL
        if not done:
            ray.cancel(ref)


def _answer(ans: Any) -> Any:
    if ans[0] == "ok":
        return ans[1]
    if ans[0] == "failed":
        raise RankFailedError(ans[1], ans[2])
    raise ValueError(ans[1])


class _RayWork:
    __slots__ = ("ref",)

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    async def wait(self) -> Any:
        return _answer(await _get(self.ref))


class RayGroup(ProcessGroup):
    """A rank of a group whose messages go through Ray actors (``ray_groups``).

    It pickles: hand ``groups[r]`` to the Ray task or actor that runs rank
    ``r`` on any machine of the cluster.  ``close()`` (once, when every rank
    is done) ends the actors.
    """

    def __init__(self, actors: list[Any], rank: int) -> None:
        super().__init__(rank, len(actors))
        self._actors = actors

    def __reduce__(self) -> Any:
        return (RayGroup, (self._actors, self.rank))

    def start(self, tag: Hashable, array: Any, op: str) -> _RayWork:
        return _RayWork(self._actors[0].contribute.remote(tag, self.rank, array, op))

    async def send_message(self, message: Any, dst: int, channel: str) -> None:
        _answer(await _get(self._actors[dst].put.remote(self.rank, channel, message)))

    async def recv_message(self, src: int, channel: str) -> Any:
        return _answer(await _get(self._actors[self.rank].take.remote(src, channel)))

    def abort(self, exc: BaseException | str) -> None:
        if isinstance(exc, RankFailedError):
            return  # another rank's failure: every actor knows already
        reason = exc if isinstance(exc, str) else describe_error(exc)
        for a in self._actors:
            a.abort.remote(self.rank, reason)

    def close(self) -> None:
        """End every rank's actor (all ranks' groups stop working)."""
        ray = import_ray()
        for a in self._actors:
            ray.kill(a)


async def ray_groups(world_size: int, **ray_options: Any) -> list[RayGroup]:
    """``world_size`` groups whose ranks talk through Ray actors, one actor per rank.

    Ray must be initialised first: ``ray.init()`` starts a local cluster,
    ``ray.init(address="auto")`` (or the head's address) joins a running one.
    ``ray_options`` go to each actor's ``.options(...)`` (``resources=``,
    ``scheduling_strategy=``...; ``num_cpus`` is 0 unless given: the actors
    only pass messages).  Call ``close()`` on one of the groups when every rank
    is done.  Needs the ``ray`` extra: ``pip install 'aengine[ray]'``.

    Example (with a local cluster)::

        import ray, aengine as ae
        ray.init(num_cpus=2, include_dashboard=False)
        groups = await ae.distributed.ray_groups(2)
        ...  # run rank r with groups[r], as with local_groups
        groups[0].close()
        ray.shutdown()
    """
    ray = import_ray()
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"ray_groups: world_size must be an int >= 1, got {world_size!r}")
    if not ray.is_initialized():
        raise RuntimeError(
            "ray_groups: Ray is not initialised: call ray.init() first (a local cluster) "
            "or ray.init(address=...) to join a running one"
        )
    options = {"num_cpus": 0, **ray_options}
    cls = _actor()
    actors = [cls.options(**options).remote(r, world_size) for r in range(world_size)]
    for a in actors:
        await _get(a.ping.remote())
    return [RayGroup(actors, r) for r in range(world_size)]
