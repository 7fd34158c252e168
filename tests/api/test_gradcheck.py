"""gradcheck / gradgradcheck: every exported op against finite differences, detection
of wrong rules, the async and sync forms.

Inputs keep away from kinks (abs, relu, sign at 0; clamp bounds; ties of max).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.ops._core import node_class, record
from tests.oracle import torch_or_skip

# -- the table of ops ------------------------------------------------------------------------


def _away(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Values with |x| in [0.2, 1.2], distinct: no kink or tie within eps."""
    n = int(np.prod(shape))
    mags = np.linspace(0.2, 1.2, n) + rng.uniform(0, 0.01, n)
    return (rng.permutation(mags) * rng.choice([-1.0, 1.0], n)).reshape(shape)


KINDS: dict[str, Callable[[tuple[int, ...], np.random.Generator], np.ndarray]] = {
    "any": lambda s, r: r.standard_normal(s),
    "pos": lambda s, r: np.abs(r.standard_normal(s)) + 0.5,
    "away": _away,
}

# name -> (fn, input shapes, kind of inputs)
OPS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], str]] = {
    # arithmetic, with broadcasting and scalars
    "add": (lambda a, b: a + b, [(2, 3), (3,)], "any"),
    "sub": (lambda a, b: a - b, [(2, 3), (2, 1)], "any"),
    "mul": (lambda a, b: a * b, [(2, 3), (3,)], "any"),
    "div": (lambda a, b: a / b, [(2, 3), (3,)], "pos"),
    "neg": (lambda a: -a, [(2, 3)], "any"),
    "scalar_ops": (lambda a: 3.0 - a * 2.0 / 4.0 + 1.0, [(3,)], "any"),
    "rdiv": (lambda a: 2.0 / a, [(3,)], "pos"),
    "pow_2": (lambda a: a**2, [(4,)], "any"),
    "pow_3": (lambda a: a**3, [(4,)], "any"),
    "pow_half": (lambda a: a**0.5, [(4,)], "pos"),
    "pow_neg": (lambda a: a**-1.5, [(4,)], "pos"),
    "pow_tensor": (lambda a, b: a**b, [(4,), (4,)], "pos"),
    "rpow": (lambda a: 2.0**a, [(4,)], "any"),
    "maximum": (lambda a, b: ae.maximum(a, b), [(2, 3), (3,)], "away"),
    "minimum": (lambda a, b: ae.minimum(a, b), [(2, 3), (2, 3)], "away"),
    "where": (lambda a, b: ae.where(a.detach() > 0, a, b), [(2, 3), (3,)], "away"),
    "clamp": (lambda a: a.clamp(-0.5, 0.7), [(2, 3)], "away"),
    "clamp_min": (lambda a: a.clamp(min=0.1), [(5,)], "away"),
    "matmul": (lambda a, b: a @ b, [(2, 3), (3, 2)], "any"),
    "matmul_batched": (lambda a, b: a @ b, [(2, 2, 3), (3,)], "any"),
    "matmul_vec": (lambda a, b: a @ b, [(3,), (3, 2)], "any"),
    "matmul_mv": (lambda a, b: a @ b, [(2, 3), (3,)], "any"),
    "matmul_dot": (lambda a, b: a @ b, [(3,), (3,)], "any"),
    "mm": (lambda a, b: ae.mm(a, b), [(2, 3), (3, 2)], "any"),
    "dot": (lambda a, b: a.dot(b) * a, [(3,), (3,)], "any"),
    # elementwise
    "exp": (lambda a: a.exp(), [(2, 3)], "any"),
    "log": (lambda a: a.log(), [(2, 3)], "pos"),
    "sqrt": (lambda a: a.sqrt(), [(2, 3)], "pos"),
    "sin": (lambda a: a.sin(), [(2, 3)], "any"),
    "cos": (lambda a: a.cos(), [(2, 3)], "any"),
    "tanh": (lambda a: a.tanh(), [(2, 3)], "any"),
    "sigmoid": (lambda a: a.sigmoid(), [(2, 3)], "any"),
    "relu": (lambda a: a.relu(), [(2, 3)], "away"),
    "square": (lambda a: a.square(), [(2, 3)], "any"),
    "log1p": (lambda a: a.log1p(), [(2, 3)], "pos"),
    "expm1": (lambda a: a.expm1(), [(2, 3)], "any"),
    "abs": (lambda a: a.abs(), [(2, 3)], "away"),
    "sign": (lambda a: a.sign() * a, [(2, 3)], "away"),
    # reductions
    "sum": (lambda a: a.sum(), [(2, 3)], "any"),
    "sum_dim": (lambda a: a.sum(1, keepdim=True), [(2, 3)], "any"),
    "mean": (lambda a: a.mean(0), [(2, 3)], "any"),
    "prod": (lambda a: a.prod(), [(2, 3)], "any"),
    "prod_dim": (lambda a: a.prod(-1), [(2, 3)], "any"),
    "amax": (lambda a: a.amax(1), [(2, 3)], "away"),
    "amin": (lambda a: a.amin((0, 1)), [(2, 3)], "away"),
    "max": (lambda a: a.max(), [(2, 3)], "away"),
    "min_dim": (lambda a: a.min(0), [(2, 3)], "away"),
    "var": (lambda a: a.var(1), [(2, 3)], "any"),
    "std": (lambda a: a.std(), [(2, 3)], "any"),
    "logsumexp": (lambda a: a.logsumexp(1), [(2, 3)], "any"),
    "softmax": (lambda a: a.softmax(1), [(2, 3)], "any"),
    "log_softmax": (lambda a: a.log_softmax(0), [(2, 3)], "any"),
    "norm": (lambda a: a.norm(), [(2, 3)], "any"),
    "norm_1": (lambda a: a.norm(1, 1), [(2, 3)], "away"),
    "norm_inf": (lambda a: a.norm(math.inf, 1), [(2, 3)], "away"),
    "norm_3": (lambda a: a.norm(3, 0), [(2, 3)], "any"),
    # shape
    "reshape": (lambda a: a.reshape(3, 2) * a.reshape(3, 2), [(2, 3)], "any"),
    "view": (lambda a: a.view(-1), [(2, 3)], "any"),
    "flatten": (lambda a: a.flatten(), [(2, 1, 3)], "any"),
    "permute": (lambda a: a.permute(2, 0, 1), [(2, 1, 3)], "any"),
    "transpose": (lambda a: a.transpose(0, 1), [(2, 3)], "any"),
    "T": (lambda a: a.T * 2.0, [(2, 3)], "any"),
    "mT": (lambda a: a.mT, [(2, 2, 3)], "any"),
    "expand": (lambda a: a.expand(2, 3) * 1.5, [(1, 3)], "any"),
    "broadcast_to": (lambda a: ae.broadcast_to(a, (2, 3)), [(3,)], "any"),
    "squeeze": (lambda a: a.squeeze(1), [(2, 1, 3)], "any"),
    "unsqueeze": (lambda a: a.unsqueeze(0), [(2, 3)], "any"),
    "clone": (lambda a: a.clone(), [(2, 3)], "any"),
    "contiguous": (lambda a: a.T.contiguous(), [(2, 3)], "any"),
    "to_float64": (lambda a: a.to(dtype=ae.float64) * a, [(3,)], "any"),
    "double": (lambda a: a.double(), [(3,)], "any"),
    "cpu": (lambda a: a.to("sim:0").cpu() * a, [(3,)], "any"),
    "type_as": (lambda a, b: a.type_as(b) * b, [(3,), (3,)], "any"),
    "view_as": (lambda a, b: a.view_as(b) * b, [(2, 3), (3, 2)], "any"),
    "reshape_as": (lambda a, b: a.T.reshape_as(b) * b, [(2, 3), (6,)], "any"),
    "expand_as": (lambda a, b: a.expand_as(b) * b, [(1, 3), (2, 3)], "any"),
    # indexing, joining, in-place
    "getitem_basic": (lambda a: a[1:, ::2], [(3, 4)], "any"),
    "getitem_int": (lambda a: a[1] * a[0], [(3, 4)], "any"),
    "getitem_advanced": (lambda a: a[[0, 2, 0]], [(3, 2)], "any"),
    "getitem_mask": (lambda a: a[a.detach() > 0], [(3, 2)], "away"),
    "gather": (lambda a: a.gather(1, ae.tensor([[0, 0], [1, 0]])), [(2, 3)], "any"),
    "index_select": (lambda a: a.index_select(0, ae.tensor([1, 1])), [(2, 3)], "any"),
    "take_along_dim": (lambda a: a.take_along_dim(ae.tensor([[2], [0]]), 1), [(2, 3)], "any"),
    "masked_fill": (
        lambda a: a.masked_fill(ae.tensor([[True, False, False]]), 0.5),
        [(2, 3)],
        "any",
    ),
    "narrow": (lambda a: a.narrow(1, 1, 2), [(2, 3)], "any"),
    "select": (lambda a: a.select(0, 1), [(2, 3)], "any"),
    "cat": (lambda a, b: ae.cat([a, b, a], 0), [(2, 3), (1, 3)], "any"),
    "stack": (lambda a, b: ae.stack([a, b], 1), [(2, 3), (2, 3)], "any"),
    "split": (lambda a: a.split(2, 1), [(2, 3)], "any"),
    "chunk": (lambda a: a.chunk(2, 0), [(3, 2)], "any"),
    "unbind": (lambda a: a.unbind(1), [(2, 3)], "any"),
    "setitem": (lambda a, b: _setitem(a, b), [(3, 2), (2,)], "any"),
    "add_": (lambda a, b: a.clone().add_(b), [(2, 3), (3,)], "any"),
    "sub_": (lambda a, b: a.clone().sub_(b), [(2, 3), (3,)], "any"),
    "mul_": (lambda a, b: (a * 1.0).mul_(b), [(2, 3), (3,)], "any"),
    "div_": (lambda a, b: (a * 1.0).div_(b), [(2, 3), (3,)], "pos"),
    "zero_": (lambda a: a * (a * 1.0).zero_(), [(2, 3)], "any"),
    "fill_": (lambda a: a.clone().fill_(2.0) * a, [(2, 3)], "any"),
    "copy_": (lambda a, b: ae.zeros(2, 3, dtype=ae.float64).copy_(b) * a, [(2, 3), (3,)], "any"),
    "clamp_": (lambda a: a.clone().clamp_(-0.5, 0.7), [(2, 3)], "away"),
    "relu_": (lambda a: a.clone().relu_(), [(2, 3)], "away"),
    "view_inplace": (lambda a: _view_inplace(a), [(2, 3)], "any"),
}


