"""Engine semantics against PyTorch (the oracle): the same scenario on both.

Sections: grad vs backward, retain_graph, create_graph, accumulation and
order.  Every case runs under the sync driver and under the async driver on
asyncio and on trio.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

CREATE_GRAPH_WARNING = r"Using backward\(\) with create_graph=True"


class Driver:
    """Runs ``backward``/``grad`` with one driver: ``ae.sync`` or ``anyio.run``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return anyio.run(functools.partial(fn, *args, **kwargs), backend=self.kind)

    def backward(self, *args: Any, **kwargs: Any) -> None:
        if self.kind == "sync":
            ae.sync.backward(*args, **kwargs)
        else:
            self._run(ae.backward, *args, **kwargs)

    def grad(self, *args: Any, **kwargs: Any) -> Any:
        if self.kind == "sync":
            return ae.sync.grad(*args, **kwargs)
        return self._run(ae.grad, *args, **kwargs)


@pytest.fixture(params=["sync", "asyncio", "trio"])
def drv(request: pytest.FixtureRequest) -> Driver:
    return Driver(request.param)


def npy(t: Any) -> np.ndarray:
    """A tensor of either library as a numpy array."""
    if isinstance(t, np.ndarray):
        return t
    return t.detach().numpy()  # type: ignore[no-any-return]


def same(a: Any, b: Any, rtol: float = 1e-7) -> None:
    if a is None or b is None:
        assert a is None and b is None, (a, b)
        return
    np.testing.assert_allclose(npy(a), npy(b), rtol=rtol, atol=1e-12)


def pair(arr: np.ndarray, requires_grad: bool = True) -> tuple[ae.Tensor, Any]:
    """The same leaf in aengine and in torch."""
    torch = torch_or_skip()
    return (
        ae.tensor(arr, requires_grad=requires_grad),
        torch.tensor(arr, requires_grad=requires_grad),
    )


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape)


