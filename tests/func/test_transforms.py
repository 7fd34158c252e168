"""ae.func against torch.func (torch 2.13, the oracle), from the same numpy arrays.

Cases follow functorch's eager-transform tests (grad: primitive, composite,
kwargs, argnums, has_aux, nested; vjp; jvp; jacrev; jacfwd; hessian;
functional_call) and the async flavour of each transform.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

# torch's forward-mode transforms import code that warns on this torch
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)
sf = ae.sync.func
RNG = np.random.default_rng(0)


def arr(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def close(a: Any, b: Any, tol: float = 1e-9) -> None:
    """aengine result ``a`` (nested) equals torch result ``b`` (nested)."""
    if isinstance(a, dict):
        assert set(a) == set(b)
        for k in a:
            close(a[k], b[k], tol)
        return
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            close(x, y, tol)
        return
    assert isinstance(a, ae.Tensor), type(a)
    bn = b.detach().numpy()
    assert tuple(a.shape) == tuple(bn.shape)
    np.testing.assert_allclose(a.detach().numpy(), bn, rtol=tol, atol=tol)


def both(x: np.ndarray) -> tuple[Any, Any]:
    torch = torch_or_skip()
    return ae.tensor(x), torch.tensor(x)


# -- grad ----------------------------------------------------------------------------------------
def test_grad_primitive() -> None:
    torch = torch_or_skip()
    a, t = both(arr())
    close(sf.grad(ae.sin)(a), torch.func.grad(torch.sin)(t))


def test_grad_composite_simple() -> None:
    torch = torch_or_skip()
    a, t = both(arr(2, 3, 4))
    close(sf.grad(lambda x: x.flatten().sum())(a), torch.func.grad(lambda x: x.flatten().sum())(t))


def test_grad_fn_with_kwargs() -> None:
    torch = torch_or_skip()
    (a, t), (b, u) = both(arr(3)), both(arr(3))
    close(
        sf.grad(lambda x, y: (x * y).sum())(a, y=b),
        torch.func.grad(lambda x, y: (x * y).sum())(t, y=u),
    )


def test_grad_composite_complicated() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(3)), both(arr(3, 5))

    def f(lib: Any) -> Any:
        return lambda x, y: (x @ y).sin().sum()

    close(sf.grad(f(ae))(x, y), torch.func.grad(f(torch))(tx, ty))


def test_grad_composite_two_ops() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(3)), both(arr(3))
    close(
        sf.grad(lambda x, y: (x * y).sum())(x, y),
        torch.func.grad(lambda x, y: (x * y).sum())(tx, ty),
    )


def test_grad_argnums_and_pytrees() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(3)), both(arr(3))

    def f(d: Any, z: Any) -> Any:
        return (d["a"] * d["b"][0] * z).sum()

    got = sf.grad(f, argnums=(0, 1))({"a": x, "b": [y]}, x)
    want = torch.func.grad(f, argnums=(0, 1))({"a": tx, "b": [ty]}, tx)
    close(got, want)
    close(
        sf.grad(f, argnums=-1)({"a": x, "b": [y]}, y),
        torch.func.grad(f, argnums=-1)({"a": tx, "b": [ty]}, ty),
    )


def test_grad_has_aux_and_value() -> None:
    torch = torch_or_skip()
    a, t = both(arr(4))

    def f(lib: Any) -> Any:
        return lambda x: ((x**2).sum(), {"m": x.mean()})

    g, aux = sf.grad(f(ae), has_aux=True)(a)
    tg, taux = torch.func.grad(f(torch), has_aux=True)(t)
    close(g, tg)
    close(aux, taux)
    (g, (v, aux)) = sf.grad_and_value(f(ae), has_aux=True)(a)
    (tg, (tv, taux)) = torch.func.grad_and_value(f(torch), has_aux=True)(t)
    close((g, v, aux["m"]), (tg, tv, taux["m"]))
    assert not v.requires_grad and not g.requires_grad


def test_nested_grad() -> None:
    torch = torch_or_skip()
    a, t = both(arr())
    close(sf.grad(sf.grad(ae.sin))(a), torch.func.grad(torch.func.grad(torch.sin))(t))
    close(
        sf.grad(sf.grad(sf.grad(lambda x: x**4)))(a),
        torch.func.grad(torch.func.grad(torch.func.grad(lambda x: x**4)))(t),
    )


def test_grad_of_closure_over_outer_input() -> None:
    """The inner grad's result depends on the outer input (no confusion of levels)."""
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr()), both(arr())

    def outer(lib: Any, G: Any) -> Any:
        return lambda x, y: G(lambda y: x * y**2)(y) * x

    close(sf.grad(outer(ae, sf.grad))(x, y), torch.func.grad(outer(torch, torch.func.grad))(tx, ty))


def test_grad_unused_input_gives_zeros() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(2)), both(arr(2))
    got = sf.grad(lambda x, y: (y * 2).sum(), argnums=(0, 1))(x, y)
    want = torch.func.grad(lambda x, y: (y * 2).sum(), argnums=(0, 1))(tx, ty)
    close(got, want)


