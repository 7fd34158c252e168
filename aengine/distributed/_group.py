"""What every process group offers: ranks, collectives, point-to-point, abort.

# NOTE [Collectives by tag]
# A collective is matched across ranks by a tag, not by arrival order: the
# n-th ``all_reduce`` a rank calls has the tag ``("op", n)`` on every rank, and
# GradSync tags a bucket with (its own number, the backward's number, the
# bucket), so buckets that become ready in a different order on two ranks
# still meet.  A collective is started without awaiting (``start``: the
# contribution is on its way, as a hook must not wait) and awaited later
# (``Work.wait``), as PyTorch's ``async_op=True`` and DDP's communication hooks.
#
# NOTE [Abort]
# A rank that fails or is cancelled while others may wait for it aborts its
# group (``abort``): every pending and later operation of every rank raises
# ``RankFailedError`` naming that rank and its error, at once, never after a
# timeout.  An aborted group stays aborted (as an NCCL communicator): make
# new groups to go on.  The sum of a reduction is computed once, in rank
# order, and handed to every rank, so that all ranks hold the same bits.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Hashable
from typing import Any, Protocol

import numpy as np

from ..core import AutogradError
from ..tensors import Tensor

__all__ = ["ProcessGroup", "RankFailedError", "Work", "reduce_arrays", "OPS"]

#: the reductions ``all_reduce`` knows
OPS = ("sum", "mean", "max", "min", "prod")


class RankFailedError(AutogradError):
    """Another rank of the group failed or was cancelled (``rank`` names it).

    Example::

        >>> import aengine as ae
        >>> err = ae.distributed.RankFailedError(1, "ValueError: bad batch")
        >>> err.rank, str(err)
        (1, 'rank 1 failed: ValueError: bad batch; this group is aborted, make new groups to go on')
    """

    def __init__(self, rank: int, reason: str) -> None:
        super().__init__(
            f"rank {rank} failed: {reason}; this group is aborted, make new groups to go on"
        )
        self.rank = rank
        self.reason = reason


class Work(Protocol):
    """A collective on its way: ``await work.wait()`` gives its result (an array)."""

    async def wait(self) -> Any: ...


def reduce_arrays(arrays: list[Any], op: str) -> Any:
    """Reduce the ranks' arrays in rank order (the same bits on every rank)."""
    out = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        if op in ("sum", "mean"):
            out += a
        elif op == "max":
            np.maximum(out, a, out=out)
        elif op == "min":
            np.minimum(out, a, out=out)
        else:
            out *= a
    if op == "mean":
        out /= len(arrays)
    return out


def describe_error(exc: BaseException) -> str:
    """``Type: message`` of an exception, as another rank reports it."""
    if _is_cancellation(exc):
        return "it was cancelled"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_cancellation(exc: BaseException) -> bool:
    if isinstance(exc, asyncio.CancelledError):
        return True
    trio = sys.modules.get("trio")  # loaded where a trio loop could run: never imported here
    return trio is not None and isinstance(exc, trio.Cancelled)


