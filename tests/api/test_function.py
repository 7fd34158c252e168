"""Custom Functions: ae.Function against torch.autograd.Function."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.tensors._tensor import own_vc
from tests.oracle import torch_or_skip


def _np(t):  # type: ignore[no-untyped-def]
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


# -- the same Functions, written for both libraries ---------------------------------------


def make_scalar_arg_function(lib, base, async_backward=False):  # type: ignore[no-untyped-def]
    """A Python scalar among tensor args: forward(ctx, t1, pyscalar, t2) = t1 + s*t2 + t1*t2."""

    class MyFunction(base):
        @staticmethod
        def forward(ctx, t1, pyscalar, t2):  # type: ignore[no-untyped-def]
            ctx.pyscalar = pyscalar
            ctx.save_for_backward(t1, t2)
            return t1 + pyscalar * t2 + t1 * t2

        if async_backward:

            @staticmethod
            async def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
                await anyio.sleep(0)
                t1, t2 = ctx.saved_tensors
                return (
                    grad_output + grad_output * t2,
                    None,
                    grad_output * ctx.pyscalar + grad_output * t1,
                )

        else:

            @staticmethod
            def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
                t1, t2 = ctx.saved_tensors
                return (
                    grad_output + grad_output * t2,
                    None,
                    grad_output * ctx.pyscalar + grad_output * t1,
                )

    return MyFunction


def _leaves(torch, shape=(3, 4)):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    b = rng.standard_normal(shape)
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    xa = ae.tensor(a, requires_grad=True)
    xb = ae.tensor(b, requires_grad=True)
    return ta, tb, xa, xb


@pytest.mark.parametrize("create_graph", [False, True])
def test_scalar_arg_function_sync_against_torch(create_graph: bool) -> None:
    torch = torch_or_skip()
    ta, tb, xa, xb = _leaves(torch)
    TF = make_scalar_arg_function(torch, torch.autograd.Function)
    AF = make_scalar_arg_function(ae, ae.Function)
    ty = TF.apply(ta, 2.0, tb)
    xy = AF.apply(xa, 2.0, xb)
    assert xy.grad_fn.name() == "MyFunctionBackward"
    assert type(ty.grad_fn).__name__ == "MyFunctionBackward"
    np.testing.assert_allclose(_np(xy), _np(ty))
    tg = torch.autograd.grad(ty.sum(), (ta, tb), create_graph=create_graph)
    xg = ae.sync.grad(xy.sum(), (xa, xb), create_graph=create_graph)
    for t, x in zip(tg, xg, strict=True):
        np.testing.assert_allclose(_np(x), _np(t))
        assert (x.grad_fn is not None) == (t.grad_fn is not None)
    if create_graph:
        (tgg,) = torch.autograd.grad(tg[0].sum(), tb)
        (xgg,) = ae.sync.grad(xg[0].sum(), xb)
        np.testing.assert_allclose(_np(xgg), _np(tgg))


@pytest.mark.anyio
@pytest.mark.parametrize("async_backward", [False, True])
async def test_scalar_arg_function_async(async_backward: bool) -> None:
    torch = torch_or_skip()
    ta, tb, xa, xb = _leaves(torch)
    TF = make_scalar_arg_function(torch, torch.autograd.Function)
    AF = make_scalar_arg_function(ae, ae.Function, async_backward)
    TF.apply(ta, 2.0, tb).sum().backward()
    await ae.backward(AF.apply(xa, 2.0, xb).sum())
    np.testing.assert_allclose(_np(xa.grad), _np(ta.grad))
    np.testing.assert_allclose(_np(xb.grad), _np(tb.grad))
    # create_graph through an async backward: the results carry graphs
    (ga,) = await ae.grad(AF.apply(xa, 2.0, xb).sum(), xa, create_graph=True)
    assert ga.grad_fn is not None
    (gab,) = await ae.grad(ga.sum(), xb)
    np.testing.assert_allclose(_np(gab), np.ones((3, 4)))


def test_async_backward_under_sync() -> None:
    """An async backward runs under ae.sync from plain code (no loop running)."""
    AF = make_scalar_arg_function(ae, ae.Function, async_backward=True)
    x = ae.ones(2, requires_grad=True)
    y = ae.ones(2, requires_grad=True)
    ae.sync.backward(AF.apply(x, 3.0, y).sum())
    assert x.grad.tolist() == [2.0, 2.0]
    assert y.grad.tolist() == [4.0, 4.0]
    (gx,) = ae.sync.grad(AF.apply(x, 3.0, y).sum(), x, create_graph=True)
    assert gx.tolist() == [2.0, 2.0] and gx.grad_fn is not None
    (gxy,) = ae.sync.grad(gx.sum(), y)
    assert gxy.tolist() == [1.0, 1.0]


# -- scenarios run by torch, ae.sync and the awaitable API --------------------------------

from tests.api.test_hooks import AeAsyncLib, AeSyncLib, TorchLib, assert_same, run_plain  # noqa: E402


async def once_differentiable_backward(L: Any) -> Any:
    class MyFunction(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @L.once_differentiable
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = L.tensor([1.0, 3.0], requires_grad=True)
    go = L.tensor(1.0, requires_grad=True)
    (gx,) = await L.grad(MyFunction.apply(x).sum(), x, go, create_graph=True)
    out = [gx.detach(), gx.requires_grad, gx.grad_fn is not None]
    try:
        await L.backward(gx.sum())
    except RuntimeError as exc:
        out.append("trying to differentiate twice a function that was marked" in str(exc))
    # without create_graph the results carry no graph
    (gx2,) = await L.grad(MyFunction.apply(x).sum(), x)
    out.append(gx2.requires_grad)
    return out


async def forward_returns_input(L: Any) -> Any:
    class Identity(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    class Undefined(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return None

    out = []
    for shape in [(1,), ()]:
        v = L.tensor(np.ones(shape), requires_grad=True)
        y = Identity.apply(v)
        out.append([y is v, y.requires_grad, y.grad_fn is not None])
        await L.backward(y.sum())
        out.append(v.grad)
        w = L.tensor(np.ones(shape), requires_grad=True)
        await L.backward(Identity.apply(w.clone()).sum())
        out.append(w.grad)
        u = L.tensor(np.ones(shape), requires_grad=True)
        await L.backward((Undefined.apply(u) ** 2).sum())
        out.append(u.grad is None)
        (gu,) = await L.grad(Undefined.apply(u).sum(), u, allow_unused=True)
        out.append(gu is None)
    return out


async def materialize_grads_on_and_off(L: Any) -> Any:
    seen: list[Any] = []

    def make(materialize: bool) -> Any:
        class Two(L.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.set_materialize_grads(materialize)
                return x * 1, x * 2

            @staticmethod
            def backward(ctx: Any, g1: Any, g2: Any) -> Any:
                seen.append(None if g2 is None else g2.detach().clone())
                return g1 * 1 if g2 is None else g1 + g2 * 2

        return Two

    for m in (True, False):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        a, b = make(m).apply(x)
        await L.backward(a.sum())
        seen.append(x.grad)
    return seen


async def non_differentiable_grads_not_materialized(L: Any) -> Any:
    seen: list[Any] = []

    class Func(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            out0 = x.clone()
            out1 = x.clone()
            ctx.mark_non_differentiable(out1)
            ctx._materialize_non_diff_grads = False
            return out0, out1

        @staticmethod
        def backward(ctx: Any, g0: Any, g1: Any) -> Any:
            seen.append(g1 is None)
            return g0

    x = L.tensor([1.0, 2.0], requires_grad=True)
    out0, _ = Func.apply(x)
    await L.backward(out0.sum())
    return [seen, x.grad]


async def non_differentiable_outputs(L: Any) -> Any:
    class Positive(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            out = x * 1 > 0
            ctx.mark_non_differentiable(out)
            return out

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            raise RuntimeError("not called")

    class Mixed(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            a = x + 1
            b = x + 2
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx: Any, ga: Any, gb: Any) -> Any:
            seen.append(gb.detach().clone())
            return ga

    seen: list[Any] = []
    x = L.tensor([-1.0, 2.0], requires_grad=True)
    p = Positive.apply(x)
    a, b = Mixed.apply(x)
    out = [p.requires_grad, a.requires_grad, b.requires_grad, b.grad_fn is None]
    await L.backward(a.sum())
    return [out, seen, x.grad]


async def wrong_number_or_shape_of_grads(L: Any) -> Any:
    class Trims(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, None, None

    class TooMany(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, g

    class Bcast(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.sum()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * L.tensor(np.ones((3, 5, 5)))

    class BadShape(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return L.tensor(np.ones(10))

    x = L.tensor(np.ones((5, 5)), requires_grad=True)
    out: list[Any] = []
    await L.backward(Trims.apply(x).sum())
    out.append(x.grad)
    for F in (TooMany, BadShape):
        try:
            await L.backward(F.apply(x).sum())
        except RuntimeError as exc:
            msg = str(exc)
            out.append(
                "returned an incorrect number of gradients (expected 1, got 2)" in msg
                or "returned an invalid gradient at index 0 - got [10] but expected shape "
                "compatible with [5, 5]"
                in msg
            )
    (g,) = await L.grad(Bcast.apply(x), x)
    out.append(g)
    return out


async def non_tensor_inputs_and_outputs(L: Any) -> Any:
    info: dict[str, Any] = {}

    class MyFunction(L.Function):
        @staticmethod
        def forward(ctx: Any, t1: Any, t2: Any, scale: float, t3: Any) -> Any:
            t4 = t1 + t2 * t3
            t5 = t1 * t2 + t3
            t4 = t4 * scale
            t5 = t5 * scale
            ctx.scale = scale
            ctx.save_for_backward(t1, t2, t3)
            return scale, t4, None, True, t5, "bar", t1

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            info["grads"] = [g is None for g in grads]
            t1, t2, t3 = ctx.saved_tensors
            s = ctx.scale
            g4, g5, g1 = grads[1], grads[4], grads[6]
            return (
                g4 * s + g5 * s * t2 + g1,
                g4 * s * t3 + g5 * s * t1,
                None,
                g4 * s * t2 + g5 * s,
            )

    t1 = L.tensor([1.0, 2.0], requires_grad=True)
    t2 = L.tensor([3.0, 4.0], requires_grad=True)
    t3 = L.tensor([5.0, 6.0])
    res = MyFunction.apply(t1, t2, 2.0, t3)
    kinds = [type(r).__name__ if not hasattr(r, "requires_grad") else "T" for r in res]
    await L.backward(res[1].sum() + res[4].sum() + res[6].sum())
    return [kinds, res[0], res[3], res[5], info["grads"], t1.grad, t2.grad, t3.grad is None]


async def save_none_and_output_nr(L: Any) -> Any:
    info: dict[str, Any] = {}

    class SaveNone(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(None, x, None)
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            a, x, b = ctx.saved_tensors
            info["none"] = (a is None, b is None)
            return g * 2

    class Two(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            a, b = x * 1, x * 3
            ctx.save_for_backward(b)
            return a, b

        @staticmethod
        def backward(ctx: Any, ga: Any, gb: Any) -> Any:
            (b,) = ctx.saved_tensors
            info["output_nr"] = b.output_nr
            return ga + gb * 3

    x = L.tensor([1.0, 2.0], requires_grad=True)
    await L.backward(SaveNone.apply(x).sum())
    a, b = Two.apply(x)
    await L.backward(b.sum())
    return [info, x.grad]


async def duplicate_outputs_and_mark_dirty(L: Any) -> Any:
    class Dup(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = x * 2
            return y, y

        @staticmethod
        def backward(ctx: Any, g1: Any, g2: Any) -> Any:
            return g1 * 2 + g2 * 2

    class Inplace(L.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            ctx.mark_dirty(a)
            return L.iadd(a, b), b + 2

        @staticmethod
        def backward(ctx: Any, ga: Any, gb: Any) -> Any:
            return ga, ga + gb

    class NotReturned(L.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            ctx.mark_dirty(a)
            return a * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    out: list[Any] = []
    x = L.tensor([1.0, 2.0], requires_grad=True)
    a, b = Dup.apply(x)
    out.append(a is b)
    await L.backward(a.sum())
    out.append(x.grad)
    y = L.tensor([3.0, 4.0], requires_grad=True)
    x.grad = None
    c = x.clone()
    v0 = c._version
    q, p = Inplace.apply(c, y)
    out += [q is c, c._version - v0, q.grad_fn is p.grad_fn, q.data.tolist()]
    await L.backward(q.sum() * 2 + p.sum())
    out += [x.grad, y.grad]
    for args in ((Inplace, x, y), (NotReturned, x.clone())):
        try:
            args[0].apply(*args[1:])
            out.append("no error")
        except RuntimeError as exc:
            msg = str(exc)
            out.append(
                "a leaf Variable that requires grad has been used in an in-place operation" in msg
                or "Some elements marked as dirty during the forward method were not returned"
                in msg
            )
    return out


async def mark_dirty_on_a_view(L: Any) -> Any:
    """mark_dirty on a view: the base's history goes through CopySlices."""

    class Double(L.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            ctx.mark_dirty(a)
            return L.iadd(a, a)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    x = L.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = x * 1
    v = b[1:3]
    y = Double.apply(v)
    out = [y is v, b.detach().clone(), type(b.grad_fn).__name__]
    await L.backward((b * b).sum() + (y * 3).sum())
    out.append(x.grad)
    return out


async def apply_under_no_grad(L: Any) -> Any:
    class MyFunction(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x + 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    x = L.tensor([1.0], requires_grad=True)
    with L.torch.no_grad() if L.name == "torch" else ae.no_grad():
        y = MyFunction.apply(x)
    return [y.requires_grad, y.grad_fn is None, x.grad is None]


async def input_computed_from_non_differentiable_output(L: Any) -> Any:
    class F1(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            out = x * 0 + 0.5
            ctx.mark_non_differentiable(out)
            return x * 1, out

        @staticmethod
        def backward(ctx: Any, g: Any, ignored: Any) -> Any:
            return g

    class F2(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, None

    x = L.tensor([1.0, 2.0], requires_grad=True)
    a, noise = F1.apply(x)
    b = noise + 1
    c = F2.apply(a, b)
    await L.backward(c.sum())
    return [x.grad]


async def saved_tensors_freed_or_modified(L: Any) -> Any:
    class MyFunction(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 2 * x

    out: list[Any] = []
    x = L.tensor([1.0, 2.0], requires_grad=True)
    y = MyFunction.apply(x)
    await L.backward(y.sum(), retain_graph=True)
    out.append(len(y.grad_fn.saved_tensors))
    await L.backward(y.sum())
    out.append(x.grad)
    for attempt in ("access", "backward"):
        try:
            if attempt == "access":
                y.grad_fn.saved_tensors
            else:
                await L.backward(y.sum())
            out.append("no error")
        except RuntimeError as exc:
            out.append("Trying to backward through the graph a second time" in str(exc))
    # a saved input modified in place
    z = L.tensor([1.0, 2.0], requires_grad=True)
    w = z.clone()
    y2 = MyFunction.apply(w)
    L.iadd(w, L.tensor([1.0, 1.0])) if L.name == "torch" else _bump(w)
    try:
        await L.backward(y2.sum())
        out.append("no error")
    except RuntimeError as exc:
        out.append("modified by an inplace operation" in str(exc))
    return out


def _bump(t: Any) -> None:
    t.data += 1
    own_vc(t)[0] += 1


FUNCTION_SCENARIOS = [
    once_differentiable_backward,
    forward_returns_input,
    materialize_grads_on_and_off,
    non_differentiable_grads_not_materialized,
    non_differentiable_outputs,
    wrong_number_or_shape_of_grads,
    non_tensor_inputs_and_outputs,
    save_none_and_output_nr,
    duplicate_outputs_and_mark_dirty,
    mark_dirty_on_a_view,
    apply_under_no_grad,
    input_computed_from_non_differentiable_output,
    saved_tensors_freed_or_modified,
]


@pytest.mark.parametrize("scenario", FUNCTION_SCENARIOS, ids=lambda f: f.__name__)
def test_function_sync_matches_torch(scenario: Any) -> None:
    torch_lib = TorchLib()
    expected = run_plain(scenario(torch_lib))
    lib = AeSyncLib()
    lib.torch = torch_lib.torch  # type: ignore[attr-defined]
    got = run_plain(scenario(lib))
    assert_same(got, expected)


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", FUNCTION_SCENARIOS, ids=lambda f: f.__name__)
async def test_function_async_matches_torch(scenario: Any) -> None:
    torch_lib = TorchLib()
    expected = run_plain(scenario(torch_lib))
    got = await scenario(AeAsyncLib())
    assert_same(got, expected)


# -- aengine-only checks ----------------------------------------------------------------------


def test_missing_forward_or_backward() -> None:
    class NoForward(ae.Function):
        pass

    class NoBackward(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

    class Both(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

        @staticmethod
        def vjp(ctx: Any, g: Any) -> Any:
            return g

    x = ae.ones(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="must implement the forward"):
        NoForward.apply(x)
    with pytest.raises(ae.BackwardError, match="must implement either the backward"):
        ae.sync.backward(NoBackward.apply(x).sum())
    with pytest.raises(ae.AutogradError, match="Implementing both 'backward' and 'vjp'"):
        ae.sync.backward(Both.apply(x).sum())
    with pytest.raises(TypeError, match="call NoBackward.apply"):
        NoBackward()


def test_mark_dirty_of_a_non_input_warns_and_goes_on() -> None:
    # PyTorch warns (it used to be an error here) and makes the tensor an output
    class Bad(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = x * 1
            ctx.mark_dirty(y)
            return y

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 3

    x = ae.ones(2, requires_grad=True)
    with pytest.warns(
        UserWarning,
        match=r"^ctx\.mark_dirty\(\) received a tensor that was not an input\. Only input "
        r"Tensors that have been mutated should be passed to ctx\.mark_dirty\(\)\.$",
    ) as rec:
        y = Bad.apply(x)
    assert rec[0].filename == __file__  # points at the caller's F.apply
    assert y.grad_fn.name() == "BadBackward" and y._version == 1
    ae.sync.backward(y.sum())
    assert x.grad.tolist() == [3.0, 3.0]
    # nothing recorded: no warning (as PyTorch)
    assert Bad.apply(ae.ones(2)).grad_fn is None


def test_ctx_cycle_is_collected() -> None:
    class Cyc(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.meta = {}
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    refs = []
    for run_backward in (False, True):
        x = ae.ones(2, requires_grad=True)
        y = Cyc.apply(x)
        y.grad_fn.meta["out"] = y  # node -> output -> node
        refs.append(weakref.ref(y))
        if run_backward:
            ae.sync.backward(y.sum())
        del y
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_setup_context_kwargs_and_ctx_attributes() -> None:
    torch = torch_or_skip()

    def make(base):  # type: ignore[no-untyped-def]
        class Scale(base):
            @staticmethod
            def forward(x, k=2.0):  # type: ignore[no-untyped-def]
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
                ctx.k = inputs[1]
                ctx.save_for_backward(inputs[0])

            @staticmethod
            def backward(ctx, g):  # type: ignore[no-untyped-def]
                return g * ctx.k, None

        return Scale

    tx = torch.ones(3, dtype=torch.float64, requires_grad=True)
    x = ae.ones(3, dtype=ae.float64, requires_grad=True)
    make(torch.autograd.Function).apply(tx, k=3.0).sum().backward()
    ae.sync.backward(make(ae.Function).apply(x, k=3.0).sum())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_dtype_cast_and_array_results() -> None:
    """Gradients are cast to the input's dtype; a backend array is accepted as gradient."""

    class F(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return np.ones(g.shape, dtype=np.float64) * 3

    x = ae.ones(2, dtype=ae.float32, requires_grad=True)
    ae.sync.backward(F.apply(x).sum())
    assert x.grad.dtype == ae.float32 and x.grad.tolist() == [3.0, 3.0]


def test_direct_node_call_and_async_under_running_loop_suspends() -> None:
    """grad_fn(*grads) runs a custom node directly."""
    AF = make_scalar_arg_function(ae, ae.Function)
    x = ae.ones(2, requires_grad=True)
    y = ae.ones(2, requires_grad=True)
    out = AF.apply(x, 3.0, y)
    gx, g_none, gy = out.grad_fn(ae.ones(2))
    assert gx.tolist() == [2.0, 2.0] and g_none is None and gy.tolist() == [4.0, 4.0]


@pytest.mark.anyio
async def test_async_backward_lets_other_tasks_run() -> None:
    ev = anyio.Event()
    started = anyio.Event()
    order: list[str] = []

    class Waits(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        async def backward(ctx: Any, g: Any) -> Any:
            order.append("backward waits")
            started.set()
            await ev.wait()
            order.append("backward resumes")
            return g * 2

    async def other() -> None:
        await started.wait()  # the waiter suspended; the loop still runs us
        order.append("other")
        ev.set()

    x = ae.ones(2, requires_grad=True)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ae.backward, Waits.apply(x).sum())
            tg.start_soon(other)
    assert order == ["backward waits", "other", "backward resumes"]
    assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.anyio
async def test_async_once_differentiable() -> None:
    class Sq(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @ae.once_differentiable
        async def backward(ctx: Any, g: Any) -> Any:
            await anyio.sleep(0)
            assert not ae.is_grad_enabled()
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = ae.tensor([1.0, 2.0], requires_grad=True)
    go = ae.tensor([1.0, 1.0], requires_grad=True)
    (gx,) = await ae.grad(Sq.apply(x), x, go, create_graph=True)
    assert gx.tolist() == [2.0, 4.0] and gx.requires_grad
    with pytest.raises(ae.AutogradError, match="trying to differentiate twice"):
        await ae.backward(gx.sum())


def test_mark_dirty_view_limits() -> None:
    class AddTo(ae.Function):
        @staticmethod
        def forward(ctx: Any, other: Any, a: Any) -> Any:
            ctx.mark_dirty(a)
            return a.add_(other)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, g

    x = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    with pytest.raises(ae.AutogradError, match="supported when the view is the first input"):
        AddTo.apply(ae.ones(2), b[:2])
    with pytest.raises(ae.AutogradError, match="view of a leaf Variable that requires grad"):
        AddTo.apply(ae.ones(2), x[:2])


@pytest.mark.anyio
async def test_suspending_async_backward_under_sync_inside_a_loop() -> None:
    """ae.sync inside a running loop cannot suspend: a clear error, grads untouched."""
    AF = make_scalar_arg_function(ae, ae.Function, async_backward=True)
    x = ae.ones(2, requires_grad=True)
    y = ae.ones(2, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="blocks the loop"):
        with pytest.raises(ae.AutogradError, match="suspended during a synchronous backward"):
            ae.sync.backward(AF.apply(x, 3.0, y).sum())
    assert x.grad is None and y.grad is None


# -- setup_context gets forward's defaults -----------------------------------------------------
def test_setup_context_receives_forward_defaults() -> None:
    torch = torch_or_skip()
    seen: dict[str, Any] = {}

    def make(lib, base):  # type: ignore[no-untyped-def]
        class Scale(base):
            @staticmethod
            def forward(x, k=3.0, shift=None):  # type: ignore[no-untyped-def]
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
                seen[lib.__name__] = inputs[1:]
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, g):  # type: ignore[no-untyped-def]
                return g * ctx.k, None, None

        return Scale

    for lib, base in ((ae, ae.Function), (torch, torch.autograd.Function)):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        y = make(lib, base).apply(x)  # no argument for k nor shift: their defaults
        if lib is ae:
            ae.sync.backward(y.sum())
        else:
            y.sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]
    assert seen["aengine"] == seen["torch"] == (3.0, None)

    # keyword-only parameters cannot be passed on (PyTorch fails too): a clear TypeError
    class KwOnly(ae.Function):
        @staticmethod
        def forward(x, *, k=2.0):  # type: ignore[no-untyped-def]
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
            pass

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            return g

    with pytest.raises(TypeError, match=r"KwOnly\.forward takes keyword-only arguments \(k\)"):
        KwOnly.apply(ae.ones(2, requires_grad=True))


# -- views returned by a Function ----------------------------------------------------------------
def _view_returning(lib, base, kind):  # type: ignore[no-untyped-def]
    class MyFn(base):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            if kind == "input":
                return x
            y = x.clone()
            v = y[:2]
            if kind == "changed":
                y.mul_(2)  # the local tensor changes after the view was taken
            return v

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            if kind == "input":
                return g * 7
            return lib.cat([g, lib.zeros(1, dtype=g.dtype)]) * 7

    return MyFn


@pytest.mark.parametrize("kind", ["changed", "view", "input"])
def test_view_output_has_the_function_node_and_may_not_change_in_place(kind: str) -> None:
    torch = torch_or_skip()
    results = []
    for lib, base in ((ae, ae.Function), (torch, torch.autograd.Function)):
        x = lib.ones(3, dtype=lib.float64, requires_grad=True)
        out = _view_returning(lib, base, kind).apply(x)
        name = type(out.grad_fn).__name__
        if lib is ae:
            ae.sync.backward(out.sum())
        else:
            out.sum().backward()
        errors = []
        for f in (lambda: out.mul_(2), lambda: out[0].add_(1)):
            try:
                f()
            except RuntimeError as exc:
                errors.append(str(exc))
        results.append((name, out.tolist(), x.grad.tolist(), errors))
    assert results[0] == results[1]
    name, _, _, errors = results[0]
    assert name == "MyFnBackward"
    assert errors[0] == (
        "Output 0 of MyFn is a view and is being modified inplace. This view was created inside "
        "a custom Function (or because an input was returned as-is) and the autograd logic to "
        "handle view+inplace would override the custom backward associated with the custom "
        "Function, leading to incorrect gradients. This behavior is forbidden. You can fix this "
        "by cloning the output of the custom Function."
    )
    assert errors[1].startswith("Output 0 of Select is a view and is being modified inplace.")


def test_view_outputs_of_a_function_with_several_outputs_are_multi_output_views() -> None:
    torch = torch_or_skip()
    msgs = []
    for lib, base in ((ae, ae.Function), (torch, torch.autograd.Function)):

        class Two(base):  # type: ignore[valid-type,misc]
            @staticmethod
            def forward(ctx, x):  # type: ignore[no-untyped-def]
                return x[:2], x[1:]

            @staticmethod
            def backward(ctx, g, h):  # type: ignore[no-untyped-def]
                return lib.ones(3)

        a, b = Two.apply(lib.ones(3, requires_grad=True).clone())
        with pytest.raises(RuntimeError) as info:
            b.mul_(2)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]
    assert msgs[0].startswith("Output 1 of Two is a view and is being modified inplace. This view")


# -- a Function saving its dirty output frees it at once ------------------------------------------
@pytest.mark.parametrize("where", ["tensor", "view", "two_outputs"])
def test_saved_dirty_output_is_freed_without_the_cycle_collector(where: str) -> None:
    class Double_(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            x.mul_(2)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return (x * 1, x) if where == "two_outputs" else x

        @staticmethod
        def backward(ctx: Any, g: Any, h: Any = None) -> Any:
            (x,) = ctx.saved_tensors
            assert x.shape == (2,)
            return g * 2 if h is None else g * 2 + h * 2

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        leaf = ae.ones(3, requires_grad=True)
        if where == "view":
            base = leaf.clone()
            out = Double_.apply(base[:2])
            del base
        elif where == "two_outputs":
            out = Double_.apply(leaf.clone()[:2].clone())[1]
        else:
            out = Double_.apply(leaf.clone()[:2].clone())
        ref = weakref.ref(out)
        node = weakref.ref(out.grad_fn)
        if where == "view":
            ae.sync.backward(out.sum(), retain_graph=True)  # unpacks the saved view
            assert leaf.grad.tolist() == [2.0, 2.0, 0.0]
        del out
        assert ref() is None and node() is None
    finally:
        if was_enabled:
            gc.enable()


def test_saved_dirty_view_double_backward_matches_torch() -> None:
    # the saved dirty view unpacks as an output of the Function's node (as PyTorch), which the
    # second backward reaches directly and through the base's CopySlices
    torch = torch_or_skip()
    res = []
    for lib, base in ((ae, ae.Function), (torch, torch.autograd.Function)):

        class Exp_(base):  # type: ignore[valid-type,misc]
            @staticmethod
            def forward(ctx, x):  # type: ignore[no-untyped-def]
                x.copy_(x.exp())
                ctx.mark_dirty(x)
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, g):  # type: ignore[no-untyped-def]
                (y,) = ctx.saved_tensors
                return g * y

        grad = ae.sync.grad if lib is ae else torch.autograd.grad
        leaf = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = leaf * 1
        out = Exp_.apply(b[:2])
        (g,) = grad((out * out).sum() + b.sum(), [leaf], create_graph=True)
        (g2,) = grad(g.sum(), [leaf])
        res.append((g.tolist(), g2.tolist()))
    np.testing.assert_allclose(res[0][0], res[1][0])
    np.testing.assert_allclose(res[0][1], res[1][1])
