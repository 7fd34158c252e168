"""dtypes as PyTorch's: the default dtype, inference at creation, promotion.

Also the matrix products' one-dtype rule, ``ae.mm`` / ``ae.dot`` /
``Tensor.cpu``, the ``axis=`` alias of ``dim=`` and numpy integers as sizes
and dims.  Every case is compared with torch 2.13 (the oracle).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip


def _name(dtype: Any) -> str:
    """``torch.float32`` and ``dtype('float32')`` both as ``'float32'``."""
    return str(dtype).rsplit(".", 1)[-1]


@pytest.fixture
def restore_default_dtype() -> Iterator[None]:
    """The default dtype is process-wide (in both libraries): put it back after the test."""
    before = ae.get_default_dtype()
    torch = torch_or_skip()
    tbefore = torch.get_default_dtype()
    try:
        yield
    finally:
        ae.set_default_dtype(before)
        torch.set_default_dtype(tbefore)


# -- the dtype of data given without one ------------------------------------------------------
def _data(lib: Any) -> dict[str, Any]:
    return {
        "float": 1.5,
        "int": 2,
        "bool": True,
        "complex": 1j,
        "floats": [1.0, 2.0],
        "ints_and_floats": [1, 2.0],
        "ints": [1, 2],
        "bools": [True, False],
        "bool_and_float": [True, 2.0],
        "bool_and_int": [True, 2],
        "empty": [],
        "empty_nested": [[]],
        "nested": [[1.0, 2], [3, 4]],
        "tuple": (1.0, 2.0),
        "complex_and_float": [1j, 1.0],
        "np_float64": np.float64(1.0),
        "np_float32": np.float32(1.0),
        "np_int32": np.int32(1),
        "np_bool": np.bool_(True),
        "array_float64": np.array([1.0, 2.0]),
        "array_float32": np.array([1.0], dtype=np.float32),
        "array_int32": np.array([1], dtype=np.int32),
        "array_0d": np.array(1.0),
        "np_float32_in_list": [np.float32(1), 2.0],
        "np_float64_in_list": [1, np.float64(2)],
        "np_float16_in_list": [np.float16(1), 2.0],
        "np_int32_in_list": [np.int32(1), 2],
        "int_beyond_int64_and_float": [2**64, 1.0],
        "float64_tensor_in_list": [lib.tensor(1.0, dtype=lib.float64), 2.0],
        "int32_tensor_in_list": [lib.tensor(1, dtype=lib.int32), 2],
    }


DATA = list(_data(ae))


@pytest.mark.parametrize("case", DATA)
def test_tensor_infers_torchs_dtype(case: str) -> None:
    torch = torch_or_skip()
    expected = torch.tensor(_data(torch)[case])
    ours = ae.tensor(_data(ae)[case])
    assert _name(ours.dtype) == _name(expected.dtype)
    assert ours.tolist() == expected.tolist()
    assert _name(ae.as_tensor(_data(ae)[case]).dtype) == _name(expected.dtype)


@pytest.mark.parametrize("case", DATA)
def test_tensor_infers_torchs_dtype_under_a_float64_default(
    case: str, restore_default_dtype: None
) -> None:
    torch = torch_or_skip()
    torch.set_default_dtype(torch.float64)
    ae.set_default_dtype(ae.float64)
    expected = torch.tensor(_data(torch)[case])
    assert _name(ae.tensor(_data(ae)[case]).dtype) == _name(expected.dtype)


def test_python_floats_are_float32_numpy_arrays_keep_float64() -> None:
    """The issue: JSON floats were float64 and turned float32 weights' products into float64."""
    assert ae.get_default_dtype() == ae.float32
    w = ae.randn(3, 2, requires_grad=True)
    x = ae.tensor([[0.5, -1.0, 2.0]])  # e.g. parsed from JSON
    assert w.dtype == x.dtype == (x @ w).dtype == ae.float32
    assert ae.tensor(np.array([0.5, -1.0])).dtype == ae.float64
    assert ae.tensor(np.float64(0.5)).dtype == ae.float64  # torch: float64 too


def test_ints_beyond_int64_raise_as_torch() -> None:
    torch = torch_or_skip()
    for data in ([1, 2**63], [-(2**63) - 1], 2**63):
        with pytest.raises(ValueError, match="Overflow"):
            torch.tensor(data)
        with pytest.raises(ValueError, match="cannot be converted to int64 without overflow"):
            ae.tensor(data)


