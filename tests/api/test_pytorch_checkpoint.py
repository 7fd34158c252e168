"""PyTorch's non-reentrant checkpoint tests, as behaviours run under torch 2.13 and aengine.

The behaviours come from ``TestNestedCheckpoint`` and the checkpoint tests
of ``TestAutograd`` in PyTorch's ``test/test_autograd.py``, written anew
against the namespace ``L`` of ``tests/api/test_pytorch_autograd.py`` (one
program, run under both libraries, results compared), with the checkpoint
names added here (``L.ck`` is ``checkpoint(..., use_reentrant=False)``).
The last part runs the same behaviours awaited (``await ae.grad`` /
``await ae.backward``) under asyncio and trio, with recomputations that
interleave with other backwards on the same Engine and a backward cancelled
in the middle of one.

Left out, as aengine does not have them: CUDA memory statistics,
DataParallel, torch.compile / dynamo, autocast, dispatch modes (selective
activation checkpointing, counting kernels under a TorchDispatchMode) and
the curried ``checkpoint(use_reentrant=False)(fn)`` form (newer than torch
2.13, the oracle).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import gc
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest
from anyio.lowlevel import checkpoint as yield_point

import aengine as ae
from tests.api.test_pytorch_autograd import _AeLib, _compare, _Lib, _plain, _TorchLib
from tests.oracle import torch_or_skip

# -- the checkpoint names, in both spellings -------------------------------------------------------


class _CkTorch(_TorchLib):
    def __init__(self, torch: Any) -> None:
        super().__init__(torch)
        cp = torch.utils.checkpoint
        self.checkpoint_any = cp.checkpoint
        self.checkpoint_sequential = cp.checkpoint_sequential
        self.set_checkpoint_early_stop = cp.set_checkpoint_early_stop
        self.set_checkpoint_debug_enabled = cp.set_checkpoint_debug_enabled
        self.CheckpointError = cp.CheckpointError
        self.nn = torch.nn

    def linear(self, n_in: int, n_out: int, seed: int, bias: bool = True) -> Any:
        lin = self.nn.Linear(n_in, n_out, bias=bias, dtype=self.float64)
        _set_params(self, lin, seed)
        return lin


class _CkAe(_AeLib):
    def __init__(self) -> None:
        super().__init__()
        self.checkpoint_any = ae.checkpoint
        self.checkpoint_sequential = ae.checkpoint_sequential
        self.set_checkpoint_early_stop = ae.set_checkpoint_early_stop
        self.set_checkpoint_debug_enabled = ae.set_checkpoint_debug_enabled
        self.CheckpointError = ae.CheckpointError
        self.nn = ae.nn

    def linear(self, n_in: int, n_out: int, seed: int, bias: bool = True) -> Any:
        lin = self.nn.Linear(n_in, n_out, bias=bias, dtype=self.float64)
        _set_params(self, lin, seed)
        return lin


def _set_params(L: Any, module: Any, seed: int) -> None:
    """The same parameter values in both libraries (drawn by numpy)."""
    rng = np.random.default_rng(seed)
    with L.no_grad():
        for p in module.parameters():
            p.copy_(L.t(rng.standard_normal(tuple(p.shape)) * 0.5))


def _ck(L: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return L.checkpoint_any(fn, *args, use_reentrant=False, **kwargs)


AE = _CkAe()


@pytest.fixture
def T() -> _Lib:
    return _CkTorch(torch_or_skip())


def same(T: _Lib, program: Callable[[Any], Any]) -> Any:
    """Run ``program`` under torch and under aengine; both give the same result."""
    expected = _plain(program(T))
    got = _plain(program(AE))
    _compare(expected, got)
    return got


def error_of(fn: Callable[[], Any]) -> tuple[str, str]:
    """Call ``fn``: ("ok", "") or (RuntimeError / ValueError / ..., message)."""
    try:
        fn()
    except Exception as err:  # the programs compare which error each library raises
        kind = "RuntimeError" if isinstance(err, RuntimeError) else type(err).__name__
        return kind, str(err)
    return "ok", ""


# -- TestNestedCheckpoint ---------------------------------------------------------------------------


def _grad(L: Any, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def wrapper(x: Any) -> Any:
        with L.enable_grad():
            out = fn(x)
            (grad_input,) = L.grad(out, inputs=(x,), create_graph=True)
        return grad_input

    return wrapper


def _sum(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda x: fn(x).sum()


def _c(L: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args, **kwargs: _ck(L, fn, *args, **kwargs)


def _nested_cases(L: Any, fn: Callable[[Any], Any]) -> Any:
    """A function and the same function wrapped in checkpoints in various ways."""

    def grad(f: Any) -> Any:
        return _grad(L, f)

    def c(f: Any) -> Any:
        return _c(L, f)

    return (
        (fn, (c(fn), c(c(fn)))),
        (grad(fn), (grad(c(fn)), grad(c(c(fn))))),
        (grad(grad(fn)), (grad(c(grad(fn))), c(grad(grad(c(fn)))), grad(c(grad(c(fn)))))),
        (grad(grad(grad(fn))), (grad(c(grad(grad(c(fn))))), grad(c(grad(c(grad(c(fn)))))))),
    )


def _graph_survivors(L: Any, fn: Callable[[Any], Any]) -> list[str]:
    """The nodes of ``fn``'s graph still alive once its output is dropped (no gc pass)."""

    class Handle:
        def __init__(self, name: str) -> None:
            self.name = name

    def scope() -> list[Any]:
        out = fn(L.t(0.7, rg=True))
        refs, seen, queue = [], set(), collections.deque([out.grad_fn])
        while queue:
            node = queue.popleft()
            if node is None or node in seen:
                continue
            seen.add(node)
            handle = Handle(node.name())
            refs.append(weakref.ref(handle))
            node.metadata["blah"] = handle
            queue.extend(f for f, _ in node.next_functions)
        return refs

    refs = scope()
    return [h.name for h in (r() for r in refs) if h is not None]


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoints_give_the_plain_values_and_their_graphs_die(
    T: _Lib, early_stop: bool
) -> None:
    def program(L: Any) -> Any:
        def f(x: Any) -> Any:
            return x.sin().exp().sin()

        def g(x: Any) -> Any:  # backwards inside the checkpointed forward
            a = x.sin().exp().sin()
            b = x.sin().exp().sin()
            L.grad(a, x)
            L.grad(b, x)
            return x.sin()

        results = []
        with L.set_checkpoint_early_stop(early_stop):
            x = L.t(0.7, rg=True)
            for fn in (f, g):
                for expected_fn, actual_fns in _nested_cases(L, fn):
                    expected = expected_fn(x)
                    for actual_fn in actual_fns:
                        actual = actual_fn(x)
                        results.append((expected, actual, _graph_survivors(L, actual_fn)))
        return results

    for expected, actual, survivors in same(T, program):
        _compare(expected, actual)
        assert survivors == []


