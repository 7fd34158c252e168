"""First and second derivatives of the arithmetic and elementwise ops against PyTorch."""

from __future__ import annotations

import math

import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip

BINARY_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((), (2, 2)), ((0, 3), (3,))]


@pytest.mark.parametrize("shapes", BINARY_SHAPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "matmul_like"])
def test_binary(op, shapes):
    import operator

    fns = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "div": operator.truediv,
        "maximum": lambda a, b: a.maximum(b),
        "minimum": lambda a, b: a.minimum(b),
        "matmul_like": lambda a, b: a * b + a,
    }
    fn = fns[op]
    check_op(fn, fn, shapes)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    "name", ["exp", "sin", "cos", "tanh", "sigmoid", "relu", "square", "expm1", "abs", "neg"]
)
@pytest.mark.parametrize("shape", [(4,), (2, 3), (), (0,)])
def test_unary(name, shape, dtype):
    check_op(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(), [shape], dtype=dtype)


@pytest.mark.parametrize("name", ["log", "sqrt", "log1p"])
@pytest.mark.parametrize("shape", [(4,), (2, 3), ()])
def test_unary_positive(name, shape):
    check_op(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(), [shape], positive=True)


@pytest.mark.parametrize("p", [2, 3, 0.5, -1.5, 0, 1])
def test_pow_scalar(p):
    check_op(lambda x: x**p, lambda x: x**p, [(5,)], positive=True)


def test_pow_tensor_and_rpow():
    check_op(lambda a, b: a**b, lambda a, b: a**b, [(4,), (4,)], positive=True)
    check_op(lambda a: 2.0**a, lambda a: 2.0**a, [(4,)])


def test_scalar_operands():
    check_op(lambda a: 3.0 - a * 2.0 / 4.0 + 1.0, lambda a: 3.0 - a * 2.0 / 4.0 + 1.0, [(3,)])
    check_op(lambda a: 1.0 / a, lambda a: 1.0 / a, [(3,)], positive=True)


@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 3), (3, 4)),
        ((3,), (3,)),
        ((3,), (3, 2)),
        ((2, 3), (3,)),
        ((5, 2, 3), (3, 4)),
        ((2, 1, 2, 3), (4, 3, 2)),
    ],
)
def test_matmul(shapes):
    check_op(lambda a, b: a @ b, lambda a, b: a @ b, shapes)


def test_where_and_clamp():
    import numpy as np

    torch = pytest.importorskip("torch")
    cond = np.array([True, False, True, False])
    check_op(
        lambda a, b: ae.where(ae.tensor(cond), a, b),
        lambda a, b: torch.where(torch.tensor(cond), a, b),
        [(4,), (4,)],
    )
    check_op(lambda a: a.clamp(-0.5, 0.5), lambda a: a.clamp(-0.5, 0.5), [(6,)])
    check_op(lambda a: a.clamp(min=0.1), lambda a: a.clamp(min=0.1), [(6,)])