# -- creation functions ------------------------------------------------------------------------
CREATION: dict[str, Callable[[Any], Any]] = {
    "zeros": lambda lib: lib.zeros(2, 3),
    "ones": lambda lib: lib.ones(2),
    "empty": lambda lib: lib.empty(2),
    "rand": lambda lib: lib.rand(2),
    "randn": lambda lib: lib.randn(2),
    "linspace": lambda lib: lib.linspace(0, 1, 3),
    "eye": lambda lib: lib.eye(2),
    "full_int": lambda lib: lib.full((2,), 3),
    "full_float": lambda lib: lib.full((2,), 2.5),
    "full_bool": lambda lib: lib.full((2,), True),
    "full_complex": lambda lib: lib.full((2,), 1j),
    "full_np_float64": lambda lib: lib.full((2,), np.float64(1.0)),
    "full_np_int32": lambda lib: lib.full((2,), np.int32(1)),
    "full_float64_tensor": lambda lib: lib.full((2,), lib.tensor(1.0, dtype=lib.float64)),
    "arange_int": lambda lib: lib.arange(3),
    "arange_float": lambda lib: lib.arange(3.0),
    "arange_float_step": lambda lib: lib.arange(0, 3, 0.5),
    "arange_np_int": lambda lib: lib.arange(np.int64(3)),
    "arange_np_float64": lambda lib: lib.arange(np.float64(3)),
    "arange_int_tensor": lambda lib: lib.arange(lib.tensor(3)),
    "arange_float64_tensor": lambda lib: lib.arange(lib.tensor(3.0, dtype=lib.float64)),
    "zeros_like_keeps": lambda lib: lib.zeros_like(lib.ones(2, dtype=lib.float64)),
    "rand_like_keeps": lambda lib: lib.rand_like(lib.ones(2, dtype=lib.float64)),
    "explicit_dtype": lambda lib: lib.ones(2, dtype=lib.float64),
}


@pytest.mark.parametrize("case", list(CREATION))
def test_creation_functions_give_torchs_dtype(case: str) -> None:
    torch = torch_or_skip()
    expected, ours = CREATION[case](torch), CREATION[case](ae)
    assert _name(ours.dtype) == _name(expected.dtype)
    assert ours.shape == tuple(expected.shape)


@pytest.mark.parametrize("case", list(CREATION))
def test_creation_functions_follow_a_float64_default(
    case: str, restore_default_dtype: None
) -> None:
    torch = torch_or_skip()
    torch.set_default_dtype(torch.float64)
    ae.set_default_dtype(ae.float64)
    assert _name(CREATION[case](ae).dtype) == _name(CREATION[case](torch).dtype)


# -- set_default_dtype / get_default_dtype --------------------------------------------------------
def test_default_dtype_is_float32_and_settable(restore_default_dtype: None) -> None:
    torch = torch_or_skip()
    assert _name(ae.get_default_dtype()) == _name(torch.get_default_dtype()) == "float32"
    ae.set_default_dtype(ae.float64)
    assert ae.get_default_dtype() == ae.float64
    assert ae.tensor(1.0).dtype == ae.zeros(1).dtype == ae.float64
    assert ae.tensor(1j).dtype == ae.complex128
    assert (ae.tensor([1, 2]) * 2.5).dtype == ae.float64
    assert (ae.tensor([1, 2]) / 2).dtype == ae.float64
    ae.set_default_dtype("float16")  # names are dtypes too
    assert ae.tensor(1.0).dtype == ae.float16
    ae.set_default_dtype(ae.float32)
    assert ae.tensor(1.0).dtype == ae.float32


@pytest.mark.parametrize("bad", ["int64", "bool", "complex64"])
def test_set_default_dtype_accepts_only_floating_dtypes(
    bad: str, restore_default_dtype: None
) -> None:
    torch = torch_or_skip()
    with pytest.raises(TypeError, match="only floating-point types are supported as the default"):
        torch.set_default_dtype(getattr(torch, bad))
    with pytest.raises(TypeError, match="only floating-point types are supported as the default"):
        ae.set_default_dtype(np.dtype(bad))
    with pytest.raises(TypeError, match="not a dtype"):
        ae.set_default_dtype("nonsense")
    assert ae.get_default_dtype() == ae.float32


