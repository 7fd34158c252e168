"""Distributed backward (rpc, context, serve) with in-process ranks."""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.distributed import _rpc
from tests.distributed.util import run_ranks, split_backward, split_reference, split_weights

D = ae.distributed


async def serving(groups: list[Any], body: Any) -> list[Any]:
    """Every rank serves; rank 0 also runs ``body(group)``.

    Checks afterwards that every rank's agent forgot every context: leaving
    a context released it everywhere (PyTorch's #40880 freed it too early).
    """
    agents = []

    async def rank(g: Any) -> Any:
        async with D.serve(g):
            agents.append(_rpc._agent.get())
            if g.rank == 0:
                return await body(g)
        return None

    out = await run_ranks(groups, rank)
    if not any(isinstance(o, BaseException) for o in out):
        assert [a.contexts for a in agents] == [{}] * len(groups)
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("ranks", [2, 3])
async def test_split_model_gives_the_single_process_gradient(
    anyio_backend: str, ranks: int
) -> None:
    ref = await split_reference()
    split_weights()
    groups = D.local_groups(ranks)
    out = await serving(groups, lambda g: split_backward(g, ranks))
    for got, want in zip(out[0], ref):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    assert out[1:] == [None] * (ranks - 1)


@pytest.mark.anyio
async def test_answers_are_matched_by_request_not_by_arrival(anyio_backend: str) -> None:
    """Answers that arrive out of order (PyTorch's #38513 hung on message order)."""

    async def slow_square(t: ae.Tensor, delay: float) -> ae.Tensor:
        await anyio.sleep(delay)
        return t * t

    async def body(g: Any) -> Any:
        w = ae.tensor([1.0, 2.0], requires_grad=True)
        res: dict[str, Any] = {}
        async with D.context() as ctx:

            async def call(name: str, scale: float, delay: float) -> None:
                res[name] = await D.rpc(1, slow_square, w * scale, delay)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "first", 1.0, 0.05)  # answered last
                tg.start_soon(call, "second", 3.0, 0.0)
            await ctx.backward([(res["first"] + res["second"]).sum()])
            return res["first"].tolist(), res["second"].tolist(), ctx.get_gradients()[w].tolist()

    out = await serving(D.local_groups(2), body)
    assert out[0] == ([1.0, 4.0], [9.0, 36.0], [20.0, 40.0])  # d/dw (w^2 + 9 w^2) = 20 w


def bad_stage(h: ae.Tensor) -> ae.Tensor:
    raise ValueError("shape mismatch in stage 2")


async def relay(h: ae.Tensor) -> ae.Tensor:
    return await D.rpc(2, bad_stage, h)


@pytest.mark.anyio
async def test_errors_name_every_rank_they_passed(anyio_backend: str) -> None:
    """(PyTorch's #27643 / #27644: remote errors that did not say where they came from.)"""

    async def body(g: Any) -> Any:
        async with D.context():
            with pytest.raises(D.RemoteError) as info:
                await D.rpc(1, relay, ae.ones(2, requires_grad=True))
        return info.value

    out = await serving(D.local_groups(3), body)
    err = out[0]
    assert isinstance(err, D.RemoteError) and err.rank == 1
    assert str(err) == (
        "on rank 1: RemoteError: on rank 2: ValueError: shape mismatch in stage 2 "
        "(in rpc of bad_stage) (in rpc of relay)"
    )


def hooked(h: ae.Tensor) -> ae.Tensor:
    def bad(_: Any) -> None:
        raise ArithmeticError("nan in the remote backward")

    y = h * 2
    y.register_hook(bad)
    return y


@pytest.mark.anyio
async def test_an_error_in_a_remote_part_reaches_the_caller(anyio_backend: str) -> None:
    async def body(g: Any) -> Any:
        w = ae.ones(2, requires_grad=True)
        async with D.context() as ctx:
            y = await D.rpc(1, hooked, w)
            with pytest.raises(D.RemoteError, match="on rank 1: .*nan in the remote backward"):
                await ctx.backward([y.sum()])
            return ctx.get_gradients()

    out = await serving(D.local_groups(2), body)
    assert out[0] == {}  # nothing was delivered