def test_grad_of_tensor_that_requires_grad_stays_differentiable() -> None:
    torch = torch_or_skip()
    data = arr(3)
    x = ae.tensor(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    g = sf.grad(lambda x: (x**3).sum())(x)
    tg = torch.func.grad(lambda x: (x**3).sum())(tx)
    (gg,) = ae.sync.grad(g.sum(), [x])
    (tgg,) = torch.autograd.grad(tg.sum(), [tx])
    close(gg, tgg)


def test_grad_errors_match_torch() -> None:
    torch = torch_or_skip()
    a, t = both(arr(3))
    with pytest.raises(
        RuntimeError,
        match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims",
    ):
        sf.grad(lambda x: x)(a)
    with pytest.raises(RuntimeError):
        torch.func.grad(lambda x: x)(t)
    with pytest.raises(RuntimeError, match="only 1 positional inputs"):
        sf.grad(lambda x: x.sum(), argnums=1)(a)
    with pytest.raises(RuntimeError):
        torch.func.grad(lambda x: x.sum(), argnums=1)(t)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        sf.grad(lambda x: x.sum(), argnums=1.0)(a)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        sf.grad(lambda x: x.sum(), has_aux=True)(a)
    with pytest.raises(RuntimeError):
        torch.func.grad(lambda x: x.sum(), has_aux=True)(t)
    with pytest.raises(RuntimeError, match="to return a Tensor"):
        sf.grad(lambda x: 1.0)(a)


# -- vjp / jvp -------------------------------------------------------------------------------------
def test_vjp() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty), (c, tc) = both(arr(3)), both(arr(3)), both(arr(3))
    out, fn = sf.vjp(lambda x, y: x.sin() * y, x, y)
    tout, tfn = torch.func.vjp(lambda x, y: x.sin() * y, tx, ty)
    close(out, tout)
    close(fn(c), tfn(tc))
    close(fn(c), tfn(tc))  # vjp_fn may be called again


def test_vjp_pytree_and_aux() -> None:
    torch = torch_or_skip()
    (x, tx), (c, tc) = both(arr(2, 3)), both(arr(3))

    def f(lib: Any) -> Any:
        return lambda d: ((d["w"].cos().sum(0), d["w"] * 2), d["w"].sum())

    out, fn, aux = sf.vjp(f(ae), {"w": x}, has_aux=True)
    tout, tfn, taux = torch.func.vjp(f(torch), {"w": tx}, has_aux=True)
    close(out, tout)
    close(aux, taux)
    close(
        fn((c, ae.ones(2, 3, dtype=ae.float64))), tfn((tc, torch.ones(2, 3, dtype=torch.float64)))
    )


def test_vjp_wrong_cotangent_shape() -> None:
    out, fn = sf.vjp(lambda x: x * 2, ae.ones(3))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn(ae.ones(2))


def test_jvp() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty), (v, tv), (w, tw) = both(arr(3)), both(arr(3)), both(arr(3)), both(arr(3))
    got = sf.jvp(lambda x, y: (x.exp() * y, x.sum()), (x, y), (v, w))
    want = torch.func.jvp(lambda x, y: (x.exp() * y, x.sum()), (tx, ty), (tv, tw))
    close(got, want)


def test_jvp_errors() -> None:
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        sf.jvp(ae.sin, ae.ones(2), (ae.ones(2),))
    with pytest.raises(RuntimeError, match="same shape"):
        sf.jvp(ae.sin, (ae.ones(2),), (ae.ones(3),))


# -- jacobians and hessians ---------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
def test_jacobian_simple(which: str) -> None:
    torch = torch_or_skip()
    a, t = both(arr(3))
    close(getattr(sf, which)(ae.sin)(a), getattr(torch.func, which)(torch.sin)(t))


@pytest.mark.parametrize("which", ["jacrev", "jacfwd"])
def test_jacobian_argnums_and_outputs(which: str) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(2, 3)), both(arr(3))

    def f(x: Any, y: Any) -> Any:
        return (x * y).sum(1), (x @ y).exp()

    got = getattr(sf, which)(f, argnums=(0, 1))(x, y)
    want = getattr(torch.func, which)(f, argnums=(0, 1))(tx, ty)
    close(got, want)


def test_jacrev_has_aux() -> None:
    torch = torch_or_skip()
    a, t = both(arr(3))
    got, aux = sf.jacrev(lambda x: (x.sin(), x.cos()), has_aux=True)(a)
    want, taux = torch.func.jacrev(lambda x: (x.sin(), x.cos()), has_aux=True)(t)
    close((got, aux), (want, taux))


def test_hessian() -> None:
    torch = torch_or_skip()
    a, t = both(arr(3))
    close(
        sf.hessian(lambda x: (x.sin() * x.sum()).sum())(a),
        torch.func.hessian(lambda x: (x.sin() * x.sum()).sum())(t),
    )


