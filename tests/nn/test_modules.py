"""ae.nn modules against torch.nn: registration, state_dict keys, repr, outputs and gradients.

Each layer pair gets the same weights (torch's state_dict loaded into the
aengine module: that is also the checkpoint path users take); outputs and
the gradients of the input and of every parameter then equal torch's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip


def _same(a: Any, t: Any, rtol: float = 1e-5, atol: float = 1e-6, what: str = "") -> None:
    np.testing.assert_allclose(
        a.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol, err_msg=what
    )


def _check_pair(
    make: Callable[[Any], Any], shapes: list[tuple[int, ...]], train: bool = True,
    ints: dict[int, int] | None = None,
) -> None:  # fmt: skip
    torch = torch_or_skip()
    torch.manual_seed(0)
    tm = make(torch.nn).double()
    am = make(ae.nn).double()
    assert list(am.state_dict()) == list(tm.state_dict()), "state_dict keys differ from torch's"
    assert [n for n, _ in am.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(am) == repr(tm)
    result = am.load_state_dict(tm.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    am.train(train)
    tm.train(train)
    rng = np.random.default_rng(0)
    arrays = []
    for i, s in enumerate(shapes):
        if ints and i in ints:
            arrays.append(rng.integers(0, ints[i], size=s))
        else:
            arrays.append(rng.standard_normal(s))
    xa = [ae.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    xt = [torch.from_numpy(a.copy()).requires_grad_(a.dtype.kind == "f") for a in arrays]
    ya, yt = am(*xa), tm(*xt)
    if isinstance(yt, tuple):
        ya, yt = ya[0], yt[0]
    _same(ya, yt, what="output")
    w = rng.standard_normal(tuple(yt.shape))
    (ya * ae.tensor(w)).sum().backward()
    (yt * torch.from_numpy(w)).sum().backward()
    for (name, p), (_, q) in zip(am.named_parameters(), tm.named_parameters()):
        if q.grad is None:
            assert p.grad is None, name
            continue
        _same(p.grad, q.grad, what=f"grad of {name}")
    for x, y in zip(xa, xt):
        if y.grad is not None:
            _same(x.grad, y.grad, what="grad of the input")
    for (name, b), (_, c) in zip(am.named_buffers(), tm.named_buffers()):
        _same(b, c, what=f"buffer {name}")


LAYERS: list[tuple[str, Callable[[Any], Any], list[tuple[int, ...]], dict[str, Any]]] = [
    ("Linear", lambda nn: nn.Linear(4, 3), [(5, 4)], {}),
    ("Linear no bias", lambda nn: nn.Linear(4, 3, bias=False), [(2, 5, 4)], {}),
    ("Bilinear", lambda nn: nn.Bilinear(3, 4, 2), [(5, 3), (5, 4)], {}),
    ("Embedding", lambda nn: nn.Embedding(10, 3, padding_idx=1), [(2, 5)], {"ints": {0: 10}}),
    ("BatchNorm1d", lambda nn: nn.BatchNorm1d(3), [(6, 3)], {}),
    ("BatchNorm1d eval", lambda nn: nn.BatchNorm1d(3), [(6, 3, 2)], {"train": False}),
    ("BatchNorm2d", lambda nn: nn.BatchNorm2d(3, momentum=None), [(2, 3, 4, 4)], {}),
    ("LayerNorm", lambda nn: nn.LayerNorm((3, 4)), [(2, 3, 4)], {}),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 4), [(3, 4, 5)], {}),
    ("RMSNorm", lambda nn: nn.RMSNorm(4, eps=1e-6), [(3, 4)], {}),
    (
        "Sequential",
        lambda nn: nn.Sequential(
            nn.Linear(4, 8), nn.Identity(), nn.Flatten(0), nn.Unflatten(0, (5, 8))
        ),
        [(5, 4)],
        {},
    ),
    ("Dropout eval", lambda nn: nn.Dropout(0.3), [(4, 3)], {"train": False}),
    ("Conv1d", lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1), [(2, 3, 9)], {}),
    ("Conv2d", lambda nn: nn.Conv2d(2, 4, 3, padding=1, bias=False), [(2, 2, 6, 5)], {}),
    (
        "Conv2d same reflect groups",
        lambda nn: nn.Conv2d(4, 6, (3, 2), padding="same", padding_mode="reflect", groups=2),
        [(2, 4, 6, 5)],
        {},
    ),
    (
        "Conv2d circular",
        lambda nn: nn.Conv2d(2, 3, 3, padding=2, padding_mode="circular"),
        [(1, 2, 5, 5)],
        {},
    ),  # fmt: skip
    ("ConvTranspose1d", lambda nn: nn.ConvTranspose1d(3, 2, 3, stride=2), [(2, 3, 4)], {}),
    (
        "ConvTranspose2d",
        lambda nn: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2),
        [(2, 4, 3, 3)],
        {},
    ),
    ("MaxPool1d", lambda nn: nn.MaxPool1d(2), [(2, 3, 8)], {}),
    ("MaxPool2d", lambda nn: nn.MaxPool2d(3, stride=2, padding=1), [(2, 3, 7, 7)], {}),
    ("AvgPool1d", lambda nn: nn.AvgPool1d(3, stride=2), [(2, 3, 8)], {}),
    ("AvgPool2d", lambda nn: nn.AvgPool2d(2, ceil_mode=True), [(2, 3, 5, 5)], {}),
    ("AdaptiveAvgPool1d", lambda nn: nn.AdaptiveAvgPool1d(3), [(2, 3, 8)], {}),
    ("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d((1, 1)), [(2, 3, 5, 5)], {}),
    ("AdaptiveMaxPool2d", lambda nn: nn.AdaptiveMaxPool2d(2), [(2, 3, 5, 5)], {}),
    (
        "MultiheadAttention",
        lambda nn: nn.MultiheadAttention(8, 2, batch_first=True),
        [(3, 5, 8), (3, 4, 8), (3, 4, 8)],
        {},
    ),
    (
        "TransformerEncoderLayer",
        lambda nn: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
        [(5, 3, 8)],
        {},
    ),
    (
        "TransformerEncoderLayer norm_first gelu",
        lambda nn: nn.TransformerEncoderLayer(
            8,
            2,
            dim_feedforward=16,
            dropout=0.0,
            activation="gelu",
            norm_first=True,
            batch_first=True,
        ),
        [(3, 5, 8)],
        {},
    ),
    (
        "TransformerEncoder",
        lambda nn: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
            2,
            enable_nested_tensor=False,
        ),
        [(5, 3, 8)],
        {},
    ),
    (
        "TransformerDecoderLayer",
        lambda nn: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
        [(4, 3, 8), (6, 3, 8)],
        {},
    ),
]


@pytest.mark.parametrize(("name", "make", "shapes", "kw"), LAYERS, ids=[x[0] for x in LAYERS])
def test_layer_equals_torch(name: str, make: Any, shapes: Any, kw: dict[str, Any]) -> None:
    _check_pair(make, shapes, **kw)


class _Net:
    """A small model built the same way from either library."""

    @staticmethod
    def build(nn: Any) -> Any:
        class Net(nn.Module):  # type: ignore[misc,name-defined]
            def __init__(self) -> None:
                super().__init__()
                self.fc1 = nn.Linear(4, 8)
                self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
                self.heads = nn.ModuleDict({"a": nn.Linear(8, 2)})
                self.register_buffer("scale", (nn.Linear(1, 1).weight.detach() * 0 + 2).reshape(1))
                self.register_buffer("tmp", None, persistent=False)

            def forward(self, x: Any) -> Any:
                h = self.fc1(x)
                for b in self.blocks:
                    h = b(h) * 0.5 + h
                return self.heads["a"](h) * self.scale

        return Net()


def test_module_tree_and_state_dict_like_torch() -> None:
    torch = torch_or_skip()
    tm = _Net.build(torch.nn)
    am = _Net.build(ae.nn)
    assert list(am.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in am.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in am.named_children()] == [n for n, _ in tm.named_children()]
    assert [n for n, _ in am.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert repr(am) == repr(tm)
    am.load_state_dict(tm.state_dict())
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    _same(am(ae.tensor(x)), tm(torch.from_numpy(x)))


def test_load_state_dict_checks_everything_before_copying() -> None:
    m = ae.nn.Linear(3, 2)
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    bad = {"weight": ae.zeros(2, 3), "bias": ae.zeros(5)}
    with pytest.raises(RuntimeError, match=r"size mismatch for bias: .*\(5,\).*\(2,\)"):
        m.load_state_dict(bad)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        m.load_state_dict({"weight": ae.zeros(2, 3)})
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        m.load_state_dict({"weight": ae.zeros(2, 3), "bias": ae.zeros(2), "extra": ae.ones(1)})
    with pytest.raises(RuntimeError, match="expected an ae.Tensor or a numpy array"):
        m.load_state_dict({"weight": "no", "bias": ae.zeros(2)})
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])  # untouched
    res = m.load_state_dict({"weight": np.ones((2, 3))}, strict=False)
    assert res.missing_keys == ["bias"] and m.weight.tolist() == [[1.0] * 3] * 2
    assert m.weight.dtype == np.float32  # cast to the parameter's dtype


def test_module_modes_conversion_hooks_and_errors() -> None:
    m = ae.nn.Sequential(ae.nn.Linear(2, 2), ae.nn.Dropout(0.5))
    assert m.training and all(c.training for c in m.children())
    m.eval()
    assert not m[1].training
    w = m[0].weight
    m.double()
    assert m[0].weight is w and w.dtype == np.float64 and w.requires_grad
    seen: list[Any] = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    h2 = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    out = m(ae.ones(3, 2, dtype=ae.float64))
    assert seen == [(3, 2)]
    h1.remove(), h2.remove()
    assert out.shape == (3, 2)
    m.requires_grad_(False)
    assert not w.requires_grad
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'weight'"):
        m[0].weight = 3
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = m.nope
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        ae.nn.Module()(1)
    with pytest.raises(KeyError, match="contain"):
        ae.nn.Module().register_parameter("a.b", None)


def test_zero_grad_and_deepcopy() -> None:
    m = ae.nn.Linear(2, 2)
    m(ae.ones(1, 2)).sum().backward()
    assert m.weight.grad is not None
    c = copy.deepcopy(m)
    assert c.weight is not m.weight and isinstance(c.weight, ae.nn.Parameter)
    np.testing.assert_array_equal(c.weight.detach().numpy(), m.weight.detach().numpy())
    assert c.weight.grad is not None
    m.zero_grad()
    assert m.weight.grad is None
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(m.weight * 2)


def test_init_functions_follow_torch_formulas() -> None:
    ae.manual_seed(0)
    w = ae.empty(200, 300)
    ae.nn.init.kaiming_uniform_(w, a=5**0.5)
    bound = (6 / ((1 + 5) * 300)) ** 0.5
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.95 * bound
    ae.nn.init.xavier_normal_(w)
    assert abs(float(w.std()) - (2 / 500) ** 0.5) < 0.003
    ae.nn.init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    assert float(w.abs().max()) <= 0.5
    q = ae.empty(4, 6)
    ae.nn.init.orthogonal_(q)
    np.testing.assert_allclose((q @ q.T).numpy(), np.eye(4), atol=1e-5)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        ae.nn.init.xavier_uniform_(ae.empty(3))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        ae.nn.init.calculate_gain("nope")
    torch = torch_or_skip()
    for name in ("linear", "tanh", "relu", "leaky_relu", "selu", "sigmoid"):
        assert ae.nn.init.calculate_gain(name) == pytest.approx(torch.nn.init.calculate_gain(name))


def test_clip_grad_and_vector_utils_equal_torch() -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    for norm_type in (2.0, 1.0, float("inf"), 3.0):
        ap = [ae.nn.Parameter(ae.tensor(a)) for a in arrays]
        tp = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in arrays]
        for p, q, a in zip(ap, tp, arrays):
            p.grad = ae.tensor(a * 3)
            q.grad = torch.from_numpy(a * 3)
        na = ae.nn.utils.clip_grad_norm_(ap, 1.0, norm_type)
        nt = torch.nn.utils.clip_grad_norm_(tp, 1.0, norm_type)
        assert float(na) == pytest.approx(float(nt), rel=1e-12)
        for p, q in zip(ap, tp):
            _same(p.grad, q.grad, rtol=1e-12)
    ae.nn.utils.clip_grad_value_(ap, 0.1)
    assert float(ap[0].grad.abs().max()) <= 0.1
    v = ae.nn.utils.parameters_to_vector(ap)
    assert v.shape == (17,)
    ae.nn.utils.vector_to_parameters(v * 0 + 1, ap)
    assert ap[1].tolist() == [1.0] * 5
    with pytest.raises(RuntimeError, match="non-finite"):
        ap[0].grad = ae.full((3, 4), float("inf"), dtype=ae.float64)
        ae.nn.utils.clip_grad_norm_(ap, 1.0, error_if_nonfinite=True)


ACTIVATIONS = [
    "ReLU()", "ReLU(inplace=True)", "ReLU6()", "LeakyReLU(0.2)", "ELU(alpha=0.5)", "SELU()",
    "CELU(2.0)", "GELU()", "GELU(approximate='tanh')", "SiLU()", "Mish()", "Softplus(beta=2.0)",
    "Softsign()", "Hardtanh(-2.0, 2.0)", "Hardsigmoid()", "Hardswish()", "LogSigmoid()",
    "Sigmoid()", "Tanh()", "Softmax(dim=1)", "LogSoftmax(dim=1)", "Softmin(dim=1)", "GLU()",
]  # fmt: skip


@pytest.mark.parametrize("spec", ACTIVATIONS)
def test_activation_module_equals_torch(spec: str) -> None:
    def make(nn: Any) -> Any:
        layer = eval(f"nn.{spec}")
        # in place on a leaf is refused (as torch): act on a non-leaf
        return nn.Sequential(nn.Identity(), layer) if "inplace" not in spec else layer

    if "inplace" in spec:
        torch = torch_or_skip()
        a = eval(f"ae.nn.{spec}")
        assert repr(a) == repr(eval(f"torch.nn.{spec}", {"torch": torch}))
        x = ae.tensor([-1.0, 2.0], requires_grad=True)
        y = a(x * 1)
        assert y.tolist() == [0.0, 2.0]
        return
    _check_pair(make, [(3, 4)])


LOSSES: list[tuple[str, str, list[tuple[int, ...]], dict[int, int]]] = [
    ("CrossEntropyLoss", "CrossEntropyLoss(label_smoothing=0.1)", [(5, 4), (5,)], {1: 4}),
    ("NLLLoss", "NLLLoss(reduction='sum')", [(5, 4), (5,)], {1: 4}),
    ("MSELoss", "MSELoss()", [(5, 4), (5, 4)], {}),
    ("L1Loss", "L1Loss(reduction='none')", [(5, 4), (5, 4)], {}),
    ("SmoothL1Loss", "SmoothL1Loss(beta=0.5)", [(5, 4), (5, 4)], {}),
    ("HuberLoss", "HuberLoss(delta=0.5)", [(5, 4), (5, 4)], {}),
    ("BCEWithLogitsLoss", "BCEWithLogitsLoss()", [(5, 4), (5, 4)], {1: 2}),
    ("KLDivLoss", "KLDivLoss(reduction='batchmean')", [(5, 4), (5, 4)], {}),
]


@pytest.mark.parametrize(("name", "spec", "shapes", "ints"), LOSSES, ids=[x[0] for x in LOSSES])
def test_loss_module_equals_torch(
    name: str, spec: str, shapes: list[tuple[int, ...]], ints: dict[int, int]
) -> None:
    torch = torch_or_skip()
    rng = np.random.default_rng(0)
    arrays = [
        rng.integers(0, ints[i], size=s) if i in ints else rng.standard_normal(s)
        for i, s in enumerate(shapes)
    ]
    if name == "BCEWithLogitsLoss":
        arrays[1] = arrays[1].astype(np.float64)
    if name == "KLDivLoss":  # a distribution as the target
        arrays[1] = np.abs(arrays[1]) / np.abs(arrays[1]).sum(1, keepdims=True)
    am, tm = eval(f"ae.nn.{spec}"), eval(f"torch.nn.{spec}")
    assert repr(am) == repr(tm)
    xa = ae.tensor(arrays[0], requires_grad=True)
    xt = torch.from_numpy(arrays[0].copy()).requires_grad_(True)
    ya, yt = am(xa, ae.tensor(arrays[1])), tm(xt, torch.from_numpy(arrays[1]))
    _same(ya, yt, rtol=1e-10)
    ya.sum().backward()
    yt.sum().backward()
    _same(xa.grad, xt.grad, rtol=1e-10)


def test_attention_masks_equal_torch() -> None:
    """Causal bool masks, float masks and key padding, with and without the weights."""
    torch = torch_or_skip()
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    am = ae.nn.MultiheadAttention(8, 2, batch_first=True).double()
    am.load_state_dict(tm.state_dict())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8))
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, 3:] = True
    for need in (True, False):
        for mask, kpm in ((causal, pad), (np.where(causal, -1e9, 0.0), np.where(pad, -1e9, 0.0))):
            xa = ae.tensor(x, requires_grad=True)
            xt = torch.from_numpy(x.copy()).requires_grad_(True)
            ya, wa = am(xa, xa, xa, key_padding_mask=ae.tensor(kpm), attn_mask=ae.tensor(mask),
                        need_weights=need)  # fmt: skip
            yt, wt = tm(xt, xt, xt, key_padding_mask=torch.from_numpy(kpm),
                        attn_mask=torch.from_numpy(mask), need_weights=need)  # fmt: skip
            _same(ya, yt, rtol=1e-9, atol=1e-12)
            if need:
                _same(wa, wt, rtol=1e-9, atol=1e-12)
            ya.sum().backward()
            yt.sum().backward()
            _same(xa.grad, xt.grad, rtol=1e-9, atol=1e-12)
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        ae.nn.MultiheadAttention(8, 3)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        am(ae.tensor(x), ae.tensor(x), ae.tensor(x), is_causal=True)
