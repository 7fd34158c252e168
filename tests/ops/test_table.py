"""The operator table's tests: every entry, every sample, both float dtypes, against torch.

Per case (NOTE [The operator table] in aengine/ops/_table.py): the values
equal torch's, computed from the same numpy arrays; the first derivatives
(a vector-Jacobian product with the same random cotangents) equal torch's;
the second derivatives (the gradient of <first derivatives, w>) equal
torch's where torch has them; gradcheck passes in float64 on the first
sample; the op gives the same on ``sim:0``; the Tensor method agrees with
the function; each error case raises torch's exception type.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.ops._table import TABLE, ErrorCase, Maker, OpInfo, Sample
from tests.oracle import DEVICE, torch_or_skip

#: the dtypes run (``AENGINE_TEST_DTYPE`` picks one, as ``make gpu-check`` does)
_ONLY_DTYPE = os.environ.get("AENGINE_TEST_DTYPE")

_DEFAULT_TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9)}
_GRAD_TOL = {"float32": (1e-3, 1e-4), "float64": (1e-6, 1e-8)}


def _samples(info: OpInfo, dtype: str) -> list[Sample]:
    return list(info.samples(Maker(dtype, seed=0)))


def _cases() -> Iterator[Any]:
    for name in sorted(TABLE):
        info = TABLE[name]
        for dtype in info.dtypes:
            if _ONLY_DTYPE is not None and dtype != _ONLY_DTYPE and dtype in ("float32", "float64"):
                continue
            for i, _ in enumerate(_samples(info, dtype)):
                yield pytest.param(name, dtype, i, id=f"{name}-{dtype}-{i}")


def _error_cases() -> Iterator[Any]:
    for name in sorted(TABLE):
        info = TABLE[name]
        if info.errors is None:
            continue
        for i, _ in enumerate(info.errors(Maker(info.dtypes[0], seed=0))):
            yield pytest.param(name, i, id=f"{name}-{i}")


# --- turning samples into tensors of both libraries --------------------------


def _grad_positions(sample: Sample) -> set[int]:
    if sample.grad is not None:
        return set(sample.grad)
    out = set()
    for i, a in enumerate(sample.args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            out.add(i)
        elif isinstance(a, (list, tuple)) and any(
            isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in a
        ):
            out.add(i)
    return out


def _convert(x: Any, make: Any, rg: bool, leaves: list[Any]) -> Any:
    if isinstance(x, np.ndarray):
        want = rg and x.dtype.kind == "f"
        t = make(x.copy(), want)
        if want:
            leaves.append(t)
        return t
    if isinstance(x, list):
        return [_convert(v, make, rg, leaves) for v in x]
    if isinstance(x, tuple):
        return tuple(_convert(v, make, rg, leaves) for v in x)
    return x


def _build(sample: Sample, make: Any) -> tuple[tuple[Any, ...], dict[str, Any], list[Any]]:
    pos = _grad_positions(sample)
    leaves: list[Any] = []
    args = tuple(_convert(a, make, i in pos, leaves) for i, a in enumerate(sample.args))
    kwargs = {k: _convert(v, make, False, leaves) for k, v in sample.kwargs.items()}
    return args, kwargs, leaves


def _ae_maker(device: str) -> Any:
    def make(a: np.ndarray, rg: bool) -> Any:
        t = ae.tensor(a)
        if device != "cpu":
            t = t.to(device)
        if rg:
            t.requires_grad_(True)
        return t

    return make


def _torch_maker(torch: Any) -> Any:
    # torch's twin of DEVICE: the same cuda:N; a simulated device's data is on the cpu
    twin = DEVICE if DEVICE.startswith("cuda") else None

    def make(a: np.ndarray, rg: bool) -> Any:
        t = torch.from_numpy(a) if twin is None else torch.from_numpy(a).to(twin)
        if rg:
            t.requires_grad_(True)
        return t

    return make


def _flat(out: Any) -> list[Any]:
    """The results as a flat list (tuples, lists and named tuples unpacked)."""
    if isinstance(out, (tuple, list)):
        res: list[Any] = []
        for o in out:
            res.extend(_flat(o))
        return res
    return [out]


def _np(x: Any) -> Any:
    if isinstance(x, ae.Tensor):
        return x.detach().cpu().numpy()
    if hasattr(x, "detach"):  # a torch tensor
        return x.detach().numpy(force=True)
    return np.asarray(x)


def _close(a: Any, b: Any, tol: tuple[float, float], what: str) -> None:
    an, bn = _np(a), _np(b)
    assert an.shape == bn.shape, f"{what}: shape {an.shape} != torch's {bn.shape}"
    if isinstance(a, ae.Tensor):
        assert an.dtype == bn.dtype, f"{what}: dtype {an.dtype} != torch's {bn.dtype}"
    if an.dtype.kind in "fc":
        np.testing.assert_allclose(an, bn, rtol=tol[0], atol=tol[1], err_msg=what, equal_nan=True)
    else:
        np.testing.assert_array_equal(an, bn, err_msg=what)


def _tol(info: OpInfo, dtype: str, base: dict[str, tuple[float, float]]) -> tuple[float, float]:
    if dtype in info.tol:
        return info.tol[dtype]
    return base.get(dtype, (0.0, 0.0))


def _differentiable(outs: list[Any]) -> list[int]:
    return [
        i
        for i, o in enumerate(outs)
        if isinstance(o, ae.Tensor) and o.requires_grad and o.dtype.kind == "f"
    ]


def _cotangents(outs: list[Any], idx: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(outs[i].shape), dtype=outs[i].dtype) for i in idx]


def _grads_ae(outs: list[Any], leaves: list[Any], vs: list[Any], create: bool) -> list[Any]:
    return list(ae.sync.grad(outs, leaves, grad_outputs=vs, allow_unused=True, create_graph=create))


def _grads_torch(
    torch: Any, outs: list[Any], leaves: list[Any], vs: list[Any], create: bool
) -> Any:
    return list(
        torch.autograd.grad(outs, leaves, grad_outputs=vs, allow_unused=True, create_graph=create)
    )


def _zero_if_none(g: Any, leaf: Any) -> Any:
    return np.zeros(leaf.shape, dtype=_np(leaf).dtype) if g is None else g


def _same_grads(
    ga: Any, gt: Any, a_leaves: list[Any], t_leaves: list[Any], tol: Any, what: str
) -> None:
    """Gradients equal torch's, input by input (None counts as zeros)."""
    for k, (x, y) in enumerate(zip(ga, gt)):
        if x is None and y is None:
            continue
        _close(_zero_if_none(x, a_leaves[k]), _zero_if_none(y, t_leaves[k]), tol, f"{what} {k}")


