"""Forward-mode AD (``ae.autograd.forward_ad``): PyTorch's TestAutogradForwardMode, translated.

Each test runs the same steps with torch 2.13 (the oracle) where the
behaviour is compared, from the same numpy arrays.  Departures (NOTE
[Forward-mode AD] in aengine/tensors/_dual.py; docs/forward-ad.md):
torch's per-level tensor subclasses, ``_set_fwd_grad_enabled``,
``torch.func`` nesting and the layout/storage checks have no counterpart.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import aengine as ae
import aengine.autograd.forward_ad as fwAD
from aengine.ops._forward import ForwardUnsupported
from tests.oracle import torch_or_skip


def _fw(torch: Any) -> Any:
    with warnings.catch_warnings():  # (torch's jvp decompositions warn at their import)
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._decomp.decompositions_for_jvp  # noqa: F401
    return torch.autograd.forward_ad


def _arr(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def test_forward_level_cleanup() -> None:
    # torch: test_forward_level_cleanup: the tangent is gone once the level exits
    x, t = ae.tensor(_arr(3)), ae.tensor(_arr(3, seed=1))
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, t)
        assert fwAD.unpack_dual(dual).tangent is t
    assert fwAD.unpack_dual(dual).tangent is None
    assert fwAD.unpack_dual(dual).primal is dual


def test_size_check() -> None:
    torch = torch_or_skip()
    fw = _fw(torch)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Trying to set a forward gradient that has a"):
            fwAD.make_dual(ae.ones(3), ae.ones(4))
    with fw.dual_level(), pytest.raises(RuntimeError, match="different size"):
        fw.make_dual(torch.ones(3), torch.ones(4))


def test_make_dual_errors() -> None:
    torch = torch_or_skip()
    fw = _fw(torch)
    for lib, f in ((ae, fwAD), (torch, fw)):
        with pytest.raises(RuntimeError, match="no level exists"):
            f.make_dual(lib.ones(2), lib.ones(2))
        with f.dual_level():
            with pytest.raises(ValueError, match="Expected primal to be floating point"):
                f.make_dual(lib.ones(2).long(), lib.ones(2))
            with pytest.raises(ValueError, match="Expected tangent to be floating point"):
                f.make_dual(lib.ones(2), lib.ones(2).long())
            d = f.make_dual(lib.ones(2), lib.ones(2))
            with pytest.raises(RuntimeError, match="already has a forward gradient"):
                f.make_dual(d, lib.ones(2))
            with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
                f.enter_dual_level()


def test_default_level_and_unpack_of_plain() -> None:
    # torch: test_default_level: unpack_dual of a tensor with no tangent gives None
    with fwAD.dual_level():
        x = ae.ones(2)
        assert fwAD.unpack_dual(x).tangent is None
        res = fwAD.unpack_dual(x)
        assert isinstance(res, fwAD.UnpackedDualTensor) and res._fields == ("primal", "tangent")
    assert fwAD.unpack_dual(3.0) == (3.0, None)


def test_level_as_decorator_and_functions() -> None:
    @fwAD.dual_level()
    def f() -> Any:
        return fwAD.unpack_dual(ae.exp(fwAD.make_dual(ae.zeros(1), ae.ones(1)))).tangent

    assert f().tolist() == [1.0]
    level = fwAD.enter_dual_level()
    assert level == 0
    fwAD.exit_dual_level(level=level)
    with pytest.raises(RuntimeError, match="not entered"):
        fwAD.exit_dual_level()


def test_detach_drops_the_tangent() -> None:
    torch = torch_or_skip()
    fw = _fw(torch)
    with fwAD.dual_level():
        d = fwAD.make_dual(ae.ones(2), ae.ones(2))
        assert fwAD.unpack_dual(d.detach()).tangent is None
    with fw.dual_level():
        td = fw.make_dual(torch.ones(2), torch.ones(2))
        assert fw.unpack_dual(td.detach()).tangent is None


def _views_and_inplace(lib: Any, f: Any) -> list[np.ndarray]:
    """torch's test_view_inplace_non_differentiable_views / test_inplace_on_view, as steps."""
    out = []
    with f.dual_level():
        base = f.make_dual(lib.tensor(_arr(4)), lib.tensor(_arr(4, seed=1)))
        view = base[1:3]
        out.append(f.unpack_dual(view).tangent)
        view.mul_(lib.tensor(_arr(2, seed=2)))
        out.append(f.unpack_dual(base).tangent)
        other = f.make_dual(lib.tensor(_arr(2, seed=3)), lib.tensor(_arr(2, seed=4)))
        base[2:] = other  # a plain write of a dual value into a dual tensor
        out.append(f.unpack_dual(base).tangent)
        plain = lib.zeros(3, dtype=lib.float64)
        plain[:2] = other
        out.append(f.unpack_dual(plain).tangent)
        t = base.t() if base.dim() == 2 else base.reshape(2, 2).t()
        out.append(f.unpack_dual(t).tangent)
        x = f.make_dual(lib.tensor(_arr(3)), lib.tensor(_arr(3, seed=5)))
        x.mul_(lib.tensor(_arr(3, seed=6)))
        y = x.clone()
        y.add_(x)
        out.append(f.unpack_dual(y).tangent)
    return [np.asarray(o.detach().numpy() if hasattr(o, "detach") else o) for o in out]


def test_views_and_inplace_against_torch() -> None:
    torch = torch_or_skip()
    fw = _fw(torch)
    mine = _views_and_inplace(ae, fwAD)
    theirs = _views_and_inplace(torch, fw)
    for a, b in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_view_tangent_is_a_view_of_the_tangent() -> None:
    with fwAD.dual_level():
        t = ae.zeros(4)
        base = fwAD.make_dual(ae.ones(4), t)
        tv = fwAD.unpack_dual(base[1:3]).tangent
        assert tv._base is t


