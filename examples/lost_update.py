"""Three concurrent training steps and a lost update, found and replayed by ae.testing.

    python examples/lost_update.py      # explores the buggy and the fixed version

Three requests arrive 4 ms apart; each runs a training step whose backward
runs on a simulated device (1 ms a node).  A post-accumulate hook on the
weights tells a parameter server about the new gradient: it reads the
server's update count, awaits the 2 ms round trip, and writes the count + 1.
Run plainly it usually passes; but when the device is a little slower for
one step, two pushes overlap across that await and an update is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

import aengine as ae


class ParameterServer:
    """Counts the gradient pushes it received (``updates``)."""

    def __init__(self, locked: bool) -> None:
        self.updates = 0
        self.lock = anyio.Lock() if locked else None

    async def push(self) -> None:
        if self.lock is None:
            await self._push()
        else:
            async with self.lock:  # the fix: one read-modify-write at a time
                await self._push()

    async def _push(self) -> None:
        seen = self.updates  # read
        await anyio.sleep(0.002)  # the round trip: another push may run meanwhile...
        self.updates = seen + 1  # ...and then this write loses its update


def training(locked: bool = False) -> Callable[[], Awaitable[None]]:
    """An async function that runs three training steps at once, then checks the count."""

    async def three_steps() -> None:
        server = ParameterServer(locked)
        async with ae.Engine(sim_latency=0.001):
            w = ae.ones(4, 3, requires_grad=True)

            async def on_grad(param: ae.Tensor) -> None:
                await server.push()

            w.register_post_accumulate_grad_hook(on_grad)

            async def step(i: int) -> None:
                await anyio.sleep(0.004 * i)  # the i-th request arrives
                x = ae.full((2, 4), float(i + 1), device="sim:0")
                loss = (x @ w.to("sim:0")).tanh().sum()
                await loss.backward()

            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(step, i)
        assert server.updates == 3, f"lost an update: the server counted {server.updates} of 3"

    return three_steps


if __name__ == "__main__":
    try:
        ae.testing.explore(training(), seeds=200)
    except ae.testing.ScheduleFailure as failure:
        print(f"found at run {failure.runs} under {failure.backend}, shrunk to:")
        print(failure.interleaving)
        try:
            ae.testing.replay(training(), failure.shrunk)
        except AssertionError as again:
            print(f"replayed: {again}")
    report = ae.testing.explore(training(locked=True), seeds=500)
    print(f"with the lock: {report.runs} runs passed, {report.distinct_schedules} interleavings")
