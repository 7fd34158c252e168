"""GradSync: the data-parallel gradient all-reduce, overlapping the backward.

# NOTE [GradSync overlaps the backward]
# PyTorch's DDP fills gradient buckets from hooks on each parameter and
# launches a bucket's all-reduce as soon as its last gradient arrived, while
# the backward goes on; the backward returns when every reduction is done.
# Here:
#
# * A tensor hook on each parameter runs when the parameter's AccumulateGrad
#   node runs, with the gradient this backward gives it (its final value in
#   this backward: the node runs once, after every contribution summed).  The
#   hook copies it into its bucket and, when the bucket is complete, starts
#   the bucket's collective without awaiting it (NOTE [Collectives by tag]):
#   the reduction is on its way while the other nodes run.
# * The first hook of a backward registers a commit guard (NOTE [Commit
#   guards] in core/_graph_task.py): after the last node ran and before
#   ``.grad`` is written, it starts the buckets still incomplete (a
#   parameter this backward did not reach contributes zeros), awaits every
#   reduction, and stages the averages in place of the local gradients.
#   Only then are they committed, so ``.grad`` holds either what it held
#   before or the reduced gradient, never a local or half-reduced one.
# * A backward that fails, a reduction that fails and a cancellation all
#   abort the group (NOTE [Abort]): the other ranks' backwards raise
#   RankFailedError naming this rank, and nothing is committed anywhere.
#   The guard and ``on_finish`` see every outcome; ``async with GradSync``
#   also aborts when its block raises (a failure before any backward).
#
# Buckets hold parameters in reverse order (a backward reaches the last
# layers first, as DDP assumes), of one dtype each, up to ``bucket_bytes``.
# The tags of a backward's buckets carry the number of the backward on this
# rank, so every rank must run its backwards under GradSync in the same
# sequence, one at a time, as with DDP.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core import AutogradError, GraphTask, current_graph_task
from ..runtime import async_library
from ..tensors import Tensor
from ._group import ProcessGroup, Work, describe_error

__all__ = ["GradSync"]

#: DDP's default bucket size
DEFAULT_BUCKET_BYTES = 25 * 2**20


class _Step:
    """One backward's buckets on this rank (owned by its GradSync)."""

    __slots__ = ("grads", "missing", "number", "ok", "works")

    def __init__(self, number: int, buckets: list[list[int]]) -> None:
        self.number = number
        self.grads: dict[int, Any] = {}
        self.missing = [len(b) for b in buckets]
        self.works: list[Work | None] = [None] * len(buckets)
        self.ok = False


