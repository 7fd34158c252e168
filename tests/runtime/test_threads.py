"""Backward from several OS threads at once.

Each thread runs ``ae.sync.backward`` or its own event loop
(``anyio.run(ae.backward, ...)``).  Gradients for a leaf shared by all
threads must add up exactly: committing staged gradients is serialized.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

THREADS = 8
N = 4096  # large enough for numpy to release the GIL inside its loops


@pytest.fixture(autouse=True)
def _fast_switching() -> Iterator[None]:
    """Switch threads often, to give races a chance to show."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(target: Callable[[int], Any], n: int = THREADS) -> list[Any]:
    """Run ``target(i)`` in ``n`` threads started together; re-raise their errors."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def main(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a backward thread hung"
    if errors:
        raise errors[0]
    return results


def backward_in(kind: str, *args: Any, **kwargs: Any) -> None:
    if kind == "sync":
        ae.sync.backward(*args, **kwargs)
    else:
        anyio.run(lambda: ae.backward(*args, **kwargs), backend=kind)


def grad_in(kind: str, *args: Any, **kwargs: Any) -> Any:
    if kind == "sync":
        return ae.sync.grad(*args, **kwargs)
    return anyio.run(lambda: ae.grad(*args, **kwargs), backend=kind)


KINDS = ["sync", "asyncio", "trio"]


def f(x: Any) -> Any:
    return ((x + 3) * (x + 4) * 0.5).sum()


def test_each_thread_its_own_graph() -> None:
    torch = torch_or_skip()
    arr = np.linspace(-1, 1, N)

    def work(i: int) -> np.ndarray:
        x = ae.tensor(arr, requires_grad=True)
        backward_in(KINDS[i % 3], f(x))
        return x.grad.numpy()  # type: ignore[no-any-return]

    tx = torch.tensor(arr, requires_grad=True)
    f(tx).backward()
    for g in run_threads(work):
        np.testing.assert_allclose(g, tx.grad.numpy())
        np.testing.assert_allclose(g, arr + 3.5)


@pytest.mark.parametrize("rounds", range(3))
def test_shared_leaf_grad_sums_exactly(rounds: int) -> None:
    torch = torch_or_skip()
    arr = np.linspace(-1, 1, N)
    x = ae.tensor(arr, requires_grad=True)

    def work(i: int) -> None:
        for _ in range(4):
            backward_in(KINDS[i % 3], f(x))

    run_threads(work)
    tx = torch.tensor(arr, requires_grad=True)

    def twork(i: int) -> None:
        for _ in range(4):
            f(tx).backward()

    run_threads(twork)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(x.grad.numpy(), 4 * THREADS * (arr + 3.5))


def test_grad_in_threads_leaves_grad_untouched() -> None:
    arr = np.linspace(-1, 1, N)
    x = ae.tensor(arr, requires_grad=True)

    def work(i: int) -> np.ndarray:
        (g,) = grad_in(KINDS[i % 3], f(x), x)
        return g.numpy()  # type: ignore[no-any-return]

    for g in run_threads(work):
        np.testing.assert_allclose(g, arr + 3.5)
    assert x.grad is None


def test_shared_graph_without_retain_graph() -> None:
    torch = torch_or_skip()
    arr = np.linspace(-1, 1, 16)
    x = ae.tensor(arr, requires_grad=True)
    y = x * x  # saved tensors shared by every thread's backward

    def work(i: int) -> str:
        try:
            backward_in(KINDS[i % 3], (y * 2).sum())
        except ae.AutogradError as exc:
            assert "Specify retain_graph=True" in str(exc)
            return "freed"
        return "ok"

    outcomes = run_threads(work)
    assert "ok" in outcomes
    ok = outcomes.count("ok")
    np.testing.assert_allclose(x.grad.numpy(), ok * 4 * arr)
    # torch behaves the same way
    tx = torch.tensor(arr, requires_grad=True)
    ty = tx * tx
    (ty * 2).sum().backward()
    with pytest.raises(RuntimeError, match="Specify retain_graph=True"):
        (ty * 2).sum().backward()


def test_shared_graph_with_retain_graph() -> None:
    arr = np.linspace(-1, 1, N)
    x = ae.tensor(arr, requires_grad=True)
    y = x * x

    def work(i: int) -> None:
        backward_in(KINDS[i % 3], (y * 2).sum(), retain_graph=True)

    run_threads(work)
    np.testing.assert_allclose(x.grad.numpy(), THREADS * 4 * arr)


def test_threads_see_their_own_grad_mode() -> None:
    def work(i: int) -> bool:
        if i % 2:
            with ae.no_grad():
                res = []
                for _ in range(50):
                    res.append(ae.is_grad_enabled())
                return not any(res)
        return all(ae.is_grad_enabled() for _ in range(50))

    assert all(run_threads(work))


# ---- the same in one event loop: concurrent tasks ----------------------------------------


@pytest.mark.anyio
async def test_concurrent_async_backwards_share_a_leaf() -> None:
    arr = np.linspace(-1, 1, 64)
    x = ae.tensor(arr, requires_grad=True)
    failures: list[str] = []

    async def one(i: int) -> None:
        y = x * 1.0

        async def hook(g: ae.Tensor) -> None:
            await anyio.sleep(0)  # the backwards interleave here
            if i % 4 == 3:
                raise KeyError(f"task {i}")

        y.register_hook(hook)
        try:
            await ae.backward(f(y))
        except ae.BackwardError as exc:
            assert isinstance(exc.__cause__, KeyError)
            failures.append(str(i))

    async with anyio.create_task_group() as tg:
        for i in range(THREADS):
            tg.start_soon(one, i)
    assert sorted(failures) == ["3", "7"]
    # the failed backwards left no trace; the others add up exactly
    np.testing.assert_allclose(x.grad.numpy(), (THREADS - 2) * (arr + 3.5))