def _check_case(info: OpInfo, dtype: str, sample: Sample, torch: Any, device: str = "cpu") -> None:
    a_args, a_kw, a_leaves = _build(sample, _ae_maker(device))
    t_args, t_kw, t_leaves = _build(sample, _torch_maker(torch))
    out_a = info.fn(*a_args, **a_kw)
    out_t = info.torch_fn(torch)(*t_args, **t_kw)
    fa, ft = _flat(out_a), _flat(out_t)
    assert len(fa) == len(ft), f"{len(fa)} results, torch gives {len(ft)}"
    for a in fa:
        if isinstance(a, ae.Tensor):
            assert a.device == ae.device(device), f"result on {a.device}, expected {device}"
    if info.random:
        for i, (a, t) in enumerate(zip(fa, ft)):
            assert _np(a).shape == _np(t).shape, f"result {i}: shape"
        return
    tol = _tol(info, dtype, _DEFAULT_TOL)
    for i, (a, t) in enumerate(zip(fa, ft)):
        _close(a, t, tol, f"{info.name} result {i}")
    if not info.grad or not a_leaves:
        return
    idx = _differentiable(fa)
    if not idx:
        return
    vs = _cotangents(fa, idx, seed=1)
    va = [_ae_maker(device)(v, False) for v in vs]
    vt = [_torch_maker(torch)(v, False) for v in vs]
    want2 = info.grad2
    ga = _grads_ae([fa[i] for i in idx], a_leaves, va, want2)
    gt = _grads_torch(torch, [ft[i] for i in idx], t_leaves, vt, want2)
    gtol = _tol(info, dtype, _GRAD_TOL)
    _same_grads(ga, gt, a_leaves, t_leaves, gtol, f"{info.name} d/d input")
    if not want2:
        return
    # second derivatives: the gradient of <first derivatives, w>
    rng = np.random.default_rng(2)
    ws = [np.asarray(rng.standard_normal(leaf.shape), dtype=dtype) for leaf in a_leaves]
    wa = [_ae_maker(device)(w, False) for w in ws]
    wt = [_torch_maker(torch)(w, False) for w in ws]
    sa = [(g * w).sum() for g, w in zip(ga, wa) if g is not None and g.requires_grad]
    st = [(g * w).sum() for g, w in zip(gt, wt) if g is not None and g.requires_grad]
    if not st:
        return  # torch's first derivative is constant in the inputs
    if not sa:
        raise AssertionError(f"{info.name}: first derivatives record no graph, torch's do")
    ha = ae.sync.grad([sum(sa[1:], sa[0])], a_leaves, allow_unused=True)
    ht = torch.autograd.grad([sum(st[1:], st[0])], t_leaves, allow_unused=True)
    _same_grads(ha, ht, a_leaves, t_leaves, gtol, f"{info.name} second derivative, input")


@pytest.mark.parametrize(("name", "dtype", "i"), list(_cases()))
def test_op_against_torch(name: str, dtype: str, i: int) -> None:
    torch = torch_or_skip()
    info = TABLE[name]
    _check_case(info, dtype, _samples(info, dtype)[i], torch, device=DEVICE)


