"""ae.distributed with in-process ranks: groups, GradSync, failures and cancellation."""

from __future__ import annotations

import doctest
import subprocess
import sys
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.distributed.util import (
    data_parallel,
    loss_of,
    params,
    reference,
    run_ranks,
    shard,
)
from tests.oracle import torch_or_skip
from tests.paths import ROOT

D = ae.distributed


@pytest.mark.anyio
async def test_collectives_and_messages(anyio_backend: str) -> None:
    groups = D.local_groups(3)

    async def rank(g: Any) -> Any:
        s = await g.all_reduce(ae.tensor([1.0, g.rank]))
        m = await g.all_reduce(ae.tensor([float(g.rank)]), op="max")
        b = await g.broadcast(ae.tensor([10.0 * g.rank]), src=2)
        nxt, prev = (g.rank + 1) % 3, (g.rank - 1) % 3
        await g.send(ae.tensor([g.rank, 0.0]), nxt)
        await g.send(ae.tensor([g.rank, 1.0]), nxt)
        first, second = await g.recv(prev), await g.recv(prev)
        return s.tolist(), m.tolist(), b.tolist(), first.tolist(), second.tolist()

    out = await run_ranks(groups, rank)
    for r, res in enumerate(out):
        prev = (r - 1) % 3
        assert res == ([3.0, 3.0], [2.0], [20.0], [prev, 0.0], [prev, 1.0])


@pytest.mark.anyio
async def test_bad_arguments_say_what_to_do(anyio_backend: str) -> None:
    g0, g1 = D.local_groups(2)
    with pytest.raises(ValueError, match="op must be one of"):
        await g0.all_reduce(ae.ones(2), op="avg")
    with pytest.raises(ValueError, match=r"dst must be a rank in 0\.\.1, got 5"):
        await g0.send(ae.ones(2), 5)
    with pytest.raises(ValueError, match="cannot send to itself"):
        await g0.send(ae.ones(2), 0)
    with pytest.raises(TypeError, match="expects a Tensor"):
        await g0.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        D.local_groups(0)
    out = await run_ranks([g0, g1], lambda g: g.all_reduce(ae.ones(g.rank + 1)))
    assert all(isinstance(e, ValueError) and "different shapes" in str(e) for e in out)

    def mixed(g: Any) -> Any:
        return g.all_reduce(ae.ones(1)) if g.rank else g.broadcast(ae.ones(1), 0)

    out = await run_ranks([g0, g1], mixed)
    assert all(isinstance(e, ValueError) and "the same collectives" in str(e) for e in out)


@pytest.mark.anyio
async def test_a_failed_rank_is_named_to_the_others(anyio_backend: str) -> None:
    groups = D.local_groups(3)

    async def rank(g: Any) -> Any:
        async with g:
            if g.rank == 1:
                raise KeyError("lost shard")
            return await g.all_reduce(ae.ones(2))

    out = await run_ranks(groups, rank)
    assert isinstance(out[1], KeyError)
    for r in (0, 2):
        assert isinstance(out[r], D.RankFailedError) and out[r].rank == 1
        assert "rank 1 failed: KeyError: 'lost shard'" in str(out[r])
    with pytest.raises(D.RankFailedError, match="rank 1 failed"):  # stays aborted
        await groups[0].recv(2)


@pytest.mark.anyio
@pytest.mark.parametrize("n", [2, 3])
async def test_gradsync_gives_the_whole_batch_gradient(anyio_backend: str, n: int) -> None:
    ref = await reference()
    reps, out = await data_parallel(D.local_groups(n, latency=0.001))
    assert out == [None] * n
    for ps in reps:
        for p, r in zip(ps, ref):
            np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-13, atol=1e-15)


@pytest.mark.anyio
async def test_gradsync_matches_torch(anyio_backend: str) -> None:
    torch = torch_or_skip()
    from tests.distributed.util import B1, W1, W2, X, Y

    tp = [torch.tensor(a, requires_grad=True) for a in (W1, B1, W2)]
    h = torch.tanh(torch.tensor(X) @ tp[0] + tp[1])
    ((h @ tp[2] - torch.tensor(Y)) ** 2).mean().backward()
    reps, _ = await data_parallel(D.local_groups(2))
    for p, t in zip(reps[1], tp):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-12)