def test_a_nested_checkpoints_arguments_are_freed_with_the_enclosing_ones(T: _Lib) -> None:
    # torch's rule 2 of nested checkpoints: the inner one's inputs are saved by the outer one
    def program(L: Any) -> Any:
        refs: list[Any] = []

        def outer(x: Any) -> Any:
            h = x.cos() * 2.0
            refs.append(weakref.ref(h))
            return _ck(L, lambda t: t.sin().exp(), h).sum()

        x = L.randn(3, seed=1, rg=True)
        out = _ck(L, outer, x)
        gc.collect()
        alive = refs[0]() is not None
        (g,) = L.grad(out, (x,), create_graph=True)
        (gg,) = L.grad(g.sum(), (x,))
        return alive, g, gg

    assert same(T, program)[0] is False


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_with_two_children(T: _Lib, early_stop: bool) -> None:
    def program(L: Any) -> Any:
        def grad(f: Any) -> Any:
            return _grad(L, f)

        def c(f: Any) -> Any:
            return _c(L, f)

        def f(x: Any) -> Any:
            return x.sin().exp().sin()

        def g(x: Any) -> Any:
            return x.cos().sin().exp()

        def hc(x: Any) -> Any:
            return c(g)(c(f)(x))

        def h(x: Any) -> Any:
            return g(f(x))

        with L.set_checkpoint_early_stop(early_stop):
            a = L.randn(3, 3, seed=1, rg=True)
            expected = grad(_sum(grad(_sum(h))))(a)
            actual = grad(_sum(grad(_sum(c(hc)))))(a)
            actual2 = grad(_sum(c(grad(_sum(c(hc))))))(a)
            survivors = [
                _graph_survivors(L, grad(c(hc))),
                _graph_survivors(L, grad(_sum(grad(_sum(c(hc)))))),
                _graph_survivors(L, grad(_sum(c(grad(_sum(c(hc))))))),
            ]
        return expected, actual, actual2, survivors

    expected, actual, actual2, survivors = same(T, program)
    _compare(expected, actual)
    _compare(expected, actual2)
    assert survivors == [[], [], []]


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_with_non_tensor_inputs_and_outputs(T: _Lib, early_stop: bool) -> None:
    def program(L: Any) -> Any:
        def fn(k: int, a: Any, b: Any, f: Any) -> Any:
            return f(k * a * b.exp()), 1, "abcd"

        a = L.t(2.0, rg=True)
        b = L.t(3.0, rg=True)
        with L.set_checkpoint_early_stop(early_stop):
            out, one, text = _ck(L, fn, 3, a, b, lambda x: x.sin())
        actual = L.grad(out, (a, b))
        plain, _, _ = fn(3, a, b, lambda x: x.sin())
        return one, text, actual, L.grad(plain, (a, b))

    one, text, actual, expected = same(T, program)
    assert (one, text) == (1, "abcd")
    _compare(expected, actual)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_passes_keyword_arguments(T: _Lib, early_stop: bool) -> None:
    def program(L: Any) -> Any:
        def fn(a: Any, blah: Any = None) -> Any:
            out = a.sin().exp()
            if blah is not None:
                out = out * blah
            return out.sin().exp()

        a = L.t(2.0, rg=True)
        b = L.t(3.0, rg=True)
        with L.set_checkpoint_early_stop(early_stop):
            actual = L.grad(_ck(L, fn, a, blah=b), (a, b))
            expected = L.grad(fn(a, blah=b), (a, b))
        return actual, expected

    actual, expected = same(T, program)
    _compare(expected, actual)