def _first_float64(info: OpInfo) -> Sample | None:
    if "float64" not in info.dtypes:
        return None
    samples = _samples(info, "float64")
    return samples[0] if samples else None


@pytest.mark.parametrize("name", sorted(TABLE))
def test_op_gradcheck(name: str) -> None:
    info = TABLE[name]
    sample = _first_float64(info)
    if not (info.grad and info.gradcheck and not info.random) or sample is None:
        pytest.skip(f"{name}: not differentiable, random, or not checked by finite differences")
    args, kwargs, leaves = _build(sample, _ae_maker("cpu"))
    if not leaves:
        pytest.skip(f"{name}: its first sample has no differentiable input")
    positions = [i for i, a in enumerate(args) if any(a is leaf for leaf in leaves)]
    if len(positions) != len(leaves):
        pytest.skip(f"{name}: differentiable inputs inside lists are checked against torch only")

    def fn(*xs: Any) -> Any:
        full = list(args)
        for p, x in zip(positions, xs):
            full[p] = x
        outs = [o for o in _flat(info.fn(*full, **kwargs)) if isinstance(o, ae.Tensor)]
        return tuple(o for o in outs if o.dtype.kind == "f")

    assert ae.sync.gradcheck(fn, tuple(leaves), eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_op_on_sim_device(name: str) -> None:
    if DEVICE != "cpu":
        pytest.skip(f"the op tests run on {DEVICE} already")
    torch = torch_or_skip()
    info = TABLE[name]
    dtype = "float64" if "float64" in info.dtypes else info.dtypes[0]
    samples = _samples(info, dtype)
    _check_case(info, dtype, samples[0], torch, device="sim:0")


@pytest.mark.parametrize("name", sorted(n for n, i in TABLE.items() if i.method_name))
def test_op_method(name: str) -> None:
    torch = torch_or_skip()
    info = TABLE[name]
    dtype = info.dtypes[0]
    sample = _samples(info, dtype)[0]
    method = info.method_name
    assert method is not None
    a_args, a_kw, _ = _build(sample, _ae_maker("cpu"))
    t_args, t_kw, _ = _build(sample, _torch_maker(torch))
    assert isinstance(a_args[0], ae.Tensor), f"{name}: a method's first argument is a tensor"
    out_a = getattr(a_args[0], method)(*a_args[1:], **a_kw)
    out_t = getattr(t_args[0], method)(*t_args[1:], **t_kw)
    if info.random:
        return
    for k, (x, y) in enumerate(zip(_flat(out_a), _flat(out_t))):
        _close(x, y, _tol(info, dtype, _DEFAULT_TOL), f"{name} method result {k}")


@pytest.mark.parametrize(("name", "i"), list(_error_cases()))
def test_op_error(name: str, i: int) -> None:
    info = TABLE[name]
    assert info.errors is not None
    case: ErrorCase = list(info.errors(Maker(info.dtypes[0], seed=0)))[i]
    sample = Sample(case.args, case.kwargs, grad=())
    args, kwargs, _ = _build(sample, _ae_maker("cpu"))
    with pytest.raises(case.exc, match=case.match):
        info.fn(*args, **kwargs)
    if not case.torch_same:
        return
    torch = torch_or_skip()
    t_args, t_kw, _ = _build(sample, _torch_maker(torch))
    with pytest.raises(case.exc):
        info.torch_fn(torch)(*t_args, **t_kw)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_entry_has_samples_in_each_dtype(name: str) -> None:
    info = TABLE[name]
    assert info.dtypes, f"{name}: no dtypes"
    for dtype in info.dtypes:
        assert _samples(info, dtype), f"{name}: no samples in {dtype}"
    assert info.fn.__doc__, f"{name}: the function has no docstring"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_entry_is_in_its_namespace(name: str) -> None:
    info = TABLE[name]
    ns: Any = ae
    for part in info.namespace.split(".") if info.namespace else ():
        ns = getattr(ns, part)
    fn = getattr(ns, info.short, None)
    # after a first ae.func.vmap the name holds a dispatcher of the function (NOTE [vmap by
    # physical translation] in aengine/func/_batched.py)
    fn = getattr(fn, "__wrapped__", fn) if getattr(fn, "_ae_vmap_dispatcher", False) else fn
    assert fn is info.fn, f"ae.{name} is not the table's function"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_op_rejects_a_string_for_its_tensor(name: str) -> None:
    """A str where the first tensor goes: TypeError (torch's type), never a crash deep inside."""
    info = TABLE[name]
    sample = _samples(info, info.dtypes[0])[0]
    args, kwargs, _ = _build(sample, _ae_maker("cpu"))
    first = args[0]
    if isinstance(first, str):
        pytest.skip(f"{name}'s first argument is a string (an equation)")
    bad = "oops" if not isinstance(first, list) else ["oops", "oops"]
    with pytest.raises(TypeError):
        info.fn(bad, *args[1:], **kwargs)