def test_default_dtype_is_process_wide(restore_default_dtype: None) -> None:
    """As torch's: set in one thread, seen in every other."""
    torch = torch_or_skip()
    seen: list[Any] = []

    def other() -> None:
        seen.append((ae.tensor(1.0).dtype, torch.tensor(1.0).dtype))

    ae.set_default_dtype(ae.float64)
    torch.set_default_dtype(torch.float64)
    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [(ae.float64, torch.float64)]


# -- promotion with scalars and between tensors ------------------------------------------------------
PROMOTION: dict[str, Callable[[Any], Any]] = {
    "int_times_float": lambda lib: lib.tensor([1, 2]) * 2.5,
    "int_plus_int": lambda lib: lib.tensor([1, 2]) + 2,
    "int_div_int_scalar": lambda lib: lib.tensor([1, 2]) / 2,
    "int_rdiv": lambda lib: 2 / lib.tensor([1, 2]),
    "int_div_int": lambda lib: lib.tensor([1, 2]) / lib.tensor([2, 2]),
    "bool_div_bool": lambda lib: lib.tensor([True]) / lib.tensor([True]),
    "int_div_complex": lambda lib: lib.tensor([1, 2]) / 1j,
    "float64_div_int": lambda lib: lib.ones(2, dtype=lib.float64) / 2,
    "int_pow_half": lambda lib: lib.tensor([1, 2]) ** 0.5,
    "float_base_int_exponent": lambda lib: 2.0 ** lib.tensor([1, 2]),
    "bool_plus_int": lambda lib: lib.tensor([True]) + 1,
    "bool_times_float": lambda lib: lib.tensor([True]) * 1.5,
    "int_times_complex": lambda lib: lib.tensor([1]) * 1j,
    "float32_times_complex": lambda lib: lib.ones(1) * 1j,
    "float64_times_complex": lambda lib: lib.ones(1, dtype=lib.float64) * 1j,
    "float32_times_np_float64": lambda lib: lib.ones(1) * np.float64(2),
    "int_times_np_float64": lambda lib: lib.tensor([1]) * np.float64(2.5),
    "int_times_np_int32": lambda lib: lib.tensor([1]) * np.int32(2),
    "float16_times_float": lambda lib: lib.ones(1, dtype=lib.float16) * 2.5,
    "float32_plus_float64": lambda lib: lib.ones(2) + lib.ones(2, dtype=lib.float64),
    "float64_times_float32": lambda lib: lib.ones(2, dtype=lib.float64) * lib.ones(2),
    "float32_minus_0d_float64": lambda lib: lib.ones(2) - lib.tensor(1.0, dtype=lib.float64),
    "int_plus_0d_float64": lambda lib: lib.tensor([1]) + lib.tensor(1.0, dtype=lib.float64),
    "float64_times_complex64": lambda lib: (
        lib.ones(2, dtype=lib.float64) * lib.ones(2, dtype=lib.complex64)
    ),
    "float64_times_0d_complex64": lambda lib: (
        lib.ones(2, dtype=lib.float64) * lib.tensor(1j, dtype=lib.complex64)
    ),
    "float16_times_float32": lambda lib: lib.ones(2, dtype=lib.float16) * lib.ones(2),
    "float32_pow_float64": lambda lib: lib.ones(2) ** lib.ones(2, dtype=lib.float64),
    "maximum_float32_float64": lambda lib: lib.maximum(lib.ones(2), lib.ones(2, dtype=lib.float64)),
    "cat_float32_float64": lambda lib: lib.cat([lib.ones(2), lib.ones(2, dtype=lib.float64)]),
    "stack_int_float32": lambda lib: lib.stack([lib.ones(2), lib.tensor([1, 2])]),
}


@pytest.mark.parametrize("case", list(PROMOTION))
def test_result_dtype_is_torchs(case: str) -> None:
    torch = torch_or_skip()
    assert _name(PROMOTION[case](ae).dtype) == _name(PROMOTION[case](torch).dtype)