class ProcessGroup:
    """A rank's view of a group of ranks: collectives and point-to-point messages.

    ``local_groups`` (ranks of one event loop) and ``ray_groups`` (ranks
    whose messages go through Ray actors) make them.  Every method is a
    coroutine that works under asyncio and trio.  ``async with group:`` aborts
    the group if the block raises or is cancelled (NOTE [Abort]).

    Example::

        >>> import anyio, aengine as ae
        >>> async def main():
        ...     g0, g1 = ae.distributed.local_groups(2)
        ...     out = []
        ...     async with anyio.create_task_group() as tg:
        ...         for g in (g0, g1):
        ...             tg.start_soon(lambda g: _append(out, g), g)
        ...     return sorted(out)
        >>> async def _append(out, g):
        ...     out.append((await g.all_reduce(ae.tensor([g.rank + 1.0]))).item())
        >>> anyio.run(main)
        [3.0, 3.0]
    """

    rank: int
    world_size: int

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size
        self._seq = itertools.count()
        self._tags = itertools.count()

    # -- what an implementation provides -------------------------------------------------------
    def start(self, tag: Hashable, array: Any, op: str) -> Work:
        """Contribute ``array`` to the collective ``tag`` now; await the result later.

        ``op`` is a reduction of ``OPS`` or ``"broadcast:SRC"``.
        """
        raise NotImplementedError

    async def send_message(self, message: Any, dst: int, channel: str) -> None:
        """Send any picklable ``message`` to rank ``dst`` on ``channel`` (in order per channel)."""
        raise NotImplementedError

    async def recv_message(self, src: int, channel: str) -> Any:
        """The next message rank ``src`` sent to this rank on ``channel``."""
        raise NotImplementedError

    def abort(self, exc: BaseException | str) -> None:
        """Fail every pending and later operation of every rank, naming this rank (NOTE [Abort])."""
        raise NotImplementedError

    # -- the public operations -----------------------------------------------------------------
    def new_tag(self, kind: str) -> tuple[str, int]:
        """A tag that the same call on every rank gets (ranks create in the same order)."""
        return (kind, next(self._tags))

    async def all_reduce(self, tensor: Any, op: str = "sum") -> Tensor:
        """The reduction of ``tensor`` over every rank (``op``: sum, mean, max, min, prod).

        Every rank must call it, in the same order; returns a new tensor
        (no gradient), the same on every rank.
        """
        if op not in OPS:
            raise ValueError(f"all_reduce: op must be one of {OPS}, got {op!r}")
        arr = _array_of(tensor, "all_reduce")
        return Tensor._make(await self.start(("op", next(self._seq)), arr, op).wait())

    async def broadcast(self, tensor: Any, src: int) -> Tensor:
        """Rank ``src``'s ``tensor`` on every rank (the others pass one of the same shape)."""
        self._check_rank(src, "src")
        arr = _array_of(tensor, "broadcast")
        return Tensor._make(
            await self.start(("op", next(self._seq)), arr, f"broadcast:{src}").wait()
        )

    async def send(self, tensor: Any, dst: int) -> None:
        """Send ``tensor`` to rank ``dst`` (returns once it is on its way)."""
        self._check_rank(dst, "dst")
        if dst == self.rank:
            raise ValueError(f"send: rank {self.rank} cannot send to itself")
        await self.send_message(np.array(_array_of(tensor, "send"), copy=True), dst, "p2p")

    async def recv(self, src: int) -> Tensor:
        """The next tensor rank ``src`` sent to this rank (in the order they were sent)."""
        self._check_rank(src, "src")
        if src == self.rank:
            raise ValueError(f"recv: rank {self.rank} cannot receive from itself")
        return Tensor._make(await self.recv_message(src, "p2p"))

    async def __aenter__(self) -> ProcessGroup:
        return self

    async def __aexit__(self, typ: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            self.abort(exc)

    def _check_rank(self, r: Any, what: str) -> None:
        if not isinstance(r, int) or not 0 <= r < self.world_size:
            raise ValueError(f"{what} must be a rank in 0..{self.world_size - 1}, got {r!r}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.world_size}>"


def _array_of(tensor: Any, what: str) -> Any:
    if isinstance(tensor, Tensor):
        return tensor.detach().data
    if isinstance(tensor, np.ndarray):
        return tensor
    raise TypeError(f"{what} expects a Tensor (or a numpy array), got {type(tensor).__name__}")


def mismatch(tag: Hashable, rank: int, op: str, other: str) -> str:
    """The error text of ranks that disagree on a collective."""
    return (
        f"collective {tag!r}: rank {rank} asked for {op!r} where another rank asked for "
        f"{other!r}; every rank must call the same collectives in the same order"
    )


def combine(arrays: list[Any], op: str) -> Any:
    """The result of collective ``op`` over the ranks' contributions (in rank order)."""
    if op.startswith("broadcast:"):
        return np.array(arrays[int(op.split(":", 1)[1])], copy=True)
    shapes = {np.shape(a) for a in arrays}
    if len(shapes) > 1:
        raise ValueError(
            f"all_reduce: the ranks passed arrays of different shapes {sorted(shapes)}; "
            "every rank must pass the same shape"
        )
    return reduce_arrays(arrays, op)
