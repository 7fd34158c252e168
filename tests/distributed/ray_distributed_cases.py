"""ae.distributed.ray_groups on a local Ray cluster (loopback only), one for the module.

Run by test_distributed_ray.py in a pytest process of its own (see NOTE
[Ray's driver in a process of its own] in tests/ray_child.py)."""

from __future__ import annotations

import faulthandler
import importlib.util
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.distributed import _ray
from tests.distributed.util import (
    data_parallel,
    params,
    reference,
    run_ranks,
    shard,
    split_backward,
    split_reference,
    split_weights,
)
from tests.paths import ROOT

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'aengine[ray]')")

D = ae.distributed
EXAMPLE = ROOT / "examples" / "data_parallel.py"


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A test that hangs (seconds are normal; a minute on a loaded machine)
    ends the run after 150 s with every thread's traceback, rather than
    holding CI until its own limit."""
    faulthandler.dump_traceback_later(150, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def shared(cluster: None) -> Iterator[list[Any]]:
    """Groups for the tests that do not abort them: an actor takes a new Ray
    worker process (about 1.5 s), so they are made once for these tests.
    Actor handles serve any event loop."""
    gs = anyio.run(D.ray_groups, 2)
    yield gs
    gs[0].close()
    _no_actor_or_wait_left(gs[0]._actors)


@pytest.fixture
async def groups() -> Any:
    """Fresh groups, for a test that aborts them."""
    gs = await D.ray_groups(2)
    yield gs
    gs[0].close()
    _no_actor_or_wait_left(gs[0]._actors)


def _no_actor_or_wait_left(actors: list[Any]) -> None:
    deadline = time.monotonic() + 10
    for a in actors:  # the state API needs the dashboard: ask the actors themselves
        while True:  # ray.kill returns before the actor is gone
            try:
                ray.get(a.ping.remote(), timeout=5)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, f"{a} is still alive"
            time.sleep(0.02)
    while _ray.active_thread_waits:  # a cancelled wait's thread ends within one poll
        assert time.monotonic() < deadline, _ray.active_thread_waits
        time.sleep(0.01)


@pytest.mark.anyio
async def test_collectives_messages_and_gradsync(anyio_backend: str, shared: Any) -> None:
    async def rank(g: Any) -> Any:
        s = await g.all_reduce(ae.tensor([1.0, g.rank]))
        b = await g.broadcast(ae.tensor([10.0 * g.rank]), src=1)
        await g.send(ae.tensor([float(g.rank)]), 1 - g.rank)
        return s.tolist(), b.tolist(), (await g.recv(1 - g.rank)).tolist()

    assert await run_ranks(shared, rank) == [
        ([2.0, 1.0], [10.0], [1.0]),
        ([2.0, 1.0], [10.0], [0.0]),
    ]

    # the same groups go on to a data-parallel backward
    ref = await reference()
    reps, out = await data_parallel(shared)
    assert out == [None, None]
    for ps in reps:
        for p, r in zip(ps, ref):
            np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-13, atol=1e-15)


@pytest.mark.anyio
async def test_a_failing_rank_is_named_and_no_grad_is_written(
    anyio_backend: str, groups: Any
) -> None:
    reps, out = await data_parallel(groups, fail=0)
    assert isinstance(out[0], ae.BackwardError)
    assert isinstance(out[1], D.RankFailedError) and out[1].rank == 0
    assert re.search(r"^rank 0 failed: .*ValueError: bad batch", str(out[1]))
    assert all(p.grad is None for ps in reps for p in ps)


@pytest.mark.anyio
async def test_cancelling_a_rank_ends_every_rank(anyio_backend: str, groups: Any) -> None:
    reps = [params(), params()]
    out: list[Any] = [None, None]

    async def rank(g: Any) -> None:
        x, y = shard(g.rank, 2)
        try:
            async with D.GradSync(reps[g.rank], g):
                if g.rank == 1:
                    await anyio.sleep_forever()  # cancelled before its backward
                await ((x @ reps[g.rank][0]).sum() * 0 + (reps[g.rank][2]).sum()).backward()
        except Exception as exc:
            out[g.rank] = exc

    threads = threading.active_count()
    async with anyio.create_task_group() as tg:
        tg.start_soon(rank, groups[0])
        with anyio.move_on_after(0.3):
            await rank(groups[1])
    assert isinstance(out[0], D.RankFailedError) and "rank 1 failed: it was cancelled" in str(
        out[0]
    )
    assert all(p.grad is None for ps in reps for p in ps)
    assert threading.active_count() <= threads + 1  # at most an idle worker of the thread pool


@pytest.mark.anyio
async def test_distributed_backward_over_ray(anyio_backend: str, shared: Any) -> None:
    ref = await split_reference()
    split_weights()

    async def rank(g: Any) -> Any:
        async with D.serve(g):
            if g.rank == 0:
                return await split_backward(g, 2)
        return None

    out = await run_ranks(shared, rank)
    for got, want in zip(out[0], ref):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    assert out[1] is None


@pytest.mark.anyio
async def test_the_data_parallel_example_on_ray(anyio_backend: str, shared: Any) -> None:
    spec = importlib.util.spec_from_file_location("data_parallel", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    (w0, b0), (w1, b1) = await example.train(shared, steps=5)
    assert np.array_equal(w0, w1) and np.array_equal(b0, b1)
    assert not np.array_equal(w0, np.zeros_like(w0))