def test_checkpoint_of_a_function_without_arguments(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.t(2.0, rg=True)

        def fn() -> Any:
            return a.sin().exp()

        out = _ck(L, fn)
        expected = fn()
        return out, L.grad(out, (a,)), L.grad(expected, (a,))

    out, actual, expected = same(T, program)
    _compare(expected, actual)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_backward_runs_the_original_graph(T: _Lib, early_stop: bool) -> None:
    def program(L: Any) -> Any:
        counter = [0]
        a = L.t(1.0, rg=True)
        with L.set_checkpoint_early_stop(early_stop):
            out = _ck(L, lambda t: t.sin().cos().sin(), a)
        # the hook is registered on the original graph, and backward runs that graph
        out.grad_fn.next_functions[0][0].register_hook(
            lambda *_: counter.__setitem__(0, 1 + counter[0])
        )
        L.backward(out)
        return counter[0], a.grad

    same(T, program)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_with_a_backward_inside_a_node_hook(T: _Lib, early_stop: bool) -> None:
    def program(L: Any) -> Any:
        def fn(a: Any) -> Any:
            x = a.sin().cos()
            return x, x.sin()

        a = L.t(1.0, rg=True)
        with L.set_checkpoint_early_stop(early_stop):
            x, out = _ck(L, fn, a)

        def hook(*_: Any) -> None:
            # backward again, over the part of the graph before the hook's node
            L.backward(x, retain_graph=True)

        out.grad_fn.register_hook(hook)
        L.backward(out, retain_graph=True)
        return a.grad

    same(T, program)


def test_set_checkpoint_early_stop_and_early_stop(T: _Lib) -> None:
    def program(L: Any) -> Any:
        counter = [0]

        def fn(x: Any) -> Any:
            # clone saves nothing: it is recomputed only without early stop
            y = x.sin().cos()
            counter[0] += 1
            return y.clone()

        def calls(make: Callable[[Any], Any]) -> int:
            counter[0] = 0
            a = L.t(1.0, rg=True)
            L.backward(make(a))
            return counter[0]

        stop = L.set_checkpoint_early_stop
        return [
            calls(lambda a: _ck(L, fn, a)),  # early stop by default
            calls(lambda a: _ck(L, fn, a, early_stop=False)),
            calls(lambda a: _ck(L, fn, a, early_stop=True)),
            _under(stop(False), lambda: calls(lambda a: _ck(L, fn, a))),
            _under(stop(True), lambda: calls(lambda a: _ck(L, fn, a))),
            # nesting: the innermost wins; the context manager wins over the argument
            _under(
                stop(False),
                lambda: _under(
                    stop(True), lambda: calls(lambda a: _ck(L, fn, a, early_stop=False))
                ),
            ),
            _under(stop(False), lambda: calls(lambda a: _ck(L, fn, a, early_stop=True))),
            _under(stop(True), lambda: calls(lambda a: _ck(L, fn, a, early_stop=False))),
        ]

    assert same(T, program) == [1, 2, 1, 2, 1, 1, 2, 1]


def test_set_checkpoint_early_stop_needs_only_the_forward(T: _Lib) -> None:
    def program(L: Any) -> Any:
        counter = [0]

        def fn(x: Any) -> Any:
            counter[0] += 1
            return x.sin().cos().clone()

        a = L.t(1.0, rg=True)
        with L.set_checkpoint_early_stop(False):
            out = _ck(L, fn, a)
        L.backward(out)  # outside the context manager: its setting was taken
        return counter[0]

    assert same(T, program) == 2


def _under(cm: Any, fn: Callable[[], Any]) -> Any:
    with cm:
        return fn()


def test_early_stop_when_no_recomputation_is_needed(T: _Lib) -> None:
    # (the count of sin kernels under a dispatch mode is left out: no dispatch modes)
    def program(L: Any) -> Any:
        counter = [0]

        def saves_its_input(x: Any) -> Any:
            counter[0] += 1
            return x.sin()

        def saves_nothing(x: Any) -> Any:
            counter[0] += 1
            return x.clone()

        counts = []
        for fn in (saves_its_input, saves_nothing):
            for stop in (True, False):
                counter[0] = 0
                a = L.t(1.0, rg=True)
                with L.set_checkpoint_early_stop(stop):
                    out = _ck(L, fn, a)
                L.backward(out)
                counts.append(counter[0])
        return counts

    assert same(T, program) == [2, 2, 1, 1]


# -- TestAutograd's checkpoint tests -------------------------------------------------------------


@pytest.mark.skip(
    reason="aengine has no autocast: the behaviour (the recomputation runs under the "
    "forward's autocast state) has nothing to check"
)
def test_checkpointing_non_reentrant_autocast() -> None:
    raise AssertionError("unreachable")


def test_checkpoints_drop_the_segments_activations(T: _Lib) -> None:
    # torch checks CUDA peak memory; here, whether an activation of the segment lives on
    def program(L: Any) -> Any:
        w = L.randn(8, 8, seed=1, rg=True)
        alive = {}
        for how in ("none", "reentrant", "non-reentrant"):
            refs: list[Any] = []

            def segment(x: Any) -> Any:
                h = (x @ w).tanh()
                refs.append(weakref.ref(h))
                return (h * h).sum()

            x = L.randn(4, 8, seed=2, rg=True)
            if how == "none":
                out = segment(x)
            else:
                out = L.checkpoint_any(segment, x, use_reentrant=how == "reentrant")
            gc.collect()
            alive[how] = refs[0]() is not None
            L.backward(out)
            alive[how + " grad"] = x.grad
        return alive

    got = same(T, program)
    assert (got["none"], got["reentrant"], got["non-reentrant"]) == (True, False, False)


def test_custom_function_saved_tensors_unpack_once_per_backward(T: _Lib) -> None:
    msg = "Unpack is being triggered for a tensor that was already unpacked once"

    def program(L: Any) -> Any:
        second: list[Any] = []

        class MyFunc(L.Function):
            @staticmethod
            def forward(ctx, x, y, z):
                w = x * y * z
                out = w + w
                ctx.save_for_backward(x, y, z, w, out)
                return out

            @staticmethod
            def backward(ctx, grad_out):
                x, y, z, w, out = ctx.saved_tensors
                # recomputed values are dropped as they are unpacked
                second.append(error_of(lambda: ctx.saved_tensors))
                return x, y, z

        x, y, z = L.t(1.0, rg=True), L.t(2.0, rg=True), L.t(3.0, rg=True)

        def foo(x: Any, y: Any, z: Any) -> Any:
            return MyFunc.apply(x * y * z, y * y * z, z * z)

        L.backward(_ck(L, foo, x, y, z).sum())
        kind, text = second[0]
        return kind, msg in text, x.grad, y.grad, z.grad

    assert same(T, program)[:2] == ("RuntimeError", True)


def test_context_fn_runs_the_forward_and_the_recomputation_in_its_contexts(T: _Lib) -> None:
    def program(L: Any) -> Any:
        log: list[str] = []

        @contextlib.contextmanager
        def tagged(name: str) -> Any:
            log.append(f"enter {name}")
            yield
            log.append(f"exit {name}")

        def segment(x: Any) -> Any:
            log.append("exp")
            return x.exp()

        x = L.t(1.0, rg=True)
        out = _ck(L, segment, x, context_fn=lambda: (tagged("forward"), tagged("recompute")))
        log.append("backward")
        L.backward(out)
        refused = error_of(
            lambda: L.checkpoint_any(
                lambda t: t.sin(), x, use_reentrant=True, context_fn=lambda: (None, None)
            )
        )
        return log, refused[0], "only supported when use_reentrant=False" in refused[1], x.grad

    same(T, program)


def test_context_fn_exits_when_the_forward_raises(T: _Lib) -> None:
    def program(L: Any) -> Any:
        active = contextvars.ContextVar("active", default=False)
        events: list[Any] = []

        class Context:
            def __enter__(self) -> None:
                events.append("enter")
                self.token = active.set(True)

            def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
                events.append(("exit", exc_type.__name__, str(exc)))
                active.reset(self.token)

        def fn(x: Any) -> Any:
            events.append(("active", active.get()))
            raise RuntimeError("forward failed")

        err = error_of(
            lambda: _ck(
                L, fn, L.t(1.0, rg=True), context_fn=lambda: (Context(), contextlib.nullcontext())
            )
        )
        return err, events, active.get()

    same(T, program)


def test_context_fn_cannot_suppress_a_forward_exception(T: _Lib) -> None:
    def program(L: Any) -> Any:
        seen: list[Any] = []

        class Suppressing:
            def __enter__(self) -> None:
                pass

            def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
                seen.append((exc_type.__name__, str(exc)))
                return True

        def fn(x: Any) -> Any:
            raise ValueError("forward failed")

        kind, text = error_of(
            lambda: _ck(
                L,
                fn,
                L.t(1.0, rg=True),
                context_fn=lambda: (Suppressing(), contextlib.nullcontext()),
            )
        )
        return kind, "context_fn suppressed" in text, seen

    assert same(T, program)[:2] == ("RuntimeError", True)


def _warned(fn: Callable[[], Any]) -> bool:
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        fn()
    return any(
        "the use_reentrant parameter should be passed explicitly" in str(w.message) for w in ws
    )


def test_checkpoint_warns_if_use_reentrant_is_not_passed(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.randn(1, seed=1, rg=True)
        return (
            _warned(lambda: L.checkpoint_any(lambda x: x * 2, a, use_reentrant=False)),
            _warned(lambda: L.checkpoint_any(lambda x: x * 2, a)),
        )

    assert same(T, program) == (False, True)


def test_checkpoint_sequential_warns_if_use_reentrant_is_not_passed(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.randn(3, seed=1, rg=True)
        layers = [L.linear(3, 3, seed=i) for i in range(3)]
        return (
            _warned(lambda: L.checkpoint_sequential(layers, 3, a, use_reentrant=False)),
            _warned(lambda: L.checkpoint_sequential(layers, 3, a)),
        )

    assert same(T, program) == (False, True)


def test_checkpoint_sequential_without_reentrant_gives_the_plain_gradients(T: _Lib) -> None:
    def program(L: Any) -> Any:
        layers = [L.linear(4, 4, seed=i) for i in range(5)]
        x = L.randn(2, 4, seed=9, rg=True)
        out = L.checkpoint_sequential(layers, 2, x, use_reentrant=False)
        grads = L.grad(out.tanh().sum(), [x, *(p for m in layers for p in m.parameters())])
        return out, grads

    same(T, program)


def _non_det(orig: Callable[[Any], Any], recompute: Callable[[Any], Any]) -> Callable[[Any], Any]:
    calls = [0]

    def fn(x: Any) -> Any:
        calls[0] += 1
        return orig(x) if calls[0] == 1 else recompute(x)

    return fn


def test_checkpoint_detects_non_determinism(T: _Lib) -> None:
    def program(L: Any) -> Any:
        def save_3(x: Any) -> Any:
            return x.sin().exp().sin()

        def save_2(x: Any) -> Any:
            return x.sin().exp()

        def save_2_alt(x: Any) -> Any:  # as many saved tensors, of another shape
            return x.sin() * L.t([1.0, 2.0])

        a = L.randn(1, seed=1, rg=True)

        def run(orig: Any, again: Any, **kw: Any) -> tuple[str, str]:
            return error_of(lambda: L.backward(_ck(L, _non_det(orig, again), a, **kw)))

        with L.set_checkpoint_early_stop(False):
            more_without_early_stop = run(save_2, save_3)
        with L.set_checkpoint_debug_enabled(True):
            debug_enabled = run(save_2, save_2_alt)
        with L.set_checkpoint_debug_enabled(False):
            debug_disabled = run(save_2, save_2_alt, debug=True)
        errors = {
            "fewer": run(save_3, save_2),
            "more without early stop": more_without_early_stop,
            "more with early stop": run(save_2, save_3),
            "other metadata": run(save_2, save_2_alt),
            "debug": run(save_2, save_2_alt, debug=True),
            "debug enabled": debug_enabled,
            "debug disabled": debug_disabled,
        }
        texts = {
            "fewer": "A different number of tensors was saved",
            "more without early stop": "trying to save more tensors during recomputation",
            "more with early stop": "",
            "other metadata": "tensors have different metadata",
            "debug": "You are seeing this error because you passed `debug=True` to checkpoint",
            "debug enabled": "You are seeing this error because you passed `debug=True`",
            "debug disabled": "Recomputed values for the following tensors have different",
        }
        return {k: (kind, texts[k] in text) for k, (kind, text) in errors.items()}, a.grad

    errors, _ = same(T, program)
    assert errors["more with early stop"] == ("ok", True)
    assert all(
        kind == "RuntimeError" and found
        for k, (kind, found) in errors.items()
        if k != "more with early stop"
    )


def test_checkpoint_error_is_a_runtime_error_of_its_own(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.randn(1, seed=1, rg=True)
        fn = _non_det(lambda x: x.sin().exp().sin(), lambda x: x.sin().exp())
        try:
            L.backward(_ck(L, fn, a))
        except L.CheckpointError as err:
            return isinstance(err, RuntimeError)
        return "no error"

    assert same(T, program) is True


def test_checkpoint_refuses_an_unknown_determinism_check_and_debug_with_context_fn(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.randn(1, seed=1, rg=True)
        bad_check = error_of(lambda: _ck(L, lambda x: x.sin(), a, determinism_check="all"))
        debug_ctx = error_of(
            lambda: _ck(
                L,
                lambda x: x.sin(),
                a,
                debug=True,
                context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext()),
            )
        )
        return (
            bad_check[0],
            "determinism_check should be one of" in bad_check[1],
            debug_ctx[0],
            "debug=True is incompatible with non-default context_fn" in debug_ctx[1],
        )

    assert same(T, program) == ("ValueError", True, "ValueError", True)


def test_saved_values_accessed_outside_a_backward_recompute_each_time(T: _Lib) -> None:
    # torch reads d.grad_fn._saved_result of an exp; here a custom Function's saved_tensors
    def program(L: Any) -> Any:
        count = [0]

        class Exp(L.Function):
            @staticmethod
            def forward(ctx, x):
                out = x.exp()
                ctx.save_for_backward(out)
                return out

            @staticmethod
            def backward(ctx, g):
                (out,) = ctx.saved_tensors
                return g * out

        def foo(a: Any) -> Any:
            count[0] += 1
            b = a * a
            a * b
            return Exp.apply(a)

        a = L.randn(5, seed=1, rg=True)
        d = _ck(L, foo, a)
        counts = [count[0]]
        first = d.grad_fn.saved_tensors[0]
        counts.append(count[0])
        d.grad_fn.saved_tensors  # each access outside a backward recomputes
        counts.append(count[0])
        L.backward(d.sum())  # the backward recomputes once and frees the saved values
        counts.append(count[0])
        kind, text = error_of(lambda: d.grad_fn.saved_tensors)
        return counts, first, a.grad, kind, "after they have already been freed" in text

    assert same(T, program)[0] == [1, 2, 3, 4]


def test_saved_result_accessed_outside_a_backward_recomputes_each_time(T: _Lib) -> None:
    if not hasattr(ae.tensor(1.0, requires_grad=True).exp().grad_fn, "_saved_result"):
        pytest.skip("aengine's nodes have no _saved_* attributes yet")

    def program(L: Any) -> Any:
        count = [0]

        def foo(a: Any) -> Any:
            count[0] += 1
            b = a * a
            a * b
            return a.exp()

        a = L.randn(5, seed=1, rg=True)
        d = _ck(L, foo, a)
        counts = [count[0]]
        d.grad_fn._saved_result
        counts.append(count[0])
        d.grad_fn._saved_result
        counts.append(count[0])
        L.backward(d.sum())
        counts.append(count[0])
        kind, text = error_of(lambda: d.grad_fn._saved_result)
        return counts, kind, "after they have already been freed" in text

    assert same(T, program) == ([1, 2, 3, 4], "RuntimeError", True)


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_checkpointing_without_reentrant_gives_the_plain_parameter_gradients(
    T: _Lib, input_requires_grad: bool
) -> None:
    def program(L: Any) -> Any:
        def model() -> Any:
            inner = L.nn.Sequential(L.linear(6, 20, seed=1), L.nn.ReLU(), L.linear(20, 6, seed=2))

            class MyModule(L.nn.Module):  # a module taking its input as a keyword argument
                def __init__(self) -> None:
                    super().__init__()
                    self.module = inner

                def forward(self, data: Any) -> Any:
                    return self.module(data)

            return MyModule()

        module, plain = model(), model()
        feats, plain_feats = [], []
        for i in range(12):
            data = L.rand(1, 6, seed=100 + i, rg=input_requires_grad)
            feats.append(_ck(L, module, data=data))
            plain_feats.append(plain(data))
        L.stack(feats).mean().backward()
        L.stack(plain_feats).mean().backward()
        return [p.grad for p in module.parameters()], [p.grad for p in plain.parameters()]

    ck, plain = same(T, program)
    _compare(plain, ck)


def test_reentrant_checkpoint_works_again_after_refusing_grad(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.randn(2, 2, seed=1, rg=True)
        kind, text = error_of(
            lambda: L.grad(L.checkpoint_any(lambda t: t.exp(), a, use_reentrant=True).sum(), (a,))
        )
        L.backward(L.checkpoint_any(lambda t: t.exp(), a, use_reentrant=True).sum())
        return kind, "checkpoint is incompatible" in text, a.grad

    assert same(T, program)[:2] == ("RuntimeError", True)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_of_a_segment_computed_without_grad(T: _Lib, use_reentrant: bool) -> None:
    def program(L: Any) -> Any:
        lin1, lin2 = L.linear(2, 2, seed=1, bias=False), L.linear(2, 2, seed=2, bias=False)

        def no_grad_module(x: Any) -> Any:
            with L.no_grad():
                return lin2(lin1(x))

        a = L.randn(2, 2, seed=3, rg=True)
        results = []
        for _ in range(3):

            def step() -> None:
                out = L.checkpoint_any(no_grad_module, a, use_reentrant=use_reentrant)
                out = out + a
                L.backward(out.sum())

            kind, text = error_of(step)
            results.append((kind, "none of output has requires_grad=True" in text))
        return results, a.grad

    results, _ = same(T, program)
    assert results == [("RuntimeError", True) if use_reentrant else ("ok", False)] * 3


def test_checkpointing_without_reentrant_keeps_saved_object_identity(T: _Lib) -> None:
    def program(L: Any) -> Any:
        seen: list[Any] = []

        class Test(L.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(y)
                return x

            @staticmethod
            def backward(ctx, g):
                seen.append(ctx.saved_tensors[0])
                return g, None

        a = L.t(1.0, rg=True)
        b = L.t(1.0)
        Test.apply(a, b).backward()
        _ck(L, Test.apply, a, b).backward()
        return seen[0] is b, seen[1] is b

    assert same(T, program) == (True, True)


def test_checkpointing_without_reentrant_gives_correct_gradients(T: _Lib) -> None:
    def program(L: Any) -> Any:
        a = L.randn(2, 2, seed=1, rg=True)
        L.backward(a.exp().sum())
        plain = a.grad
        a.grad = None
        L.backward(_ck(L, lambda t: t.exp(), a).sum())
        by_backward = a.grad
        a.grad = None
        (by_grad,) = L.grad(_ck(L, lambda t: t.exp(), a).sum(), (a,))
        return plain, by_backward, by_grad

    plain, by_backward, by_grad = same(T, program)
    _compare(plain, by_backward)
    _compare(plain, by_grad)


@pytest.mark.skip(reason="aengine has no DataParallel (nor CUDA): nothing to run")
def test_checkpointing_without_reentrant_dataparallel() -> None:
    raise AssertionError("unreachable")


def test_checkpointing_without_reentrant_runs_a_parameters_hook_once(T: _Lib) -> None:
    def program(L: Any) -> Any:
        w = L.randn(10, 10, seed=1, rg=True)
        count = [0]
        w.register_hook(lambda g: count.__setitem__(0, count[0] + 1))
        x = L.rand(10, 10, seed=2, rg=True)
        h = w * x  # w outside the checkpoint
        out = _ck(L, lambda t: w * t, h)  # and inside
        L.backward(out.sum())
        return count[0], w.grad, x.grad

    assert same(T, program)[0] == 1


def test_checkpointing_without_reentrant_takes_and_gives_any_structure(T: _Lib) -> None:
    def program(L: Any) -> Any:
        def model() -> Any:
            layer = L.linear(5, 5, seed=1, bias=False)

            class MyModel(L.nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.layer = layer

                def forward(self, dict_input: Any) -> Any:
                    return {"result": self.layer(dict_input["tensor"])}

            return MyModel()

        plain_model, ck_model = model(), model()
        inp = {"tensor": L.randn(5, 5, seed=2)}
        plain = plain_model(inp)["result"].sum()
        ck = _ck(L, ck_model, inp)["result"].sum()
        L.backward(plain)
        L.backward(ck)
        return (
            plain,
            ck,
            [p.grad for p in plain_model.parameters()],
            [p.grad for p in ck_model.parameters()],
        )

    plain, ck, plain_grads, ck_grads = same(T, program)
    _compare(plain, ck)
    _compare(plain_grads, ck_grads)


def test_checkpoint_does_not_modify_its_inputs(T: _Lib) -> None:
    def program(L: Any) -> Any:
        x = L.randn(3, seed=1, rg=True)
        y = L.randn(3, seed=2)
        before = (x.detach().clone(), y.clone())
        out = _ck(L, lambda a, b: (a * b).sin() + a.exp(), x, y)
        L.backward(out.sum())
        return before, (x, y), x.grad, y.grad, x.requires_grad, y.requires_grad, x.is_leaf

    before, after, *_ = same(T, program)
    _compare(before, after)


def test_a_create_graph_backward_through_a_checkpoint_differentiates_the_original_graph(
    T: _Lib,
) -> None:
    def program(L: Any) -> Any:
        x = L.randn(3, seed=1, rg=True)
        calls = [0]
        out = _ck(L, lambda t: t.sin().exp(), x)
        # a hook on a node of the original graph runs in both backwards
        out.grad_fn.register_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        (g,) = L.grad(out.sum(), (x,), create_graph=True)
        (gg,) = L.grad(g.sum(), (x,))
        return g, gg, calls[0]

    same(T, program)


def test_a_retained_graph_recomputes_for_each_backward(T: _Lib) -> None:
    def program(L: Any) -> Any:
        count = [0]

        def fn(t: Any) -> Any:
            count[0] += 1
            return t.sin().exp()

        x = L.randn(3, seed=1, rg=True)
        out = _ck(L, fn, x).sum()
        L.backward(out, retain_graph=True)
        first = x.grad.clone()
        L.backward(out)
        return count[0], first, x.grad

    assert same(T, program)[0] == 3


def test_graph_exec_group_recomputes_once_for_several_backwards(T: _Lib) -> None:
    def program(L: Any) -> Any:
        group = L.mod.utils.checkpoint.GraphExecGroup if L.name == "torch" else ae.GraphExecGroup

        def run(use_group: bool) -> Any:
            counter = [0]

            def fn(x: Any) -> Any:
                counter[0] += 1
                y = x.sin().cos()
                return y, y.sin().cos()

            x = L.randn(3, 3, seed=1, rg=True)
            y, z = _ck(L, fn, x)
            with group() if use_group else contextlib.nullcontext():
                (gy,) = L.grad(z, inputs=(y,), grad_outputs=(L.ones(3, 3),))
                (gx,) = L.grad(y, inputs=(x,), grad_outputs=(gy,))
            return counter[0], gx

        x = L.randn(3, 3, seed=2, rg=True)
        out = _ck(L, lambda t: t.sin().cos(), x)
        with group():
            # two backwards of one group must not need the same saved value
            L.backward(out.sum(), retain_graph=True)
            kind, text = error_of(lambda: L.backward(out.sum()))
        nested = error_of(lambda: _under(group(), lambda: _under(group(), lambda: None)))
        return (
            run(True),
            run(False),
            (kind, "Performing two backward calls that overlap" in text),
            (nested[0], "GraphExecGroup contexts cannot be nested" in nested[1]),
        )

    grouped, plain, overlap, nested = same(T, program)
    assert (grouped[0], plain[0]) == (2, 3)
    assert overlap == ("RuntimeError", True) and nested == ("RuntimeError", True)


# -- the same behaviours awaited (asyncio and trio) ------------------------------------------------


def _torch_grads(T: Any, build: Callable[[Any], Any]) -> Any:
    return _plain(build(T))


@pytest.mark.anyio
async def test_awaited_nested_checkpoints_give_torchs_higher_order_gradients(
    T: _Lib, anyio_backend: str
) -> None:
    def inner(t: Any) -> Any:
        return (t.sin() * t).exp()

    def sync_program(L: Any) -> Any:
        x = L.t([0.4, -0.3, 1.1], rg=True)
        y = _ck(L, lambda a: _ck(L, inner, a * 2.0).cos() * a, x).sum()
        (g,) = L.grad(y, [x], create_graph=True)
        (gg,) = L.grad(g.sum(), [x])
        return g, gg

    x = AE.t([0.4, -0.3, 1.1], rg=True)
    y = _ck(AE, lambda a: _ck(AE, inner, a * 2.0).cos() * a, x).sum()
    (g,) = await ae.grad(y, [x], create_graph=True)
    (gg,) = await ae.grad(g.sum(), [x])
    _compare(_plain(sync_program(T)), _plain((g, gg)))

    x2 = AE.t([0.4, -0.3, 1.1], rg=True)
    await ae.backward(_ck(AE, lambda a: _ck(AE, inner, a * 2.0).cos() * a, x2).sum(), inputs=[x2])
    _compare(_plain(sync_program(T))[0], _plain(x2.grad))


@pytest.mark.anyio
async def test_awaited_recomputations_interleave_with_other_backwards(
    T: _Lib, anyio_backend: str
) -> None:
    """Several backwards on one Engine, each pausing inside its checkpointed region."""
    n = 4

    def build(L: Any, w: Any, i: int, pause: Any = None) -> Any:
        x = L.randn(2, 3, seed=10 + i, rg=True)

        def segment(t: Any) -> Any:
            h = (t @ w).tanh()
            if pause is not None and h.requires_grad:
                h.register_hook(pause)  # runs while this segment's holders are half unpacked
            return _ck(L, lambda u: (u * u).sin(), h) @ w

        return x, _ck(L, segment, x).sum()

    w_t = T.randn(3, 3, seed=1, rg=True)
    expected = []
    for i in range(n):
        x_t, loss_t = build(T, w_t, i)
        expected.append(_plain(T.grad(loss_t, [x_t, w_t])))
    shared_x, shared_loss = build(T, w_t, n)
    shared_expected = _plain(T.grad(shared_loss, [shared_x]))

    async def pause(g: Any) -> None:
        await yield_point()
        await yield_point()

    w = AE.randn(3, 3, seed=1, rg=True)
    got: list[Any] = [None] * n
    shared_got: list[Any] = []
    async with ae.Engine():
        graphs = [build(AE, w, i, pause) for i in range(n)]
        sx, sloss = build(AE, w, n, pause)

        async def one(i: int) -> None:
            x, loss = graphs[i]
            got[i] = _plain(await ae.grad(loss, [x, w]))

        async def on_shared() -> None:  # two backwards of one retained graph at once
            shared_got.append(_plain(await ae.grad(sloss, [sx], retain_graph=True)))

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
            tg.start_soon(on_shared)
            tg.start_soon(on_shared)
    for e, a in zip(expected, got, strict=True):
        _compare(e, a)
    assert len(shared_got) == 2
    for a in shared_got:
        _compare(shared_expected, a)


@pytest.mark.anyio
async def test_a_backward_cancelled_in_the_middle_of_a_recomputation(anyio_backend: str) -> None:
    w = ae.tensor(np.linspace(-1.0, 1.0, 9).reshape(3, 3), requires_grad=True)
    recomputations = [0]

    class Handle:
        pass

    def scope() -> tuple[Any, list[Any], Any]:
        x = ae.tensor(np.linspace(0.1, 0.6, 6).reshape(2, 3), requires_grad=True)

        async def cancelling(g: Any) -> None:
            cancel.cancel()
            await yield_point()  # cancellation is delivered here, mid-recomputation

        def segment(t: Any) -> Any:
            recomputations[0] += 1
            h = (t @ w).tanh()
            if recomputations[0] == 1:
                h.register_hook(cancelling)
            return (h * h).exp().sin()

        loss = ae.checkpoint(segment, x, use_reentrant=False).sum()
        refs, seen, queue = [], set(), collections.deque([loss.grad_fn])
        while queue:
            node = queue.popleft()
            if node is None or node in seen:
                continue
            seen.add(node)
            handle = Handle()
            node.metadata["handle"] = handle
            refs.append(weakref.ref(handle))
            queue.extend(f for f, _ in node.next_functions)
        return x, refs, loss

    x, refs, loss = scope()
    with anyio.CancelScope() as cancel:
        await ae.backward(loss)
    assert cancel.cancelled_caught
    assert recomputations[0] == 2  # the recomputation ran, the backward stopped inside it
    assert x.grad is None and w.grad is None
    del loss, x
    # the event loop holds the delivered cancellation (and its traceback's frames) until
    # the task's next step
    await yield_point()
    gc.collect()
    assert [r for r in refs if r() is not None] == []
