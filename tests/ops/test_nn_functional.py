"""ae.nn.functional activations and losses: what the operator table's tests cannot express.

In-place activations (on non-leaves and views, as torch), torch dtypes as
arguments (softmax's ``dtype``), the implicit dimension and the legacy
reduction flags (both warn), third derivatives through the rules, the
second derivatives that torch gives as ZeroTensors, and edge values
(binary_cross_entropy's clamps, all targets ignored).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

AF = ae.nn.functional


def _t(a: np.ndarray, rg: bool = True) -> Any:
    t = ae.tensor(a.copy())
    return t.requires_grad_(True) if rg else t


def _close(a: Any, b: Any, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    an = a.detach().numpy() if isinstance(a, ae.Tensor) else np.asarray(a)
    bn = b.detach().numpy()
    assert an.shape == bn.shape
    np.testing.assert_allclose(an, bn, rtol=rtol, atol=atol, equal_nan=True)


_INPLACE = [
    ("relu", {}),
    ("relu6", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 1.0}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {"alpha": 0.7}),
    ("selu", {}),
    ("celu", {"alpha": 1.5}),
    ("silu", {}),
    ("mish", {}),
    ("hardsigmoid", {}),
    ("hardswish", {}),
]


@pytest.mark.parametrize(("name", "kw"), _INPLACE)
@pytest.mark.parametrize("view", [False, True])
def test_inplace_activation_matches_torch(name: str, kw: dict[str, Any], view: bool) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    a = rng.uniform(-4, 7, size=(3, 4))
    a[np.abs(a) < 0.1] += 0.3
    v = rng.standard_normal((3, 4))

    def run(grad: Any, fn: Any, make: Any) -> tuple[Any, Any]:
        x = make(a)
        y = x * 2.0  # a non-leaf: in-place on it is allowed
        target = y[1:] if view else y
        out = fn(target, inplace=True, **kw)
        assert out is target
        g = grad(y, x, make(v, False), create_graph=True)[0]
        if name == "hardsigmoid":  # torch: the derivative of hardsigmoid_backward is missing
            return y, (g, None)
        gg = grad((g * make(v, False)).sum(), x, allow_unused=True)[0]
        return y, (g, gg)

    ya, (ga, gga) = run(ae.sync.grad, getattr(AF, name), lambda z, rg=True: _t(z, rg))
    yt, (gt, ggt) = run(
        torch.autograd.grad,
        getattr(torch.nn.functional, name),
        lambda z, rg=True: torch.tensor(z, requires_grad=rg),
    )
    _close(ya, yt)
    _close(ga, gt)
    if ggt is not None and gga is not None:
        _close(gga, ggt)


@pytest.mark.parametrize(("name", "kw"), _INPLACE)
def test_inplace_on_leaf_that_requires_grad_raises(name: str, kw: dict[str, Any]) -> None:
    x = _t(np.ones(3))
    with pytest.raises(RuntimeError, match="leaf"):
        getattr(AF, name)(x, inplace=True, **kw)


def test_inplace_without_grad_modifies_the_input() -> None:
    x = ae.tensor([-1.0, 2.0])
    assert AF.leaky_relu(x, 0.5, inplace=True) is x
    assert x.tolist() == [-0.5, 2.0]


def test_softmax_dtype_and_implicit_dim() -> None:
    torch = torch_or_skip()
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    for name in ("softmax", "log_softmax", "softmin"):
        fa, ft = getattr(AF, name), getattr(torch.nn.functional, name)
        out = fa(_t(a), 1, dtype=ae.float64)
        assert out.dtype == np.float64
        _close(out, ft(torch.tensor(a), 1, dtype=torch.float64))
        with pytest.warns(UserWarning, match="Implicit dimension choice"):
            implicit = fa(_t(a))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _close(implicit, ft(torch.tensor(a)), 1e-5, 1e-6)


@pytest.mark.parametrize(
    ("name", "kw"),
    [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}),
     ("softplus", {"beta": 1.5}), ("logsigmoid", {}), ("elu", {"alpha": 0.5}), ("selu", {})],
)  # fmt: skip
def test_third_derivative_matches_torch(name: str, kw: dict[str, Any]) -> None:
    torch = torch_or_skip()
    a = np.random.default_rng(2).uniform(-3, 3, size=7)

    def third(grad: Any, fn: Any, x: Any) -> Any:
        (g,) = grad(fn(x, **kw).sum(), x, create_graph=True)
        (h,) = grad(g.sum(), x, create_graph=True)
        return grad(h.sum(), x)[0]

    _close(
        third(ae.sync.grad, getattr(AF, name), _t(a)),
        third(
            torch.autograd.grad,
            getattr(torch.nn.functional, name),
            torch.tensor(a, requires_grad=True),
        ),
        1e-6,
        1e-8,
    )


def test_piecewise_linear_gradients_stay_in_the_graph() -> None:
    # torch: the gradient of relu & co requires grad; its own gradient is 0
    for fn in (AF.relu, AF.relu6, AF.hardtanh, AF.leaky_relu):
        x = _t(np.array([-1.5, 0.5, 2.0]))
        (g,) = ae.sync.grad(fn(x).sum(), x, create_graph=True)
        assert g.requires_grad
        (h,) = ae.sync.grad(g.sum(), x)
        assert h.tolist() == [0.0, 0.0, 0.0]
    x = _t(np.random.default_rng(3).standard_normal((4, 3)))
    loss = AF.nll_loss(x, ae.tensor(np.array([0, 2, 1, 1])))
    (g,) = ae.sync.grad(loss, x, create_graph=True)
    assert g.requires_grad
    assert not ae.sync.grad(g.sum(), x)[0].numpy().any()


def test_l1_second_derivative_is_zero() -> None:
    rng = np.random.default_rng(4)
    x, t = _t(rng.standard_normal(5)), _t(rng.standard_normal(5))
    gx, gt = ae.sync.grad(AF.l1_loss(x, t), (x, t), create_graph=True)
    hx, ht = ae.sync.grad((gx * gx).sum() + gt.sum(), (x, t), allow_unused=True)
    for h in (hx, ht):
        assert h is None or not h.numpy().any()


def test_smooth_l1_with_beta_zero_is_l1() -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    xa, xt = _t(a), torch.tensor(a, requires_grad=True)
    la = AF.smooth_l1_loss(xa, _t(b, False), beta=0.0)
    lt = torch.nn.functional.smooth_l1_loss(xt, torch.tensor(b), beta=0.0)
    _close(la, lt)
    _close(ae.sync.grad(la, xa)[0], torch.autograd.grad(lt, xt)[0])


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_losses_broadcast_with_torch_warning(name: str) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    fa, ft = getattr(AF, name), getattr(torch.nn.functional, name)
    with pytest.warns(UserWarning, match="different to the input size"):
        la = fa(_t(a), _t(b))
    with pytest.warns(UserWarning):
        lt = ft(torch.tensor(a), torch.tensor(b))
    _close(la, lt)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="must match the size"):
        fa(_t(a), _t(rng.standard_normal(5)))


@pytest.mark.parametrize(
    ("size_average", "reduce"), [(None, False), (False, None), (True, True), (False, True)]
)
def test_legacy_reduction_flags(size_average: Any, reduce: Any) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    idx = np.array([0, 3, 1])
    cases = [
        ("mse_loss", (a, b)),
        ("l1_loss", (a, b)),
        ("smooth_l1_loss", (a, b)),
        ("nll_loss", (a, idx)),
        ("cross_entropy", (a, idx)),
        ("binary_cross_entropy", (1 / (1 + np.exp(-a)), 1 / (1 + np.exp(-b)))),
        ("binary_cross_entropy_with_logits", (a, 1 / (1 + np.exp(-b)))),
        ("kl_div", (a, np.exp(b))),
    ]
    for name, (x, t) in cases:
        kw = {"size_average": size_average, "reduce": reduce}
        with pytest.warns(UserWarning, match="size_average and reduce"):
            la = getattr(AF, name)(_t(x, False), _t(t, False), **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lt = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(t), **kw)
        _close(la, lt)


def test_kl_div_mean_warns_as_torch() -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(8)
    a, b = np.log(rng.uniform(0.1, 1, (2, 3))), rng.uniform(0.1, 1, (2, 3))
    with pytest.warns(UserWarning, match="batchmean"):
        la = AF.kl_div(_t(a), _t(b))
    with pytest.warns(UserWarning):
        lt = torch.nn.functional.kl_div(torch.tensor(a), torch.tensor(b))
    _close(la, lt)


def test_class_weights_that_require_grad_raise() -> None:
    x = _t(np.random.default_rng(9).standard_normal((2, 3)))
    w = _t(np.ones(3))
    idx = ae.tensor(np.array([0, 1]))
    for fn in (AF.nll_loss, AF.cross_entropy):
        with pytest.raises(RuntimeError, match="not differentiable with respect to argument"):
            fn(x, idx, weight=w)
    p = _t(np.full(3, 0.5))
    with pytest.raises(RuntimeError, match="argument 'weight'"):
        AF.binary_cross_entropy(p, _t(np.full(3, 0.5), False), weight=w)
    with pytest.raises(RuntimeError, match="argument 'pos_weight'"):
        AF.binary_cross_entropy_with_logits(p, _t(np.full(3, 0.5), False), pos_weight=w)
    with ae.no_grad():
        AF.nll_loss(x, idx, weight=w)  # nothing is recorded: no error (as torch)


def test_binary_cross_entropy_clamps_as_torch() -> None:
    torch = torch_or_skip()
    a = np.array([0.0, 1.0, 0.5, 1e-30])
    b = np.array([0.3, 0.4, 0.5, 0.0])
    xa = _t(a)
    xt = torch.tensor(a, requires_grad=True)
    la = AF.binary_cross_entropy(xa, _t(b, False), reduction="none")
    lt = torch.nn.functional.binary_cross_entropy(xt, torch.tensor(b), reduction="none")
    _close(la, lt)
    _close(ae.sync.grad(la.sum(), xa)[0], torch.autograd.grad(lt.sum(), xt)[0])


def test_cross_entropy_with_every_target_ignored() -> None:
    torch = torch_or_skip()
    a = np.random.default_rng(10).standard_normal((4, 3))
    idx = np.full(4, -100)
    for ls in (0.0, 0.2):
        xa, xt = _t(a), torch.tensor(a, requires_grad=True)
        la = AF.cross_entropy(xa, ae.tensor(idx), label_smoothing=ls)
        lt = torch.nn.functional.cross_entropy(xt, torch.tensor(idx), label_smoothing=ls)
        _close(la, lt)
        _close(ae.sync.grad(la, xa)[0], torch.autograd.grad(lt, xt)[0])


def test_cross_entropy_of_a_float32_input_and_float64_probabilities() -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(11)
    a, p = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.uniform(0, 1, (2, 3, 4))
    la = AF.cross_entropy(_t(a), _t(p))
    lt = torch.nn.functional.cross_entropy(torch.tensor(a), torch.tensor(p))
    assert la.dtype == np.float64
    _close(la, lt, 1e-5, 1e-6)