def _setitem(a: ae.Tensor, b: ae.Tensor) -> ae.Tensor:
    c = a * 1.0
    c[1] = b
    return c


def _view_inplace(a: ae.Tensor) -> ae.Tensor:
    c = a.clone()
    c[0].mul_(a[1])  # an in-place op on a view rebases the base's history
    return c


TABLE = [pytest.param(fn, shapes, kind, id=name) for name, (fn, shapes, kind) in OPS.items()]


def _inputs(shapes: list[tuple[int, ...]], kind: str, seed: int = 0) -> tuple[ae.Tensor, ...]:
    rng = np.random.default_rng(seed)
    return tuple(ae.tensor(KINDS[kind](s, rng), requires_grad=True) for s in shapes)


@pytest.mark.parametrize(("fn", "shapes", "kind"), TABLE)
def test_gradcheck_every_op(fn, shapes, kind):
    assert ae.sync.gradcheck(fn, _inputs(shapes, kind)) is True


@pytest.mark.parametrize(("fn", "shapes", "kind"), TABLE)
def test_gradgradcheck_every_op(fn, shapes, kind):
    assert ae.sync.gradgradcheck(fn, _inputs(shapes, kind)) is True


def test_every_exported_op_is_in_the_table():
    """A new differentiable op (function or Tensor method from aengine.ops) needs an entry."""
    not_differentiable = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                          "logical_not", "MaxResult", "MinResult", "any", "all"}  # fmt: skip
    # float() rounds to float32, too coarse for eps=1e-6; backward() is not an op
    not_differentiable |= {"float", "backward"}
    # casts to integer, bool and float16 types (no gradient, or too coarse); cuda() needs a GPU
    # (tests/tensors/test_cuda.py); type(dtype) is to(dtype), which "to_float64" covers
    not_differentiable |= {"bool", "int", "long", "half", "cuda", "type"}
    aliases = {"pow": "pow_2", "min": "min_dim", "getitem": "getitem_basic", "to": "to_float64"}
    from aengine.ops._table import TABLE as OPERATORS  # the operator table's gradchecks

    covered = set(OPS) | set(OPERATORS) | {i.method_name for i in OPERATORS.values()}
    missing = []
    functions = [(n, getattr(ae, n)) for n in ae.__all__]
    methods = [(n, getattr(ae.Tensor, n)) for n in dir(ae.Tensor) if not n.startswith("__")]
    for name, obj in functions + methods:
        module = getattr(obj, "__module__", "") or ""
        if not module.startswith("aengine.ops") or name in not_differentiable:
            continue
        if aliases.get(name, name) not in covered and name not in missing:
            missing.append(name)
    assert not missing, (
        f"exported ops without a gradcheck entry: {missing}; add them to the operator table "
        "(aengine/ops/_table.py), to OPS, or, if they are not differentiable, to "
        "not_differentiable in tests/api/test_gradcheck.py"
    )