def torch_quiet(fn: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


# ---- backward vs grad -------------------------------------------------------------------


def test_grad_and_backward_with_create_graph(drv: Driver) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = pair(rand(2, 2)), pair(rand(2, 2) + 1)
    z = x**2 + y * x + y**2
    tz = tx**2 + ty * tx + ty**2
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        drv.backward(z, ae.ones(2, 2), create_graph=True)
    torch_quiet(lambda: tz.backward(torch.ones(2, 2), create_graph=True))
    same(x.grad, tx.grad)
    same(y.grad, ty.grad)
    assert x.grad.grad_fn is not None and y.grad.grad_fn is not None
    xg, yg = x.grad.detach().numpy().copy(), y.grad.detach().numpy().copy()
    gs = 2 * x.grad + y.grad
    tgs = 2 * tx.grad + ty.grad
    (gx,) = drv.grad([gs], [x], grad_outputs=[ae.ones(2, 2)], create_graph=True)
    (tgx,) = torch.autograd.grad([tgs], [tx], grad_outputs=[torch.ones(2, 2)], create_graph=True)
    same(gx, tgx)
    same(gx, np.full((2, 2), 5.0))
    # grad() never accumulates
    np.testing.assert_array_equal(x.grad.detach().numpy(), xg)
    np.testing.assert_array_equal(y.grad.detach().numpy(), yg)


def test_grad_wrt_nonleaf_repeatedly(drv: Driver) -> None:
    torch = torch_or_skip()
    (x0, tx0), (y, ty) = pair(rand(3)), pair(rand(3))
    x, tx = x0 * 1.0, tx0 * 1.0
    for _ in range(5):
        (gx,) = drv.grad((x * y).sin().sum(), x, create_graph=True)
        (tgx,) = torch.autograd.grad((tx * ty).sin().sum(), tx, create_graph=True)
        same(gx, tgx)
        x, tx = x + 0.05 * gx, tx + 0.05 * tgx
        assert x0.grad is None and y.grad is None
    drv.backward(x, ae.ones(3))
    tx.backward(torch.ones(3))
    same(y.grad, ty.grad)
    same(x0.grad, tx0.grad)


def test_grad_at_nonleaves_prunes_below(drv: Driver) -> None:
    torch = torch_or_skip()
    x, tx = pair(rand(4, 2))
    calls: list[int] = []
    x.register_hook(lambda g: calls.append(1))
    a, b = x * 1.0, x * 3.0
    ta, tb = tx * 1.0, tx * 3.0
    go = rand(4, 2)
    ga, gb = drv.grad(a + 2 * b, [a, b], grad_outputs=ae.tensor(go), create_graph=True)
    tga, tgb = torch.autograd.grad(
        ta + 2 * tb, [ta, tb], grad_outputs=torch.tensor(go), create_graph=True
    )
    same(ga, tga)
    same(gb, tgb)
    assert calls == [] and x.grad is None


def test_unreachable_input_with_allow_unused(drv: Driver) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = pair(np.array(1.5)), pair(np.array(2.0))
    _ = y * 2  # y has an AccumulateGrad node from another use
    _t = ty * 2
    gx, gy = drv.grad(x * 2, [x, y], allow_unused=True)
    tgx, tgy = torch.autograd.grad(tx * 2, [tx, ty], allow_unused=True)
    same(gx, tgx)
    assert gy is None and tgy is None
    z = ae.tensor(1.0, requires_grad=True)  # never used: no accumulator at all
    assert drv.grad(x * 2, [x, z], allow_unused=True)[1] is None
    with pytest.raises(ae.AutogradError, match="Set allow_unused=True"):
        drv.grad(x * 2, [x, y])
    del _, _t


def test_unreachable_branches_never_run(drv: Driver) -> None:
    x0, y, z = (ae.tensor(1.0, requires_grad=True) for _ in range(3))
    never = boom(x0 * 2)  # its backward raises: it must not run
    assert drv.grad(never, (y,), allow_unused=True) == (None,)
    gy, gz = drv.grad(boom(x0 * 2) + z, (y, z), allow_unused=True)
    assert gy is None and gz.item() == 1.0
    drv.backward(boom(x0 * 2) + z * 0, inputs=(y,))  # backward implies allow_unused
    assert y.grad is None and x0.grad is None and z.grad is None


def test_backward_with_inputs(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    (x, tx), (y, ty) = pair(rand(2, 2)), pair(rand(2, 2))

    def f(a: Any, b: Any) -> Any:
        return (a * b + a * a).sum()

    drv.backward(f(x, y), inputs=[x, y])
    f(tx, ty).backward(inputs=[tx, ty])
    same(x.grad, tx.grad)
    same(y.grad, ty.grad)
    y_before = y.grad.numpy().copy()
    drv.backward(f(x, y), inputs=[x])
    f(tx, ty).backward(inputs=[tx])
    same(x.grad, tx.grad)
    np.testing.assert_array_equal(y.grad.numpy(), y_before)
    drv.backward(f(x, y), inputs=y)  # a single tensor is accepted
    f(tx, ty).backward(inputs=ty)
    same(y.grad, ty.grad)


def test_backward_with_nonleaf_and_scalar_inputs(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    (x, tx), (y, ty), (u, tu) = pair(rand(3)), pair(rand(3)), pair(rand(3))
    xn, txn = x * 2, tx * 2
    out, tout = (xn * xn + xn * y).sum(), (txn * txn + txn * ty).sum()
    drv.backward(out, inputs=[xn, y, u])
    tout.backward(inputs=[txn, ty, tu])
    same(xn.grad, txn.grad)
    same(y.grad, ty.grad)
    assert x.grad is None and u.grad is None and tu.grad is None
    s, ts = pair(np.array(3.0))
    drv.backward(s**2, inputs=s)
    (ts**2).backward(inputs=ts)
    same(s.grad, ts.grad)


def test_grad_with_materialize_grads(drv: Driver) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = pair(np.array(0.5)), pair(np.array(1.5))
    out, tout = x * x, tx * tx
    gx, gy = drv.grad(out, [x, y], materialize_grads=True)
    tgx, tgy = torch.autograd.grad(tout, [tx, ty], materialize_grads=True)
    same(gx, tgx)
    same(gy, tgy)
    assert not gy.requires_grad and not tgy.requires_grad
    # under create_graph the materialized zeros require grad, as in torch
    _, gy = drv.grad(x * x, [x, y], materialize_grads=True, create_graph=True)
    _, tgy = torch.autograd.grad(tx * tx, [tx, ty], materialize_grads=True, create_graph=True)
    assert gy.requires_grad and tgy.requires_grad
    # through higher derivatives: d2(y*x)/dy2 == 0
    (g1,) = drv.grad(y * x, y, create_graph=True)
    (g2,) = drv.grad(g1, y, materialize_grads=True)
    (tg1,) = torch.autograd.grad(ty * tx, ty, create_graph=True)
    (tg2,) = torch.autograd.grad(tg1, ty, materialize_grads=True)
    same(g2, tg2)


def test_sharded_grad_then_multi_root_backward(drv: Driver) -> None:
    torch = torch_or_skip()
    n = 4
    arrs = [rand(3) + i for i in range(n)]
    leaves = [ae.tensor(a, requires_grad=True) for a in arrs]
    tleaves = [torch.tensor(a, requires_grad=True) for a in arrs]
    inter = [li * i + li * li for i, li in enumerate(leaves)]
    tinter = [li * i + li * li for i, li in enumerate(tleaves)]
    loss = sum(i * inter[i] for i in range(n)).sum()  # type: ignore[union-attr]
    tloss = sum(i * tinter[i] for i in range(n)).sum()  # type: ignore[union-attr]
    d_inter = []
    for lo in range(0, n, 2):
        batch = inter[lo : lo + 2]
        d_inter.extend(drv.grad(loss, batch))  # nothing saved above: no retain needed
        tb = torch.autograd.grad(tloss, tinter[lo : lo + 2], retain_graph=True)
        for g, tg in zip(d_inter[-2:], tb):
            same(g, tg)
    drv.backward(inter, d_inter)
    torch.autograd.backward(tinter, [torch.tensor(g.numpy()) for g in d_inter])
    for i, (li, tli, a) in enumerate(zip(leaves, tleaves, arrs)):
        same(li.grad, tli.grad)
        np.testing.assert_allclose(li.grad.numpy(), i * (i + 2 * a), rtol=1e-12)


def test_duplicate_roots_accumulate(drv: Driver) -> None:
    torch = torch_or_skip()
    (a, ta), (b, tb) = pair(rand(3)), pair(rand(3))
    g = rand(3)
    x, tx = a * b, ta * tb
    drv.backward([x, x], [ae.tensor(g), ae.tensor(g)])
    torch.autograd.backward([tx, tx], [torch.tensor(g), torch.tensor(g)])
    same(a.grad, ta.grad)
    same(b.grad, tb.grad)
    np.testing.assert_allclose(a.grad.numpy(), 2 * b.detach().numpy() * g)


def test_multi_root_shared_subexpression(drv: Driver) -> None:
    torch = torch_or_skip()
    (q, tq), (w, tw) = pair(rand(2)), pair(rand(2))
    gz, gc = rand(2), rand(2)

    def f(q: Any, w: Any) -> tuple[Any, Any]:
        q2 = q * 2
        return q2 * w, q2 + w

    z, c = f(q, w)
    tz, tc = f(tq, tw)
    drv.backward([z, c], [ae.tensor(gz), ae.tensor(gc)])
    torch.autograd.backward([tz, tc], [torch.tensor(gz), torch.tensor(gc)])
    same(q.grad, tq.grad)
    same(w.grad, tw.grad)


def test_dependent_roots(drv: Driver) -> None:
    torch = torch_or_skip()
    x, tx = pair(rand(3))
    gy, gz = rand(3), rand(3)
    y, ty = x**2, tx**2
    z, tz = y**3, ty**3
    drv.backward([y, z], [ae.tensor(gy), ae.tensor(gz)])
    torch.autograd.backward([ty, tz], [torch.tensor(gy), torch.tensor(gz)])
    same(x.grad, tx.grad)
    xa = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * xa * gy + 6 * xa**5 * gz)


# ---- retain_graph and freed graphs ------------------------------------------------------


def test_backward_twice_raises_lazily(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    b, tb = pair(rand(3))
    c, tc = (b * b).sum(), (tb * tb).sum()
    drv.backward(c)
    tc.backward()
    with pytest.raises(ae.AutogradError, match="Specify retain_graph=True") as info:
        drv.backward(c)
    with pytest.raises(RuntimeError, match="Specify retain_graph=True") as tinfo:
        tc.backward()
    assert str(info.value) == str(tinfo.value).replace("autograd.grad()", "autograd.grad()")
    same(b.grad, tb.grad)  # the failed call left .grad as it was


def test_retain_graph_and_graph_that_saves_nothing(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    b, tb = pair(rand(3))
    c, tc = (b * b).sum(), (tb * tb).sum()
    drv.backward(c, retain_graph=True)
    drv.backward(c)
    tc.backward(retain_graph=True)
    tc.backward()
    same(b.grad, tb.grad)
    # a graph that saves nothing can be backwarded twice without retain_graph
    d, td = (b + 1).sum(), (tb + 1).sum()
    drv.backward(d)
    drv.backward(d)
    td.backward()
    td.backward()
    same(b.grad, tb.grad)


def test_saved_tensors_after_free_raise(drv: Driver) -> None:
    b = ae.tensor(rand(3), requires_grad=True)
    c = b * b
    assert len(c.grad_fn.saved_tensors) == 2
    drv.backward(c.sum())
    with pytest.raises(ae.AutogradError, match="after they have already been freed"):
        c.grad_fn.saved_tensors


def test_retain_graph_defaults_to_create_graph(drv: Driver) -> None:
    torch = torch_or_skip()
    x, tx = pair(rand(3))
    y, ty = (x * x * x).sum(), (tx * tx * tx).sum()
    (g1,) = drv.grad(y, x, create_graph=True)
    (g2,) = drv.grad(y, x)  # still possible: create_graph retained the graph
    (tg1,) = torch.autograd.grad(ty, tx, create_graph=True)
    (tg2,) = torch.autograd.grad(ty, tx)
    same(g1, tg1)
    same(g2, tg2)
    with pytest.raises(ae.AutogradError, match="retain_graph"):
        drv.grad(y, x)


# ---- create_graph, double backward ------------------------------------------------------


def test_hessian_vector_product_into_grad(drv: Driver) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = pair(rand(2, 2)), pair(rand(2, 2))
    z, tz = x**2 + y * x + y**2, tx**2 + ty * tx + ty**2
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        drv.backward(z, ae.ones(2, 2), create_graph=True)
    torch_quiet(lambda: tz.backward(torch.ones(2, 2), create_graph=True))
    drv.backward(2 * x.grad + y.grad, ae.ones(2, 2))
    (2 * tx.grad + ty.grad).backward(torch.ones(2, 2))
    same(x.grad, tx.grad)
    same(y.grad, ty.grad)


def test_accumulation_in_place_unless_create_graph(drv: Driver) -> None:
    torch = torch_or_skip()
    x, tx = pair(rand(5))
    go = rand(5)
    y, ty = x + 2, tx + 2
    drv.backward(y, ae.tensor(go), retain_graph=True)
    ty.backward(torch.tensor(go), retain_graph=True)
    g, tg = x.grad, tx.grad
    drv.backward(y, ae.tensor(go), retain_graph=True)
    ty.backward(torch.tensor(go), retain_graph=True)
    assert x.grad is g and tx.grad is tg  # in place
    same(g, tg)
    np.testing.assert_allclose(g.numpy(), 2 * go)
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        drv.backward(y, ae.tensor(go), create_graph=True)
    torch_quiet(lambda: ty.backward(torch.tensor(go), create_graph=True))
    assert x.grad is not g and tx.grad is not tg  # out of place
    same(g, tg)
    same(x.grad, tx.grad)
    # a pre-set .grad keeps its identity without create_graph
    p, tp = pair(rand(4))
    p.grad, tp.grad = ae.zeros(4, dtype=ae.float64), torch.zeros(4, dtype=torch.float64)
    pg, tpg = p.grad, tp.grad
    drv.backward(p, ae.tensor(go[:4]))
    tp.backward(torch.tensor(go[:4]))
    assert p.grad is pg and tp.grad is tpg
    same(p.grad, tp.grad)


def test_plain_backward_adds_in_place_into_a_grad_with_graph(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    x, tx = pair(rand(3))
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        drv.backward((x**3).sum(), create_graph=True)
    torch_quiet(lambda: (tx**3).sum().backward(create_graph=True))
    g, tg = x.grad, tx.grad
    assert g.grad_fn is not None and tg.grad_fn is not None
    version, tversion = g._version, tg._version
    drv.backward(x.grad.sum())  # HVP accumulated into the same .grad object
    tx.grad.sum().backward()
    assert x.grad is g and tx.grad is tg
    assert g._version == version + 1 and tg._version == tversion + 1
    assert g.grad_fn is not None and tg.grad_fn is not None
    same(x.grad, tx.grad)


def test_create_graph_warning_only_for_backward(drv: Driver) -> None:
    torch = torch_or_skip()
    x = ae.tensor(rand(2), requires_grad=True)
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        drv.backward((x * x).sum(), create_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drv.grad((x * x).sum(), x, create_graph=True)

    # as torch (where it is a warn-once): every backward(create_graph=True)
    # warns, with inputs= too and whatever reaches the leaves
    torch.set_warn_always(True)

    def cases(lib: Any, backward: Callable[..., None]) -> list[int]:
        counts = []
        for run in (
            lambda v: backward((v * v).sum(), create_graph=True, inputs=[v]),
            lambda v: backward((v * 2.0).sum(), create_graph=True),
            lambda v: backward((v * v).sum(), create_graph=True),
        ):
            v = lib.tensor(rand(2), requires_grad=True)
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                run(v)
            counts.append(sum("create_graph=True" in str(w.message) for w in rec))
        return counts

    try:
        assert cases(ae, drv.backward) == cases(torch, torch.autograd.backward) == [1, 1, 1]
    finally:
        torch.set_warn_always(False)


def test_grad_mode_inside_nodes_is_create_graph(drv: Driver) -> None:
    torch = torch_or_skip()
    for create_graph in (False, True):
        seen: list[bool] = []
        tseen: list[bool] = []
        x, tx = pair(rand(2))
        y, ty = x * 2, tx * 2
        y.register_hook(lambda g: seen.append(ae.is_grad_enabled()))
        ty.register_hook(lambda g: tseen.append(torch.is_grad_enabled()))
        with ae.no_grad() if create_graph else ae.enable_grad():
            outer = ae.is_grad_enabled()
            if create_graph:
                with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
                    with ae.enable_grad():
                        loss = y.sum()
                    drv.backward(loss, create_graph=True)
            else:
                drv.backward(y.sum())
            assert ae.is_grad_enabled() == outer  # restored
        torch_quiet(lambda: ty.sum().backward(create_graph=create_graph))
        assert seen == tseen == [create_graph]


def test_repeated_grad_of_grad_is_stable(drv: Driver) -> None:
    torch = torch_or_skip()
    x, tx = pair(rand(2, 3))
    y, ty = (x**3).sum(dim=1), (tx**3).sum(dim=1)
    results = []
    for _ in range(2):
        (gy,) = drv.grad(y.sum(), x, create_graph=True)
        (g2,) = drv.grad(gy.sum(), x, retain_graph=True)
        results.append(g2.numpy())
    (tgy,) = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    (tg2,) = torch.autograd.grad(tgy.sum(), tx, retain_graph=True)
    np.testing.assert_allclose(results[0], results[1])
    np.testing.assert_allclose(results[0], tg2.numpy())


# ---- accumulation, retain_grad, InputBuffer, order --------------------------------------


def test_retain_grad_of_nonleaf_across_backwards(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    inp, tinp = pair(rand(3))
    h1, th1 = inp * 3, tinp * 3
    out, tout = (h1 * h1).sum(), (th1 * th1).sum()
    h1.retain_grad()
    h1.retain_grad()
    th1.retain_grad()
    inp.retain_grad()  # no-op on a leaf
    drv.backward(out, retain_graph=True)
    tout.backward(retain_graph=True)
    same(h1.grad, th1.grad)
    drv.backward(out, retain_graph=True)
    tout.backward(retain_graph=True)
    same(h1.grad, th1.grad)
    np.testing.assert_allclose(h1.grad.numpy(), 4 * h1.detach().numpy())
    inp.grad = None
    tinp.grad = None
    drv.backward(out)
    tout.backward()
    same(inp.grad, tinp.grad)
    np.testing.assert_allclose(inp.grad.numpy(), 18 * inp.detach().numpy())


def test_nonleaf_grad_access_warns() -> None:
    torch = torch_or_skip()
    for lib, mk in ((ae, lambda: ae.ones(2, requires_grad=True)),
                    (torch, lambda: torch.ones(2, requires_grad=True))):  # fmt: skip
        leaf = mk()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert leaf.grad is None  # leaf: no warning
        nonleaf = leaf * 2
        with pytest.warns(UserWarning, match="not a leaf Tensor is being accessed") as rec:
            assert nonleaf.grad is None
        assert len(rec) == 1
        nonleaf.retain_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert nonleaf.grad is None  # retained: no more warning
    del lib


def test_hook_of_an_output_that_got_no_gradient_sees_none(drv: Driver) -> None:
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        x = lib.tensor(rand(4), requires_grad=True)
        xs = x.unbind()
        seen: list[Any] = []
        xs[0].register_hook(lambda g, seen=seen: seen.append(None if g is None else g.item()))
        for i in range(3):
            if lib is ae:
                drv.backward(xs[i], retain_graph=True)
            else:
                xs[i].backward(retain_graph=True)
        assert xs[0].retains_grad is False
        res.append((seen, x.grad.detach().numpy().tolist()))
    assert res[0] == res[1]
    assert res[0][0] == [1.0, None, None]


def test_leaf_and_nonleaf_hooks_see_none_from_a_function(drv: Driver) -> None:
    torch = torch_or_skip()

    def run(lib: Any, base: type) -> list[Any]:
        class F(base):  # type: ignore[misc, valid-type]
            @staticmethod
            def forward(ctx: Any, x: Any, y: Any) -> Any:
                return x * y

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return None, g

        x = lib.ones(2, requires_grad=True)
        y = lib.ones(2, requires_grad=True)
        seen: list[Any] = []
        x.register_hook(lambda g: seen.append(("x", g)))
        z = x * 1
        z.register_hook(lambda g: seen.append(("z", g)))
        loss = F.apply(z, y).sum()
        if lib is ae:
            drv.backward(loss)
        else:
            loss.backward()
        return [seen, x.grad]

    assert (
        run(ae, ae.Function)
        == run(torch, torch.autograd.Function)
        == [
            [("z", None), ("x", None)],
            None,
        ]
    )


def test_retain_grad_follows_inplace_ops(drv: Driver) -> None:
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        leaf = lib.tensor(rand(3), requires_grad=True)
        a = leaf.clone()
        a.retain_grad()
        a.mul_(2)
        a.mul_(3)
        if lib is ae:
            drv.backward(a.sum())
        else:
            a.sum().backward()
        res.append((a.grad.numpy().tolist(), leaf.grad.numpy().tolist()))
    assert res[0] == res[1] == ([1.0] * 3, [6.0] * 3)


def test_grad_read_from_threads_is_the_same_object(drv: Driver) -> None:
    import threading

    x = ae.tensor(rand(3), requires_grad=True)
    drv.backward((x * x).sum())
    seen: list[Any] = []
    barrier = threading.Barrier(4)

    def read() -> None:
        barrier.wait()
        for _ in range(10):
            seen.append(x.grad)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 40 and all(g is x.grad for g in seen)


def test_shared_grads_are_not_mutated(drv: Driver) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = pair(np.ones((5, 5))), pair(np.ones((5, 5)))

    def f(x: Any, y: Any) -> Any:
        a, b, c = x + 2, y + 2, x + 2
        add1 = a + b
        add2 = add1 + c
        for _ in range(4):
            a, b, c = a * 2, b * 2, c * 2
        return add2 + (a + b + c)

    drv.backward(f(x, y), ae.ones(5, 5))
    f(tx, ty).backward(torch.ones(5, 5))
    same(x.grad, tx.grad)
    same(y.grad, ty.grad)
    np.testing.assert_array_equal(x.grad.numpy(), np.full((5, 5), 34.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full((5, 5), 17.0))


def test_user_grad_outputs_not_modified(drv: Driver) -> None:
    x = ae.tensor(rand(3), requires_grad=True)
    g1, g2 = ae.tensor(rand(3)), ae.tensor(rand(3) + 1)
    c1, c2 = g1.numpy().copy(), g2.numpy().copy()
    out1, out2 = x * 1, x * 1  # gradients pass through unchanged and meet at x
    drv.backward((out1, out2), (g1, g2))
    np.testing.assert_array_equal(g1.numpy(), c1)
    np.testing.assert_array_equal(g2.numpy(), c2)
    np.testing.assert_allclose(x.grad.numpy(), c1 + c2)
    drv.backward((x + 0, x + 0), (g1, g2))
    np.testing.assert_array_equal(g1.numpy(), c1)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (c1 + c2))


def _order(lib: Any, x: Any, log: list[str], backward: Callable[[Any], None]) -> None:
    """A diamond with a chain on one side; tensor hooks log the order grads arrive."""
    a = x.sin()
    b = x.cos()
    c = a * 2
    d = (b + 1) * 3
    e = c.exp()
    out = (e * d).sum()
    for name, t in (("a", a), ("b", b), ("c", c), ("d", d), ("e", e), ("x", x)):
        t.register_hook(functools.partial(lambda n, g: log.append(n), name))
    backward(out)


def test_execution_order_matches_torch(drv: Driver) -> None:
    torch = torch_or_skip()
    log: list[str] = []
    tlog: list[str] = []
    _order(ae, ae.tensor(rand(3), requires_grad=True), log, drv.backward)
    _order(torch, torch.tensor(rand(3), requires_grad=True), tlog, lambda o: o.backward())
    assert log == tlog


def test_node_prehook_order_matches_torch(drv: Driver) -> None:
    torch = torch_or_skip()

    def run(lib: Any, x: Any, backward: Callable[[Any], None]) -> list[str]:
        names: list[str] = []
        y = (x.sin() * x.cos()).exp() + x
        nodes, stack = [], [y.grad_fn]
        while stack:
            n = stack.pop()
            if n is None or n in nodes:
                continue
            nodes.append(n)
            stack.extend(e[0] for e in n.next_functions)
        for n in nodes:
            name = n.name().replace("torch::autograd::", "")
            n.register_prehook(functools.partial(lambda nm, g: names.append(nm), name))
        backward(y.sum())
        return names

    got = run(ae, ae.tensor(rand(3), requires_grad=True), drv.backward)
    want = run(torch, torch.tensor(rand(3), requires_grad=True), lambda o: o.backward())
    assert got == want


def _hooked(log: list[str], **named: Any) -> None:
    for name, t in named.items():
        t.register_hook(functools.partial(lambda n, g: log.append(n), name))


def _case_chain(lib: Any, a: Any, b: Any, log: list[str]) -> tuple[Any, ...]:
    c = a.exp()
    d = c.sin()
    e = d * 1.5
    _hooked(log, a=a, c=c, d=d, e=e)
    return (e.sum(),), None


def _case_mul_of_two_branches(lib: Any, a: Any, b: Any, log: list[str]) -> tuple[Any, ...]:
    s, c = b.sin(), a.cos()
    out = s * c
    _hooked(log, a=a, b=b, s=s, c=c, out=out)
    return (out.sum(),), None


def _case_leaf_two_consumers(lib: Any, a: Any, b: Any, log: list[str]) -> tuple[Any, ...]:
    s, c = a.sin(), a.cos()
    t = c * b
    _hooked(log, a=a, b=b, s=s, c=c, t=t)
    return ((s + t).sum(),), None


def _case_three_roots_grad(lib: Any, a: Any, b: Any, log: list[str]) -> tuple[Any, ...]:
    out = a.cos()
    out2 = a.sin() * b
    out3 = out.cos()
    _hooked(log, a=a, b=b, out=out, out2=out2, out3=out3)
    return (out.sum(), out3.sum(), out2.sum()), (a,)


def _case_two_inputs_one_path(lib: Any, a: Any, b: Any, log: list[str]) -> tuple[Any, ...]:
    c = a * b
    d = c.exp()
    e = d.sin()
    _hooked(log, a=a, b=b, c=c, d=d, e=e)
    return (e.sum(),), (c, a)


def _case_pruned_subgraph(lib: Any, a: Any, b: Any, log: list[str]) -> tuple[Any, ...]:
    c = b.exp() * 2  # only reaches b: pruned for grad(inputs=(a,))
    d = a.sin()
    out = (c * d).sum()
    _hooked(log, a=a, b=b, c=c, d=d)
    return (out,), (a,)


ORDER_CASES = [
    _case_chain,
    _case_mul_of_two_branches,
    _case_leaf_two_consumers,
    _case_three_roots_grad,
    _case_two_inputs_one_path,
    _case_pruned_subgraph,
]


@pytest.mark.parametrize("case", ORDER_CASES, ids=lambda c: c.__name__[6:])
def test_hook_order_matches_torch(drv: Driver, case: Callable[..., Any]) -> None:
    torch = torch_or_skip()
    logs = []
    results = []
    for lib in (ae, torch):
        log: list[str] = []
        a = lib.tensor(rand(3), requires_grad=True)
        b = lib.tensor(rand(3) + 1, requires_grad=True)
        roots, inputs = case(lib, a, b, log)
        if lib is ae:
            if inputs is None:
                drv.backward(list(roots))
                res = [a.grad, b.grad]
            else:
                res = list(drv.grad(list(roots), list(inputs)))
        else:
            if inputs is None:
                torch.autograd.backward(list(roots))
                res = [a.grad, b.grad]
            else:
                res = list(torch.autograd.grad(list(roots), list(inputs)))
        logs.append(log)
        results.append(res)
    assert logs[0] == logs[1]
    for g, tg in zip(*results):
        same(g, tg)


def test_next_functions_match_torch() -> None:
    torch = torch_or_skip()
    x, y = ae.ones(2, requires_grad=True), ae.ones(2, requires_grad=True)
    tx, ty = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    nf = (x + y).grad_fn.next_functions
    tnf = (tx + ty).grad_fn.next_functions
    assert [(type(n).__name__, i) for n, i in nf] == [(type(n).__name__, i) for n, i in tnf]
    assert nf[0][0].variable is x and nf[1][0].variable is y
    # a constant tensor operand has no edge: (None, 0)
    assert (x + ae.ones(2)).grad_fn.next_functions[1] == (None, 0)
    assert (tx + torch.ones(2)).grad_fn.next_functions[1] == (None, 0)


def test_a_node_is_the_fixed_list_of_its_next_nodes() -> None:
    """NOTE [A node is the list of its next nodes]: a list in layout only."""
    x = ae.ones(2, requires_grad=True)
    y = x * 2
    node, acc = (y + y.detach()).grad_fn, x._grad_accumulator()
    assert list(node) == [y.grad_fn, None] and len(node) == 2 and node[0] is y.grad_fn
    assert node.next_nodes == (y.grad_fn, None)
    assert node.next_functions == ((y.grad_fn, 0), (None, 0))
    # identity, not contents: equal edges do not make equal nodes
    twin = (y + y.detach()).grad_fn
    assert list(twin) == list(node) and twin != node and not (twin == node)
    assert len({node, twin, node}) == 2 and {node: 1}[node] == 1
    assert bool(acc) and len(acc) == 0  # a node without edges is still true
    with pytest.raises(TypeError):
        _ = node < twin  # no order, as any object
    for change in (
        lambda: node.append(None),
        lambda: node.extend([None]),
        lambda: node.pop(),
        lambda: node.clear(),
        lambda: node.__setitem__(0, None),
        lambda: node.__delitem__(0),
        lambda: node.__iadd__([None]),
    ):
        with pytest.raises(TypeError, match="AddBackward0 are fixed"):
            change()
    assert list(node) == [y.grad_fn, None]  # unchanged
    ae.sync.backward((y + y.detach()).sum())  # a graph still runs
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_accumulation_across_calls_and_grad_reset(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    x, tx = pair(rand(3))
    for _ in range(3):
        drv.backward((x * x).sum())
        (tx * tx).sum().backward()
    same(x.grad, tx.grad)
    x.grad = None
    tx.grad = None
    drv.backward(x.sum())
    tx.sum().backward()
    same(x.grad, tx.grad)


def test_zero_dim_and_empty_tensors(drv: Driver) -> None:
    torch_or_skip()  # pair() needs torch
    s, ts = pair(np.array(2.0))
    drv.backward(s * s * s)
    (ts * ts * ts).backward()
    same(s.grad, ts.grad)
    assert s.grad.shape == ()
    e, te = pair(np.zeros((0, 3)))
    drv.backward((e * 2).sum())
    (te * 2).sum().backward()
    assert e.grad.shape == tuple(te.grad.shape) == (0, 3)
    (ge,) = drv.grad((e * e).sum(), e)
    assert ge.shape == (0, 3)


def test_int_and_float32_dtypes_of_grads(drv: Driver) -> None:
    torch = torch_or_skip()
    a = rand(3).astype(np.float32)
    x, tx = ae.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    drv.backward((x * 2.5).sum())
    (tx * 2.5).sum().backward()
    assert x.grad.dtype == np.float32
    same(x.grad, tx.grad)


# ---- helpers ------------------------------------------------------------------------


def _boom_rule(F: Any, g: Any, saved: Any, node: Any) -> Any:
    raise ValueError("something")


def boom(x: ae.Tensor) -> ae.Tensor:
    """Identity whose backward raises ``ValueError('something')``."""
    from aengine.ops._core import record

    return record(_BOOM, x.data.copy(), x.device, (x,))


def _make_boom() -> Any:
    from aengine.ops._core import node_class

    return node_class("BoomBackward", _boom_rule)


_BOOM = _make_boom()