PROBE: dict[str, Any] = {}


def stalling(h: ae.Tensor) -> ae.Tensor:
    async def stall(_: Any) -> None:
        PROBE["started"].set()
        try:
            await anyio.sleep_forever()
        finally:
            PROBE["cancelled"] = True

    y = h * 2
    y.register_hook(stall)
    return y


@pytest.mark.anyio
async def test_cancelling_the_caller_cancels_the_remote_part(anyio_backend: str) -> None:
    PROBE.clear()
    PROBE["started"] = anyio.Event()

    async def body(g: Any) -> Any:
        w = ae.ones(2, requires_grad=True)
        async with D.context() as ctx:
            y = await D.rpc(1, stalling, w)
            async with anyio.create_task_group() as tg:
                tg.start_soon(ctx.backward, [y.sum()])
                await PROBE["started"].wait()
                tg.cancel_scope.cancel()
            return ctx.get_gradients()

    out = await serving(D.local_groups(2), body)
    assert out == [{}, None]
    assert PROBE["cancelled"] is True


async def sleepy(h: ae.Tensor) -> ae.Tensor:
    await anyio.sleep(30)
    return h


@pytest.mark.anyio
async def test_a_failing_rank_ends_every_rank(anyio_backend: str) -> None:
    groups = D.local_groups(3)

    async def rank(g: Any) -> Any:
        async with D.serve(g):
            if g.rank == 0:
                return await D.rpc(1, sleepy, ae.ones(1))
            if g.rank == 2:
                await anyio.sleep(0.01)
                raise KeyError("disk full")
        return None

    with anyio.fail_after(5):
        out = await run_ranks(groups, rank)
    assert isinstance(out[2], KeyError)
    for r in (0, 1):
        assert isinstance(out[r], D.RankFailedError) and out[r].rank == 2, out[r]
        assert "rank 2 failed: KeyError: 'disk full'" in str(out[r])


@pytest.mark.anyio
async def test_misuse_says_what_to_do(anyio_backend: str) -> None:
    with pytest.raises(ae.AutogradError, match=r"async with ae\.distributed\.serve\(group\)"):
        await D.rpc(1, ae.square, ae.ones(1))
    with pytest.raises(ae.AutogradError, match="serve"):
        D.context()

    async def body(g: Any) -> Any:
        with pytest.raises(ValueError, match="this rank itself"):
            await D.rpc(0, ae.square, ae.ones(1))
        with pytest.raises(ValueError, match=r"to must be a rank in 0\.\.1"):
            await D.rpc(7, ae.square, ae.ones(1))
        async with D.context() as ctx:
            with pytest.raises(ae.AutogradError, match="scalar tensors that require grad"):
                await ctx.backward([ae.ones(2)])
        return "ok"

    assert (await serving(D.local_groups(2), body))[0] == "ok"


@pytest.mark.anyio
async def test_each_rank_runs_its_part_in_its_own_engine(anyio_backend: str) -> None:
    ref = await split_reference()
    split_weights()
    engines: dict[int, Any] = {}

    async def rank(g: Any) -> Any:
        async with ae.Engine() as engine, D.serve(g):
            engines[g.rank] = engine
            if g.rank == 0:
                return await split_backward(g, 3)
        return None

    out = await run_ranks(D.local_groups(3), rank)
    for got, want in zip(out[0], ref):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    # rank 0: ctx.backward, then the part from h0 (whose gradient rank 1 sent
    # back); rank 2: stage 2; rank 1: stage 1 (the result it passed on from
    # rank 2 is a leaf there: its gradient goes on to rank 2 without a backward)
    assert [engines[r].stats().backwards_done for r in range(3)] == [2, 1, 1]