def _custom(lib: Any, f: Any, fn: Any) -> np.ndarray:
    with f.dual_level():
        d = f.make_dual(lib.tensor(_arr(3)), lib.tensor(_arr(3, seed=1)))
        out = fn.apply(d, 2.0)
        return np.asarray(f.unpack_dual(out).tangent.detach().numpy())


def test_custom_function_jvp_against_torch() -> None:
    torch = torch_or_skip()
    fw = _fw(torch)

    def make(base: Any, lib: Any) -> Any:
        class Fn(base):  # type: ignore[misc,valid-type]
            @staticmethod
            def forward(ctx: Any, x: Any, k: float) -> Any:
                ctx.save_for_forward(x)
                ctx.k = k
                return lib.sin(x) * k

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g, None

            @staticmethod
            def jvp(ctx: Any, tx: Any, tk: Any) -> Any:
                (x,) = ctx.saved_tensors
                return lib.cos(x) * tx * ctx.k

        return Fn

    a = _custom(ae, fwAD, make(ae.Function, ae))
    b = _custom(torch, fw, make(torch.autograd.Function, torch))
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_custom_function_without_jvp() -> None:
    torch = torch_or_skip()
    fw = _fw(torch)

    def make(base: Any) -> Any:
        class Fn(base):  # type: ignore[misc,valid-type]
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g * 2

        return Fn

    for lib, f, base in ((ae, fwAD, ae.Function), (torch, fw, torch.autograd.Function)):
        with f.dual_level():
            d = f.make_dual(lib.ones(2), lib.ones(2))
            with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
                make(base).apply(d)


def test_op_without_a_rule_names_it() -> None:
    with fwAD.dual_level():
        d = fwAD.make_dual(ae.tensor(_arr(3, 3)), ae.tensor(_arr(3, 3, seed=1)))
        with pytest.raises(NotImplementedError, match="forward AD with linalg_svd"):
            ae.linalg.svd(d)
        with pytest.raises(ForwardUnsupported):
            ae.linalg.qr(d)


def _reverse_over_forward(lib: Any, f: Any) -> np.ndarray:
    # torch: test_create_graph / reverse over forward: the tangent is differentiable
    x = lib.tensor(_arr(4), requires_grad=True)
    with f.dual_level():
        d = f.make_dual(x, lib.tensor(_arr(4, seed=1)))
        y = (lib.tanh(d) * d).sum()
        tangent = f.unpack_dual(y).tangent
    (g,) = ae.sync.grad(tangent, [x]) if lib is ae else lib.autograd.grad(tangent, [x])
    return np.asarray(g.detach().numpy())


def test_reverse_over_forward_against_torch() -> None:
    torch = torch_or_skip()
    np.testing.assert_allclose(
        _reverse_over_forward(ae, fwAD), _reverse_over_forward(torch, _fw(torch)), rtol=1e-10
    )


def test_primal_is_differentiable() -> None:
    # make_dual and unpack_dual are backward differentiable (torch's docstrings)
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ae.ones(2))
        p = fwAD.unpack_dual(d * 3.0).primal
    (g,) = ae.sync.grad(p.sum(), [x])
    assert g.tolist() == [3.0, 3.0]


def test_functional_jvp_hvp_against_torch() -> None:
    torch = torch_or_skip()
    x, v = _arr(5), _arr(5, seed=1)

    def f(lib: Any) -> Any:
        return lambda t: lib.tanh(t) * t.sum() + t.exp()

    def g(lib: Any) -> Any:
        return lambda t: (lib.sin(t) * t * t).sum()

    _, a = ae.sync.functional.jvp(f(ae), ae.tensor(x), ae.tensor(v))
    _, b = torch.autograd.functional.jvp(f(torch), torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)
    _, a = ae.sync.functional.hvp(g(ae), ae.tensor(x), ae.tensor(v))
    _, b = torch.autograd.functional.hvp(g(torch), torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)
    ja = ae.sync.functional.jacobian(f(ae), ae.tensor(x), vectorize=True, strategy="forward-mode")
    jb = torch.autograd.functional.jacobian(
        f(torch), torch.tensor(x), vectorize=True, strategy="forward-mode"
    )
    np.testing.assert_allclose(ja.numpy(), jb.numpy(), rtol=1e-10)
    ha = ae.sync.functional.hessian(
        g(ae), ae.tensor(x), vectorize=True, outer_jacobian_strategy="forward-mode"
    )
    hb = torch.autograd.functional.hessian(
        g(torch), torch.tensor(x), vectorize=True, outer_jacobian_strategy="forward-mode"
    )
    np.testing.assert_allclose(ha.numpy(), hb.detach().numpy(), rtol=1e-10)


def test_functional_jvp_falls_back_where_forward_mode_cannot_run() -> None:
    # an op without a rule (svd): the double-backward trick gives the product all the same
    x = ae.tensor(_arr(3, 3))
    v = ae.tensor(_arr(3, 3, seed=1))
    _, a = ae.sync.functional.jvp(lambda t: ae.linalg.svd(t)[1], x, v)
    _, b = ae.sync.functional.jvp(lambda t: ae.linalg.svd(t)[1], x, v, strict=True)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)
    with fwAD.dual_level():  # a level already open: the same
        _, c = ae.sync.functional.jvp(lambda t: t.exp(), x, v)
    np.testing.assert_allclose(c.numpy(), (x.exp() * v).numpy(), rtol=1e-12)
