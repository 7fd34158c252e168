"""PyTorch's ``TestMultithreadAutograd``, as behaviours run under torch 2.13 and under aengine.

Each behaviour runs twice under aengine: (a) on OS threads calling
``ae.sync.*``, compared with torch's program on OS threads (the same numpy
inputs; gradients, counts and errors compared); (b) as concurrent tasks of
one event loop awaiting ``ae.*`` (asyncio and trio), compared with torch's
threaded result.  Thread and task counts are small and bounded; a hung
thread fails after minutes, nothing here measures time.

Left out, with the reason: ``test_dataparallel_saved_tensors_hooks`` needs
``torch.nn.DataParallel`` on several CUDA devices (its behaviour: saved
tensor hooks do not reach a thread that did not set them, is kept below),
``test_cat_stack_r_to_c`` is about complex tensors (aengine has none), and
``test_remove_obj_from_tls`` tests torch's C++ thread-local storage.
``test_fork_join_in_middle`` forks with ``torch.jit._fork``; its behaviour
is written here with a thread (and a task) forked in the middle of a
program.  ``test_custom_function_propagates_errors_from_device_thread``
needs CUDA in torch; aengine's device workers run on the ``sim`` device.
"""

from __future__ import annotations

import gc
import sys
import threading
import traceback
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.core import current_graph_task
from tests.api.test_pytorch_autograd import AE, _compare, _Lib, _plain
from tests.api.test_pytorch_autograd import T as T  # noqa: F401  (the fixture)
from tests.api.test_pytorch_autograd import torch as torch  # noqa: F401  (the fixture)

THREADS = 10  # as PyTorch's _run_py_multithread_fn
HANG = 240.0  # seconds: a thread or a task group that takes longer hung


# -- running a function on threads and on tasks ------------------------------------------------