# -- a wrong rule is detected ------------------------------------------------------------------
BadSquareBackward = node_class("BadSquareBackward0", lambda F, g, s, n: (g * 3.0 * s[0],))


def bad_square(x: ae.Tensor) -> ae.Tensor:
    """x * x whose rule claims 3x: wrong first derivative."""
    return record(BadSquareBackward, x.data * x.data, x._device, (x,), (x,))


def _const(v: Any) -> Any:
    return v.detach() if isinstance(v, ae.Tensor) else v


# right first derivative 2x, but the saved x is used as a constant: wrong second derivative
FlatSquareBackward = node_class(
    "FlatSquareBackward0", lambda F, g, s, n: (g * (2.0 * _const(s[0])),)
)


def flat_square(x: ae.Tensor) -> ae.Tensor:
    return record(FlatSquareBackward, x.data * x.data, x._device, (x,), (x,))


WRONG_FIRST = (
    "Jacobian mismatch for output 0 with respect to input 0,\n"
    "numerical:array([[2., 0.],\n       [0., 4.]])\n"
    "analytical:array([[3., 0.],\n       [0., 6.]])\n"
)


def test_gradcheck_detects_a_wrong_rule():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    with pytest.raises(ae.GradcheckError, match=re.escape(WRONG_FIRST)):
        ae.sync.gradcheck(bad_square, (x,))
    assert ae.sync.gradcheck(bad_square, (x,), raise_exception=False) is False
    assert issubclass(ae.GradcheckError, ae.AutogradError)