class CountingGroup(D.LocalGroup):
    def __init__(self, g: D.LocalGroup) -> None:
        super().__init__(g._hub, g.rank)
        self.started = 0

    def start(self, tag: Any, array: Any, op: str) -> Any:
        self.started += 1
        return super().start(tag, array, op)


@pytest.mark.anyio
async def test_gradsync_reduces_a_bucket_while_the_backward_runs(anyio_backend: str) -> None:
    groups = [CountingGroup(g) for g in D.local_groups(2)]
    seen: list[int] = []

    async def rank(g: Any) -> None:
        ps = params()
        x, y = shard(g.rank, 2)
        x.requires_grad_()  # x's gradient comes after every parameter's but W1's
        x.register_hook(lambda _: seen.append(g.started))
        async with D.GradSync(ps, g, bucket_bytes=8):  # one bucket per parameter
            await loss_of(ps, x, y).backward()
        return g.started

    assert await run_ranks(groups, rank) == [3, 3]
    assert seen == [2, 2]  # W2's and b1's reductions were on their way before the end


@pytest.mark.anyio
async def test_a_failing_backward_names_its_rank_and_writes_no_grad(anyio_backend: str) -> None:
    before = [np.full((4, 5), 0.5), np.full(5, 0.25), np.full((5, 1), 2.0)]
    reps, out = await data_parallel(D.local_groups(3), fail=1, grads=before)
    assert isinstance(out[1], ae.BackwardError) and "bad batch" in str(out[1])
    for r in (0, 2):
        assert isinstance(out[r], D.RankFailedError), out[r]
        assert "rank 1 failed: ValueError: bad batch" in str(out[r])
    for ps in reps:
        for p, b in zip(ps, before):
            assert np.array_equal(p.grad.numpy(), b)


@pytest.mark.anyio
async def test_a_cancelled_rank_is_named_and_no_grad_is_written(anyio_backend: str) -> None:
    groups = D.local_groups(2)
    reps = [params(), params()]
    out: list[Any] = [None, None]

    async def rank(g: Any, scope: anyio.CancelScope | None = None) -> None:
        ps = reps[g.rank]
        x, y = shard(g.rank, 2)
        if g.rank == 1:
            x.requires_grad_()

            async def stall(_: Any) -> None:
                await anyio.sleep_forever()

            x.register_hook(stall)
        try:
            async with D.GradSync(ps, g, bucket_bytes=8):
                await loss_of(ps, x, y).backward()
        except Exception as exc:
            out[g.rank] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(rank, groups[0])
        with anyio.CancelScope() as scope:
            tg.start_soon(lambda: _cancel_later(scope))
            await rank(groups[1])
    assert isinstance(out[0], D.RankFailedError) and "rank 1 failed: it was cancelled" in str(
        out[0]
    )
    assert out[1] is None
    assert all(p.grad is None for ps in reps for p in ps)


async def _cancel_later(scope: anyio.CancelScope) -> None:
    await anyio.sleep(0.02)
    scope.cancel()


@pytest.mark.anyio
async def test_gradsync_leaves_grad_calls_and_detached_backwards_alone(anyio_backend: str) -> None:
    (g,) = D.local_groups(1)
    ps = params()
    x, y = shard(0, 1)
    sync = D.GradSync(ps, g)
    sync.attach()
    grads = await ae.grad(loss_of(ps, x, y), ps)  # nothing staged: no reduction, no wait
    assert all(p.grad is None for p in ps) and len(grads) == 3
    sync.detach()
    await loss_of(ps, x, y).backward()
    np.testing.assert_allclose(ps[0].grad.numpy(), grads[0].numpy(), rtol=1e-15)