def test_hessian_argnums() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(2)), both(arr(2))

    def f(x: Any, y: Any) -> Any:
        return (x**2 * y.exp()).sum()

    close(sf.hessian(f, argnums=(0, 1))(x, y), torch.func.hessian(f, argnums=(0, 1))(tx, ty))


def test_jacrev_of_jacrev_equals_hessian() -> None:
    torch = torch_or_skip()
    a, t = both(arr(3))

    def f(x: Any) -> Any:
        return (x**3).sum()

    close(sf.jacrev(sf.jacrev(f))(a), torch.func.jacrev(torch.func.jacrev(f))(t))


# -- functional_call -----------------------------------------------------------------------------------
def _linear_pair() -> tuple[Any, Any]:
    torch = torch_or_skip()
    tm = torch.nn.Linear(3, 2).double()
    am = ae.nn.Linear(3, 2).double()
    am.load_state_dict({k: ae.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return am, tm


def test_functional_call_replaces_and_restores() -> None:
    torch = torch_or_skip()
    am, tm = _linear_pair()
    w, tw = both(arr(2, 3))
    x, tx = both(arr(4, 3))
    close(
        ae.func.functional_call(am, {"weight": w}, (x,)),
        torch.func.functional_call(tm, {"weight": tw}, (tx,)),
    )
    close(am.weight.detach(), tm.weight)  # the module's own weight is back


def test_functional_call_multiple_dicts_and_errors() -> None:
    torch = torch_or_skip()
    am, tm = _linear_pair()
    (w, tw), (b, tb), (x, tx) = both(arr(2, 3)), both(arr(2)), both(arr(3))
    close(
        ae.func.functional_call(am, ({"weight": w}, {"bias": b}), x),
        torch.func.functional_call(tm, ({"weight": tw}, {"bias": tb}), tx),
    )
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        ae.func.functional_call(am, ({"weight": w}, {"weight": w}), x)
    with pytest.raises(ValueError):
        torch.func.functional_call(tm, ({"weight": tw}, {"weight": tw}), tx)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bias'"):
        ae.func.functional_call(am, {"weight": w}, x, strict=True)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bias'"):
        torch.func.functional_call(tm, {"weight": tw}, tx, strict=True)


def test_functional_call_tie_weights() -> None:
    torch = torch_or_skip()

    def build(lib: Any) -> Any:
        m = lib.nn.Sequential(lib.nn.Linear(2, 2, bias=False), lib.nn.Linear(2, 2, bias=False))
        m[1].weight = m[0].weight
        return m.double()

    tm, am = build(torch), build(ae)
    am[0].weight.data = ae.tensor(tm[0].weight.detach().numpy()).data
    (w, tw), (x, tx) = both(arr(2, 2)), both(arr(2))
    close(
        ae.func.functional_call(am, {"0.weight": w}, (x,)),
        torch.func.functional_call(tm, {"0.weight": tw}, (tx,)),
    )
    close(
        ae.func.functional_call(am, {"0.weight": w}, (x,), tie_weights=False),
        torch.func.functional_call(tm, {"0.weight": tw}, (tx,), tie_weights=False),
    )


def test_grad_through_functional_call() -> None:
    torch = torch_or_skip()
    am, tm = _linear_pair()
    x, tx = both(arr(5, 3))
    p = {k: v.detach() for k, v in am.named_parameters()}
    tp = {k: v.detach() for k, v in tm.named_parameters()}

    def loss(lib: Any, m: Any) -> Any:
        return lambda p, x: lib.func.functional_call(m, p, (x,)).pow(2).mean()

    close(sf.grad(loss(ae, am))(p, x), torch.func.grad(loss(torch, tm))(tp, tx))


# -- the async flavour -----------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_async_flavour_is_awaited() -> None:
    torch = torch_or_skip()
    a, t = both(arr(3))
    g = await ae.func.grad(lambda x: (x**2).sin().sum())(a)
    close(g, torch.func.grad(lambda x: (x**2).sin().sum())(t))
    out, fn = await ae.func.vjp(ae.sin, a)
    (vj,) = await fn(ae.ones(3, dtype=ae.float64))
    close(vj, torch.func.vjp(torch.sin, t)[1](torch.ones(3, dtype=torch.float64))[0])
    h = await ae.func.hessian(lambda x: (x**3).sum())(a)
    close(h, torch.func.hessian(lambda x: (x**3).sum())(t))
    psg = await ae.func.vmap(ae.func.grad(lambda x: (x**3).sum()))(ae.tensor(arr(4, 2)))
    assert tuple(psg.shape) == (4, 2)


def test_async_flavour_outside_a_loop_names_the_twin() -> None:
    with pytest.raises(ae.AutogradError, match="ae.sync.func.grad"):
        ae.func.grad(lambda x: x.sum())(ae.ones(2))


def test_async_function_is_refused() -> None:
    async def f(x: Any) -> Any:
        return x.sum()

    with pytest.raises(TypeError, match="plain \\(sync\\) functions"):
        sf.grad(f)(ae.ones(2))