def test_elementwise_ops_of_float32_and_float64_promote_and_grads_keep_each_dtype() -> None:
    torch = torch_or_skip()
    results = []
    for lib in (ae, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        y = a * b + a
        grads = ae.sync.grad(y.sum(), [a, b]) if lib is ae else torch.autograd.grad(y.sum(), [a, b])
        results.append((_name(y.dtype), [_name(g.dtype) for g in grads], grads[0].tolist()))
    assert results[0] == results[1] == ("float64", ["float32", "float64"], [4.0, 5.0])


# -- matrix products take one dtype ----------------------------------------------------------------
MATMUL_SHAPES = [
    ((2, 3), (3, 2)),
    ((3,), (3, 2)),
    ((2, 3), (3,)),
    ((3,), (3,)),
    ((2, 2, 3), (2, 3, 2)),
    ((2, 2, 3), (3, 2)),
    ((3,), (2, 3, 2)),
]


@pytest.mark.parametrize(("sa", "sb"), MATMUL_SHAPES)
@pytest.mark.parametrize(("da", "db"), [("float32", "float64"), ("float64", "float32"),
                                        ("int64", "float32"), ("float16", "float32")])  # fmt: skip
def test_matmul_of_two_dtypes_raises_as_torch(sa: Any, sb: Any, da: str, db: str) -> None:
    torch = torch_or_skip()
    with pytest.raises(RuntimeError):
        torch.ones(*sa, dtype=getattr(torch, da)) @ torch.ones(*sb, dtype=getattr(torch, db))
    a, b = ae.ones(*sa, dtype=np.dtype(da)), ae.ones(*sb, dtype=np.dtype(db))
    if len(sa) == len(sb) == 1:
        msg = rf"^dot : expected both vectors to have same dtype, but found {da} and {db}; "
    else:
        msg = rf"^expected m1 and m2 to have the same dtype, but got: {da} != {db}; "
    with pytest.raises(RuntimeError, match=msg):
        a @ b
    with pytest.raises(RuntimeError, match=msg):
        ae.matmul(a, b)


def test_matmul_dtype_error_is_torchs_text() -> None:
    torch = torch_or_skip()
    with pytest.raises(RuntimeError) as info:
        torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.float64)
    assert str(info.value).startswith("expected m1 and m2 to have the same dtype, but got:")
    with pytest.raises(RuntimeError, match="but got: float32 != float64; convert one first"):
        ae.ones(2, 2) @ ae.ones(2, 2, dtype=ae.float64)


@pytest.mark.parametrize(("sa", "sb"), MATMUL_SHAPES)
def test_matmul_of_one_dtype_keeps_it_and_names_nodes_as_torch(sa: Any, sb: Any) -> None:
    torch = torch_or_skip()
    ta = torch.ones(*sa, requires_grad=True)
    tout = ta @ torch.ones(*sb)
    a = ae.ones(*sa, requires_grad=True)
    out = a @ ae.ones(*sb)
    assert out.dtype == ae.float32 and out.shape == tuple(tout.shape)
    (g,) = ae.sync.grad(out.sum(), [a])
    assert g.dtype == ae.float32
    if len(sa) <= 2 and len(sb) <= 2 and not (len(sa) == 1 and len(sb) == 2):
        # 1-d @ 2-d and batched products are composites in torch (SqueezeBackward4,
        # UnsafeViewBackward0); aengine records one MmBackward0 for them
        assert out.grad_fn.name() == tout.grad_fn.name()


# -- mm / dot -------------------------------------------------------------------------------------------
def test_mm_and_dot_match_torch_to_second_order() -> None:
    torch = torch_or_skip()
    check_op(lambda a, b: ae.mm(a, b), lambda a, b: torch.mm(a, b), [(2, 3), (3, 4)])
    check_op(lambda a, b: a.mm(b), lambda a, b: a.mm(b), [(1, 3), (3, 1)])
    check_op(lambda a, b: ae.dot(a, b), lambda a, b: torch.dot(a, b), [(3,), (3,)])
    check_op(lambda a, b: a.dot(b) * a, lambda a, b: a.dot(b) * a, [(4,), (4,)])
    check_op(
        lambda a, b: ae.mm(a, b), lambda a, b: torch.mm(a, b), [(2, 3), (3, 4)], dtype="float32"
    )


