"""What the operator table cannot say of the nn.functional norms, layers, dropout, attention.

The table (tests/ops/test_table.py) compares values and derivatives with
torch; here: the running statistics batch_norm / instance_norm update in
place, dropout's mask and generator, attention's dropout, embedding's
padding row and max_norm, and the derivatives torch cannot give us
(layer_norm with a weight or a bias alone, cdist's second derivative),
checked by finite differences.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

F = ae.nn.functional


def _grad(t: ae.Tensor) -> np.ndarray:
    assert t.grad is not None
    out: np.ndarray = t.grad.numpy()
    return out


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


# -- running statistics ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 2), (2, 3, 2, 2)])
def test_batch_norm_updates_running_stats_as_torch(shape: tuple[int, ...]) -> None:
    torch = torch_or_skip()
    rng = _rng()
    x = rng.standard_normal(shape)
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)
    a_rm, a_rv = ae.tensor(rm.copy()), ae.tensor(rv.copy())
    t_rm, t_rv = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    out = F.batch_norm(ae.tensor(x), a_rm, a_rv, training=True, momentum=0.3)
    ref = torch.nn.functional.batch_norm(torch.tensor(x), t_rm, t_rv, training=True, momentum=0.3)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a_rm.numpy(), t_rm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a_rv.numpy(), t_rv.numpy(), rtol=1e-12)
    assert a_rm._version == 1 and a_rv._version == 1
    # eval mode reads them
    out = F.batch_norm(ae.tensor(x), a_rm, a_rv, training=False)
    ref = torch.nn.functional.batch_norm(torch.tensor(x), t_rm, t_rv, training=False)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    assert a_rm._version == 1


def test_batch_norm_running_stats_get_no_gradient() -> None:
    x = ae.randn(4, 3, requires_grad=True)
    rm, rv = ae.zeros(3), ae.ones(3)
    F.batch_norm(x, rm, rv, training=True).sum().backward()
    assert x.grad is not None and rm.grad is None and not rm.requires_grad


def test_instance_norm_updates_running_stats_as_torch() -> None:
    torch = torch_or_skip()
    rng = _rng()
    x = rng.standard_normal((2, 3, 5))
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)
    a_rm, a_rv = ae.tensor(rm.copy()), ae.tensor(rv.copy())
    t_rm, t_rv = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    out = F.instance_norm(ae.tensor(x), a_rm, a_rv, momentum=0.2)
    ref = torch.nn.functional.instance_norm(torch.tensor(x), t_rm, t_rv, momentum=0.2)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a_rm.numpy(), t_rm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a_rv.numpy(), t_rv.numpy(), rtol=1e-12)
    assert a_rm._version == 1


# -- derivatives torch cannot give -------------------------------------------------------------
@pytest.mark.parametrize("which", ["weight", "bias"])
def test_layer_norm_weight_or_bias_alone(which: str) -> None:
    """torch's second derivative raises here: first against torch, second by finite differences."""
    torch = torch_or_skip()
    rng = _rng()
    x, p, v = rng.standard_normal((2, 3)), rng.standard_normal(3), rng.standard_normal((2, 3))
    kw: dict[str, Any] = {which: None}
    other = "bias" if which == "weight" else "weight"

    def ae_fn(xx: Any, pp: Any) -> Any:
        return F.layer_norm(xx, (3,), **{other: pp}, **kw)

    ax, ap = ae.tensor(x, requires_grad=True), ae.tensor(p, requires_grad=True)
    tx, tp = torch.tensor(x, requires_grad=True), torch.tensor(p, requires_grad=True)
    ga = ae.sync.grad([ae_fn(ax, ap)], [ax, ap], grad_outputs=[ae.tensor(v)])
    tout = torch.nn.functional.layer_norm(tx, (3,), **{other: tp}, **kw)
    gt = torch.autograd.grad([tout], [tx, tp], grad_outputs=[torch.tensor(v)])
    for a, t in zip(ga, gt):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    assert ae.sync.gradgradcheck(ae_fn, (ax, ap))


