"""``grad_fn._saved_<name>`` of built-in ops against torch's, op by op of the table.

For every operator of the table whose first output's node aengine and torch
both record under the same name, each saved value aengine names (NOTE
[Saved values by torch's names]) is compared with torch's attribute of that
name: tensors by value, other values as they are (dims given as torch's
2**64 + d for a negative d are accepted as aengine's non-negative index).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.ops._activation import _erf
from aengine.ops._core import OpNode
from aengine.ops._table import TABLE, Maker
from tests.ops.test_table import _ae_maker, _build, _flat, _torch_maker
from tests.oracle import torch_or_skip

#: composite ops whose last node saves another value than torch's (the graphs differ)
_OTHER_GRAPH = {
    "nn.functional.normalize": "torch divides by the norm expanded to the input's shape"
}

#: saved outputs that each library's LAPACK call gives up to the sign of a column
_UP_TO_SIGN = {"LinalgEighBackward0._saved_eigenvectors"}


def _cases() -> Iterator[Any]:
    for name in sorted(TABLE):
        info = TABLE[name]
        if info.grad and "float64" in info.dtypes and not info.random and name not in _OTHER_GRAPH:
            yield pytest.param(name, id=name)


def _same(a: Any, b: Any, what: str) -> None:
    if isinstance(a, ae.Tensor):
        assert hasattr(b, "detach"), f"{what}: aengine gives a tensor, torch {b!r}"
        x, y = a.detach().numpy(), b.detach().numpy()
        assert x.dtype == y.dtype, f"{what}: aengine's dtype {x.dtype}, torch's {y.dtype}"
        if what in _UP_TO_SIGN:
            x, y = np.abs(x), np.abs(y)
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-9, err_msg=what)
        return
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), f"{what}: {a!r} vs {b!r}"
        for x, y in zip(a, b, strict=True):
            _same(x, y, what)
        return
    if isinstance(b, int) and not isinstance(b, bool) and b >= 2**63:  # torch's negative int
        assert isinstance(a, int) and (a >= 0 or a == b - 2**64), f"{what}: {a!r} vs {b - 2**64}"
        return
    assert a == b, f"{what}: aengine {a!r}, torch {b!r}"


@pytest.mark.parametrize("name", list(_cases()))
def test_saved_fields_as_torch(name: str) -> None:
    torch = torch_or_skip()
    info = TABLE[name]
    checked = 0
    for sample in list(info.samples(Maker("float64", seed=0)))[:4]:
        a_args, a_kw, _ = _build(sample, _ae_maker("cpu"))
        t_args, t_kw, _ = _build(sample, _torch_maker(torch))
        a_out = _flat(info.fn(*a_args, **a_kw))[0]
        t_out = _flat(info.torch_fn(torch)(*t_args, **t_kw))[0]
        a_fn, t_fn = getattr(a_out, "grad_fn", None), getattr(t_out, "grad_fn", None)
        if not isinstance(a_fn, OpNode) or t_fn is None or a_fn.name() != t_fn.name():
            continue
        for field, where in type(a_fn).saved_fields.items():
            attr = f"_saved_{field}"
            assert hasattr(t_fn, attr), f"torch's {t_fn.name()} has no {attr}"
            _same(getattr(a_fn, attr), getattr(t_fn, attr), f"{t_fn.name()}.{attr}")
            if isinstance(getattr(t_fn, attr), torch.Tensor) and where.__class__ is int:
                # a saved tensor (not one made from the node's other facts) has its raw form
                assert getattr(a_fn, f"_raw_saved_{field}") is not None
            checked += 1
    if not checked:
        pytest.skip(f"{name}: no saved value named on a node both record")


#: graphs the table's samples do not end in: an index of several items (torch's
#: last node is its last item's), the in-place relu, the erf of gelu's rule
_MORE: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    **{
        f"x[{text}]": (fn, fn)
        for text, fn in {
            "1, 1:3": lambda x: x[1, 1:3],
            "..., 1:2": lambda x: x[..., 1:2],
            "None, :, 2:": lambda x: x[None, :, 2:],
            ":, None, 1": lambda x: x[:, None, 1],
            "..., None": lambda x: x[..., None],
            "-3:-1": lambda x: x[-3:-1],
            "::2, -1": lambda x: x[::2, -1],
            "1:": lambda x: x[1:],
            "0, ..., :2": lambda x: x[0, ..., :2],
        }.items()
    },
    "relu_": (lambda x: x.clone().relu_(), lambda x: x.clone().relu_()),
    "erf of the rules": (_erf, lambda x: x.erf()),
    "nll_loss of an image": (
        lambda x: ae.nn.functional.nll_loss(x.reshape(1, 4, 5, 3), ae.tensor(_IMAGE_TARGET)),
        lambda x: _torch_nll_image(x),
    ),
}

#: class indices of a 1 x 5 x 3 image of 4 classes
_IMAGE_TARGET = np.arange(15).reshape(1, 5, 3) % 4


def _torch_nll_image(x: Any) -> Any:
    torch = torch_or_skip()
    return torch.nn.functional.nll_loss(x.reshape(1, 4, 5, 3), torch.tensor(_IMAGE_TARGET))


@pytest.mark.parametrize("case", list(_MORE))
def test_saved_fields_of_more_graphs_as_torch(case: str) -> None:
    torch = torch_or_skip()
    a = np.random.default_rng(0).standard_normal((4, 5, 3))
    a_fn, t_fn = (
        f(lib.tensor(a, requires_grad=True)).grad_fn for f, lib in zip(_MORE[case], (ae, torch))
    )
    assert a_fn.name() == t_fn.name()
    assert type(a_fn).saved_fields
    for field in type(a_fn).saved_fields:
        attr = f"_saved_{field}"
        _same(getattr(a_fn, attr), getattr(t_fn, attr), f"{t_fn.name()}.{attr}")


def test_every_named_field_is_read_by_the_table() -> None:
    """The names of FIELDS are node classes aengine has (no stale entry)."""
    from aengine.ops._saved_fields import FIELDS

    def walk(cls: type) -> Iterator[type]:
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    x = ae.ones(2, 3, requires_grad=True)  # the classes split and unbind make on first use
    x.split(1), x.split([1, 1]), x.unbind()
    names = {c.__name__ for c in walk(OpNode)}
    assert set(FIELDS) <= names, sorted(set(FIELDS) - names)


def test_saved_tensor_after_backward_raises_and_other_values_stay_as_torch() -> None:
    torch = torch_or_skip()
    a = np.arange(6.0).reshape(2, 3)
    x, tx = ae.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = x.sum(1), tx.sum(1)
    z, tz = x.exp(), tx.exp()
    (y.sum() + z.sum()).backward()
    (ty.sum() + tz.sum()).backward()
    assert y.grad_fn._saved_dim == ty.grad_fn._saved_dim == (1,)
    assert y.grad_fn._saved_keepdim is ty.grad_fn._saved_keepdim is False
    with pytest.raises(RuntimeError, match="second time") as err:
        tz.grad_fn._saved_result
    with pytest.raises(RuntimeError, match="second time") as err2:
        z.grad_fn._saved_result
    assert str(err2.value) == str(err.value)


def test_saved_values_identity_and_unknown_names_as_torch() -> None:
    torch = torch_or_skip()
    a = np.arange(3.0)
    x, tx = ae.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    assert x.sin().grad_fn._saved_self is x
    assert tx.sin().grad_fn._saved_self is tx
    e, te = x.exp(), tx.exp()
    assert e.grad_fn._saved_result.grad_fn is e.grad_fn
    assert te.grad_fn._saved_result.grad_fn is te.grad_fn
    m, tm = x * x.detach(), tx * tx.detach()  # only self needs a gradient: self is not saved
    assert m.grad_fn._saved_self is None and tm.grad_fn._saved_self is None
    with pytest.raises(AttributeError, match="_saved_nothing"):
        te.grad_fn._saved_nothing
    with pytest.raises(AttributeError, match="_saved_nothing"):
        e.grad_fn._saved_nothing
    with pytest.raises(AttributeError):
        te.grad_fn._raw_saved_nothing
    with pytest.raises(AttributeError):
        e.grad_fn._raw_saved_nothing


def test_saved_input_modified_in_place_raises_as_torch() -> None:
    torch = torch_or_skip()
    a = np.arange(3.0)
    x, tx = ae.tensor(a, requires_grad=True).clone(), torch.tensor(a, requires_grad=True).clone()
    y, ty = x.sin(), tx.sin()
    x.add_(1)
    tx.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.grad_fn._saved_self
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.grad_fn._saved_self