def test_mm_and_dot_node_names_and_integer_dtypes_as_torch() -> None:
    torch = torch_or_skip()
    for lib in (ae, torch):
        a = lib.ones(2, 3, requires_grad=True)
        v = lib.ones(3, requires_grad=True)
        assert lib.mm(a, lib.ones(3, 2)).grad_fn.name() == "MmBackward0"
        assert lib.dot(v, lib.ones(3)).grad_fn.name() == "DotBackward0"
        assert lib.dot(lib.tensor([1, 2]), lib.tensor([3, 4])).tolist() == 11
        assert lib.mm(lib.tensor([[1, 2]]), lib.tensor([[3], [4]])).tolist() == [[11]]
        assert lib.dot(lib.zeros(0), lib.zeros(0)).tolist() == 0.0


MM_ERRORS: dict[str, tuple[Callable[[Any], Any], type[Exception], str]] = {
    "vector_first": (lambda lib: lib.mm(lib.ones(2), lib.ones(2, 2)), ValueError,
                     r"self must be a matrix"),
    "vector_second": (lambda lib: lib.mm(lib.ones(2, 2), lib.ones(2)), ValueError,
                      r"mat2 must be a matrix"),
    "batched": (lambda lib: lib.mm(lib.ones(2, 2, 2), lib.ones(2, 2)), ValueError,
                r"self must be a matrix"),
    "scalar": (lambda lib: lib.mm(lib.tensor(1.0), lib.ones(2, 2)), ValueError,
               r"self must be a matrix"),
    "shapes": (lambda lib: lib.mm(lib.ones(2, 3), lib.ones(4, 5)), ValueError,
               r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    "shapes_before_dtype": (lambda lib: lib.mm(lib.ones(2, 3), lib.ones(4, 5, dtype=lib.float64)),
                            ValueError, r"mat1 and mat2 shapes cannot be multiplied"),
    "list": (lambda lib: lib.mm(lib.ones(2, 3), [[1.0]] * 3), TypeError,
             r"mm\(\): argument 'mat2' .*must be Tensor, not list"),
    "dot_matrix": (lambda lib: lib.dot(lib.ones(2, 2), lib.ones(2)), ValueError,
                   r"1D tensors expected, but got 2D and 1D tensors"),
    "dot_scalar": (lambda lib: lib.dot(lib.tensor(1.0), lib.ones(2)), ValueError,
                   r"1D tensors expected, but got 0D and 1D tensors"),
    "dot_sizes": (lambda lib: lib.dot(lib.ones(3), lib.ones(4)), ValueError,
                  r"inconsistent tensor size, expected tensor \[3\] and src \[4\] to have the "
                  r"same number of elements, but got 3 and 4 elements respectively"),
    "dot_list": (lambda lib: lib.dot(lib.ones(2), [1.0, 2.0]), TypeError,
                 r"dot\(\): argument 'tensor' .*must be Tensor, not list"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MM_ERRORS))
def test_mm_and_dot_errors_are_torchs(case: str) -> None:
    """torch's texts; a shape error is a ValueError (torch: RuntimeError, a documented departure)."""
    torch = torch_or_skip()
    call, exc, text = MM_ERRORS[case]
    with pytest.raises((RuntimeError, TypeError), match=text):
        call(torch)
    with pytest.raises(exc, match=text):
        call(ae)


def test_mm_and_dot_dtype_errors_are_runtime_errors_as_torch() -> None:
    torch = torch_or_skip()
    for lib in (torch, ae):
        with pytest.raises(RuntimeError, match=r"expected m1 and m2 to have the same dtype"):
            lib.mm(lib.ones(2, 3), lib.ones(3, 2, dtype=lib.float64))
        with pytest.raises(RuntimeError, match=r"dot : expected both vectors to have same dtype"):
            lib.dot(lib.ones(3), lib.ones(3, dtype=lib.float64))
        with pytest.raises(RuntimeError, match=r"dot : expected both vectors to have same dtype"):
            lib.dot(lib.ones(3), lib.ones(4, dtype=lib.float64))  # dtype before sizes


# -- Tensor.cpu ------------------------------------------------------------------------------------------
def test_cpu_returns_self_on_the_cpu_as_torch() -> None:
    torch = torch_or_skip()
    tx = torch.ones(2, requires_grad=True)
    x = ae.ones(2, requires_grad=True)
    assert tx.cpu() is tx and x.cpu() is x
    y = x * 2
    assert y.cpu() is y


def test_cpu_copies_from_another_device_and_is_differentiable() -> None:
    x = ae.tensor([1.0, 2.0], device="sim:0", requires_grad=True)
    y = x.cpu()
    assert y.device == ae.device("cpu") and x.device == ae.device("sim:0")
    assert y.grad_fn.name() == "ToCopyBackward0"  # torch's name for x.cuda().cpu()
    assert not np.shares_memory(y.data, x.data)
    (g,) = ae.sync.grad((y * y).sum(), [x])
    assert g.device == ae.device("sim:0") and g.tolist() == [2.0, 4.0]
    assert ae.sync.gradcheck(lambda t: t.cpu() * 3.0, (x.detach().double().requires_grad_(),))


# -- axis= as an alias of dim= ----------------------------------------------------------------------------
def _plain(r: Any) -> Any:
    """A result as nested Python values (tensors, tuples of tensors, ints)."""
    if isinstance(r, (tuple, list)):
        return [_plain(x) for x in r]
    if isinstance(r, int):
        return r
    return r.detach().tolist()


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_close, a, b))
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)