class GradSync:
    """Average each parameter's gradient over the ranks of ``group`` during the backward.

    While active (``async with``, or ``attach()`` / ``detach()``), every
    ``await loss.backward()`` of this rank leaves in each parameter's
    ``.grad`` the average over the ranks (``average=False``: the sum), as
    PyTorch's DistributedDataParallel.  Gradients are reduced in buckets of
    about ``bucket_bytes`` as soon as a bucket is complete, while the rest
    of the backward runs (NOTE [GradSync overlaps the backward]).  Every rank
    makes its GradSync over the same parameters in the same order and runs
    the same number of backwards.  A rank that fails or is cancelled makes
    the others raise ``RankFailedError`` naming it, and no ``.grad`` changes.

    Example::

        >>> import anyio, aengine as ae
        >>> async def rank(group, w, x):
        ...     async with ae.distributed.GradSync([w], group):
        ...         await (w * x).sum().backward()
        >>> async def main():
        ...     ws = [ae.ones(2, requires_grad=True) for _ in range(2)]
        ...     groups = ae.distributed.local_groups(2)
        ...     async with anyio.create_task_group() as tg:
        ...         tg.start_soon(rank, groups[0], ws[0], ae.tensor([1.0, 2.0]))
        ...         tg.start_soon(rank, groups[1], ws[1], ae.tensor([3.0, 4.0]))
        ...     return ws[0].grad.tolist(), ws[1].grad.tolist()
        >>> anyio.run(main)
        ([2.0, 3.0], [2.0, 3.0])
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        group: ProcessGroup,
        *,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        average: bool = True,
    ) -> None:
        self.params = _check_params(params)
        if not isinstance(group, ProcessGroup):
            raise TypeError(
                f"GradSync expects a process group (ae.distributed.local_groups / ray_groups), "
                f"got {type(group).__name__}"
            )
        if not isinstance(bucket_bytes, int) or bucket_bytes < 1:
            raise ValueError(f"GradSync: bucket_bytes must be a positive int, got {bucket_bytes!r}")
        self.group = group
        self.average = average
        self.buckets = _buckets(self.params, bucket_bytes)
        self._bucket_of = {j: b for b, bucket in enumerate(self.buckets) for j in bucket}
        self._name = group.new_tag("gradsync")
        self._numbers = itertools.count()
        self._steps: dict[int, _Step] = {}
        self._handles: list[Any] | None = None

    # -- activation ------------------------------------------------------------------------
    def attach(self) -> GradSync:
        """Start reducing the gradients of every backward of this rank."""
        if self._handles is None:
            self._handles = [
                p.register_hook(functools.partial(self._on_grad, j))
                for j, p in enumerate(self.params)
            ]
        return self

    def detach(self) -> None:
        """Stop reducing (a backward in flight still completes its reductions)."""
        handles, self._handles = self._handles, None
        for h in handles or ():
            h.remove()

    async def __aenter__(self) -> GradSync:
        return self.attach()

    async def __aexit__(self, typ: Any, exc: BaseException | None, tb: Any) -> None:
        self.detach()
        if exc is not None:
            self.group.abort(exc)  # NOTE [Abort]: the other ranks must not wait for this one

    # -- during a backward -----------------------------------------------------------------
    def _on_grad(self, j: int, grad: Tensor) -> None:
        gt = current_graph_task()
        if gt is None or gt.captures:  # ae.grad(): no .grad is written, nothing to reduce
            return None
        step = self._steps.get(gt.id)
        if step is None:
            step = self._begin(gt)
        if grad is None:
            return None
        step.grads[j] = grad.data
        b = self._bucket_of[j]
        step.missing[b] -= 1
        if step.missing[b] == 0:
            self._start(step, b)
        return None

    def _begin(self, gt: GraphTask) -> _Step:
        # no loop in this thread, or the synchronous driver (no scheduler) on one: the
        # reduction's await would have nothing to wait on
        if async_library() is None or gt.sched is None:
            raise AutogradError(
                "GradSync reduces gradients while the backward runs on the event loop: "
                "call `await loss.backward()` in async code, not ae.sync.backward"
            )
        if gt.create_graph:
            raise AutogradError("GradSync does not support create_graph=True backwards")
        step = self._steps[gt.id] = _Step(next(self._numbers), self.buckets)
        gt.add_before_commit(functools.partial(self._reduce, gt, step))
        gt.add_on_finish(self._finished)
        return step

    def _start(self, step: _Step, b: int) -> None:
        parts = []
        for j in self.buckets[b]:
            g = step.grads.get(j)
            p = self.params[j]
            parts.append(np.zeros(p.data.size, p.data.dtype) if g is None else np.ravel(g))
        flat = parts[0].copy() if len(parts) == 1 else np.concatenate(parts)
        tag = ("gradsync", self._name, step.number, b)
        step.works[b] = self.group.start(tag, flat, "sum")

    async def _reduce(self, gt: GraphTask, step: _Step) -> None:
        """The commit guard: await every bucket, stage the averages."""
        try:
            for b, work in enumerate(step.works):
                if work is None:
                    self._start(step, b)  # parameters this backward did not reach: zeros
            n = self.group.world_size
            for b, work in enumerate(step.works):
                assert work is not None  # started above
                flat = await work.wait()
                if self.average:
                    flat = flat / n
                offset = 0
                for j in self.buckets[b]:
                    p = self.params[j]
                    size = p.data.size
                    gt.restage(p, flat[offset : offset + size].reshape(p.data.shape))
                    offset += size
            step.ok = True
        except GeneratorExit:
            # closed un-awaited: a synchronous driver (ae.sync.backward) cannot wait for
            # the other ranks; the backward fails with the driver's error, which
            # _finished gives the other ranks as the reason
            raise
        except BaseException as exc:
            self.group.abort(exc)
            raise

    def _finished(self, gt: GraphTask) -> None:
        step = self._steps.pop(gt.id, None)
        if step is not None and not step.ok:
            reason = describe_error(gt.error) if gt.error is not None else "its backward failed"
            self.group.abort(f"{reason} (in its backward)")


def _check_params(params: Iterable[Tensor]) -> list[Tensor]:
    if isinstance(params, Tensor):
        raise TypeError("GradSync expects an iterable of parameters, got a single Tensor")
    out = list(params)
    if not out:
        raise ValueError("GradSync: no parameters given")
    seen: set[int] = set()
    for i, p in enumerate(out):
        if not isinstance(p, Tensor):
            raise TypeError(f"GradSync: parameter {i} is a {type(p).__name__}, not a Tensor")
        if not (p.requires_grad and p.is_leaf):
            raise ValueError(
                f"GradSync: parameter {i} must be a leaf that requires grad "
                "(a parameter, not the result of an operation)"
            )
        if id(p) in seen:
            raise ValueError(f"GradSync: parameter {i} is given twice")
        seen.add(id(p))
    return out


def _buckets(params: list[Tensor], bucket_bytes: int) -> list[list[int]]:
    """Parameter indices in reverse order, cut at ``bucket_bytes`` and at dtype changes."""
    buckets: list[list[int]] = []
    size = 0
    dtype = None
    for j in reversed(range(len(params))):
        d = params[j].data
        if not buckets or size + d.nbytes > bucket_bytes or d.dtype != dtype:
            buckets.append([])
            size = 0
            dtype = d.dtype
        buckets[-1].append(j)
        size += d.nbytes
    return buckets
