"""A zoo of concurrency bugs of service code around the engine, each with its fixed twin.

    python examples/zoo.py        # explores each bug and its twin, prints what was found

Each entry of ``BUGS`` is ``make(fixed)``: an async function of no
arguments that fails (an ``AssertionError``, a ``RunTimeout``...) on some
schedules when ``fixed`` is False, and passes on every schedule when it is
True.  The bugs are small on purpose: a read-modify-write, a check and an
act, two locks, a cancellation, a retry: the shapes that ``ae.testing``
is for.  ``bench/explore.py`` measures how many runs each strategy needs.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import anyio

import aengine as ae

Explored = Callable[[], Awaitable[None]]


async def _grad_of(x: ae.Tensor, k: float = 1.0) -> ae.Tensor:
    """A small CPU backward: each of its nodes is a choice point of an explored run."""
    (g,) = await ae.grad((x * k).tanh().sum(), [x])
    return g


def lost_update(fixed: bool) -> Explored:
    """Three requests 1 ms apart read a counter, await a backward, write it back + 1."""

    async def run() -> None:
        box = {"n": 0}
        lock = anyio.Lock()
        x = ae.ones(3, requires_grad=True)

        async def request(i: int) -> None:
            await anyio.sleep(0.001 * i)
            async with lock if fixed else _nothing():
                seen = box["n"]
                await _grad_of(x)
                box["n"] = seen + 1

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(request, i)
        assert box["n"] == 3, f"lost an update: {box['n']} of 3"

    return run


def check_then_act(fixed: bool) -> Explored:
    """Two requests for one key: each checks the cache, computes on a miss, stores (computed twice)."""

    async def run() -> None:
        cache: dict[str, object] = {}
        computed = []
        x = ae.ones(2, requires_grad=True)

        async def get(key: str) -> object:
            if key in cache:
                value = cache[key]
                if isinstance(value, anyio.Event):
                    await value.wait()
                    return cache[key]
                return value
            if fixed:
                cache[key] = pending = anyio.Event()  # reserve before the await
            computed.append(key)
            g = await _grad_of(x)
            cache[key] = g
            if fixed:
                pending.set()
            return g

        async def request(i: int) -> None:
            await anyio.sleep(0.001 * i)
            await get("w")

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(request, i)
        assert computed == ["w"], f"computed {len(computed)} times: {computed}"

    return run


def order_violation_2(fixed: bool) -> Explored:
    """A request assumes the warm-up that started 1 ms before it has finished (depth 2)."""

    async def run() -> None:
        warm = {"done": False}
        ready = anyio.Event()
        x = ae.ones(4, requires_grad=True)

        async def warm_up() -> None:
            await _grad_of(x)  # the first backward: builds caches
            warm["done"] = True
            ready.set()

        async def request() -> None:
            await anyio.sleep(0.001)  # "the warm-up is surely over by now"
            if fixed:
                await ready.wait()
            assert warm["done"], "a request ran before the warm-up finished"

        async with anyio.create_task_group() as tg:
            tg.start_soon(warm_up)
            tg.start_soon(request)

    return run


def order_violation_3(fixed: bool) -> Explored:
    """A saver copies two halves of a model across two backwards while a step updates both.

    Depth 3: torn only if the step's first half lands after the saver's
    first read and its second half, sent 1 ms later, before the saver's
    second read: the saver's compute must outlast both.
    """

    async def run() -> None:
        params = {"a": 0, "b": 0}
        lock = anyio.Lock()
        x = ae.ones(2, requires_grad=True)

        async def step() -> None:
            await anyio.sleep(0.001)
            async with lock if fixed else _nothing():
                params["a"] += 1
                await anyio.sleep(0.001)  # the second half goes out 1 ms later
                params["b"] += 1

        async def save() -> None:
            async with lock if fixed else _nothing():
                a = params["a"]
                await _grad_of(x, 2.0)
                await _grad_of(x, 3.0)
                b = params["b"]
            assert a == b, f"a torn checkpoint: a={a}, b={b}"

        async with anyio.create_task_group() as tg:
            tg.start_soon(step)
            tg.start_soon(save)

    return run


def two_locks(fixed: bool) -> Explored:
    """Two handlers take two locks in opposite orders, a backward in between: a deadlock."""

    async def run() -> None:
        first, second = anyio.Lock(), anyio.Lock()
        x = ae.ones(2, requires_grad=True)

        async def handler(a: anyio.Lock, b: anyio.Lock, arrives: float) -> None:
            await anyio.sleep(arrives)
            async with a:
                await _grad_of(x)
                async with b:
                    pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(handler, first, second, 0.0)
            tg.start_soon(handler, *((first, second) if fixed else (second, first)), 0.001)

    return run


def leak_on_cancel(fixed: bool) -> Explored:
    """A request that times out (a client that leaves) never gives its slot back."""

    async def run() -> None:
        pool = {"free": 2}
        x = ae.ones(3, requires_grad=True)

        async def handle() -> None:
            pool["free"] -= 1
            if fixed:
                try:
                    await _grad_of(x)
                finally:
                    pool["free"] += 1
            else:
                await _grad_of(x)
                pool["free"] += 1

        async def client(i: int) -> None:
            with anyio.move_on_after(0.002 + 0.001 * i):  # the client leaves after 2 ms
                await handle()

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(client, i)
        assert pool["free"] == 2, f"{2 - pool['free']} slot(s) leaked"

    return run


def double_commit(fixed: bool) -> Explored:
    """Two workers finish the same step; each sees it uncommitted and applies the update."""

    async def run() -> None:
        w = {"value": 0.0, "committed": False}
        x = ae.ones(2, requires_grad=True)

        sums: list[float] = []

        async def worker(i: int) -> None:
            await anyio.sleep(0.001 * i)
            if w["committed"]:
                return
            if fixed:
                w["committed"] = True  # claim it before the await
            g = await _grad_of(x)
            if not fixed:
                w["committed"] = True
            sums.append(float(g.sum().item()))
            w["value"] += sums[-1]

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(worker, i)
        assert abs(w["value"] - sums[0]) < 1e-6, f"committed {len(sums)} times"

    return run


def starved_request(fixed: bool) -> Explored:
    """A server takes the newest request first; while requests keep coming, the first one starves."""

    async def run() -> None:
        queue: list[int] = []
        order: list[int] = []
        arrived = anyio.Event()
        x = ae.ones(2, requires_grad=True)

        async def arrivals() -> None:
            for i in range(4):
                queue.append(i)
                arrived.set()
                await anyio.sleep(0.001)

        async def server() -> None:
            await _grad_of(x)  # warming up while the first requests arrive
            while len(order) < 4:
                if not queue:
                    await anyio.sleep(0.0005)
                    continue
                order.append(queue.pop(0) if fixed else queue.pop())
                await _grad_of(x)

        async with anyio.create_task_group() as tg:
            tg.start_soon(arrivals)
            tg.start_soon(server)
        assert order.index(0) <= 1, f"request 0 waited behind later ones: {order}"

    return run


def thread_race(fixed: bool) -> Explored:
    """``engine.run`` counts in a compute thread while the loop counts too: an update lost."""

    async def run() -> None:
        box = {"n": 0}
        mutex = threading.Lock()

        def count_in_thread() -> None:
            seen = box["n"]
            ae.testing.choice("thread: between the read and the write")
            box["n"] = seen + 1

        def count_fixed() -> None:
            with mutex:  # one step for the explorer: no choice point while holding it
                box["n"] += 1

        async with ae.Engine() as engine:

            async def on_loop() -> None:
                seen = box["n"]
                if not fixed:  # the fix: no await between the read and the write
                    await ae.testing.choice("loop: between the read and the write")
                box["n"] = seen + 1

            async with anyio.create_task_group() as tg:
                tg.start_soon(engine.run, count_fixed if fixed else count_in_thread)
                tg.start_soon(on_loop)
        assert box["n"] == 2, f"lost an update: {box['n']} of 2"

    return run


def retry_not_idempotent(fixed: bool) -> Explored:
    """A push that fails after it was applied is retried and applied twice (needs a fault)."""

    async def run() -> None:
        server = {"total": 0.0, "seen": set()}
        x = ae.ones(2, requires_grad=True)

        async def push(token: int, value: float) -> None:
            if fixed and token in server["seen"]:  # type: ignore[operator]
                return
            server["seen"].add(token)  # type: ignore[attr-defined]
            server["total"] += value  # type: ignore[operator]
            if ae.testing.buggify(0.3):
                raise ConnectionError("the reply was lost")

        g = await _grad_of(x)
        for _attempt in range(3):
            try:
                await push(1, float(g.sum().item()))
                break
            except ConnectionError:
                await anyio.sleep(0.001)
        once = float(g.sum().item())
        assert server["total"] == once, f"applied {server['total'] / once:.0f} times"  # type: ignore[operator]

    return run


# -- helpers ------------------------------------------------------------------------------------


class _nothing:
    """``async with`` that does nothing (the buggy twin's missing lock)."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


#: name -> (make, what kind of bug)
BUGS: dict[str, tuple[Callable[[bool], Explored], str]] = {
    "lost_update": (lost_update, "lost update"),
    "check_then_act": (check_then_act, "atomicity violation over two awaits"),
    "order_violation_2": (order_violation_2, "order violation, depth 2"),
    "order_violation_3": (order_violation_3, "order violation, depth 3"),
    "two_locks": (two_locks, "deadlock of two locks"),
    "leak_on_cancel": (leak_on_cancel, "use after cancellation (a leaked slot)"),
    "double_commit": (double_commit, "double commit"),
    "starved_request": (starved_request, "a starved request"),
    "thread_race": (thread_race, "thread/loop race"),
    "retry_not_idempotent": (retry_not_idempotent, "a bug that needs a fault"),
}


if __name__ == "__main__":
    for name, (make, kind) in BUGS.items():
        try:
            ae.testing.explore(make(False), seeds=1000, strategy="pct", depth=3)
            print(f"{name}: not found")
        except ae.testing.ScheduleFailure as failure:
            print(f"{name} ({kind}): found; shrunk to {failure.preemptions} preemption(s)")
        report = ae.testing.explore(make(True), seeds=200, strategy="pct", depth=3)
        print(f"    fixed: {report.runs} runs passed")