# name -> (extra positional arguments, extra keyword arguments), built per library
AXIS_METHODS: dict[str, Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "sum": lambda lib: ((), {}),
    "mean": lambda lib: ((), {"keepdim": True}),
    "prod": lambda lib: ((), {}),
    "amax": lambda lib: ((), {}),
    "amin": lambda lib: ((), {}),
    "max": lambda lib: ((), {}),
    "min": lambda lib: ((), {"keepdim": True}),
    "var": lambda lib: ((), {"correction": 0}),
    "std": lambda lib: ((), {}),
    "logsumexp": lambda lib: ((), {}),
    "softmax": lambda lib: ((), {}),
    "log_softmax": lambda lib: ((), {}),
    "squeeze": lambda lib: ((), {}),
    "unsqueeze": lambda lib: ((), {}),
    "unbind": lambda lib: ((), {}),
    "chunk": lambda lib: ((2,), {}),
    "select": lambda lib: ((), {"index": 0}),
    "narrow": lambda lib: ((), {"start": 1, "length": 2}),
    "index_select": lambda lib: ((), {"index": lib.tensor([2, 0])}),
    "gather": lambda lib: ((), {"index": lib.tensor([[0], [2]])}),
    "take_along_dim": lambda lib: ((lib.tensor([[0], [2]]),), {}),
    "size": lambda lib: ((), {}),
}


def _matrix(lib: Any) -> Any:
    return lib.tensor([[1.0, 5.0, 2.0], [4.0, 3.0, 6.0]], requires_grad=True)


@pytest.mark.parametrize("name", list(AXIS_METHODS))
def test_axis_is_an_alias_of_dim_where_torch_has_it(name: str) -> None:
    torch = torch_or_skip()
    args, kw = AXIS_METHODS[name](torch)
    expected = _plain(getattr(_matrix(torch), name)(*args, axis=1, **kw))
    args, kw = AXIS_METHODS[name](ae)
    assert _close(_plain(getattr(_matrix(ae), name)(*args, axis=1, **kw)), expected)
    assert _close(_plain(getattr(_matrix(ae), name)(*args, dim=1, **kw)), expected)
    if name not in ("chunk", "size", "take_along_dim"):  # functions of aengine too
        assert _close(_plain(getattr(ae, name)(_matrix(ae), *args, axis=1, **kw)), expected)


@pytest.mark.parametrize("name", list(AXIS_METHODS))
def test_dim_and_axis_together_raise_a_type_error(name: str) -> None:
    torch = torch_or_skip()
    args, kw = AXIS_METHODS[name](torch)
    with pytest.raises(TypeError):
        getattr(_matrix(torch), name)(*args, dim=1, axis=1, **kw)
    args, kw = AXIS_METHODS[name](ae)
    with pytest.raises(TypeError, match=rf"{name}\(\): got both 'dim' and its alias 'axis'"):
        getattr(_matrix(ae), name)(*args, dim=1, axis=1, **kw)