def test_gradsync_needs_the_async_backward() -> None:
    (g,) = D.local_groups(1)
    ps = params()
    D.GradSync(ps, g).attach()
    x, y = shard(0, 1)
    with pytest.raises(ae.AutogradError, match=r"await loss\.backward\(\)"):
        ae.sync.backward(loss_of(ps, x, y))
    assert all(p.grad is None for p in ps)


@pytest.mark.anyio
async def test_a_sync_backward_in_async_code_is_named_to_the_other_ranks(
    anyio_backend: str,
) -> None:
    """ae.sync.backward on a rank with a loop: its own clear error, which the others are told."""
    groups = D.local_groups(2)
    reps = [params(), params()]
    out: list[Any] = [None, None]

    async def rank(g: Any) -> None:
        ps = reps[g.rank]
        x, y = shard(g.rank, 2)
        try:
            async with D.GradSync(ps, g):
                if g.rank == 0:
                    with pytest.warns(RuntimeWarning, match="blocks the loop"):
                        ae.sync.backward(loss_of(ps, x, y))
                else:
                    await loss_of(ps, x, y).backward()
        except Exception as exc:
            out[g.rank] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(rank, groups[0])
        tg.start_soon(rank, groups[1])
    assert isinstance(out[0], ae.AutogradError) and "await loss.backward()" in str(out[0])
    assert isinstance(out[1], D.RankFailedError), out[1]
    assert "rank 0 failed: AutogradError: GradSync reduces" in str(out[1])
    assert "GeneratorExit" not in str(out[1])
    assert all(p.grad is None for ps in reps for p in ps)


def test_gradsync_bad_arguments() -> None:
    (g,) = D.local_groups(1)
    w = ae.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="process group"):
        D.GradSync([w], object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="leaf that requires grad"):
        D.GradSync([w * 2], g)
    with pytest.raises(ValueError, match="given twice"):
        D.GradSync([w, w], g)
    with pytest.raises(TypeError, match="single Tensor"):
        D.GradSync(w, g)
    with pytest.raises(ValueError, match="bucket_bytes"):
        D.GradSync([w], g, bucket_bytes=0)


def test_ray_groups_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install 'aengine\[ray\]'"):
        anyio.run(D.ray_groups, 2)


def test_import_aengine_does_not_import_ray() -> None:
    code = "import sys, aengine; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", D.__all__)
def test_docstring_examples(name: str) -> None:
    obj = getattr(D, name)
    assert obj.__doc__, f"ae.distributed.{name} has no docstring"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(obj, name, globs={"ae": ae}):
        assert runner.run(test).failed == 0, f"docstring example of ae.distributed.{name} failed"


def test_the_data_parallel_example_runs_as_a_script() -> None:
    script = ROOT / "examples" / "data_parallel.py"
    out = subprocess.run(
        [sys.executable, str(script), "--backend", "trio", "--ranks", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4 ranks agree: w = [2.0, -1.0, 0.5], b = [0.25]"


def test_the_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import distributed as bench

    bench.main(["--quick"])
    out = capsys.readouterr().out
    assert "4 in-process ranks" in out and "overlap gain" in out


@pytest.mark.anyio
async def test_gradsync_reduces_a_backward_with_inputs(anyio_backend: str) -> None:
    ws = [ae.ones(2, requires_grad=True) for _ in range(2)]

    async def rank(g: Any) -> None:
        async with D.GradSync([ws[g.rank]], g):
            await (ws[g.rank] * (g.rank + 1.0)).sum().backward(inputs=[ws[g.rank]])

    assert await run_ranks(D.local_groups(2), rank) == [None, None]
    assert [w.grad.tolist() for w in ws] == [[1.5, 1.5], [1.5, 1.5]]


@pytest.mark.anyio
async def test_gradsync_under_an_engine_that_offloads_every_kernel(anyio_backend: str) -> None:
    ref = await reference()
    async with ae.Engine(offload_threshold=1):  # every node's kernel in a worker thread
        reps, out = await data_parallel(D.local_groups(3))
    assert out == [None] * 3
    for ps in reps:
        for p, r in zip(ps, ref):
            np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-13, atol=1e-15)
