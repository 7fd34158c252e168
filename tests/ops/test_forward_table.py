"""Forward-mode AD over the operator table: every entry, sample and float dtype.

Per case (NOTE [JVP rules] in aengine/ops/_forward.py): inside a dual level,
with a random tangent on every differentiable input, the results' tangents
equal torch's forward AD (``torch.autograd.forward_ad``) from the same numpy
arrays, and agree with aengine's reverse mode: ``<J t, v> == sum_i <J_i^T v,
t_i>`` for a random cotangent ``v``.  An entry marked ``forward_ad=False``
raises NotImplementedError naming the op, as torch's ops without a rule.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import aengine as ae
import aengine.autograd.forward_ad as fwAD
from aengine.ops._forward import ForwardUnsupported
from aengine.ops._table import TABLE, OpInfo, Sample
from tests.ops.test_table import (
    _GRAD_TOL,
    _ONLY_DTYPE,
    _build,
    _close,
    _flat,
    _np,
    _samples,
    _tol,
)
from tests.oracle import torch_or_skip

#: where aengine's reverse mode and torch's forward mode read different parts of
#: a tangent (so only torch's forward AD is the oracle)
_REVERSE_DIFFERS = {
    "linalg.cholesky": "torch's JVP reads all of dA, the gradient its lower triangle only",
    "nn.functional.embedding": "scale_grad_by_freq scales the gradient, not the tangent (torch)",
}

#: samples where forward AD raises (ForwardUnsupported) where torch has a rule: the
#: departures the forward-mode docs list
_UNSUPPORTED_SAMPLES = {
    "cumprod": "an input with zeros",
    "nn.functional.embedding": "padding_idx",
    "linalg.matrix_norm": "the norms of singular values (svd has no JVP rule)",
    "norm": "the nuclear and spectral norms (svd has no JVP rule)",
}

#: samples whose tangents differ from torch's (the departures the docs list)
_DIFFERENT_SAMPLES = {
    ("nn.functional.embedding", 4): "max_norm renorms the weight in place: torch's tangent "
    "ignores that write, aengine's follows it",
    ("logcumsumexp", 2): "magnitudes of hundreds: torch's tangent underflows at the scan's start",
    ("fmax", 6): "NaN everywhere: torch's tangent follows the NaN operand",
    ("median", 8): "NaN input: torch's tangent is NaN, aengine's the picked element's",
    ("scatter_reduce", 2): "ties with the input: torch gives the input no tangent",
    ("scatter_reduce", 3): "ties with the input: torch gives the input no tangent",
    ("scatter_reduce", 11): "ties with the input: torch gives the input no tangent",
}


def _cases() -> Any:
    for name in sorted(TABLE):
        info = TABLE[name]
        if not info.grad or info.random:
            continue
        for dtype in info.dtypes:
            if dtype not in ("float32", "float64"):
                continue
            if _ONLY_DTYPE is not None and dtype != _ONLY_DTYPE:
                continue
            for i, _ in enumerate(_samples(info, dtype)):
                yield pytest.param(name, dtype, i, id=f"{name}-{dtype}-{i}")


class _Duals:
    """Makes a library's tensors from a sample's arrays; floating leaves get tangents."""

    def __init__(self, tensor: Any, make_dual: Any, seed: int) -> None:
        self.tensor, self.make_dual = tensor, make_dual
        self.rng = np.random.default_rng(seed)
        self.tangents: list[np.ndarray] = []

    def __call__(self, a: np.ndarray, want: bool) -> Any:
        t = self.tensor(a)
        if not want:
            return t
        v = np.asarray(self.rng.standard_normal(a.shape), dtype=a.dtype)
        self.tangents.append(v)
        return self.make_dual(t, self.tensor(v.copy()))


def _ae_tensor(a: np.ndarray) -> Any:
    return ae.tensor(a.copy())


def _forward_ae(info: OpInfo, sample: Sample, seed: int) -> tuple[list[Any], list[Any]]:
    make = _Duals(_ae_tensor, fwAD.make_dual, seed)
    with fwAD.dual_level():
        args, kwargs, _ = _build(sample, make)
        outs = _flat(info.fn(*args, **kwargs))
        tangents = [fwAD.unpack_dual(o).tangent if isinstance(o, ae.Tensor) else None for o in outs]
    return outs, tangents


def torch_forward_ad() -> Any:
    """torch's forward_ad, its jvp decompositions loaded once (their import warns)."""
    torch = torch_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import torch._decomp.decompositions_for_jvp  # noqa: F401
    return torch.autograd.forward_ad


