"""Data-parallel training with ae.distributed.GradSync, on in-process ranks or on Ray.

Every rank holds a copy of the model and a shard of each batch; GradSync
averages the gradients over the ranks while each backward runs, so every
rank takes the same step and the copies stay equal.

    python examples/data_parallel.py                 # 4 in-process ranks (asyncio)
    python examples/data_parallel.py --backend trio  # the same under trio
    python examples/data_parallel.py --ray           # 2 ranks talking through Ray actors
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import numpy as np

import aengine as ae


def make_data(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    y = x @ np.array([[2.0], [-1.0], [0.5]]) + 0.25
    return x, y


async def train_rank(group: Any, x: np.ndarray, y: np.ndarray, steps: int, lr: float) -> Any:
    """One rank: its shard of every batch, the same steps as every other rank."""
    w = ae.zeros((3, 1), dtype=ae.float64, requires_grad=True)
    b = ae.zeros(1, dtype=ae.float64, requires_grad=True)
    # equal shards: the average of the shards' mean losses is the whole batch's mean
    n = len(x) // group.world_size
    rows = slice(group.rank * n, (group.rank + 1) * n)
    xs, ys = ae.tensor(x[rows]), ae.tensor(y[rows])
    async with ae.distributed.GradSync([w, b], group):
        for _ in range(steps):
            loss = ((xs @ w + b - ys) ** 2).mean()
            await loss.backward()  # returns when the gradients are averaged over the ranks
            with ae.no_grad():
                for p in (w, b):
                    p.sub_(lr * p.grad)
                    p.grad = None
    return w.detach().numpy(), b.detach().numpy()


async def train(groups: list[Any], steps: int = 50, lr: float = 0.1) -> list[Any]:
    """Run every rank of ``groups`` as a task of this loop; each rank's final weights."""
    x, y = make_data()
    results: list[Any] = [None] * len(groups)

    async def run(g: Any) -> None:
        results[g.rank] = await train_rank(g, x, y, steps, lr)

    async with anyio.create_task_group() as tg:
        for g in groups:
            tg.start_soon(run, g)
    return results


async def main(ranks: int, use_ray: bool) -> None:
    if use_ray:
        import ray  # only this mode needs the ray extra: pip install 'aengine[ray]'

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
        try:
            groups = await ae.distributed.ray_groups(ranks)
            try:
                results = await train(groups)
            finally:
                groups[0].close()
        finally:
            ray.shutdown()
    else:
        results = await train(ae.distributed.local_groups(ranks))
    w, b = results[0]
    assert all(np.array_equal(w, wr) and np.array_equal(b, br) for wr, br in results)
    print(f"{ranks} ranks agree: w = {w.ravel().round(3).tolist()}, b = {b.round(3).tolist()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=None)
    parser.add_argument("--ray", action="store_true", help="ranks talk through Ray actors")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    anyio.run(main, args.ranks or (2 if args.ray else 4), args.ray, backend=args.backend)