def test_float32_promotion_with_0d():
    torch = pytest.importorskip("torch")
    check_op(lambda a, b: a * b, lambda a, b: a * b, [(3,), ()], dtype="float32")
    x = ae.ones(3, dtype=ae.float32)
    y = ae.tensor(2.0)  # 0-d float64
    assert (x * y).dtype == ae.float32
    assert (x * 2.0).dtype == ae.float32
    assert torch.ones(3).mul(torch.tensor(2.0, dtype=torch.float64)).dtype == torch.float32


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(), (5,), (256, 128)])
def test_square_and_mean_gradients_are_the_textbook_bits(shape, dtype):
    """``(x ** 2).mean()``: the in-place scaling and the early division change no bit."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(dtype)
    x = ae.tensor(a, requires_grad=True)
    (g,) = ae.sync.grad((x**2).mean(), [x])
    seed = np.broadcast_to(np.ones((), dtype), shape) / np.asarray(a.size, dtype)
    want = seed * 2.0 * a
    assert g.dtype == want.dtype
    np.testing.assert_array_equal(g.numpy(), want)
    (g2,) = ae.sync.grad((x**2).sum(), [x], create_graph=True)  # TENSOR_OPS.scale_
    np.testing.assert_array_equal(g2.detach().numpy(), 2.0 * a)


def test_raw_scale_is_in_place_only_on_arrays_it_may_write():
    import numpy as np

    from adapters._numpy import NumpyBackend
    from aengine.ops._raw import RawOps

    F = RawOps(NumpyBackend())
    fresh = np.arange(3.0)
    assert F.scale_(fresh, 2.0) is fresh
    np.testing.assert_array_equal(fresh, [0.0, 2.0, 4.0])
    ints = np.arange(3)
    out = F.scale_(ints, 2.0)
    assert out is not ints and out.dtype == np.float64
    np.testing.assert_array_equal(ints, [0, 1, 2])
    assert F.scale_(np.float32(1.5), 2.0) == 3.0  # a 0-d product is a numpy scalar


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tanh_sigmoid_backward_bits_and_saved_output(name, dtype):
    # RawOps.tanh_grad / sigmoid_grad compute in the rule's own temporary: the
    # bits of the plain formula, and the saved output is left as it was.
    import numpy as np

    a = np.linspace(-2.0, 2.0, 12).reshape(3, 4).astype(dtype)
    gv = np.linspace(0.5, 1.5, 12).reshape(3, 4).astype(dtype)
    x = ae.tensor(a, requires_grad=True)
    y = getattr(x, name)()
    saved = y.detach().numpy().copy()
    (g,) = ae.sync.grad(y, [x], ae.tensor(gv), retain_graph=True)
    yv = y.detach().numpy()
    want = gv * (1.0 - yv * yv) if name == "tanh" else gv * yv * (1.0 - yv)
    assert g.dtype == want.dtype
    np.testing.assert_array_equal(g.numpy(), want)
    np.testing.assert_array_equal(yv, saved)
    (g2,) = ae.sync.grad(y, [x], ae.tensor(gv), retain_graph=True)  # the same again
    np.testing.assert_array_equal(g2.numpy(), want)
    (gg,) = ae.sync.grad(y, [x], ae.tensor(gv), create_graph=True)  # TENSOR_OPS' formula
    np.testing.assert_array_equal(gg.detach().numpy(), want)


def test_raw_tanh_grad_writes_only_its_own_temporary():
    import numpy as np

    from adapters._numpy import NumpyBackend
    from aengine.ops._raw import RawOps

    F = RawOps(NumpyBackend())
    y = np.array([0.5, -0.25], dtype=np.float32)
    g64 = np.array([2.0, 3.0])  # another dtype: promoted as the formula promotes
    out = F.tanh_grad(g64, y)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, g64 * (1.0 - y * y))
    g0 = np.float32(2.0)  # another shape (0-d): broadcast, not written into
    np.testing.assert_array_equal(F.tanh_grad(g0, y), g0 * (1.0 - y * y))
    s = F.sigmoid_grad(g64, y)
    assert s.dtype == np.float64
    np.testing.assert_array_equal(s, g64 * y * (1.0 - y))
    np.testing.assert_array_equal(y, [0.5, -0.25])
    np.testing.assert_array_equal(g64, [2.0, 3.0])


# -- what a binary op saves (NOTE [What a binary op saves]) ---------------------------------------
def _modified_after(lib, op, needs, modify):  # type: ignore[no-untyped-def]
    """``op(a, b)`` where input i requires grad iff ``needs[i]``, then ``modify`` ("a", "b"
    or "out") is changed in place; the leaves' gradients, or "error" when backward raises."""
    f64 = lib.float64
    leaves = [lib.tensor([1.5, 2.0, 0.5], dtype=f64, requires_grad=True) for _ in range(2)]
    plain = [lib.tensor([1.5, 2.0, 0.5], dtype=f64), lib.tensor([0.5, 3.0, 2.0], dtype=f64)]
    a, b = (leaf.clone() if n else p for leaf, n, p in zip(leaves, needs, plain))
    out = op(a, b)
    {"a": a, "b": b, "out": out}[modify].mul_(3.0)
    try:
        if lib is ae:
            ae.sync.backward(out.sum())
        else:
            out.sum().backward()
    except RuntimeError as exc:
        assert "modified by an inplace operation" in str(exc)
        return "error"
    return [None if leaf.grad is None else leaf.grad.tolist() for leaf in leaves]