def _forward_torch(torch: Any, info: OpInfo, sample: Sample, seed: int) -> list[Any] | None:
    fw = torch_forward_ad()
    make = _Duals(lambda a: torch.from_numpy(a.copy()), fw.make_dual, seed)
    with fw.dual_level():
        args, kwargs, _ = _build(sample, make)
        try:
            outs = _flat(info.torch_fn(torch)(*args, **kwargs))
        except NotImplementedError:
            return None  # torch has no forward AD for it: compared with the reverse mode only
        return [fw.unpack_dual(o).tangent if torch.is_tensor(o) else None for o in outs]


def _against_reverse(info: OpInfo, sample: Sample, tangents: list[Any], tol: Any) -> None:
    """``<J t, v> == sum_i <J_i^T v, t_i>``, the reverse mode's gradients on the same tangents."""
    make = _Duals(_ae_tensor, lambda t, v: t.requires_grad_(True), seed=1)
    args, kwargs, leaves = _build(sample, make)
    outs = _flat(info.fn(*args, **kwargs))
    pairs = [
        (o, t)
        for o, t in zip(outs, tangents)
        if isinstance(o, ae.Tensor) and o.requires_grad and t is not None
    ]
    if not pairs or not leaves:
        return
    rng = np.random.default_rng(4)
    vs = [np.asarray(rng.standard_normal(o.shape), dtype=o.dtype) for o, _ in pairs]
    grads = ae.sync.grad(
        [o for o, _ in pairs], leaves, grad_outputs=[ae.tensor(v) for v in vs], allow_unused=True
    )
    lhs = sum(float((_np(t).astype(np.float64) * v).sum()) for (_, t), v in zip(pairs, vs))
    rhs = sum(
        float((_np(g).astype(np.float64) * t).sum())
        for g, t in zip(grads, make.tangents)
        if g is not None
    )
    if np.isnan(lhs) and np.isnan(rhs):
        return  # NaN in, NaN out (both ways)
    scale = max(1.0, abs(lhs), abs(rhs))
    assert abs(lhs - rhs) <= 10 * tol[0] * scale + tol[1] * 10, (
        f"{info.name}: <J t, v> = {lhs} but <t, J^T v> = {rhs}"
    )


@pytest.mark.parametrize(("name", "dtype", "i"), list(_cases()))
def test_op_forward_ad(name: str, dtype: str, i: int) -> None:
    info = TABLE[name]
    sample = _samples(info, dtype)[i]
    if not info.forward_ad:
        # an op without a rule raises, naming it (unless nothing carried a tangent to it)
        try:
            _, tangents = _forward_ae(info, sample, seed=1)
        except ForwardUnsupported as exc:
            assert "Trying to use forward AD with" in str(exc)
            return
        assert all(t is None for t in tangents), f"{name}: forward_ad=False but a tangent came"
        return
    torch = torch_or_skip()
    try:
        outs, tangents = _forward_ae(info, sample, seed=1)
    except ForwardUnsupported:
        if name in _UNSUPPORTED_SAMPLES:
            pytest.skip(f"{name}: {_UNSUPPORTED_SAMPLES[name]} has no JVP rule (documented)")
        raise
    t_tangents = _forward_torch(torch, info, sample, seed=1)
    tol = _tol(info, dtype, _GRAD_TOL)
    if (name, i) in _DIFFERENT_SAMPLES:  # a documented departure: the reverse mode only
        t_tangents = None
    if t_tangents is not None:
        assert len(t_tangents) == len(tangents), f"{len(tangents)} results, torch {len(t_tangents)}"
        for k, (a, t) in enumerate(zip(tangents, t_tangents)):
            if t is None or a is None:
                o = outs[k]
                floating = isinstance(o, ae.Tensor) and o.dtype.kind == "f"
                other = a if t is None else t
                if other is not None and floating:
                    assert np.all(_np(other) == 0), f"{name} tangent {k}: only one side has one"
                continue
            _close(a, t, tol, f"{name} tangent {k}")
    if name not in _REVERSE_DIFFERS:
        _against_reverse(info, sample, tangents, tol)