def test_axis_of_cat_and_stack_and_a_gradient_through_it() -> None:
    torch = torch_or_skip()
    for fn in ("cat", "stack"):
        t = _matrix(torch)
        expected = getattr(torch, fn)([t, t * 2], axis=1)
        x = _matrix(ae)
        out = getattr(ae, fn)([x, x * 2], axis=1)
        assert out.tolist() == expected.tolist()
        (g,) = ae.sync.grad(out.sum(), [x])
        assert g.tolist() == torch.autograd.grad(expected.sum(), [t])[0].tolist()
        with pytest.raises(TypeError, match=rf"{fn}\(\): got both 'dim' and its alias 'axis'"):
            getattr(ae, fn)([x, x], dim=0, axis=1)


def test_required_dim_missing_raises_a_type_error() -> None:
    x = _matrix(ae)
    for name in ("softmax", "log_softmax", "logsumexp", "unsqueeze", "select", "gather"):
        with pytest.raises(TypeError, match=rf"{name}\(\) missing required argument 'dim'"):
            getattr(x, name)()
    with pytest.raises(TypeError, match=r"select\(\) missing required argument 'index'"):
        x.select(1)


@pytest.mark.parametrize("name", ["norm", "flatten", "split", "transpose"])
def test_axis_is_refused_where_torch_refuses_it(name: str) -> None:
    torch = torch_or_skip()
    args = {"split": (1,), "transpose": (0,)}.get(name, ())
    with pytest.raises(TypeError):
        getattr(_matrix(torch), name)(*args, axis=1)
    with pytest.raises(TypeError, match="axis"):
        getattr(_matrix(ae), name)(*args, axis=1)


# -- numpy integers as sizes and dims -------------------------------------------------------------------

NUMPY_INTS: dict[str, Callable[[Any, Callable[[int], Any]], Any]] = {
    "zeros": lambda lib, i: lib.zeros(i(3)),
    "zeros_tuple": lambda lib, i: lib.zeros((i(3), 2)),
    "ones": lambda lib, i: lib.ones(i(3), 2),
    "empty": lambda lib, i: lib.empty(i(2)),
    "rand": lambda lib, i: lib.rand(i(3)),
    "randn": lambda lib, i: lib.randn(i(3), i(2)),
    "full_tuple": lambda lib, i: lib.full((i(2),), 1.0),
    "eye": lambda lib, i: lib.eye(i(2), i(3)),
    "linspace": lambda lib, i: lib.linspace(0, 1, i(3)),
    "arange": lambda lib, i: lib.arange(i(3)),
    "sum": lambda lib, i: lib.ones(2, 3).sum(i(0)),
    "sum_tuple": lambda lib, i: lib.ones(2, 3).sum((i(0), i(1))),
    "mean": lambda lib, i: lib.ones(2, 3).mean(i(1)),
    "prod": lambda lib, i: lib.ones(2, 3).prod(i(1)),
    "amax": lambda lib, i: lib.ones(2, 3).amax(i(1)),
    "amin": lambda lib, i: lib.ones(2, 3).amin(i(1)),
    "max": lambda lib, i: lib.ones(2, 3).max(i(1))[0],
    "min": lambda lib, i: lib.ones(2, 3).min(i(1))[0],
    "var": lambda lib, i: lib.ones(2, 3).var(i(1)),
    "std": lambda lib, i: lib.ones(2, 3).std(i(1)),
    "logsumexp": lambda lib, i: lib.ones(2, 3).logsumexp(i(1)),
    "softmax": lambda lib, i: lib.ones(2, 3).softmax(i(1)),
    "log_softmax": lambda lib, i: lib.ones(2, 3).log_softmax(i(1)),
    "reshape": lambda lib, i: lib.ones(2, 3).reshape(i(3), -1),
    "view": lambda lib, i: lib.ones(2, 3).view(i(3), -1),
    "unsqueeze": lambda lib, i: lib.ones(2, 3).unsqueeze(i(0)),
    "squeeze": lambda lib, i: lib.ones(1, 2).squeeze(i(0)),
    "transpose": lambda lib, i: lib.ones(2, 3).transpose(i(0), 1),
    "permute": lambda lib, i: lib.ones(2, 3).permute(i(1), i(0)),
    "flatten": lambda lib, i: lib.ones(2, 3).flatten(i(0)),
    "expand": lambda lib, i: lib.ones(1, 3).expand(i(2), 3),
    "cat": lambda lib, i: lib.cat([lib.ones(2, 3)] * 2, i(1)),
    "stack": lambda lib, i: lib.stack([lib.ones(2, 3)] * 2, i(1)),
    "select": lambda lib, i: lib.ones(2, 3).select(i(1), i(0)),
    "narrow": lambda lib, i: lib.ones(2, 3).narrow(i(1), i(0), i(2)),
    "chunk": lambda lib, i: lib.ones(2, 3).chunk(i(2), i(1))[0],
    "unbind": lambda lib, i: lib.ones(2, 3).unbind(i(1))[0],
    "index_select": lambda lib, i: lib.ones(2, 3).index_select(i(1), lib.tensor([0])),
    "gather": lambda lib, i: lib.ones(2, 3).gather(i(1), lib.tensor([[0], [0]])),
    "take_along_dim": lambda lib, i: lib.ones(2, 3).take_along_dim(lib.tensor([[0], [0]]), i(1)),
    "getitem": lambda lib, i: lib.ones(2, 3)[i(1), i(0) : i(2)],
    "size": lambda lib, i: lib.tensor(lib.ones(2, 3).size(i(1))),
    # torch refuses numpy integers in these three; aengine takes them (a departure)
    "full_int": lambda lib, i: lib.full(i(2), 1.0),
    "split": lambda lib, i: lib.ones(2, 3).split(i(1), i(1))[0],
    "norm": lambda lib, i: lib.ones(2, 3).norm(dim=i(1)),
}
TORCH_REFUSES = {"full_int", "split", "norm"}


