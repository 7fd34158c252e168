"""ae.func.vmap against torch.func.vmap, from the same numpy arrays.

Cases follow functorch's vmap tests (in_dims/out_dims, nesting, randomness,
chunking, errors) and its per-sample-gradient tests (vmap of grad through
functional_call of an MLP and a CNN).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.ops._table import TABLE
from tests.func.test_transforms import arr, both, close
from tests.oracle import torch_or_skip

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)
sf = ae.sync.func


def lib_fns(lib: Any) -> dict[str, Any]:
    F = lib.nn.functional
    return {
        "pointwise": lambda x, y: (x.exp() * y - x / 2).tanh() + F.gelu(x) + F.softplus(y),
        "reduce": lambda x, y: x.sum(0) + y.mean() + x.amax(-1).sum() + x.var(1).sum(),
        "softmax": lambda x, y: F.log_softmax(x, dim=-1) + x.softmax(0),
        "matmul": lambda x, y: (x @ y.T).sum() + (y @ x.T).sum() + x.T.matmul(y[0]).sum(),
        "shape": lambda x, y: x.reshape(-1).unsqueeze(0).expand(2, -1).transpose(0, 1).flatten(),
        "index": lambda x, y: (
            x[1:, ::2].sum() + y[0] * x[0, 0] + x.select(1, 1) + x[..., None, 0].sum(-1)
        ),
        "cat": lambda x, y: lib.cat([x, y * 2], 0).cumsum(1) + lib.stack([x, y], -1).sum(-1).sum(0),
        "permute": lambda x, y: x.permute(1, 0).movedim(0, 1) + y.flip(0),
        "linear": lambda x, y: F.linear(x, y, y[0, :3]),
        "where": lambda x, y: lib.where(x > 0, x, y).clamp(-0.5, 0.5),
        "losses": lambda x, y: (
            F.mse_loss(x, y) + F.l1_loss(x, y, reduction="sum") + F.smooth_l1_loss(x, y)
        ),
        "vectors": lambda x, y: x[0] @ y[0] + (x @ y[0]).sum() + (y[0] @ x).sum() + x[0].dot(y[1]),
        "sort": lambda x, y: x.sort(0).values + x.argsort(-1) + x.topk(2, 1).values.sum(),
        "einsum": lambda x, y: lib.einsum("ij,jk->ik", x, y) + lib.einsum("ii", x) + lib.trace(y),
        "similarity": lambda x, y: F.cosine_similarity(x, y, 0) + F.pairwise_distance(x, y),
        "attention": lambda x, y: F.scaled_dot_product_attention(x, y, x.exp()).sum(0),
        "take": lambda x, y: (
            lib.take_along_dim(x, x.argsort(1), 1) + lib.gather(y, 0, x.argsort(0))
        ),
        "maxmin": lambda x, y: x.max(1).values + x.min(0)[0][:3] + x.max(),
    }


@pytest.mark.parametrize("name", sorted(lib_fns(ae)))
def test_vmap_ops_match_torch(name: str) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(5, 3, 3)), both(arr(5, 3, 3))
    close(sf.vmap(lib_fns(ae)[name])(x, y), torch.func.vmap(lib_fns(torch)[name])(tx, ty))


@pytest.mark.parametrize("name", ["pointwise", "matmul", "linear", "losses"])
def test_vmap_one_argument_unbatched(name: str) -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(5, 3, 3)), both(arr(3, 3))
    close(
        sf.vmap(lib_fns(ae)[name], in_dims=(0, None))(x, y),
        torch.func.vmap(lib_fns(torch)[name], in_dims=(0, None))(tx, ty),
    )


def test_vmap_in_dims_out_dims_and_pytrees() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(3, 4)), both(arr(4, 2))

    def f(d: Any, z: Any) -> Any:
        return {"a": d["x"] * z.sum(), "b": (d["x"].sum(), z)}

    dims = {"a": 1, "b": (0, None)}
    got = sf.vmap(f, in_dims=({"x": 1}, None), out_dims=dims)({"x": x}, y)
    want = torch.func.vmap(f, in_dims=({"x": 1}, None), out_dims=dims)({"x": tx}, ty)
    close(got, want)
    with pytest.raises(ValueError, match="out_dims=None for an output that is batched"):
        sf.vmap(f, in_dims=({"x": 1}, None), out_dims=None)({"x": x}, y)


def test_vmap_nested() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(2, 3, 4)), both(arr(3, 4))

    def f(a: Any, b: Any) -> Any:
        return (a * b).sum() + a.exp().mean(0).sum()

    got = sf.vmap(sf.vmap(f, in_dims=(0, 0)), in_dims=(0, None))(x, y)
    want = torch.func.vmap(torch.func.vmap(f, in_dims=(0, 0)), in_dims=(0, None))(tx, ty)
    close(got, want)
    got = sf.vmap(sf.vmap(f, in_dims=(None, 0)), in_dims=(0, None))(x, y)
    want = torch.func.vmap(torch.func.vmap(f, in_dims=(None, 0)), in_dims=(0, None))(tx, ty)
    close(got, want)


def test_vmap_chunk_size() -> None:
    torch = torch_or_skip()
    x, tx = both(arr(7, 3))
    close(
        sf.vmap(lambda a: a.sin().sum(), chunk_size=3)(x),
        torch.func.vmap(lambda a: a.sin().sum(), chunk_size=3)(tx),
    )


def test_vmap_unbatched_output_is_expanded() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(4, 2)), both(arr(2))
    close(
        sf.vmap(lambda a, b: b * 2, in_dims=(0, None))(x, y),
        torch.func.vmap(lambda a, b: b * 2, in_dims=(0, None))(tx, ty),
    )


def test_vmap_randomness() -> None:
    x = ae.ones(64, 50)
    F = ae.nn.functional
    with pytest.raises(ae.func.VmapError, match="randomness error mode"):
        sf.vmap(lambda a: F.dropout(a, 0.5))(x)
    diff = sf.vmap(lambda a: F.dropout(a, 0.5), randomness="different")(x)
    same = sf.vmap(lambda a: F.dropout(a, 0.5), randomness="same")(x)
    assert not np.array_equal(diff.numpy()[0], diff.numpy()[1])
    assert np.array_equal(same.numpy()[0], same.numpy()[1])
    assert np.array_equal(
        sf.vmap(lambda a: F.dropout(a, 0.5, training=False))(x).numpy(), x.numpy()
    )
    with pytest.raises(RuntimeError, match="randomness"):
        sf.vmap(lambda a: a, randomness="sometimes")


def test_vmap_errors_match_torch() -> None:
    torch = torch_or_skip()
    (x, tx), (y, ty) = both(arr(3, 2)), both(arr(4, 2))
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        sf.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError):
        torch.func.vmap(lambda a, b: a + b)(tx, ty)
    with pytest.raises(ValueError, match="at least one"):
        sf.vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError):
        torch.func.vmap(lambda a: a, in_dims=None)(tx)
    with pytest.raises(ValueError, match="in_dim=2"):
        sf.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError):
        torch.func.vmap(lambda a: a, in_dims=2)(tx)
    with pytest.raises(ValueError, match="must only return Tensors"):
        sf.vmap(lambda a: 1.0)(x)
    with pytest.raises(ValueError):
        torch.func.vmap(lambda a: 1.0)(tx)
    with pytest.raises(ValueError, match="in_dims is not compatible"):
        sf.vmap(lambda a: a, in_dims=(0, 0))(x)


def test_vmap_op_without_rule_raises_naming_it() -> None:
    no_rule = [n for n, info in TABLE.items() if info.batch is None]
    assert "kron" in no_rule
    with pytest.raises(ae.func.VmapError, match="'kron' has no batching rule"):
        sf.vmap(lambda a: ae.kron(a, a))(ae.ones(3, 2))


def test_vmap_data_dependent_control_flow_raises() -> None:
    with pytest.raises(ae.func.VmapError, match="truth value"):
        sf.vmap(lambda a: a if a.sum() > 0 else -a)(ae.ones(3, 2))
    with pytest.raises(ae.func.VmapError, match="item\\(\\)"):
        sf.vmap(lambda a: a.sum().item())(ae.ones(3, 2))
    with pytest.raises(ae.func.VmapError, match="in-place"):
        sf.vmap(lambda a: a.__iadd__(1))(ae.ones(3, 2))


# -- vmap of grad: per-sample gradients --------------------------------------------------------------
def _models(kind: str) -> tuple[Any, Any]:
    torch = torch_or_skip()

    def build(lib: Any) -> Any:
        nn = lib.nn
        if kind == "mlp":
            return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        return nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(6 * 2 * 2, 3),
        )  # fmt: skip

    torch.manual_seed(0)
    tm = build(torch).double()
    am = build(ae).double()
    am.load_state_dict({k: ae.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return am, tm


@pytest.mark.parametrize(("kind", "unsqueeze"), [("mlp", False), ("mlp", True), ("cnn", True)])
def test_per_sample_gradients(kind: str, unsqueeze: bool) -> None:
    torch = torch_or_skip()
    am, tm = _models(kind)
    shape = (5, 6) if kind == "mlp" else (5, 1, 8, 8)
    (x, tx) = both(arr(*shape))
    labels = np.random.default_rng(1).integers(0, 3, 5)
    y, ty = ae.tensor(labels), torch.tensor(labels)

    def loss(lib: Any, m: Any) -> Any:
        def f(p: Any, xb: Any, yb: Any) -> Any:
            if unsqueeze:
                xb, yb = xb.unsqueeze(0), yb.unsqueeze(0)
            out = lib.func.functional_call(m, p, (xb,))
            return lib.nn.functional.cross_entropy(out, yb)

        return f

    p = {k: v.detach() for k, v in am.named_parameters()}
    tp = {k: v.detach() for k, v in tm.named_parameters()}
    got = sf.vmap(sf.grad(loss(ae, am)), in_dims=(None, 0, 0))(p, x, y)
    want = torch.func.vmap(torch.func.grad(loss(torch, tm)), in_dims=(None, 0, 0))(tp, tx, ty)
    close(got, want)
    # the same as one backward per sample
    for i in (0, 4):
        out = am(x[i : i + 1])
        gi = ae.sync.grad(ae.nn.functional.cross_entropy(out, y[i : i + 1]), list(am.parameters()))
        for (name, _), g in zip(am.named_parameters(), gi, strict=True):
            np.testing.assert_allclose(got[name].numpy()[i], g.numpy(), rtol=1e-9, atol=1e-12)


def test_per_sample_gradients_with_batched_params() -> None:
    """Parameters batched too (an ensemble): the general (batched-weight) rules."""
    torch = torch_or_skip()
    am, tm = _models("cnn")
    (x, tx) = both(arr(4, 1, 8, 8))
    p = {
        k: ae.tensor(np.stack([v.detach().numpy()] * 4) + arr(4, *v.shape) * 0.1)
        for k, v in tm.named_parameters()
    }
    tp = {k: torch.tensor(v.numpy()) for k, v in p.items()}

    def loss(lib: Any, m: Any) -> Any:
        return lambda p, xb: lib.func.functional_call(m, p, (xb.unsqueeze(0),)).pow(2).sum()

    got = sf.vmap(sf.grad(loss(ae, am)))(p, x)
    want = torch.func.vmap(torch.func.grad(loss(torch, tm)))(tp, tx)
    close(got, want)


def test_vmap_of_grad_with_closure() -> None:
    torch = torch_or_skip()
    (w, tw), (x, tx) = both(arr(3)), both(arr(4, 3))

    def f(lib: Any, G: Any, V: Any, w0: Any) -> Any:
        return V(lambda xb: G(lambda w: (w * xb).sin().sum())(w0))

    close(f(ae, sf.grad, sf.vmap, w)(x), f(torch, torch.func.grad, torch.func.vmap, tw)(tx))


@pytest.mark.parametrize("which", ["jacrev", "jacfwd", "hessian"])
def test_vmap_of_jacobians(which: str) -> None:
    torch = torch_or_skip()
    x, tx = both(arr(4, 3))

    def f(a: Any) -> Any:
        return (a.sin() * a.sum()).sum() if which == "hessian" else a.sin() * a.sum()

    close(sf.vmap(getattr(sf, which)(f))(x), torch.func.vmap(getattr(torch.func, which)(f))(tx))


def test_grad_of_vmap() -> None:
    torch = torch_or_skip()
    (w, tw), (x, tx) = both(arr(3)), both(arr(4, 3))

    def f(lib: Any, V: Any) -> Any:
        return lambda w, x: V(lambda xb: (w * xb).exp().sum(), in_dims=0)(x).sum()

    close(sf.grad(f(ae, sf.vmap))(w, x), torch.func.grad(f(torch, torch.func.vmap))(tw, tx))


def test_vmap_of_vjp() -> None:
    torch = torch_or_skip()
    (x, tx), (c, tc) = both(arr(4, 3)), both(arr(4, 3))

    def f(V: Any, J: Any, lib: Any) -> Any:
        return V(lambda xb, cb: J(lib.sin, xb)[1](cb)[0])

    close(f(sf.vmap, sf.vjp, ae)(x, c), f(torch.func.vmap, torch.func.vjp, torch)(tx, tc))


def test_an_operator_reached_without_dispatch_names_itself() -> None:
    from aengine.ops._unary import exp  # the bare operator, as a name imported early

    x = ae.ones(3, 2)
    with pytest.raises(ae.func.VmapError, match="exp\\(\\) got a vmap-batched tensor"):
        sf.vmap(lambda a: exp(a))(x)
    with pytest.raises(ae.func.VmapError, match="batched tensor's method instead"):
        sf.vmap(lambda a: ae.ones(2).add(a))(x)
    # the public names and the operators do dispatch
    assert sf.vmap(lambda a: ae.exp(a) + ae.ones(2) * a)(x).shape == (3, 2)


def test_vjp_fn_made_outside_vmap_refuses_a_batched_cotangent() -> None:
    out, fn = sf.vjp(ae.sin, ae.ones(3))
    with pytest.raises(ae.func.VmapError, match="call vjp inside the vmapped function"):
        sf.vmap(fn)(ae.ones(4, 3))