@pytest.mark.parametrize(
    "name,modify",
    [
        (name, modify)
        for name in ["mul", "div", "pow", "maximum", "minimum", "where", "mul_", "div_"]
        for modify in ["a", "b", "out"]
        if not (name.endswith("_") and modify == "a")  # an in-place op's self is its output
    ],
)
@pytest.mark.parametrize("needs", [(True, False), (False, True), (True, True)])
def test_binary_ops_save_only_what_the_needed_gradients_read(name, needs, modify):
    # PyTorch: a * b saves b only if a requires grad, a only if b does; a result always
    torch = torch_or_skip()
    ops = {
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "pow": lambda a, b: a**b,
        "maximum": lambda a, b: a.maximum(b),
        "minimum": lambda a, b: a.minimum(b),
        "where": lambda a, b: (ae if isinstance(a, ae.Tensor) else torch).where(a > 1.0, a, b),
        "mul_": lambda a, b: a.mul_(b),
        "div_": lambda a, b: a.div_(b),
    }
    op = ops[name]
    want = _modified_after(torch, op, needs, modify)
    assert _modified_after(ae, op, needs, modify) == want


def test_mul_by_a_constant_then_changing_the_input_in_place():
    # the case of the report: c * ones(3) saves no c
    torch = torch_or_skip()
    grads = []
    for lib in (ae, torch):
        a = lib.ones(3, requires_grad=True)
        c = a.clone()
        y = c * lib.ones(3)
        c.add_(1)
        if lib is ae:
            ae.sync.backward(y.sum())
        else:
            y.sum().backward()
        grads.append(a.grad.tolist())
    assert grads[0] == grads[1] == [1.0, 1.0, 1.0]
    x = ae.ones(3, requires_grad=True)
    assert (x * ae.ones(3)).grad_fn.saved_tensors[0].tolist() == [1.0, 1.0, 1.0]
    assert len((x * ae.ones(3)).grad_fn.saved_tensors) == 1
    assert len((x * x).grad_fn.saved_tensors) == 2
    assert len((x ** ae.ones(3)).grad_fn.saved_tensors) == 3  # the result too, as PyTorch


# -- pow at a zero base, maximum / minimum with NaN -----------------------------------------------
@pytest.mark.parametrize("base", ["tensor", 0.0, 0])
def test_pow_exponent_gradient_at_a_zero_base(base):
    # PyTorch's pow_backward_exponent: 0 where the base is 0 and the exponent >= 0,
    # else grad * result * log(base): -inf for a negative exponent, not NaN
    import numpy as np

    torch = torch_or_skip()
    got = []
    for lib in (ae, torch):
        b = lib.tensor([-1.0, 0.0, 1.0, 2.5, -0.5], requires_grad=True)
        a = lib.zeros(5) if base == "tensor" else base
        with np.errstate(divide="ignore"):  # numpy's warning for 0 ** -1 in the forward
            y = a**b
        if lib is ae:
            (g,) = ae.sync.grad(y.sum(), [b], create_graph=True)
        else:
            (g,) = torch.autograd.grad(y.sum(), [b], create_graph=True)
        got.append(g.tolist())
    assert got[0] == got[1] == [-math.inf, 0.0, 0.0, 0.0, -math.inf]
    # a nonzero base is unchanged: grad * result * log(base)
    check_op(lambda a, b: a**b, lambda a, b: a**b, [(4,), (4,)], positive=True, seed=3)


def test_maximum_minimum_with_nan_give_both_inputs_the_gradient():
    torch = torch_or_skip()
    nan = math.nan
    for name in ("maximum", "minimum"):
        res = []
        for lib in (ae, torch):
            a = lib.tensor([nan, 1.0, 2.0, nan, 3.0], requires_grad=True)
            b = lib.tensor([1.0, nan, 2.0, nan, 0.0], requires_grad=True)
            y = getattr(lib, name)(a, b)
            if lib is ae:
                ae.sync.backward(y.sum())
            else:
                y.sum().backward()
            res.append((a.grad.tolist(), b.grad.tolist()))
        assert res[0] == res[1]