@pytest.mark.parametrize("np_int", [np.int64, np.int32])
@pytest.mark.parametrize("case", list(NUMPY_INTS))
def test_numpy_integers_are_sizes_and_dims(case: str, np_int: Any) -> None:
    torch = torch_or_skip()
    call = NUMPY_INTS[case]
    ours, plain = call(ae, np_int), call(ae, int)
    assert ours.shape == plain.shape
    if case not in ("empty", "rand", "randn"):
        assert ours.tolist() == plain.tolist()
    if case in TORCH_REFUSES:
        with pytest.raises(TypeError):
            call(torch, np_int)
    else:
        assert ours.shape == tuple(call(torch, np_int).shape)


def test_bools_and_floats_are_not_sizes() -> None:
    with pytest.raises(TypeError, match="sizes must be non-negative integers"):
        ae.zeros(2.0)
    with pytest.raises(TypeError, match="sizes must be non-negative integers"):
        ae.ones(np.bool_(True))
    with pytest.raises(ValueError, match="sizes must be non-negative integers"):
        ae.zeros(np.int64(-1))
    with pytest.raises(TypeError, match="must be an int"):
        ae.ones(2, 3).softmax(np.float64(1))


# -- gradcheck warns for float32 inputs, as torch ------------------------------------------------------
def test_gradcheck_of_default_float_inputs_warns_as_torch() -> None:
    torch = torch_or_skip()
    msg = r"Input #0 requires gradient and is not a double precision floating point"
    tx = torch.tensor([1.0, 2.0], requires_grad=True)  # float32: the default
    with pytest.warns(UserWarning, match=msg):
        torch.autograd.gradcheck(lambda t: t * 2.0, (tx,), eps=1e-2, atol=1e-2)
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match=msg):
        assert ae.sync.gradcheck(lambda t: t * 2.0, (x,), eps=1e-2, atol=1e-2)
    assert ae.sync.gradcheck(lambda t: t * 2.0, (x.detach().double().requires_grad_(),))


@pytest.mark.parametrize(
    "name",
    ["sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "log1p", "expm1", "relu", "abs",
     "square", "sign"],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["int64", "int32", "bool"])
def test_unary_functions_of_integer_tensors_give_torchs_dtype(name: str, kind: str) -> None:
    torch = torch_or_skip()
    if kind == "bool" and name in ("relu", "abs", "square", "sign"):
        pytest.skip("integer-valued functions of bools: not covered")
    data = [1, 4, 9] if kind != "bool" else [True, True]
    tt = torch.tensor(data, dtype=getattr(torch, kind))
    try:
        expected = getattr(torch, name)(tt).dtype
    except RuntimeError:
        pytest.skip(f"torch has no {name} for {kind}")
    got = getattr(ae, name)(ae.tensor(np.array(data, dtype=kind))).dtype
    assert str(got) == str(expected).replace("torch.", "")