def test_pairwise_distance_p1_first_derivatives() -> None:
    torch = torch_or_skip()
    rng = _rng()
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    aa, ab = ae.tensor(a, requires_grad=True), ae.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    F.pairwise_distance(aa, ab, 1.0).sum().backward()
    torch.nn.functional.pairwise_distance(ta, tb, 1.0).sum().backward()
    np.testing.assert_allclose(_grad(aa), ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(_grad(ab), tb.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("p", [2.0, 3.0])
def test_cdist_second_derivatives_by_finite_differences(p: float) -> None:
    rng = _rng()
    a = ae.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    b = ae.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    assert ae.sync.gradgradcheck(lambda x, y: ae.cdist(x, y, p), (a, b))


def test_cdist_against_torch_matrix_product_path() -> None:
    """More than 25 rows: torch takes its matrix-product path; the values agree closely."""
    torch = torch_or_skip()
    rng = _rng()
    a, b = rng.standard_normal((30, 3)), rng.standard_normal((27, 3))
    aa = ae.tensor(a, requires_grad=True)
    ta = torch.tensor(a, requires_grad=True)
    out = ae.cdist(aa, ae.tensor(b))
    ref = torch.cdist(ta, torch.tensor(b))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-8)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(_grad(aa), ta.grad.numpy(), rtol=1e-7, atol=1e-9)


# -- dropout --------------------------------------------------------------------------------
def test_dropout_identity_cases() -> None:
    x = ae.randn(3, 4, requires_grad=True)
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.5, training=False) is x


def test_dropout_mask_scale_and_gradient() -> None:
    ae.manual_seed(3)
    x = ae.tensor(np.random.default_rng(1).uniform(1.0, 2.0, (50, 40)), requires_grad=True)
    y = F.dropout(x, 0.25)
    mask = y.detach().numpy() != 0
    assert 0.6 < mask.mean() < 0.9
    np.testing.assert_allclose(y.detach().numpy()[mask], x.detach().numpy()[mask] / 0.75)
    v = np.random.default_rng(2).standard_normal(y.shape)
    (gx,) = ae.sync.grad([y], [x], grad_outputs=[ae.tensor(v)])
    np.testing.assert_allclose(gx.numpy(), v * mask / 0.75)
    assert F.dropout(x, 1.0).detach().numpy().max() == 0.0


def test_dropout_reproducible_under_manual_seed() -> None:
    x = ae.ones(6, 7)
    ae.manual_seed(11)
    a = F.dropout(x, 0.5).numpy()
    b = F.dropout(x, 0.5).numpy()
    ae.manual_seed(11)
    c = F.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)


def test_dropout_inplace() -> None:
    ae.manual_seed(0)
    x = ae.ones(4, 5)
    y = F.dropout(x, 0.5, inplace=True)
    assert y is x and x._version == 1
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}


def test_attention_dropout_draws_the_weights_mask() -> None:
    rng = _rng()
    q, k, v = (ae.tensor(rng.standard_normal(s)) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 6)])
    ae.manual_seed(5)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    ae.manual_seed(5)
    w = ae.softmax(q @ k.transpose(-2, -1) / 2.0, -1)
    ref = F.dropout(w, 0.4) @ v
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10)
    ae.manual_seed(5)
    qq = ae.tensor(q.numpy(), requires_grad=True)
    assert ae.sync.gradcheck(
        lambda t: F.scaled_dot_product_attention(t, k, v, dropout_p=0.0), (qq,)
    )


# -- embedding ------------------------------------------------------------------------------
def test_embedding_padding_row_gets_no_gradient() -> None:
    w = ae.randn(5, 3, requires_grad=True)
    idx = ae.tensor([[0, 2, 2], [4, 2, 1]])
    out = F.embedding(idx, w, padding_idx=2)
    np.testing.assert_array_equal(out.detach().numpy()[0, 1], w.detach().numpy()[2])
    out.sum().backward()
    g = _grad(w)
    np.testing.assert_array_equal(g[2], 0.0)
    np.testing.assert_array_equal(g[[0, 1, 4]], 1.0)
    np.testing.assert_array_equal(g[3], 0.0)


def test_embedding_max_norm_renormalises_weight_as_torch() -> None:
    torch = torch_or_skip()
    w = _rng().standard_normal((5, 4)) * 2
    idx = np.array([[0, 3], [3, 1]])
    aw, tw = ae.tensor(w.copy()), torch.tensor(w.copy())
    out = F.embedding(ae.tensor(idx), aw, max_norm=1.0)
    ref = torch.nn.functional.embedding(torch.tensor(idx), tw, max_norm=1.0)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(aw.numpy(), tw.numpy(), rtol=1e-12)
    assert aw._version == 1


def test_embedding_sparse_is_not_supported() -> None:
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(ae.tensor([0]), ae.randn(2, 2), sparse=True)
