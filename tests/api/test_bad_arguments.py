"""Bad arguments get a clear TypeError / ValueError at once, naming what is expected.

PyTorch refuses each of these too (the oracle checks it does); aengine's
texts name the argument and what to pass instead, PyTorch's words where it
has them (e.g. "step must be nonzero", "Dimension out of range").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

# -- non-numeric data --------------------------------------------------------------------------

#: (aengine call, the same call in torch, error type, aengine's text)
NON_NUMERIC: dict[str, tuple[Callable[[], Any], Callable[[Any], Any], type, str]] = {
    "tensor(str)": (
        lambda: ae.tensor("abc"),
        lambda torch: torch.tensor("abc"),
        TypeError,
        r"a tensor holds numbers \(bool, int, float, complex\), not str 'abc'",
    ),
    "tensor(bytes)": (
        lambda: ae.tensor(b"x"),
        lambda torch: torch.tensor(b"x"),
        TypeError,
        r"not bytes b'x'",
    ),
    "as_tensor(str)": (
        lambda: ae.as_tensor("x"),
        lambda torch: torch.as_tensor("x"),
        TypeError,
        r"not str 'x'",
    ),
    "tensor([None])": (
        lambda: ae.tensor([1.0, None]),
        lambda torch: torch.tensor([1.0, None]),
        TypeError,
        r"not NoneType",
    ),
    "tensor(object array)": (
        lambda: ae.tensor(np.array([1, 2], dtype=object)),
        lambda torch: torch.tensor(np.array([1, 2], dtype=object)),
        TypeError,
        r"can't convert a numpy array of dtype object",
    ),
    "dtype=str": (
        lambda: ae.tensor([1.0], dtype=str),
        lambda torch: torch.tensor([1.0], dtype=str),
        TypeError,
        r"dtype must be a numeric dtype",
    ),
    "zeros(dtype=object)": (
        lambda: ae.zeros(2, dtype=object),
        lambda torch: torch.zeros(2, dtype=object),
        TypeError,
        r"dtype must be a numeric dtype",
    ),
    "full(str)": (
        lambda: ae.full((2,), "a"),
        lambda torch: torch.full((2,), "a"),
        TypeError,
        r"fill_value must be a number \(bool, int, float, complex\), not str",
    ),
    "full(None)": (
        lambda: ae.full((2,), None),
        lambda torch: torch.full((2,), None),
        TypeError,
        r"fill_value must be a number \(bool, int, float, complex\), not NoneType",
    ),
    "full_like(str)": (
        lambda: ae.full_like(ae.ones(2), "a"),
        lambda torch: torch.full_like(torch.ones(2), "a"),
        TypeError,
        r"fill_value must be a number",
    ),
    "tensor(10**30)": (
        lambda: ae.tensor([10**30]),
        lambda torch: torch.tensor([10**30]),
        ValueError,
        r"value cannot be converted to int64 without overflow",
    ),
    "tensor(-10**30)": (
        lambda: ae.tensor(-(10**30)),
        lambda torch: torch.tensor(-(10**30)),
        ValueError,
        r"value cannot be converted to int64 without overflow",
    ),
    "tensor(2**63)": (
        lambda: ae.tensor([2**63]),
        lambda torch: torch.tensor([2**63]),
        ValueError,
        r"value cannot be converted to int64 without overflow",
    ),
    "tensor(10**30, int64)": (
        lambda: ae.tensor([10**30], dtype=ae.int64),
        lambda torch: torch.tensor([10**30], dtype=torch.int64),
        ValueError,
        r"value cannot be converted to int64 without overflow",
    ),
    "full(10**30)": (
        lambda: ae.full((2,), 10**30),
        lambda torch: torch.full((2,), 10**30),
        ValueError,
        r"fill_value 10{30} cannot be converted to int64 without overflow",
    ),
}


@pytest.mark.parametrize("case", list(NON_NUMERIC))
def test_non_numeric_data_is_refused(case: str) -> None:
    """TypeError for what is not a number, ValueError for an int beyond int64.

    PyTorch: TypeError (RuntimeError for None), and ValueError "Overflow when
    unpacking long" (OverflowError for a fill value).
    """
    torch = torch_or_skip()
    call, torch_call, exc, text = NON_NUMERIC[case]
    with pytest.raises((TypeError, ValueError, RuntimeError, OverflowError)):
        torch_call(torch)
    with pytest.raises(exc, match=text):
        call()


def test_numbers_that_numpy_keeps_as_objects_still_work() -> None:
    """A float next to an int beyond int64 makes floats of the default dtype, as PyTorch."""
    torch = torch_or_skip()
    expected = torch.tensor([1.5, 10**30])
    assert ae.tensor([1.5, 10**30]).tolist() == expected.tolist()
    assert ae.tensor([1.5, 10**30]).dtype == ae.float32 and expected.dtype == torch.float32
    assert ae.tensor([10**30], dtype=ae.float64).tolist() == [1e30]
    assert ae.full((2,), True).dtype == ae.bool_
    assert ae.full((1,), ae.tensor(2.0)).tolist() == [2.0]


# -- validation at once ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["sim:", "cuda:", "cpu:", "sim:²", "sim:-1", "sim: 1", "sim:x"])
def test_a_device_string_with_a_bad_index_names_it(spec: str) -> None:
    torch = torch_or_skip()
    with pytest.raises(RuntimeError, match="Invalid device string"):
        torch.device(spec.replace("sim", "cuda"))
    with pytest.raises(ValueError, match=f"invalid device string '{spec}'"):
        ae.device(spec)
    with pytest.raises(ValueError, match=f"invalid device string '{spec}'"):
        ae.ones(2, device=spec)


def test_device_strings_that_stay_valid() -> None:
    assert str(ae.device("sim")) == "sim:0" and str(ae.device("sim:01")) == "sim:1"
    assert ae.device("cpu:0") is ae.device("cpu") and ae.device("sim", 1) is ae.device("sim:1")
    with pytest.raises(TypeError, match="a device index is an int, got float"):
        ae.device("sim", 1.0)  # type: ignore[arg-type]


def test_where_wants_a_boolean_condition() -> None:
    torch = torch_or_skip()
    with pytest.raises(RuntimeError, match="where expected condition to be a boolean tensor"):
        torch.where(torch.tensor([1.0, 0.0]), torch.ones(2), torch.zeros(2))
    for cond in (ae.tensor([1.0, 0.0]), ae.tensor([1, 0]), [1.0, 0.0]):
        with pytest.raises(
            TypeError,
            match="where expected condition to be a boolean tensor, but got a tensor with dtype",
        ):
            ae.where(cond, ae.ones(2), ae.zeros(2))
    assert ae.where(ae.tensor([1.0, 0.0]) > 0, 1.0, ae.zeros(2)).tolist() == [1.0, 0.0]
    assert ae.where([True, False], 1.0, ae.zeros(2)).tolist() == [1.0, 0.0]


def test_queue_callback_of_a_non_callable_leaves_grad_untouched() -> None:
    x = ae.ones(2, requires_grad=True)
    x.grad = ae.full((2,), 5.0)
    y = x * 2

    def hook(g: ae.Tensor) -> None:
        ae.queue_callback(5)  # type: ignore[arg-type]

    y.register_hook(hook)
    with pytest.raises(
        ae.BackwardError, match="queue_callback expects a callable, got int"
    ) as info:
        ae.sync.backward(y.sum())
    assert isinstance(info.value.__cause__, TypeError)
    assert x.grad.tolist() == [5.0, 5.0]


# -- unclear errors made clear ---------------------------------------------------------------------

#: (aengine call, the same call in torch or None, error type, aengine's text)
UNCLEAR: dict[str, tuple[Callable[[], Any], Any, type, str]] = {
    "rand(generator=5)": (
        lambda: ae.rand(2, generator=5),  # type: ignore[arg-type]
        lambda torch: torch.rand(2, generator=5),
        TypeError,
        r"generator must be an ae.Generator \(or None\), not int",
    ),
    "zeros_like(list)": (
        lambda: ae.zeros_like([1, 2]),  # type: ignore[arg-type]
        lambda torch: torch.zeros_like([1, 2]),
        TypeError,
        r"zeros_like\(\): argument 'input' must be a Tensor, not list",
    ),
    "full_like(ndarray)": (
        lambda: ae.full_like(np.ones(2), 1.0),  # type: ignore[arg-type]
        lambda torch: torch.full_like(np.ones(2), 1.0),
        TypeError,
        r"full_like\(\): argument 'input' must be a Tensor, not ndarray",
    ),
    "randn_like(int)": (
        lambda: ae.randn_like(3),  # type: ignore[arg-type]
        lambda torch: torch.randn_like(3),
        TypeError,
        r"randn_like\(\): argument 'input' must be a Tensor, not int",
    ),
    "inference_mode(str)": (
        lambda: ae.inference_mode("yes"),
        None,  # PyTorch takes "yes" for a function to decorate and fails when called
        TypeError,
        r"inference_mode\(\) takes a bool mode .*got str",
    ),
    "arange(step=0)": (
        lambda: ae.arange(0, 10, 0),
        lambda torch: torch.arange(0, 10, 0),
        ValueError,
        r"^step must be nonzero$",
    ),
    "arange(str)": (
        lambda: ae.arange("a"),
        lambda torch: torch.arange("a"),
        TypeError,
        r"end must be a number",
    ),
    "size(5)": (
        lambda: ae.ones(3).size(5),
        lambda torch: torch.ones(3).size(5),
        IndexError,
        r"^Dimension out of range \(expected to be in range of \[-1, 0\], but got 5\)$",
    ),
    "size(-3) of 2-d": (
        lambda: ae.ones(2, 3).size(-3),
        lambda torch: torch.ones(2, 3).size(-3),
        IndexError,
        r"^Dimension out of range \(expected to be in range of \[-2, 1\], but got -3\)$",
    ),
    "size(0) of 0-d": (
        lambda: ae.tensor(1.0).size(0),
        lambda torch: torch.tensor(1.0).size(0),
        IndexError,
        r"^Dimension specified as 0 but tensor has no dimensions$",
    ),
    "size('a')": (
        lambda: ae.ones(3).size("a"),
        lambda torch: torch.ones(3).size(1.5),
        TypeError,
        r"size\(\): argument 'dim' must be an int, not str",
    ),
    "sum('a')": (
        lambda: ae.sum("a"),  # type: ignore[arg-type]
        lambda torch: torch.sum("a"),
        TypeError,
        r"sum\(\): argument 'input' must be a Tensor, not str",
    ),
    "t.sum('a')": (
        lambda: ae.ones(3).sum("a"),
        lambda torch: torch.ones(3).sum(1.5),
        TypeError,
        r"argument 'dim' must be an int or a tuple of ints, got str \('a'\)",
    ),
    "t.select('a', 0)": (
        lambda: ae.ones(3).select("a", 0),  # type: ignore[arg-type]
        lambda torch: torch.ones(3).select(1.5, 0),
        TypeError,
        r"argument 'dim' must be an int, not str \('a'\)",
    ),
    "t.reshape('a')": (
        lambda: ae.ones(3).reshape("a"),
        lambda torch: torch.ones(3).reshape("a"),
        TypeError,
        r"argument 'shape' must be a tuple of ints, but found an element of type str \('a'\)",
    ),
    "t.reshape(1.5)": (
        lambda: ae.ones(3).reshape(1.5),
        lambda torch: torch.ones(3).reshape(1.5),
        TypeError,
        r"argument 'shape' must be a tuple of ints, but found an element of type float",
    ),
}


@pytest.mark.parametrize("case", list(UNCLEAR))
def test_unclear_errors_name_the_argument(case: str) -> None:
    torch = torch_or_skip()
    call, torch_call, exc, text = UNCLEAR[case]
    if torch_call is not None:
        with pytest.raises((TypeError, ValueError, IndexError, RuntimeError)):
            torch_call(torch)
    with pytest.raises(exc, match=text):
        call()


def test_sizes_and_dims_given_as_numpy_ints_still_work() -> None:
    t = ae.ones(2, 3)
    assert t.size(np.int64(1)) == 3 and t.size(-1) == 3 and t.size() == (2, 3)
    assert t.reshape(np.int64(3), 2).shape == (3, 2)
    assert t.sum(np.int64(0)).shape == (3,) and t.select(np.int64(1), 0).shape == (2,)
    assert ae.arange(ae.tensor(3)).tolist() == [0, 1, 2]


# -- PyTorch's text where aengine used to show numpy's --------------------------------------------

#: (aengine call, the same call in torch, aengine's error type): aengine's message holds
#: PyTorch's word for word (it may add what to do)
TORCH_TEXT: dict[str, tuple[Callable[[], Any], Callable[[Any], Any], type]] = {
    "tensor: a row too short": (
        lambda: ae.tensor([[1.0, 2.0], [3.0]]),
        lambda torch: torch.tensor([[1.0, 2.0], [3.0]]),
        ValueError,
    ),
    "tensor: a row too long": (
        lambda: ae.tensor([[1.0, 2.0], [3.0, 4.0, 5.0]]),
        lambda torch: torch.tensor([[1.0, 2.0], [3.0, 4.0, 5.0]]),
        ValueError,
    ),
    "tensor: ragged at dim 2": (
        lambda: ae.tensor([[[1.0], [2.0]], [[3.0], [4.0, 5.0]]]),
        lambda torch: torch.tensor([[[1.0], [2.0]], [[3.0], [4.0, 5.0]]]),
        ValueError,
    ),
    "tensor: ragged with a tuple and a tensor": (
        lambda: ae.tensor([(1.0, 2.0), ae.tensor([3.0])]),
        lambda torch: torch.tensor([(1.0, 2.0), torch.tensor([3.0])]),
        ValueError,
    ),
    "tensor: a number where a row is": (
        lambda: ae.tensor([[1.0, 2.0], 3.0]),
        lambda torch: torch.tensor([[1.0, 2.0], 3.0]),
        TypeError,
    ),
    "tensor: a row where a number is": (
        lambda: ae.tensor([1.0, [2.0]]),
        lambda torch: torch.tensor([1.0, [2.0]]),
        TypeError,
    ),
    "eye(-1)": (lambda: ae.eye(-1), lambda torch: torch.eye(-1), ValueError),
    "eye(2, -3)": (lambda: ae.eye(2, -3), lambda torch: torch.eye(2, -3), ValueError),
    "linspace(steps=-1)": (
        lambda: ae.linspace(0, 1, -1),
        lambda torch: torch.linspace(0, 1, -1),
        ValueError,
    ),
    "expand (3,) to (4,)": (
        lambda: ae.ones(3).expand(4),
        lambda torch: torch.ones(3).expand(4),
        ValueError,
    ),
    "expand (2, 3) to (3, -1)": (
        lambda: ae.ones(2, 3).expand(3, -1),
        lambda torch: torch.ones(2, 3).expand(3, -1),
        ValueError,
    ),
    "expand with -1 in a new dim": (
        lambda: ae.ones(2, 3).expand(-1, 2, 3),
        lambda torch: torch.ones(2, 3).expand(-1, 2, 3),
        ValueError,
    ),
    "broadcast_to (2, 3) to (2, 4)": (
        lambda: ae.broadcast_to(ae.ones(2, 3), (2, 4)),
        lambda torch: torch.broadcast_to(torch.ones(2, 3), (2, 4)),
        ValueError,
    ),
    "mT of 1-d": (lambda: ae.ones(3).mT, lambda torch: torch.ones(3).mT, ValueError),
    "bool of 2 elements": (
        lambda: bool(ae.ones(2)),
        lambda torch: bool(torch.ones(2)),
        ValueError,
    ),
    "bool of 0 elements": (
        lambda: bool(ae.ones(0)),
        lambda torch: bool(torch.ones(0)),
        ValueError,
    ),
}


@pytest.mark.parametrize("case", list(TORCH_TEXT))
def test_errors_hold_pytorchs_text(case: str) -> None:
    torch = torch_or_skip()
    call, torch_call, exc = TORCH_TEXT[case]
    with pytest.raises((TypeError, ValueError, RuntimeError)) as theirs:
        torch_call(torch)
    with pytest.raises(exc) as ours:
        call()
    assert str(theirs.value) in str(ours.value)


def test_arguments_of_the_checked_kinds_still_work() -> None:
    torch = torch_or_skip()
    assert ae.eye(np.int64(2), np.int64(3)).shape == (2, 3)
    assert ae.linspace(ae.tensor(0.0), np.float64(1.0), np.int64(3)).tolist() == [0.0, 0.5, 1.0]
    g1, g2 = ae.Generator(np.int64(3)), ae.Generator(3)
    assert ae.rand(2, generator=g1).tolist() == ae.rand(2, generator=g2).tolist()
    x = ae.ones(2, 3)
    assert ae.select(x, 0, np.int64(1)).shape == (3,)
    assert [p.shape for p in ae.split(x, [np.int64(1), 2], 1)] == [(2, 1), (2, 2)]
    assert len(ae.chunk(x, np.int64(2))) == 2
    assert ae.clamp(x, np.float32(0.5), 2).tolist() == [[1.0] * 3] * 2
    assert x.masked_fill(x > 0, np.float64(2.0)).tolist() == [[2.0] * 3] * 2
    assert (x * 1).fill_(np.int64(4)).tolist() == [[4.0] * 3] * 2
    # broadcast_to takes -1 (keep a size) as expand does, as PyTorch; a tuple, not an int
    for size in [(4, -1, 3), (2, -1), (4, 2, 3), [2, 3]]:
        want = torch.broadcast_to(torch.ones(2, 3), size).shape
        assert ae.broadcast_to(x, size).shape == x.broadcast_to(size).shape == tuple(want)
    with pytest.raises(TypeError):
        torch.broadcast_to(torch.ones(1), 3)
    with pytest.raises(
        TypeError, match=r"broadcast_to\(\): argument 'size' must be a tuple of ints"
    ):
        ae.broadcast_to(ae.ones(1), 3)
