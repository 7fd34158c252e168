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


# -- a model split over three ranks (rpc); the stages are module-level functions
# that find their rank's weights in STAGE_WEIGHTS, so they pickle by reference
A0 = RNG.standard_normal((3, 4))
A1 = RNG.standard_normal((4, 4))
A2 = RNG.standard_normal((4, 2))
XS = RNG.standard_normal((6, 3))
STAGE_WEIGHTS: dict[int, ae.Tensor] = {}


def split_weights() -> list[ae.Tensor]:
    ws = [ae.tensor(a, requires_grad=True) for a in (A0, A1, A2)]
    STAGE_WEIGHTS.update(enumerate(ws))
    return ws


def stage2(h: ae.Tensor) -> ae.Tensor:
    return ae.tanh(h @ STAGE_WEIGHTS[2])


async def stage1(h: ae.Tensor, last: int) -> ae.Tensor:
    h = ae.tanh(h @ STAGE_WEIGHTS[1])
    return await ae.distributed.rpc(last, stage2, h) if last else stage2(h)


def stage_grad(i: int) -> ae.Tensor:
    ctx = ae.distributed.current_context()
    assert ctx is not None
    return ctx.get_gradients()[STAGE_WEIGHTS[i]]


async def split_reference() -> list[Any]:
    ws = [ae.tensor(a, requires_grad=True) for a in (A0, A1, A2)]
    h = ae.tanh(ae.tanh(ae.tanh(ae.tensor(XS) @ ws[0]) @ ws[1]) @ ws[2])
    await (h**2).mean().backward()
    return [w.grad.numpy() for w in ws]


async def split_backward(rank0: Any, ranks: int) -> list[Any]:
    """Rank 0's part: stage 0 here, stage 1 on rank 1, stage 2 on rank 2 (or 1)."""
    ws = STAGE_WEIGHTS
    async with ae.distributed.context() as ctx:
        h0 = ae.tanh(ae.tensor(XS) @ ws[0])
        h2 = await ae.distributed.rpc(1, stage1, h0, 2 if ranks == 3 else 0)
        await ctx.backward([(h2**2).mean()])
        g0 = ctx.get_gradients()[ws[0]]
        g1 = await ae.distributed.rpc(1, stage_grad, 1)
        g2 = await ae.distributed.rpc(ranks - 1, stage_grad, 2)
    return [g.numpy() for g in (g0, g1, g2)]
