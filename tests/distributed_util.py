"""Shared by the distributed tests: a small model, its data, running ranks as tasks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np

import aengine as ae

RNG = np.random.default_rng(17)
W1 = RNG.standard_normal((4, 5))
B1 = RNG.standard_normal(5)
W2 = RNG.standard_normal((5, 1))
X = RNG.standard_normal((12, 4))
Y = RNG.standard_normal((12, 1))


def params() -> list[ae.Tensor]:
    return [ae.tensor(a, requires_grad=True) for a in (W1, B1, W2)]


def loss_of(ps: list[ae.Tensor], x: Any, y: Any) -> ae.Tensor:
    h = ae.tanh(x @ ps[0] + ps[1])
    return ((h @ ps[2] - y) ** 2).mean()


def shard(rank: int, n: int) -> tuple[ae.Tensor, ae.Tensor]:
    sl = slice(rank * len(X) // n, (rank + 1) * len(X) // n)
    return ae.tensor(X[sl]), ae.tensor(Y[sl])


async def reference() -> list[Any]:
    """The single-process gradient of the whole batch."""
    ps = params()
    await loss_of(ps, ae.tensor(X), ae.tensor(Y)).backward()
    return [p.grad.numpy() for p in ps]


async def run_ranks(groups: list[Any], fn: Callable[[Any], Awaitable[Any]]) -> list[Any]:
    """Run ``fn(group)`` for every rank as tasks; each rank's result or exception."""
    out: list[Any] = [None] * len(groups)

    async def one(g: Any) -> None:
        try:
            out[g.rank] = await fn(g)
        except Exception as exc:
            out[g.rank] = exc

    async with anyio.create_task_group() as tg:
        for g in groups:
            tg.start_soon(one, g)
    return out


async def data_parallel(groups: list[Any], *, fail: int | None = None, grads: Any = None) -> Any:
    """One GradSync backward per rank; ``fail``: that rank's backward raises."""
    n = len(groups)
    reps = [params() for _ in groups]
    if grads is not None:
        for ps in reps:
            for p, g in zip(ps, grads):
                p.grad = ae.tensor(g)

    async def rank(g: Any) -> None:
        ps = reps[g.rank]
        x, y = shard(g.rank, n)
        async with ae.distributed.GradSync(ps, g, bucket_bytes=64):
            if fail == g.rank:
                x.requires_grad_()

                def bad(_: Any) -> None:
                    raise ValueError("bad batch")

                x.register_hook(bad)
            await loss_of(ps, x, y).backward()

    return reps, await run_ranks(groups, rank)
