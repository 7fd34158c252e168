"""Arguments of the wrong kind: a TypeError naming the function and the argument, as torch's.

A str (or another non-Tensor) given where an op takes a Tensor, a flag that
is not a bool, a str operand of a comparison, a range whose step has the
wrong sign, random numbers of an integer dtype.  Each case checks that torch
(the oracle) refuses it too, then aengine's type and text.  aengine raises
TypeError / ValueError where torch raises RuntimeError for a bad argument
(docs/errors.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

# -- ops that take a Tensor ---------------------------------------------------------------------

#: op name -> its call with a str as the tensor, in aengine or torch (the module is passed)
TENSOR_INPUT: dict[str, Callable[[Any], Any]] = {
    "neg": lambda m: m.neg("a"),
    "sign": lambda m: m.sign("a"),
    "clone": lambda m: m.clone("a"),
    "logical_not": lambda m: m.logical_not("a"),
    "mean": lambda m: m.mean("a"),
    "prod": lambda m: m.prod("a"),
    "amax": lambda m: m.amax("a", 0),
    "amin": lambda m: m.amin("a", 0),
    "max": lambda m: m.max("a"),
    "min": lambda m: m.min("a"),
    "logsumexp": lambda m: m.logsumexp("a", 0),
    "softmax": lambda m: m.softmax("a", 0),
    "log_softmax": lambda m: m.log_softmax("a", 0),
    "norm": lambda m: m.norm("a"),
    "std": lambda m: m.std("a"),
    "var": lambda m: m.var("a"),
    "reshape": lambda m: m.reshape("a", (1,)),
    "flatten": lambda m: m.flatten("a"),
    "permute": lambda m: m.permute("a", (0,)),
    "unbind": lambda m: m.unbind("a"),
    "index_select": lambda m: m.index_select("a", 0, m.tensor([0])),
    "masked_fill": lambda m: m.masked_fill("a", m.tensor([True]), 0.0),
}


@pytest.mark.parametrize("name", list(TENSOR_INPUT))
def test_an_op_given_a_str_for_its_tensor_names_itself(name: str) -> None:
    torch = torch_or_skip()
    call = TENSOR_INPUT[name]
    # torch: "neg(): argument 'input' (position 1) must be Tensor, not str" (norm: an
    # AttributeError from its Python code)
    with pytest.raises((TypeError, AttributeError)):
        call(torch)
    with pytest.raises(
        TypeError, match=rf"^{name}\(\): argument 'input' must be a Tensor, not str"
    ):
        call(ae)


def test_expand_given_a_str_names_itself() -> None:
    torch = torch_or_skip()
    with pytest.raises(TypeError):
        torch.Tensor.expand("a", (2,))
    with pytest.raises(TypeError, match=r"^expand\(\): argument 'input' must be a Tensor, not str"):
        ae.expand("a", (2,))


def test_ops_that_take_a_tensor_refuse_a_list_as_torch() -> None:
    torch = torch_or_skip()
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        torch.neg([1.0])
    for call in (lambda: ae.neg([1.0]), lambda: ae.mean([1.0]), lambda: ae.clone([1.0])):
        with pytest.raises(TypeError, match="argument 'input' must be a Tensor, not list"):
            call()
    x = ae.tensor([1.0, -2.0], requires_grad=True)  # Tensors as before
    assert ae.neg(x).tolist() == [-1.0, 2.0] and ae.sign(x).tolist() == [1.0, -1.0]
    assert ae.clone(x).grad_fn is not None and ae.logical_not(x > 0).tolist() == [False, True]


@pytest.mark.parametrize("method", ["view_as", "reshape_as", "expand_as", "type_as"])
def test_the_as_methods_given_a_str_name_the_other_argument(method: str) -> None:
    torch = torch_or_skip()
    with pytest.raises(TypeError, match=rf"{method}\(\): argument 'other' \(position 1\)"):
        getattr(torch.ones(2), method)("a")
    with pytest.raises(
        TypeError, match=rf"^{method}\(\): argument 'other' must be a Tensor, not str"
    ):
        getattr(ae.ones(2), method)("a")


def test_the_as_methods_still_take_a_tensor() -> None:
    x = ae.ones(2, 3, dtype=ae.float64, requires_grad=True)
    assert x.view_as(ae.ones(3, 2)).shape == (3, 2)
    assert x.reshape_as(ae.ones(6)).shape == (6,)
    assert ae.ones(1, 3).expand_as(x).shape == (2, 3)
    assert x.type_as(ae.ones(1, dtype=ae.float32)).dtype == ae.float32
    assert x.view_as(x).grad_fn is not None


# -- comparisons, logical ops and where ---------------------------------------------------------


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "ge", "logical_and", "logical_or"])
def test_a_comparison_function_refuses_a_str_operand(name: str) -> None:
    torch = torch_or_skip()
    t = torch.ones(3) > 0 if name.startswith("logical") else torch.ones(3)
    with pytest.raises(TypeError):
        getattr(torch, name)(t, "a")
    x = ae.ones(3) > 0 if name.startswith("logical") else ae.ones(3)
    text = rf"^{name}\(\): argument 'other' must be a Tensor or a number, not str 'a'$"
    with pytest.raises(TypeError, match=text):
        getattr(ae, name)(x, "a")
    with pytest.raises(
        TypeError, match=r"argument 'other' must be a Tensor or a number, not NoneType"
    ):
        getattr(ae, name)(x, None)
    with pytest.raises(
        TypeError, match=rf"^{name}\(\): argument 'input' must be a Tensor or a number"
    ):
        getattr(ae, name)("a", x)


def test_tensor_eq_and_ne_methods_refuse_a_str() -> None:
    torch = torch_or_skip()
    with pytest.raises(TypeError):
        torch.ones(3).eq("a")
    with pytest.raises(TypeError, match="eq.*not str 'a'"):
        ae.ones(3).eq("a")
    with pytest.raises(TypeError, match="ne.*not str 'a'"):
        ae.ones(3).ne("a")


def test_comparison_operators_fall_back_as_torch_for_what_they_cannot_compare() -> None:
    """``x == "a"`` is False and ``x < "a"`` a TypeError, in torch and aengine alike."""
    torch = torch_or_skip()
    for lib in (torch, ae):
        x = lib.ones(3)
        assert (x == "a") is False and (x != "a") is True
        assert (x == None) is False and (x != None) is True  # noqa: E711
        assert (x == object()) is False
        with pytest.raises(TypeError, match="'<' not supported between instances of 'Tensor'"):
            x < "a"  # noqa: B015
        with pytest.raises(TypeError, match="unsupported operand type"):
            (x > 0) & "a"
        with pytest.raises(TypeError, match="unsupported operand type"):
            (x > 0) | None
    x = ae.tensor([1.0, 2.0])
    assert (x == 1.0).tolist() == [True, False] and (2 < x).tolist() == [False, False]
    assert (x == ae.tensor([1.0, 3.0])).tolist() == [True, False]
    assert ((x > 1) & (x < 3)).tolist() == [False, True]
    # numbers in either place, numpy scalars and arrays of numbers
    assert ae.eq(1.0, x).tolist() == [True, False] and ae.ne(x, np.float32(2.0)).tolist() == [
        True,
        False,
    ]
    assert ae.lt(x, np.array([2.0, 2.0])).tolist() == [True, False]


def test_comparisons_keep_taking_lists_of_numbers() -> None:
    """A departure kept: torch refuses a list operand (``x == [1, 2]`` is False there)."""
    x = ae.tensor([1.0, 2.0])
    assert (x == [1.0, 3.0]).tolist() == [True, False]
    assert ae.gt(x, [0, 5]).tolist() == [True, False]
    with pytest.raises(TypeError, match=r"eq\(\): argument 'other' .* not str 'b'"):
        ae.eq(x, [1.0, "b"])


def test_where_refuses_a_str_branch() -> None:
    torch = torch_or_skip()
    with pytest.raises(TypeError):
        torch.where(torch.ones(2) > 0, "a", torch.ones(2))
    x = ae.ones(2)
    with pytest.raises(
        TypeError, match=r"^where\(\): argument 'input' must be a Tensor or a number, not str 'a'$"
    ):
        ae.where(x > 0, "a", x)
    with pytest.raises(
        TypeError, match=r"^where\(\): argument 'other' must be a Tensor or a number, not NoneType$"
    ):
        ae.where(x > 0, x, None)
    assert ae.where(ae.tensor([True, False]), 1.0, x * 3).tolist() == [1.0, 3.0]


# -- flags that must be bools ---------------------------------------------------------------------


def test_requires_grad_must_be_a_bool() -> None:
    torch = torch_or_skip()
    with pytest.raises(
        TypeError, match="tensor\\(\\): argument 'requires_grad' must be bool, not str"
    ):
        torch.tensor([1.0], requires_grad="yes")
    with pytest.raises(TypeError, match="argument 'requires_grad' must be bool, not str"):
        ae.tensor([1.0], requires_grad="yes")
    with pytest.raises(TypeError, match="argument 'requires_grad' must be bool, not int"):
        ae.zeros(2, requires_grad=1)

    with pytest.raises(TypeError, match="requires_grad_\\(\\): argument 'requires_grad'.*bool"):
        torch.ones(1).requires_grad_("yes")
    for bad in ("yes", None, 1, np.bool_(True)):
        with pytest.raises(
            TypeError,
            match=f"requires_grad_\\(\\): argument 'requires_grad' must be bool, not "
            f"{type(bad).__name__}",
        ):
            ae.ones(1).requires_grad_(bad)  # type: ignore[arg-type]

    t = torch.ones(1)
    with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
        t.requires_grad = "yes"
    a = ae.ones(1)
    with pytest.raises(TypeError, match="^requires_grad must be a bool, not str$"):
        a.requires_grad = "yes"  # type: ignore[assignment]
    assert a.requires_grad is False
    a.requires_grad = True
    assert a.requires_grad is True and ae.ones(1, requires_grad=True).requires_grad is True


def test_detect_anomaly_check_nan_must_be_a_bool() -> None:
    torch = torch_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="argument 'check_nan' .*must be bool, not str"):
            with torch.autograd.detect_anomaly(check_nan="x"):  # type: ignore[arg-type]
                pass
        with pytest.raises(
            TypeError, match=r"^detect_anomaly\(\): argument 'check_nan' must be bool, not str$"
        ):
            ae.detect_anomaly(check_nan="x")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="must be bool, not NoneType"):
            ae.detect_anomaly(check_nan=None)  # type: ignore[arg-type]
        with ae.detect_anomaly(check_nan=False):
            assert ae.is_anomaly_enabled() and not ae.is_anomaly_check_nan_enabled()


def _function_with(forward: Callable[[Any, Any], Any]) -> Any:
    class Custom(ae.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return forward(ctx, x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    return Custom


def _torch_function_with(torch: Any, forward: Callable[[Any, Any], Any]) -> Any:
    class Custom(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return forward(ctx, x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    return Custom


def test_function_ctx_refuses_arguments_of_the_wrong_kind() -> None:
    torch = torch_or_skip()
    tx = torch.ones(2, requires_grad=True)
    x = ae.ones(2, requires_grad=True)

    def non_diff(ctx: Any, v: Any) -> Any:
        ctx.mark_non_differentiable("a")
        return v * 1

    def materialize(ctx: Any, v: Any) -> Any:
        ctx.set_materialize_grads("a")
        return v * 1

    # torch: RuntimeError "mark_non_differentiable only accepts variable arguments"
    with pytest.raises(RuntimeError, match="mark_non_differentiable only accepts"):
        _torch_function_with(torch, non_diff).apply(tx)
    with pytest.raises(
        TypeError, match="^mark_non_differentiable only accepts tensors, but argument 0 is str"
    ):
        _function_with(non_diff).apply(x)
    with pytest.raises(TypeError, match="set_materialize_grads.*expected \\(bool\\)"):
        _torch_function_with(torch, materialize).apply(tx)
    with pytest.raises(TypeError, match="^set_materialize_grads expects a bool, got str$"):
        _function_with(materialize).apply(x)


def test_once_differentiable_refuses_what_is_not_callable() -> None:
    """A departure: torch wraps 5 and fails only when the wrapper is called."""
    torch = torch_or_skip()
    torch.autograd.function.once_differentiable(5)  # accepted
    with pytest.raises(TypeError, match="^once_differentiable expects a callable .*, got int"):
        ae.once_differentiable(5)  # type: ignore[type-var]


# -- ranges and random numbers ------------------------------------------------------------------


@pytest.mark.parametrize("bounds", [(10, 0, 1), (0, 10, -1), (1.0, 0.0, 0.5), (0.0, 1.0, -0.5)])
def test_arange_refuses_a_step_of_the_wrong_sign(bounds: tuple[Any, Any, Any]) -> None:
    torch = torch_or_skip()
    text = "upper bound and lower bound inconsistent with step sign"
    with pytest.raises(RuntimeError, match=text):
        torch.arange(*bounds)
    with pytest.raises(ValueError, match=f"^{text}"):
        ae.arange(*bounds)


@pytest.mark.parametrize("bounds", [(5, 5, 1), (5, 5, -1), (5, 0, -2), (0, 1, 0.25)])
def test_arange_with_a_step_of_the_right_sign_is_torchs(bounds: tuple[Any, Any, Any]) -> None:
    torch = torch_or_skip()
    assert ae.arange(*bounds).tolist() == torch.arange(*bounds).tolist()


@pytest.mark.parametrize("name", ["rand_like", "randn_like"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_random_like_of_a_non_float_tensor_needs_a_float_dtype(name: str, dtype: str) -> None:
    torch = torch_or_skip()
    t = torch.zeros(2, dtype=getattr(torch, dtype))
    with pytest.raises(NotImplementedError, match="not implemented for"):
        getattr(torch, name)(t)
    assert getattr(torch, name)(t, dtype=torch.float64).dtype == torch.float64
    a = ae.zeros(2, dtype=getattr(ae, dtype if dtype != "bool" else "bool_"))
    for error in (NotImplementedError, TypeError):  # torch's type, and a TypeError too
        with pytest.raises(error, match=rf"^{name}\(\): random numbers need a floating point"):
            getattr(ae, name)(a)
    assert getattr(ae, name)(a, dtype=ae.float64).dtype == ae.float64


_INIT_FILLS = {
    "uniform_": lambda init, t: init.uniform_(t),
    "normal_": lambda init, t: init.normal_(t),
    "trunc_normal_": lambda init, t: init.trunc_normal_(t),
    "xavier_uniform_": lambda init, t: init.xavier_uniform_(t),
    "xavier_normal_": lambda init, t: init.xavier_normal_(t),
    "kaiming_uniform_": lambda init, t: init.kaiming_uniform_(t),
    "kaiming_normal_": lambda init, t: init.kaiming_normal_(t),
    "orthogonal_": lambda init, t: init.orthogonal_(t),
}


@pytest.mark.parametrize("name", sorted(_INIT_FILLS))
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_random_init_of_a_non_float_tensor_raises_as_torch(name: str, dtype: str) -> None:
    torch = torch_or_skip()
    fill = _INIT_FILLS[name]
    with pytest.raises(NotImplementedError, match="not implemented for"):
        fill(torch.nn.init, torch.zeros(2, 2, dtype=getattr(torch, dtype)))
    a = ae.zeros(2, 2, dtype=getattr(ae, dtype if dtype != "bool" else "bool_"))
    with pytest.raises(NotImplementedError, match=r"random numbers need a floating point dtype"):
        fill(ae.nn.init, a)
    assert not a.numpy().any()  # untouched
    fill(ae.nn.init, ae.zeros(2, 2, dtype=ae.float32))  # a float tensor is filled


def test_rand_of_an_integer_dtype_is_refused_as_torch() -> None:
    torch = torch_or_skip()
    with pytest.raises(NotImplementedError):
        torch.rand(2, dtype=torch.int64)
    # torch's type (NotImplementedError, a RuntimeError), and a TypeError too
    for error in (NotImplementedError, RuntimeError, TypeError):
        with pytest.raises(error, match=r"^rand\(\): random numbers need a floating point dtype"):
            ae.rand(2, dtype=ae.int64)
        with pytest.raises(error, match=r"^randn\(\): random numbers need a floating point"):
            ae.randn(2, dtype=ae.bool_)
    assert ae.rand(2, dtype=ae.float64).dtype == ae.float64


#: random integers whose range or dtype torch refuses: (call, torch's error type); each
#: call takes the library and a dtype-name mapper (aengine spells bool ``bool_``)
_RANDOM_INT_REFUSALS: dict[str, tuple[Callable[[Any, Callable[[str], Any]], Any], type]] = {
    "randint bool high 3": (lambda L, d: L.randint(0, 3, (2,), dtype=d("bool")), RuntimeError),
    "randint bool low -1": (lambda L, d: L.randint(-1, 1, (2,), dtype=d("bool")), RuntimeError),
    "randint uint8 high 257": (
        lambda L, d: L.randint(0, 257, (2,), dtype=d("uint8")),
        RuntimeError,
    ),
    "randint uint8 low -1": (lambda L, d: L.randint(-1, 5, (2,), dtype=d("uint8")), RuntimeError),
    "randint int8 low -129": (
        lambda L, d: L.randint(-129, 0, (2,), dtype=d("int8")),
        RuntimeError,
    ),
    "randint int16 high 2**24": (
        lambda L, d: L.randint(0, 2**24, (2,), dtype=d("int16")),
        RuntimeError,
    ),
    "randint float16 high 65506": (
        lambda L, d: L.randint(0, 65506, (2,), dtype=d("float16")),
        RuntimeError,
    ),
    "randint_like of a bool tensor, high 3": (
        lambda L, d: L.randint_like(L.zeros(2, dtype=d("bool")), 3),
        RuntimeError,
    ),
    "randperm bool": (lambda L, d: L.randperm(3, dtype=d("bool")), NotImplementedError),
    "randperm int8 of 300": (lambda L, d: L.randperm(300, dtype=d("int8")), RuntimeError),
    "randperm float16 of 2050": (
        lambda L, d: L.randperm(2050, dtype=d("float16")),
        RuntimeError,
    ),
    "multinomial of int64 weights": (
        lambda L, d: L.multinomial(L.tensor([1, 2, 3]), 2),
        RuntimeError,
    ),
    "multinomial of bool weights": (
        lambda L, d: L.multinomial(L.tensor([True, False]), 1),
        RuntimeError,
    ),
}


@pytest.mark.parametrize("case", sorted(_RANDOM_INT_REFUSALS))
def test_random_integers_out_of_the_dtype_are_refused_as_torch(case: str) -> None:
    torch = torch_or_skip()
    call, error = _RANDOM_INT_REFUSALS[case]
    with pytest.raises(error):
        call(torch, lambda name: getattr(torch, name))
    with pytest.raises(error, match="pass|not implemented"):
        call(ae, lambda name: getattr(ae, name if name != "bool" else "bool_"))


@pytest.mark.parametrize(
    ("low", "high", "dtype"),
    [(0, 2, "bool"), (0, 256, "uint8"), (-128, 128, "int8"), (-2048, 2049, "float16")],
)
def test_random_integers_at_the_edges_of_the_dtype_are_drawn(
    low: int, high: int, dtype: str
) -> None:
    torch = torch_or_skip()
    torch.randint(low, high, (2,), dtype=getattr(torch, dtype))  # accepted by torch too
    drawn = ae.randint(low, high, (4000,), dtype=getattr(ae, dtype if dtype != "bool" else "bool_"))
    values = drawn.numpy().astype(np.float64)
    assert values.min() >= low and values.max() <= high - 1


def test_random_integers_beyond_a_floats_exact_range_warn_as_torch() -> None:
    torch = torch_or_skip()
    with pytest.warns(UserWarning, match=r"out of bounds \[-\(2\^24\), 2\^24\]"):
        torch.randint(0, 2**24 + 2, (2,), dtype=torch.float32)
    with pytest.warns(UserWarning, match=r"out of bounds \[-\(2\^24\), 2\^24\]"):
        ae.randint(0, 2**24 + 2, (2,), dtype=ae.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ae.randint(0, 2**24 + 1, (2,), dtype=ae.float32)  # every value exact: no warning
        ae.randint(0, 2**53, (2,), dtype=ae.float64)
    with pytest.warns(UserWarning, match=r"^from is out of bounds \[-\(2\^11\), 2\^11\]"):
        ae.randint(-2049, 0, (2,), dtype=ae.float16)