def on_threads(fn: Callable[[int], Any], n: int = THREADS) -> list[tuple[str, Any]]:
    """Run ``fn(i)`` on ``n`` threads started together; per thread ("ok", result) or ("err", exc)."""
    barrier = threading.Barrier(n)
    out: list[tuple[str, Any]] = [("none", None)] * n

    def main(i: int) -> None:
        try:
            barrier.wait(HANG)
            out[i] = ("ok", fn(i))
        except Exception as exc:  # reported to the test, per thread
            out[i] = ("err", exc)

    threads = [threading.Thread(target=main, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG)
        assert not t.is_alive(), "a thread hung"
    return out


async def on_tasks(fn: Callable[[int], Awaitable[Any]], n: int = THREADS) -> list[tuple[str, Any]]:
    """Run ``await fn(i)`` in ``n`` tasks of this loop; per task ("ok", result) or ("err", exc)."""
    out: list[tuple[str, Any]] = [("none", None)] * n

    async def main(i: int) -> None:
        try:
            out[i] = ("ok", await fn(i))
        except Exception as exc:  # reported to the test, per task
            out[i] = ("err", exc)

    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(main, i)
    return out


def reraise(outcomes: list[tuple[str, Any]]) -> list[Any]:
    """The results, or the first error raised again (PyTorch's PropagatingThread.join)."""
    for kind, value in outcomes:
        if kind == "err":
            raise value from value
    return [value for _, value in outcomes]


def errors(outcomes: list[tuple[str, Any]]) -> list[BaseException]:
    return [value for kind, value in outcomes if kind == "err"]


def ae_t(data: Any, rg: bool = False) -> ae.Tensor:
    return AE.t(data, rg)


def plain(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def close(got: Any, want: Any) -> None:
    _compare(_plain(want), _plain(got))


# -- test_multithreaded_exception_propagation --------------------------------------------------


def test_multithreaded_exception_propagation() -> None:
    def fn(i: int) -> None:
        raise AssertionError(f"in {i}")

    with pytest.raises(AssertionError):
        reraise(on_threads(fn))


@pytest.mark.anyio
async def test_multithreaded_exception_propagation_on_tasks() -> None:
    async def fn(i: int) -> None:
        await anyio.lowlevel.checkpoint()
        raise AssertionError(f"in {i}")

    out = await on_tasks(fn)
    assert all(isinstance(e, AssertionError) for e in errors(out)) and len(errors(out)) == THREADS
    with pytest.raises(AssertionError):
        reraise(out)


# -- test_simple_backward ----------------------------------------------------------------------


def simple_backward(L: _Lib) -> Any:
    x = L.ones(5, 5, rg=True)
    y = (x + 3) * (x + 4) * 0.5
    L.backward(y.sum())
    return _plain(x.grad), _plain(x + 3.5)


def test_simple_backward(T: _Lib) -> None:
    want = reraise(on_threads(lambda i: simple_backward(T)))
    got = reraise(on_threads(lambda i: simple_backward(AE)))
    _compare(want, got)
    for grad, expected in got:  # each thread's leaf got its own gradient, x + 3.5
        _compare(expected, grad)


@pytest.mark.anyio
async def test_simple_backward_on_tasks(T: _Lib) -> None:
    want = reraise(on_threads(lambda i: simple_backward(T)))

    async def train(i: int) -> Any:
        x = ae_t(np.ones((5, 5)), rg=True)
        y = (x + 3) * (x + 4) * 0.5
        await ae.backward(y.sum())
        return _plain(x.grad), _plain(x + 3.5)

    _compare(want, reraise(await on_tasks(train)))


# -- test_simple_backward_same_input -----------------------------------------------------------


def same_input(L: _Lib) -> Any:
    x = L.ones(5, 5, rg=True)

    def train_backward(i: int) -> None:
        y = (x + 3) * (x + 4) * 0.5
        L.backward(y.sum())

    reraise(on_threads(train_backward))
    accumulated = _plain(x.grad)  # every thread's gradient added up: 10 * (x + 3.5)

    def train_grad(i: int) -> Any:
        y = (x + 3) * (x + 4) * 0.5
        (g,) = L.grad(y.sum(), x)
        return _plain(g)

    grads = reraise(on_threads(train_grad))  # grad() leaves .grad alone
    return accumulated, grads, _plain(x.grad)


def test_simple_backward_same_input(T: _Lib) -> None:
    want = same_input(T)
    got = same_input(AE)
    _compare(want, got)
    np.testing.assert_allclose(got[0][2], THREADS * 4.5 * np.ones((5, 5)))


@pytest.mark.anyio
async def test_simple_backward_same_input_on_tasks(T: _Lib) -> None:
    want = same_input(T)
    x = ae_t(np.ones((5, 5)), rg=True)

    async def train_backward(i: int) -> None:
        y = (x + 3) * (x + 4) * 0.5
        await ae.backward(y.sum())

    reraise(await on_tasks(train_backward))
    accumulated = _plain(x.grad)

    async def train_grad(i: int) -> Any:
        y = (x + 3) * (x + 4) * 0.5
        (g,) = await ae.grad(y.sum(), x)
        return _plain(g)

    grads = reraise(await on_tasks(train_grad))
    _compare(want, (accumulated, grads, _plain(x.grad)))


# -- test_python_thread_in_middle --------------------------------------------------------------


def check_in_middle_without_retain(outcomes: list[tuple[str, Any]]) -> None:
    """At least one backward succeeds; every other one asks for retain_graph=True."""
    assert sum(kind == "ok" for kind, _ in outcomes) >= 1
    for err in errors(outcomes):
        assert isinstance(err, RuntimeError) and "Specify retain_graph=True" in str(err), err


def thread_in_middle(L: _Lib) -> Any:
    x_no = L.ones(5, 5, rg=True)
    y_no = x_no + x_no**2

    def no_retain(i: int) -> None:
        y = y_no + y_no**2
        L.backward(y.sum())

    check_in_middle_without_retain(on_threads(no_retain, 5))

    x = L.ones(5, 5, rg=True)
    y_shared = x + x**2

    def retain(i: int) -> None:
        y = y_shared + y_shared**2
        L.backward(y.sum(), retain_graph=True)

    reraise(on_threads(retain, 5))
    # five times the gradient: 5 * (4x^3 + 6x^2 + 4x + 1)
    return _plain(x.grad), _plain(5 * (4 * x**3 + 6 * x**2 + 4 * x + 1))


def test_python_thread_in_middle(T: _Lib) -> None:
    want = thread_in_middle(T)
    got = thread_in_middle(AE)
    _compare(want, got)
    _compare(got[1], got[0])


@pytest.mark.anyio
async def test_python_thread_in_middle_on_tasks(T: _Lib) -> None:
    want = thread_in_middle(T)
    x_no = ae_t(np.ones((5, 5)), rg=True)
    y_no = x_no + x_no**2

    async def no_retain(i: int) -> None:
        y = y_no + y_no**2
        await ae.backward(y.sum())

    check_in_middle_without_retain(await on_tasks(no_retain, 5))

    x = ae_t(np.ones((5, 5)), rg=True)
    y_shared = x + x**2

    async def retain(i: int) -> None:
        y = y_shared + y_shared**2
        await ae.backward(y.sum(), retain_graph=True)

    reraise(await on_tasks(retain, 5))
    _compare(want, (_plain(x.grad), _plain(5 * (4 * x**3 + 6 * x**2 + 4 * x + 1))))


# -- test_fork_join_in_middle ------------------------------------------------------------------


def fork(fn: Callable[[], Any]) -> Callable[[], tuple[str, Any]]:
    """torch.jit._fork on a thread: start ``fn()``; the returned ``wait`` joins it."""
    out: list[tuple[str, Any]] = []

    def main() -> None:
        try:
            out.append(("ok", fn()))
        except Exception as exc:  # given to the waiter
            out.append(("err", exc))

    thread = threading.Thread(target=main, daemon=True)
    thread.start()

    def wait() -> tuple[str, Any]:
        thread.join(HANG)
        assert not thread.is_alive(), "a forked thread hung"
        return out[0]

    return wait


def fork_join(L: _Lib, x0: np.ndarray) -> Any:
    """A program that forks threads in the middle and joins them (torch.jit._fork's pattern)."""

    def branch(middle: Any, orig_x: Any, retain: bool) -> Any:
        y = middle + middle**2
        return _plain(L.grad([y.sum()], [orig_x], retain_graph=retain)[0])

    def attempt(fn: Callable[[], Any]) -> tuple[str, Any]:
        try:
            return ("ok", fn())
        except RuntimeError as err:
            return ("err", err)

    x = L.t(x0, rg=True)
    y_no = (x + 3) * (x + 4) * 0.5
    wait = fork(lambda: branch(y_no, x, False))  # fut = fork(...)
    here = attempt(lambda: branch(y_no, x, False))  # while the fork runs
    check_in_middle_without_retain([wait(), here])

    x = L.t(x0, rg=True)
    y = (x + 3) * (x + 4) * 0.5
    wait1, wait2 = fork(lambda: branch(y, x, True)), fork(lambda: branch(y, x, True))
    grad = branch(y, x, True)
    grad1, grad2 = reraise([wait1(), wait2()])
    return grad, grad1, grad2


def test_fork_join_in_middle(T: _Lib) -> None:
    x0 = np.random.default_rng(0).standard_normal((5, 5))
    want = fork_join(T, x0)
    got = fork_join(AE, x0)
    _compare(want, got)
    _compare(got[0], got[1])
    _compare(got[0], got[2])


@pytest.mark.anyio
async def test_fork_join_in_middle_on_tasks(T: _Lib) -> None:
    x0 = np.random.default_rng(0).standard_normal((5, 5))
    want = fork_join(T, x0)

    async def branch(middle: Any, orig_x: Any, retain: bool) -> Any:
        y = middle + middle**2
        return _plain((await ae.grad([y.sum()], [orig_x], retain_graph=retain))[0])

    x = ae_t(x0, rg=True)
    y_no = (x + 3) * (x + 4) * 0.5
    # two tasks: the fork and the program itself, each asks for the gradient
    check_in_middle_without_retain(await on_tasks(lambda i: branch(y_no, x, False), 2))

    x = ae_t(x0, rg=True)
    y = (x + 3) * (x + 4) * 0.5
    got = reraise(await on_tasks(lambda i: branch(y, x, True), 3))
    _compare(want, tuple(got))


# -- test_preserve_backtrace -------------------------------------------------------------------


def raising_backward(L: _Lib) -> Callable[[int], Any]:
    class Foo(L.Function):  # type: ignore[name-defined,misc]
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, *grad: Any) -> Any:
            raise ValueError("something")

    def program(i: int) -> str:
        t = L.rand(10, seed=i, rg=True)
        try:
            L.backward(Foo.apply(t).sum())
        except Exception:
            tb_str = "\n".join(traceback.format_tb(sys.exc_info()[2]))
            return "kept" if 'raise ValueError("something")' in tb_str else "lost"
        return "no error"

    return program


def test_preserve_backtrace(T: _Lib) -> None:
    assert raising_backward(T)(0) == raising_backward(AE)(0) == "kept"
    # and from threads
    want = reraise(on_threads(raising_backward(T), 4))
    assert reraise(on_threads(raising_backward(AE), 4)) == want == ["kept"] * 4


@pytest.mark.anyio
async def test_preserve_backtrace_on_tasks(T: _Lib) -> None:
    want = reraise(on_threads(raising_backward(T), 4))

    class Foo(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, *grad: Any) -> Any:
            raise ValueError("something")

    async def program(i: int) -> str:
        t = AE.rand(10, seed=i, rg=True)
        try:
            await ae.backward(Foo.apply(t).sum())
        except Exception:
            tb_str = "\n".join(traceback.format_tb(sys.exc_info()[2]))
            return "kept" if 'raise ValueError("something")' in tb_str else "lost"
        return "no error"

    assert reraise(await on_tasks(program, 4)) == want


# -- test_multi_grad_all_hooks / test_multi_grad_any_hooks ----------------------------------------
# State is kept per backward (graph task): each of the concurrent backwards
# fires the hook once; the one that fails before the hook's last tensor
# never fires "all" (its partial state is dropped, the others' untouched);
# "any" fires at the first gradient, before the failing node runs.


def failing_identity(L: _Lib, lock: threading.Lock, calls: list[int]) -> Any:
    """Identity whose first backward call (of all backwards) raises."""

    class Func(L.Function):  # type: ignore[name-defined,misc]
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            with lock:
                calls[0] += 1
                first = calls[0] == 1
            if first:
                raise RuntimeError("error message")
            return g

    return Func


class HookLog:
    """What a multi-grad hook saw, over concurrent backwards."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.seen: list[Any] = []

    def all_hook(self, grads: Any) -> None:
        with self.lock:
            self.count += 1
            self.seen.append([g is not None for g in grads])

    def any_hook(self, grad: Any) -> None:
        with self.lock:
            self.count += 1
            self.seen.append("foo")


def multi_grad_program(L: _Lib, mode: str, n: int = 5) -> Any:
    t1, t2, t3, t4 = (L.rand(2, seed=i, rg=True) for i in range(4))
    log = HookLog()
    hook = log.all_hook if mode == "all" else log.any_hook
    handle = L.register_multi_grad_hook((t1, t2, t3, t4), hook, mode=mode)

    out = (t2 * t3).sum()
    reraise(on_threads(lambda i: L.backward(out, inputs=(t2, t3), retain_graph=True), n))
    first = (log.count, log.seen)

    log.__init__()  # type: ignore[misc]
    Func = failing_identity(L, threading.Lock(), [0])
    out = (Func.apply(t2) * t3).sum()
    outcomes = on_threads(lambda i: L.backward(out, inputs=(t2, t3), retain_graph=True), n)
    errs = errors(outcomes)
    assert all(isinstance(e, RuntimeError) and "error message" in str(e) for e in errs), errs
    handle.remove()
    reraise(on_threads(lambda i: L.backward(out, inputs=(t2, t3), retain_graph=True), 2))
    return first, (log.count, log.seen, len(errs)), _plain(t2.grad), successes(L, t2, t3)


def successes(L: _Lib, t2: Any, t3: Any) -> float:
    """How many backwards wrote t3's gradient (t2 * k): 11 in aengine, 12 in torch.

    5 + 4 + 2 backwards succeeded; torch's failing backward had already
    accumulated into t3 before its Func raised, aengine's writes nothing
    (docs/pytorch-differences.md: gradients land when the backward succeeded).
    """
    k = plain(t3.grad) / plain(t2)
    np.testing.assert_allclose(k, k[0])
    return float(round(k[0])) - (1.0 if L.name == "torch" else 0.0)


@pytest.mark.parametrize("mode", ["all", "any"])
def test_multi_grad_hooks_in_threads(T: _Lib, mode: str) -> None:
    want = multi_grad_program(T, mode)
    got = multi_grad_program(AE, mode)
    _compare(want, got)
    # all: 5 fired with [False, True, True, False], then 4 of 5 (one failed);
    # any: fired before the failing node in every backward, 5 then 5
    assert got[0][0] == 5 and got[1][0] == (4 if mode == "all" else 5) and got[1][2] == 1


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["all", "any"])
async def test_multi_grad_hooks_on_tasks(T: _Lib, mode: str) -> None:
    want = multi_grad_program(T, mode)
    t1, t2, t3, t4 = (AE.rand(2, seed=i, rg=True) for i in range(4))
    log = HookLog()
    hook = log.all_hook if mode == "all" else log.any_hook
    handle = ae.autograd.graph.register_multi_grad_hook((t1, t2, t3, t4), hook, mode=mode)

    async def backward(out: Any) -> None:
        await ae.backward(out, inputs=(t2, t3), retain_graph=True)

    out = (t2 * t3).sum()
    reraise(await on_tasks(lambda i: backward(out), 5))
    first = (log.count, log.seen)

    log.__init__()  # type: ignore[misc]
    Func = failing_identity(AE, threading.Lock(), [0])
    out = (Func.apply(t2) * t3).sum()
    outcomes = await on_tasks(lambda i: backward(out), 5)
    errs = errors(outcomes)
    assert all(isinstance(e, RuntimeError) and "error message" in str(e) for e in errs), errs
    handle.remove()
    reraise(await on_tasks(lambda i: backward(out), 2))
    got = first, (log.count, log.seen, len(errs)), _plain(t2.grad), successes(AE, t2, t3)
    _compare(want, got)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["all", "any"])
async def test_multi_grad_hooks_with_async_hooks_interleaved_on_tasks(mode: str) -> None:
    """Backwards whose hook awaits interleave inside it; each still fires once, the failing none."""
    t1, t2, t3 = (AE.rand(2, seed=i, rg=True) for i in range(3))
    fired: list[int] = []
    inside = 0
    most_inside = 0

    async def hook(arg: Any) -> None:
        nonlocal inside, most_inside
        inside += 1
        most_inside = max(most_inside, inside)
        for _ in range(3):
            await anyio.lowlevel.checkpoint()  # the other backwards run meanwhile
        inside -= 1
        fired.append(len(arg) if mode == "all" else 1)

    ae.autograd.graph.register_multi_grad_hook((t1, t2, t3), hook, mode=mode)
    Func = failing_identity(AE, threading.Lock(), [0])
    a = Func.apply(t1) * t2
    out = (a * t3).sum()
    outcomes = await on_tasks(lambda i: ae.backward(out, retain_graph=True), 6)
    assert len(errors(outcomes)) == 1
    assert len(fired) == (5 if mode == "all" else 6)
    assert most_inside > 1  # the hooks of several backwards were in flight together


@pytest.mark.parametrize("mode", ["all", "any"])
def test_multi_grad_hook_of_a_failed_backward_keeps_nothing(mode: str) -> None:
    t1, t2 = AE.rand(2, seed=1, rg=True), AE.rand(2, seed=2, rg=True)
    calls = [0]
    ae.autograd.graph.register_multi_grad_hook(
        (t1, t2), lambda g: calls.__setitem__(0, calls[0] + 1), mode=mode
    )
    refs: list[weakref.ref[Any]] = []
    # t1's gradient (the one the "all" state buffers) is seen by this hook too
    t1.register_hook(lambda g: refs.append(weakref.ref(g.data)))
    Func = failing_identity(AE, threading.Lock(), [0])
    out = (t1 * Func.apply(t2)).sum()
    with pytest.raises(RuntimeError, match="error message"):
        ae.sync.backward(out, retain_graph=True)
    gc.collect()
    assert calls[0] == (0 if mode == "all" else 1)
    assert refs and all(r() is None for r in refs), "a failed backward's gradient is still held"
    ae.sync.backward(out)  # the next backward (Func passes) fires as usual
    assert calls[0] == (1 if mode == "all" else 2)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["all", "any"])
async def test_multi_grad_hooks_with_a_cancelled_backward_on_tasks(mode: str) -> None:
    """A backward cancelled midway never fires "all" and keeps nothing; the others fire."""
    t1, t2 = AE.rand(2, seed=1, rg=True), AE.rand(2, seed=2, rg=True)
    fired: list[int] = []
    ae.autograd.graph.register_multi_grad_hook((t1, t2), lambda g: fired.append(1), mode=mode)
    refs: dict[int, weakref.ref[Any]] = {}  # graph task id -> t2's gradient
    blocked_gt: list[int] = []
    started = anyio.Event()

    class Block(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1.0

        @staticmethod
        async def backward(ctx: Any, g: Any) -> Any:
            blocked_gt.append(_gt_id())
            while blocked_gt[0] not in refs:  # its t2 gradient went through the hooks
                await anyio.lowlevel.checkpoint()
            started.set()
            # (an Event, not sleep_forever: asyncio keeps a cancelled timer,
            # and the context it holds, until its heap is purged)
            await anyio.Event().wait()

    blocked = Block.apply(t1) * t2
    t2.register_hook(lambda g: refs.__setitem__(_gt_id(), weakref.ref(g.data)))
    out_blocked = blocked.sum()
    out = (t1 * t2).sum()
    scope = anyio.CancelScope()

    async def blocked_backward() -> None:
        with scope:
            await ae.backward(out_blocked)

    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked_backward)
            await started.wait()  # its t2 gradient is in, t1's never comes
            reraise(await on_tasks(lambda i: ae.backward(out, retain_graph=True), 4))
            scope.cancel()
    assert scope.cancelled_caught
    gc.collect()
    assert len(fired) == (4 if mode == "all" else 5)
    assert refs[blocked_gt[0]]() is None, "the cancelled backward's gradient is still held"
    np.testing.assert_allclose(plain(t1.grad), 4 * plain(t2))  # the cancelled one wrote nothing


def _gt_id() -> int:
    """The id of the backward (graph task) running this hook: tells concurrent backwards apart."""
    gt = current_graph_task()
    assert gt is not None
    return gt.id


# -- test_set_multithreading_enabled_as_context_manager_and_function -----------------------------


def multithreading_flags(mod: Any) -> list[bool]:
    """torch.autograd or ae.autograd: the flag after each step of PyTorch's test."""
    seen = []
    with mod.set_multithreading_enabled(False):
        seen.append(mod.is_multithreading_enabled())
    seen.append(mod.is_multithreading_enabled())
    with mod.set_multithreading_enabled(True):
        seen.append(mod.is_multithreading_enabled())
    seen.append(mod.is_multithreading_enabled())
    with mod.set_multithreading_enabled(False):
        mod.set_multithreading_enabled(True)
        seen.append(mod.is_multithreading_enabled())
    seen.append(mod.is_multithreading_enabled())
    mod.set_multithreading_enabled(False)
    seen.append(mod.is_multithreading_enabled())
    with mod.set_multithreading_enabled(False):  # a new thread starts with it on
        seen.extend(reraise(on_threads(lambda i: mod.is_multithreading_enabled(), 2)))
    mod.set_multithreading_enabled(True)
    seen.append(mod.is_multithreading_enabled())
    return seen


def test_set_multithreading_enabled_as_context_manager_and_function(torch: Any) -> None:
    want = multithreading_flags(torch.autograd)
    assert multithreading_flags(ae.autograd) == want
    assert want == [False, True, True, True, True, True, False, True, True, True]


def test_set_multithreading_enabled_takes_only_a_bool(torch: Any) -> None:
    msg = r"set_multithreading_enabled\(\): argument 'enabled' \(position 1\) must be bool, not str"
    with pytest.raises(TypeError, match=msg):
        torch.autograd.set_multithreading_enabled("no")
    with pytest.raises(TypeError, match=msg):
        ae.autograd.set_multithreading_enabled("no")  # type: ignore[arg-type]
    assert ae.autograd.is_multithreading_enabled()


@pytest.mark.anyio
async def test_set_multithreading_enabled_is_task_local() -> None:
    off = anyio.Event()
    seen: dict[str, bool] = {}

    async def switches_off() -> None:
        ae.autograd.set_multithreading_enabled(False)
        off.set()
        seen["itself"] = ae.autograd.is_multithreading_enabled()

    async def looks() -> None:
        await off.wait()
        seen["another task"] = ae.autograd.is_multithreading_enabled()

    async with anyio.create_task_group() as tg:
        tg.start_soon(looks)
        tg.start_soon(switches_off)
    assert seen == {"itself": False, "another task": True}
    assert ae.autograd.is_multithreading_enabled()


class Where(ae.Function):
    """Identity recording the thread its backward ran in."""

    seen: set[int] = set()  # noqa: RUF012

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        Where.seen.add(threading.get_ident())
        return g


def heavy_loss(x0: np.ndarray, w0: np.ndarray) -> tuple[Any, Any]:
    x, w = ae_t(x0), ae_t(w0, rg=True)
    h = x
    for _ in range(3):
        h = ae.tanh(Where.apply(h @ w))
    return (h * h).mean(), w


@pytest.mark.anyio
@pytest.mark.parametrize("enabled", [True, False])
async def test_multithreading_off_keeps_an_awaited_backward_on_the_loop(
    T: _Lib, enabled: bool
) -> None:
    from aengine.runtime import _offload  # the offload counters (tests read them)

    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((8, 16)), rng.standard_normal((16, 16)) / 4

    def torch_grad() -> Any:
        x, w = T.t(x0), T.t(w0, rg=True)
        h = x
        for _ in range(3):
            h = (h @ w).tanh()
        T.backward((h * h).mean())
        return _plain(w.grad)

    want = torch_grad()
    here = threading.get_ident()
    grads = []
    for offload_backward in (True, False):  # the backward moved, or its kernels offloaded
        Where.seen = set()
        _offload.reset_stats()
        async with ae.Engine(offload_threshold=1, offload_backward=offload_backward) as engine:
            with ae.autograd.set_multithreading_enabled(enabled):
                loss, w = heavy_loss(x0, w0)
                await ae.backward(loss)
            st = engine.stats()
        grads.append(_plain(w.grad))
        in_threads = st.backwards_in_threads + _offload.stats.kernels
        if enabled:  # Where's backward runs in the thread the backward moved to
            assert in_threads > 0 and (Where.seen != {here}) == offload_backward
        else:
            assert in_threads == 0 and Where.seen == {here}
    _compare(want, grads[0])
    _compare(want, grads[1])


# -- test_custom_function_propagates_errors_from_device_thread -----------------------------------
# torch runs a CUDA node on its device thread; aengine runs a node on another
# device in that device's worker (here the simulated device ``sim``).


def blah_function(L: _Lib) -> Any:
    class MyFunc(L.Function):  # type: ignore[name-defined,misc]
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            raise RuntimeError("blah")

    return MyFunc


@pytest.mark.anyio
@pytest.mark.parametrize("enabled", [True, False])
async def test_custom_function_propagates_errors_from_device_thread(T: _Lib, enabled: bool) -> None:
    t = T.t([1.0, 2.0], rg=True)
    with pytest.raises(RuntimeError, match="blah"):
        T.backward(blah_function(T).apply(t).sum())

    MyFunc = blah_function(AE)
    x = ae_t([1.0, 2.0], rg=True)
    with ae.autograd.set_multithreading_enabled(enabled):
        out = MyFunc.apply(x.to("sim:0")).to("cpu").sum()
        with pytest.raises(RuntimeError, match="blah"):
            await ae.backward(out)
        async with ae.Engine():
            with pytest.raises(RuntimeError, match="blah"):
                await ae.backward(out, retain_graph=True)
    assert x.grad is None

    def on_sim(xs: Any) -> Any:  # a node on the device in the middle: the gradient arrives
        return ((xs.to("sim:0") * 2.0).to("cpu") * xs).sum()

    t = T.t([1.0, 2.0], rg=True)
    T.backward((t * 2.0 * t).sum())
    with ae.autograd.set_multithreading_enabled(enabled):
        x = ae_t([1.0, 2.0], rg=True)
        await ae.backward(on_sim(x))
    _compare(_plain(t.grad), _plain(x.grad))


# -- test_dataparallel_saved_tensors_hooks, without DataParallel ---------------------------------
# Saved-tensor hooks are the setting thread's: a forward in another thread
# (DataParallel's replicas) does not call them; in the thread that set them it
# does.  An anyio task started inside the ``with`` copies its context, so
# aengine's hooks reach it (docs/hooks.md).


def saved_hooks_threads(mod: Any, L: _Lib) -> tuple[int, int]:
    packed: list[str] = []
    lock = threading.Lock()

    def pack(x: Any) -> Any:
        with lock:
            packed.append(threading.current_thread().name)
        return x

    x = L.ones(5, 5, rg=True)
    with mod.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        reraise(on_threads(lambda i: x * x, 4))
        in_threads = len(packed)
        y = x * x
    L.backward(y.sum())
    return in_threads, len(packed) - in_threads


def test_saved_tensors_hooks_stay_in_their_thread(torch: Any, T: _Lib) -> None:
    want = saved_hooks_threads(torch, T)
    assert saved_hooks_threads(ae, AE) == want == (0, 2)


@pytest.mark.anyio
async def test_saved_tensors_hooks_reach_the_tasks_started_inside() -> None:
    packed: list[int] = []
    x = ae_t(np.ones((5, 5)), rg=True)

    async def forward_backward(i: int) -> Any:
        y = x * x  # saves x twice
        (g,) = await ae.grad(y.sum(), x)
        return _plain(g)

    with ae.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        grads = reraise(await on_tasks(forward_backward, 4))
    assert len(packed) == 8
    for g in grads:
        _compare(_plain(2 * x), g)
    packed.clear()
    reraise(await on_tasks(forward_backward, 2))  # outside the with: none
    assert packed == []