def test_gradcheck_names_the_failing_output_and_input():
    a = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    b = ae.tensor([0.5, -1.0], dtype=ae.float64, requires_grad=True)
    with pytest.raises(ae.GradcheckError, match=r"for output 1 with respect to input 2,"):
        ae.sync.gradcheck(lambda k, u, v: (u * v, bad_square(v) + u), (3.0, a, b))


def test_gradgradcheck_detects_a_wrong_second_derivative():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(flat_square, (x,))
    # output 0 is the first derivative, input 0 is x: d(2 x v)/dx = 2 v, claimed 0
    msg = (
        r"Jacobian mismatch for output 0 with respect to input 0,\n"
        r"numerical:array\(\[\[ ?-?\d\.\d+, +0\. +\],\n +\[ +0\. +, -?\d\.\d+\]\]\)\n"
        r"analytical:array\(\[\[0\., 0\.\],\n +\[0\., 0\.\]\]\)\n$"
    )
    with pytest.raises(ae.GradcheckError, match=msg):
        ae.sync.gradgradcheck(flat_square, (x,))
    assert ae.sync.gradgradcheck(flat_square, (x,), raise_exception=False) is False
    # with grad_outputs that do not require grad, only x is checked: the claimed
    # first derivative then has no graph at all, though it depends on x
    v = ae.tensor([1.0, 1.0], dtype=ae.float64)
    with pytest.raises(
        ae.GradcheckError, match=r"Numerical gradient for function expected to be zero"
    ):
        ae.sync.gradgradcheck(flat_square, (x,), grad_outputs=(v,))
    assert ae.sync.gradgradcheck(lambda t: t**3, (x,), grad_outputs=v)


def test_output_that_does_not_require_grad_but_depends_on_input():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    with pytest.raises(
        ae.GradcheckError, match=r"Numerical gradient for function expected to be zero"
    ):
        ae.sync.gradcheck(lambda t: t.detach() * 2.0, (x,))
    assert ae.sync.gradcheck(lambda t: ae.ones(2), (x,))


# -- arguments ------------------------------------------------------------------------------------
def test_tuples_of_outputs_non_tensor_and_frozen_inputs():
    a = ae.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=ae.float64, requires_grad=True)
    c = ae.tensor(
        [2.0, 1.0], dtype=ae.float64
    )  # does not require grad: passed through, not checked
    assert ae.sync.gradcheck(lambda x, k, y: (x * k, (x * y).sum(), x.max(1)), (a, 2.5, c))
    assert ae.sync.gradgradcheck(lambda x, k, y: (x * x * k, (x * y).sum()), [a, 2.5, c])
    assert ae.sync.gradcheck(lambda x: x.exp(), a)  # a single tensor is accepted


