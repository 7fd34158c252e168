"""The plain backward of the normalisations (``_normalize_grads``) against torch.

The rule takes the forward's statistics and works in place on arrays; under
create_graph it recomputes them through ``F``.  These cases cover the
weight's layouts it tells apart (per channel or not, no weight but a bias),
rms_norm, group_norm of 3-d inputs, non-contiguous inputs and a broadcast
gradient, in both modes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import aengine as ae

R = np.random.default_rng(0)


def _arr(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float64)


CASES: list[tuple[str, Callable[[Any, Any, Any, Any], Any], tuple[int, ...], Any, Any]] = [
    ("layer_norm", lambda F, x, w, b: F.layer_norm(x, (6,), w, b), (4, 6), (6,), (6,)),
    ("layer_norm_all", lambda F, x, w, b: F.layer_norm(x, (4, 6), w, b), (4, 6), (4, 6), (4, 6)),
    ("layer_norm_bias", lambda F, x, w, b: F.layer_norm(x, (6,), None, b), (3, 4, 6), None, (6,)),
    ("layer_norm_plain", lambda F, x, w, b: F.layer_norm(x, (4, 6)), (3, 4, 6), None, None),
    ("rms_norm", lambda F, x, w, b: F.rms_norm(x, (6,), w), (4, 6), (6,), None),
    ("rms_norm_plain", lambda F, x, w, b: F.rms_norm(x, (6,)), (4, 6), None, None),
    ("group_norm_3d", lambda F, x, w, b: F.group_norm(x, 2, w, b), (3, 4, 5), (4,), (4,)),
    ("group_norm_4d", lambda F, x, w, b: F.group_norm(x, 2, w, b), (2, 4, 3, 3), (4,), (4,)),
    (
        "batch_norm",
        lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        (5, 3, 4, 2),
        (3,),
        (3,),
    ),
    (
        "batch_norm_bias",
        lambda F, x, w, b: F.batch_norm(x, None, None, None, b, training=True),
        (5, 3),
        None,
        (3,),
    ),
    (
        "instance_norm",
        lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b),
        (2, 3, 5),
        (3,),
        (3,),
    ),
]


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("broadcast_grad", [False, True])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_normalize_grads_match_torch(
    case: Any, create_graph: bool, broadcast_grad: bool, transposed: bool
) -> None:
    _, fn, xshape, wshape, bshape = case
    rev = tuple(range(len(xshape)))[::-1]
    # transposed: the input is a non-contiguous view (a permuted leaf of the reversed shape)
    arrays = [_arr(*xshape[::-1]) if transposed else _arr(*xshape)]
    arrays += [_arr(*s) if s is not None else None for s in (wshape, bshape)]
    ga = np.ones(xshape) if broadcast_grad else _arr(*xshape)
    ae_in = [ae.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) if a is not None else None for a in arrays]
    ae_x = ae_in[0].permute(*rev) if transposed else ae_in[0]
    t_x = t_in[0].permute(*rev) if transposed else t_in[0]
    y = fn(ae.nn.functional, ae_x, ae_in[1], ae_in[2])
    ty = fn(torch.nn.functional, t_x, t_in[1], t_in[2])
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    leaves = [t for t in ae_in if t is not None]
    t_leaves = [t for t in t_in if t is not None]
    if broadcast_grad:
        grads = ae.sync.grad([y.sum()], leaves, create_graph=create_graph)
        t_grads = torch.autograd.grad([ty.sum()], t_leaves)
    else:
        grads = ae.sync.grad([y], leaves, [ae.tensor(ga)], create_graph=create_graph)
        t_grads = torch.autograd.grad([ty], t_leaves, [torch.tensor(ga)])
    for a, t in zip(grads, t_grads):
        np.testing.assert_allclose(a.detach().numpy(), t.numpy(), rtol=1e-9, atol=1e-11)


LARGE = [  # sizes where the kernels take their blocked sums (aengine/ops/_cpu_kernels.py)
    (lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True), (16, 8, 32, 32), (8,), 3),
    (lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b), (4, 8, 64, 64), (8,), 3),
    (lambda F, x, w, b: F.layer_norm(x, (512,), w, b), (256, 512), (512,), 3),
    (lambda F, x, w, b: F.rms_norm(x, (4, 256), w), (64, 4, 256), (4, 256), 2),  # (no bias)
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", LARGE)
def test_large_normalize_match_torch(case: Any, dtype: str) -> None:
    fn, xshape, pshape, n_leaves = case
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(dtype) for s in (xshape, pshape, pshape, xshape)]
    arrays[0] += 2.0  # a mean away from 0
    a, w, b, g = arrays
    x, aw, ab = (ae.tensor(v, requires_grad=True) for v in (a, w, b))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (a, w, b))
    y, ty = fn(ae.nn.functional, x, aw, ab), fn(torch.nn.functional, tx, tw, tb)
    rtol, atol = (2e-5, 2e-5) if dtype == "float32" else (1e-10, 1e-10)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=atol)
    leaves, t_leaves = [x, aw, ab][:n_leaves], [tx, tw, tb][:n_leaves]
    grads = ae.sync.grad([y], leaves, [ae.tensor(g)])
    t_grads = torch.autograd.grad([ty], t_leaves, [torch.tensor(g)])
    for ga, gt in zip(grads, t_grads):
        scale = float(np.abs(gt.numpy()).max())
        np.testing.assert_allclose(ga.numpy(), gt.numpy(), rtol=rtol, atol=atol * scale)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_row_masked_by_infinite_scores(causal: bool) -> None:
    # the causal path skips the masked-row check unless a score is -inf: here row 0's one
    # kept score is -inf, a row masked entirely, zeros as torch's (the later rows: nan)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    k[0, 0] = np.inf
    q[0, 0] = -1.0
    keep = np.tril(np.ones((3, 3), dtype=bool))
    mask = None if causal else keep
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)),
        attn_mask=None if mask is None else torch.from_numpy(mask),
        is_causal=causal,
    )
    with np.errstate(invalid="ignore"):
        got = ae.nn.functional.scaled_dot_product_attention(
            *(ae.tensor(a) for a in (q, k, v)),
            attn_mask=None if mask is None else ae.tensor(mask),
            is_causal=causal,
        )
    assert np.array_equal(got.numpy()[0, 0], np.zeros(4, np.float32))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)