def test_empty_input_and_output():
    x = ae.zeros(0, 3, dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(lambda t: t.sum(0), (x,))
    assert ae.sync.gradcheck(lambda t: t * 2.0, (x,))


def test_no_input_requires_grad():
    with pytest.raises(ValueError, match=r"at least one input tensor to require gradient"):
        ae.sync.gradcheck(lambda t: t * 2.0, (ae.ones(2, dtype=ae.float64),))


def test_float32_input_warns_like_torch():
    x = ae.tensor([1.0, 2.0], dtype=ae.float32, requires_grad=True)
    msg = r"Input #0 requires gradient and is not a double precision floating point"
    with pytest.warns(UserWarning, match=msg):
        assert ae.sync.gradcheck(lambda t: t * 2.0, (x,), eps=1e-2, atol=1e-2)


def test_result_must_be_tensors():
    x = ae.tensor([1.0], dtype=ae.float64, requires_grad=True)
    with pytest.raises(TypeError, match=r"must be a Tensor or a tuple of Tensors, got float"):
        ae.sync.gradcheck(lambda t: 1.0, (x,))


def test_inputs_are_restored():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = ae.tensor(a, requires_grad=True)
    data, version = x.data, x._version
    assert ae.sync.gradgradcheck(lambda t: (t**3).sum(1), (x,))
    assert x.data is data and x._version == version
    np.testing.assert_array_equal(x.detach().numpy(), a)


def test_non_contiguous_inputs():
    a = np.asfortranarray(np.arange(6.0).reshape(2, 3) / 7 + 0.1)
    x = ae.tensor(a, requires_grad=True)
    assert ae.sync.gradcheck(lambda t: t * t.sum(0), (x,))
    y = ae.tensor(a.T.copy(), requires_grad=True)
    assert ae.sync.gradgradcheck(lambda t: (t * t).prod(1), (y.T,))  # a view, not a leaf


def test_works_inside_no_grad():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    with ae.no_grad():
        assert ae.sync.gradcheck(lambda t: t * t, (x,))
        assert ae.sync.gradgradcheck(lambda t: t * t * t, (x,))
        with pytest.raises(ae.GradcheckError, match=r"Jacobian mismatch for output 0"):
            ae.sync.gradgradcheck(flat_square, (x,))


def test_inputs_on_another_device():
    x = ae.tensor(
        [[0.3, -1.2, 2.0], [0.7, 0.1, -0.4]], dtype=ae.float64, device="sim:0", requires_grad=True
    )
    assert ae.sync.gradcheck(lambda t: t.prod(1) + t.logsumexp(1), (x,))
    assert ae.sync.gradgradcheck(lambda t: t.softmax(1) * t, (x,))
    with pytest.raises(ae.GradcheckError, match=r"Jacobian mismatch for output 0"):
        ae.sync.gradcheck(bad_square, (x,))


def test_tolerances_are_used():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    # analytical 3x vs numerical 2x: rtol=0.6 accepts it
    assert ae.sync.gradcheck(bad_square, (x,), rtol=0.6)
    assert ae.sync.gradcheck(bad_square, (x,), atol=2.1, rtol=0.0)
    assert not ae.sync.gradcheck(bad_square, (x,), atol=1.9, rtol=0.0, raise_exception=False)


def test_nondet_tol_must_be_a_non_negative_number():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    for check in (ae.sync.gradcheck, ae.sync.gradgradcheck):
        with pytest.raises(
            TypeError, match=r"^nondet_tol must be a number \(e\.g\. 1e-10\), got str$"
        ):
            check(lambda t: t * t, (x,), nondet_tol="0")
        with pytest.raises(ValueError, match=r"^nondet_tol must be >= 0, got -1\.0$"):
            check(lambda t: t * t, (x,), nondet_tol=-1.0)
        assert check(lambda t: t * t, (x,), nondet_tol=1e-12)


# -- custom Functions --------------------------------------------------------------------------------
class Cube(ae.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 * x * x


class AsyncCube(ae.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    async def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 * x * x


def test_custom_function():
    x = ae.tensor([0.5, -1.5, 2.0], dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(Cube.apply, (x,))
    assert ae.sync.gradgradcheck(Cube.apply, (x,))


@pytest.mark.anyio
async def test_custom_function_with_async_backward():
    x = ae.tensor([0.5, -1.5, 2.0], dtype=ae.float64, requires_grad=True)
    assert await ae.gradcheck(AsyncCube.apply, (x,))
    assert await ae.gradgradcheck(AsyncCube.apply, (x,))


# -- async and sync forms ---------------------------------------------------------------------------
@pytest.mark.anyio
async def test_async_gradcheck_and_gradgradcheck():
    x = ae.tensor([[0.3, -1.2, 2.0]], dtype=ae.float64, requires_grad=True)
    assert await ae.gradcheck(lambda t: t.softmax(1), (x,)) is True
    assert await ae.gradgradcheck(lambda t: t.prod(), (x,)) is True
    with pytest.raises(ae.GradcheckError, match=r"Jacobian mismatch for output 0"):
        await ae.gradcheck(bad_square, (x,))
    assert await ae.gradgradcheck(flat_square, (x,), raise_exception=False) is False


@pytest.mark.anyio
async def test_sync_form_inside_a_loop_warns():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    with pytest.warns(RuntimeWarning, match=r"ae\.sync\.gradcheck\(\) called inside a running"):
        assert ae.sync.gradcheck(lambda t: t * t, (x,))


def test_names_and_docs():
    assert (
        ae.gradcheck.__name__ == "gradcheck" and ae.sync.gradgradcheck.__name__ == "gradgradcheck"
    )
    assert "finite differences" in ae.gradcheck.__doc__
    assert ae.sync.gradcheck.__doc__ == ae.gradcheck.__doc__


# -- like torch.autograd.gradcheck: grad mode, perturbed shapes, stride-0 inputs -----------------
def _hooked(t: Any) -> Any:
    """2 t whose gradient a hook triples: needs grad mode in every evaluation."""
    y = t * 2
    y.register_hook(lambda g: g * 3)
    return y


def _shape_changes(t: Any) -> Any:
    """Two elements at t[0] <= 1, one above: changes at the point checked (t[0] = 1)."""
    n = 1 if float(t.detach()[0]) > 1.0 else 2
    return t[:n] * 2


def _dtype_changes(t: Any) -> Any:
    return t * 2 if float(t.detach()[0]) > 1.0 else (t * 2).float()


def _torch_gradcheck_error(torch: Any, fn: Any, x: Any) -> BaseException:
    with pytest.raises(BaseException) as info:
        torch.autograd.gradcheck(fn, (x,))
    return info.value


def test_fn_that_needs_grad_mode_is_checked_like_torch():
    torch = torch_or_skip()
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    err = _torch_gradcheck_error(torch, _hooked, tx)
    assert type(err).__name__ == "GradcheckError" and "Jacobian mismatch" in str(err)
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    wrong = (
        "Jacobian mismatch for output 0 with respect to input 0,\n"
        "numerical:array([[2., 0.],\n       [0., 2.]])\n"
        "analytical:array([[6., 0.],\n       [0., 6.]])\n"
    )
    with pytest.raises(ae.GradcheckError, match=re.escape(wrong)):
        ae.sync.gradcheck(_hooked, (x,))
    assert ae.sync.gradcheck(_hooked, (x,), raise_exception=False) is False
    with ae.no_grad():  # also inside no_grad (torch: no differentiable output there)
        assert ae.sync.gradcheck(_hooked, (x,), raise_exception=False) is False


def test_output_shape_that_changes_under_perturbation_raises_like_torch():
    torch = torch_or_skip()
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    err = _torch_gradcheck_error(torch, _shape_changes, tx)
    assert "same shape when inputs are perturbed on index (0,) by 1e-06" in str(err)
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    msg = (
        r"Expected `func` to return outputs with the same shape when inputs are perturbed on "
        r"index \(0,\) by 1e-06, but got: shapes \(2,\) and \(1,\)\."
    )
    with pytest.raises(ValueError, match=msg):
        ae.sync.gradcheck(_shape_changes, (x,))
    with pytest.raises(ValueError, match=msg):  # not a failed check: raised as torch does
        ae.sync.gradcheck(_shape_changes, (x,), raise_exception=False)


def test_output_dtype_that_changes_under_perturbation_raises_like_torch():
    torch = torch_or_skip()
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    err = _torch_gradcheck_error(torch, _dtype_changes, tx)
    assert "same dtype when inputs are perturbed on index (0,) by 1e-06" in str(err)
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    msg = (
        r"Expected `func` to return outputs with the same dtype when inputs are perturbed on "
        r"index \(0,\) by 1e-06, but got: dtypes float32 and float64\."
    )
    with pytest.raises(ValueError, match=msg):
        ae.sync.gradcheck(_dtype_changes, (x,))


STRIDE_0 = (
    r"The {}th input has a dimension with stride 0\. gradcheck only supports inputs that are "
    r"non-overlapping to be able to compute the numerical gradients correctly\. You should "
    r"call \.contiguous on the input before passing it to gradcheck\."
)


def test_input_with_a_stride_0_dimension_is_refused_like_torch():
    torch = torch_or_skip()
    tx = torch.ones(1, dtype=torch.float64, requires_grad=True).expand(3)
    with pytest.raises(RuntimeError, match=STRIDE_0.format(0)):
        torch.autograd.gradcheck(lambda t: t * 2, (tx,))
    x = ae.ones(1, dtype=ae.float64, requires_grad=True).expand(3)
    with pytest.raises(RuntimeError, match=STRIDE_0.format(0)):
        ae.sync.gradcheck(lambda t: t * 2, (x,))
    with pytest.raises(RuntimeError, match=STRIDE_0.format(0)):
        ae.sync.gradcheck(lambda t: t * 2, (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match=STRIDE_0.format(0)):
        ae.sync.gradgradcheck(lambda t: t * t, (x,))
    assert ae.sync.gradcheck(lambda t: t * 2, (x.contiguous(),))  # the fix
    # a broadcast numpy array shared without a copy, as the second input
    b = ae.as_tensor(np.broadcast_to(np.arange(2.0)[:, None], (2, 3))).requires_grad_()
    with pytest.raises(RuntimeError, match=STRIDE_0.format(1)):
        ae.sync.gradcheck(lambda k, t: t * k, (3.0, b))
    # size-1 dimensions and empty tensors are fine, as in torch
    ones = ae.ones(1, 1, dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(lambda t: t * 2, (ones.expand(1, 1),))
    one = ae.ones(1, 3, dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(lambda t: t * 2, (one.expand(1, 3),))


@pytest.mark.anyio
async def test_async_gradcheck_checks_the_same():
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    assert await ae.gradcheck(_hooked, (x,), raise_exception=False) is False
    with pytest.raises(ValueError, match=r"same shape when inputs are perturbed on index \(0,\)"):
        await ae.gradcheck(_shape_changes, (x,))
    e = ae.ones(1, dtype=ae.float64, requires_grad=True).expand(3)
    with pytest.raises(RuntimeError, match=STRIDE_0.format(0)):
        await ae.gradgradcheck(lambda t: t * t, (e,))


# -- fast mode ---------------------------------------------------------------------------------------


def _torch_gradcheck_error_type() -> Any:
    """torch's GradcheckError (``torch.autograd.gradcheck`` is also the function's name)."""
    return importlib.import_module("torch.autograd.gradcheck").GradcheckError


def _torch_bad_square(torch: Any) -> Any:
    """bad_square in torch: x * x with a backward of 3 x g (the right one is 2 x g)."""

    class BadSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 3.0 * x

    return BadSquare.apply


FAST_CASES: list[tuple[str, Callable[..., Any], list[tuple[int, ...]]]] = [
    ("tanh of a product", lambda a, b: (a @ b).tanh(), [(4, 3), (3, 2)]),
    ("two outputs", lambda a, b: (a.sin() * b, (a * b).sum()), [(3,), (3,)]),
    ("softmax", lambda a: a.softmax(1), [(2, 5)]),
    ("a reduction", lambda a: a.prod(0), [(3, 2)]),
]


@pytest.mark.parametrize("name,fn,shapes", FAST_CASES, ids=[c[0] for c in FAST_CASES])
def test_fast_mode_passes_what_torch_passes(name: str, fn: Any, shapes: list[Any]) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [ae.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    assert torch.autograd.gradcheck(fn, theirs, fast_mode=True)
    assert ae.sync.gradcheck(fn, ours, fast_mode=True) is True
    assert torch.autograd.gradgradcheck(fn, theirs, fast_mode=True)
    assert ae.sync.gradgradcheck(fn, ours, fast_mode=True) is True


def test_fast_mode_finds_a_wrong_rule_as_torch_and_shows_the_jacobians() -> None:
    torch = torch_or_skip()
    data = np.array([1.0, 2.0, -0.5])
    t = torch.tensor(data, requires_grad=True)
    with pytest.raises(_torch_gradcheck_error_type(), match="Jacobian mismatch"):
        torch.autograd.gradcheck(_torch_bad_square(torch), (t,), fast_mode=True)
    x = ae.tensor(data, requires_grad=True)
    with pytest.raises(ae.GradcheckError) as info:
        ae.sync.gradcheck(bad_square, (x,), fast_mode=True)
    msg = str(info.value)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    # the whole Jacobians follow, computed the slow way: diag(2x) against the claimed diag(3x)
    assert "Numerical:\n array([[ 2.,  0.,  0.]," in msg
    assert "Analytical:\narray([[ 3. ,  0. ,  0. ]," in msg
    assert re.search(r"max per-element difference \(slow mode\) is: 1\.99999", msg)
    assert ae.sync.gradcheck(bad_square, (x,), fast_mode=True, raise_exception=False) is False


def test_fast_mode_says_when_the_slow_mode_would_pass() -> None:
    """Entries each within rtol of large alternating ones; their projection is not."""
    c = np.tile([100.0, -100.0], 25)
    # the claimed derivative is c + 1: 1% off each entry (rtol 2% lets each pass), but the
    # projection's +1s add up while the alternating 100s cancel
    scaled = node_class("Scaled", lambda F, g, s, n: (g * (c + 1.0),))
    f = lambda t: record(scaled, t.data * c, t._device, (t,), (t,))  # noqa: E731
    x = ae.tensor(np.linspace(-1, 1, 50), requires_grad=True)
    assert ae.sync.gradcheck(f, (x,), atol=0.0, rtol=0.02)
    with pytest.raises(ae.GradcheckError, match="might have passed in the slow mode"):
        ae.sync.gradcheck(f, (x,), atol=0.0, rtol=0.02, fast_mode=True)
    torch = torch_or_skip()

    class TorchScaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any) -> Any:
            return t * torch.tensor(c)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * torch.tensor(c + 1.0)

    t = torch.tensor(np.linspace(-1, 1, 50), requires_grad=True)
    assert torch.autograd.gradcheck(TorchScaled.apply, (t,), atol=0.0, rtol=0.02)
    with pytest.raises(_torch_gradcheck_error_type(), match="might've passed in slow_mode"):
        torch.autograd.gradcheck(TorchScaled.apply, (t,), atol=0.0, rtol=0.02, fast_mode=True)


def test_fast_mode_second_derivative_and_dependence_without_grad_like_torch() -> None:
    torch = torch_or_skip()
    x = ae.tensor([1.0, 2.0], dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(flat_square, (x,), fast_mode=True)
    with pytest.raises(ae.GradcheckError, match=r"Jacobian mismatch for output 0 with respect"):
        ae.sync.gradgradcheck(flat_square, (x,), fast_mode=True)
    expected_zero = r"Numerical gradient for function expected to be zero"
    t = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(_torch_gradcheck_error_type(), match=expected_zero):
        torch.autograd.gradcheck(lambda a: a.detach() * 2.0, (t,), fast_mode=True)
    with pytest.raises(ae.GradcheckError, match=expected_zero):
        ae.sync.gradcheck(lambda a: a.detach() * 2.0, (x,), fast_mode=True)
    assert ae.sync.gradcheck(lambda a: ae.ones(2), (x,), fast_mode=True)


def test_fast_mode_evaluates_fn_a_fixed_number_of_times() -> None:
    calls = [0]

    def f(a: ae.Tensor) -> ae.Tensor:
        calls[0] += 1
        return a.exp()

    x = ae.randn(50, dtype=ae.float64, requires_grad=True)
    assert ae.sync.gradcheck(f, (x,), fast_mode=True)
    assert calls[0] == 3  # once, then minus and plus along u: not 2 per element
    before = x.detach().numpy().copy()
    ae.sync.gradcheck(f, (x,), fast_mode=True)
    np.testing.assert_array_equal(x.detach().numpy(), before)  # the input is restored


@pytest.mark.anyio
async def test_fast_mode_awaited() -> None:
    x = ae.tensor([[0.3, -1.2, 2.0]], dtype=ae.float64, requires_grad=True)
    assert await ae.gradcheck(lambda t: t.softmax(1), (x,), fast_mode=True) is True
    assert await ae.gradgradcheck(AsyncCube.apply, (x,), fast_mode=True) is True
    assert await ae.gradcheck(bad_square, (x,), fast_mode=True, raise_exception=False) is False
