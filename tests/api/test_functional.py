"""ae.functional / ae.sync.functional against torch.autograd.functional."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

# -- functions written once for both libraries (methods and operators only) ------------------


def f_reduce(x: Any) -> Any:
    return x.exp().sum(dim=1)


def f_multi(x: Any, y: Any) -> Any:
    return (2 * x + 3 * y, x * y.sin())


def f_matmul(x: Any, w: Any) -> Any:
    return (x @ w).tanh()


def f_scalar(x: Any) -> Any:
    return (x**3).sum() + (x.sin() * x).sum()


def f_scalar2(x: Any, y: Any) -> Any:
    return (x * y).sum() + (x * x * y.exp()).sum()


def _arrays(shapes: list[tuple[int, ...]], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * 0.7 for s in shapes]


def _inputs(lib: Any, arrays: list[np.ndarray], as_tuple: bool) -> Any:
    ts = tuple(lib.tensor(a) for a in arrays)
    return ts if as_tuple else ts[0]


def _np(res: Any) -> Any:
    """Nested tuples of numpy arrays, keeping the tuple structure."""
    if isinstance(res, tuple):
        return tuple(_np(r) for r in res)
    data = res.detach()
    return np.asarray(data.numpy())


def _assert_same(got: Any, expected: Any) -> None:
    if isinstance(expected, tuple):
        assert isinstance(got, tuple), f"expected a tuple, got {type(got).__name__}"
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _assert_same(g, e)
        return
    assert not isinstance(got, tuple), "expected a single Tensor, got a tuple"
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


# (name, function, input shapes, inputs given as tuple, v shapes or None)
CASES: dict[str, list[tuple[Callable[..., Any], list[tuple[int, ...]], bool]]] = {
    "vjp": [(f_reduce, [(4, 4)], False), (f_multi, [(3,), (3,)], True), (f_matmul, [(2, 3), (3, 4)], True)],
    "jvp": [(f_reduce, [(4, 4)], False), (f_multi, [(3,), (3,)], True), (f_matmul, [(2, 3), (3, 4)], True)],
    "jacobian": [(f_reduce, [(3, 3)], False), (f_multi, [(3,), (3,)], True), (f_matmul, [(2, 3), (3, 2)], True), (f_scalar, [(3,)], False)],
    "hessian": [(f_scalar, [(3,)], False), (f_scalar2, [(2,), (2,)], True)],
    "vhp": [(f_scalar, [(3,)], False), (f_scalar2, [(2,), (2,)], True)],
    "hvp": [(f_scalar, [(3,)], False), (f_scalar2, [(2,), (2,)], True)],
}  # fmt: skip

IDS = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]


def _v_arrays(name: str, lib: Any, fn: Any, arrays: list[np.ndarray], as_tuple: bool) -> Any:
    """The v argument: shaped like the outputs (vjp) or the inputs (jvp, vhp, hvp)."""
    if name in ("jacobian", "hessian"):
        return None
    if name == "vjp":
        out = fn(*[lib.tensor(a) for a in arrays])
        outs = out if isinstance(out, tuple) else (out,)
        shapes = [tuple(o.shape) for o in outs]
        vs = tuple(lib.tensor(a) for a in _arrays(shapes, seed=1))
        return vs if isinstance(out, tuple) else vs[0]
    vs = tuple(lib.tensor(a) for a in _arrays([a.shape for a in arrays], seed=1))
    return vs if as_tuple else vs[0]


def _torch_result(name: str, case_idx: int, **kw: Any) -> Any:
    torch = torch_or_skip()
    fn, shapes, as_tuple = CASES[name][case_idx]
    arrays = _arrays(shapes)
    inputs = _inputs(torch, arrays, as_tuple)
    v = _v_arrays(name, torch, fn, arrays, as_tuple)
    tf = getattr(torch.autograd.functional, name)
    res = tf(fn, inputs, **kw) if v is None else tf(fn, inputs, v, **kw)
    return _np(res)


def _ae_args(name: str, case_idx: int) -> tuple[Any, Any, Any]:
    fn, shapes, as_tuple = CASES[name][case_idx]
    arrays = _arrays(shapes)
    return fn, _inputs(ae, arrays, as_tuple), _v_arrays(name, ae, fn, arrays, as_tuple)


@pytest.mark.parametrize(("name", "case"), IDS)
def test_sync_matches_torch(name: str, case: int) -> None:
    expected = _torch_result(name, case)
    fn, inputs, v = _ae_args(name, case)
    f = getattr(ae.sync.functional, name)
    got = f(fn, inputs) if v is None else f(fn, inputs, v)
    _assert_same(_np(got), expected)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "case"),
    [("vjp", 1), ("jvp", 2), ("jacobian", 1), ("hessian", 1), ("hvp", 0), ("vhp", 1)],
)
async def test_async_matches_torch(name: str, case: int) -> None:
    expected = _torch_result(name, case)
    fn, inputs, v = _ae_args(name, case)
    f = getattr(ae.functional, name)
    got = await (f(fn, inputs) if v is None else f(fn, inputs, v))
    _assert_same(_np(got), expected)  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES["jacobian"])))
def test_jacobian_vectorize_same_result(case: int) -> None:
    expected = _torch_result("jacobian", case, vectorize=True)
    fn, inputs, _ = _ae_args("jacobian", case)
    _assert_same(_np(ae.sync.functional.jacobian(fn, inputs, vectorize=True)), expected)


@pytest.mark.parametrize("name", ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"])
def test_create_graph_results_are_differentiable(name: str) -> None:
    """create_graph=True: the result depends on the inputs differentiably, as in torch."""
    torch = torch_or_skip()
    case = 1 if name in ("vjp", "jvp", "jacobian") else 0
    fn, shapes, as_tuple = CASES[name][case]
    arrays = _arrays(shapes)
    sums = []
    flags: list[list[bool]] = []
    for lib in (torch, ae):
        leaves = tuple(lib.tensor(a, requires_grad=True) for a in arrays)
        inputs = leaves if as_tuple else leaves[0]
        v = _v_arrays(name, lib, fn, arrays, as_tuple)
        f = getattr(torch.autograd.functional if lib is torch else ae.sync.functional, name)
        res = f(fn, inputs, create_graph=True) if v is None else f(fn, inputs, v, create_graph=True)
        if name in ("vjp", "jvp", "vhp", "hvp"):
            res = res[1]
        flat = _flatten(res)
        flags.append([r.requires_grad for r in flat])
        total = sum((r * r).sum() for r in flat if r.requires_grad)
        if lib is torch:
            grads = torch.autograd.grad(total, leaves)
        else:
            grads = ae.sync.grad(total, list(leaves))
        sums.append(_np(tuple(grads)))
    assert flags[1] == flags[0] and any(flags[0])
    _assert_same(sums[1], sums[0])


def _flatten(res: Any) -> list[Any]:
    if isinstance(res, tuple):
        return [x for r in res for x in _flatten(r)]
    return [res]


def test_results_detached_and_inputs_untouched() -> None:
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    out, g = ae.sync.functional.vjp(lambda t: (t * t).sum(), x)
    assert not out.requires_grad and not g.requires_grad
    assert x.grad is None
    jac = ae.sync.functional.jacobian(lambda t: t * t, x)
    assert not jac.requires_grad and x.grad is None


def test_strict_mode_errors() -> None:
    x = ae.tensor([1.0, 2.0])
    y = ae.tensor([3.0, 4.0])
    with pytest.raises(ae.AutogradError, match="independent of input 1"):
        ae.sync.functional.vjp(lambda a, b: a * 2, (x, y), ae.ones(2), strict=True)
    with pytest.raises(
        ae.AutogradError, match="Output 0 of the user-provided function is independent of input 1"
    ):
        ae.sync.functional.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(ae.AutogradError, match="does not require gradients"):
        ae.sync.functional.vjp(lambda a: ae.ones(2), x, ae.ones(2), strict=True)
    with pytest.raises(ae.AutogradError, match="jacobian of the user-provided function"):
        ae.sync.functional.hessian(lambda a: (a * 2).sum(), x, strict=True)
    # not strict: zeros, as the mathematical value
    _, (gx, gy) = ae.sync.functional.vjp(lambda a, b: a * 2, (x, y), ae.ones(2))
    assert gy.tolist() == [0.0, 0.0] and gx.tolist() == [2.0, 2.0]  # fmt: skip


def test_argument_errors() -> None:
    # misuse raises RuntimeError, as torch.autograd.functional (ValueError before)
    x = ae.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        ae.sync.functional.vjp(lambda a: a, [1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="v has invalid size"):
        ae.sync.functional.vjp(lambda a: a * 2, x, ae.ones(3))
    with pytest.raises(RuntimeError, match="can only be None"):
        ae.sync.functional.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        ae.sync.functional.hvp(lambda a: (a.sum(), a.sum()), x, ae.ones(2))
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorize=True`"):
        ae.sync.functional.jacobian(lambda a: a, x, strict=True, vectorize=True)
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        ae.sync.functional.jacobian(lambda a: a, x, strategy="forward-mode")
    with pytest.raises(ValueError, match='Expected strategy to be either "forward-mode" or'):
        ae.sync.functional.jacobian(lambda a: a, x, strategy="sideways")


def _t(lib: Any, values: list[float]) -> Any:
    return lib.tensor(np.asarray(values, dtype=np.float64))


# misuse of torch.autograd.functional that torch answers with RuntimeError:
# (case, call with (lib, functional namespace), aengine's message as a regex)
MISUSE: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("vjp v shape", lambda L, F: F.vjp(lambda a: a * 2, _t(L, [1, 2]), _t(L, [1, 1, 1])),
     r"^v has invalid size: should be \(2,\) but got \(3,\)\.$"),
    ("vjp v entry shape",
     lambda L, F: F.vjp(lambda a: (a * 2, a.sum()), _t(L, [1, 2]), (_t(L, [1, 1]), _t(L, [1, 1]))),
     r"^Entry 1 in v has invalid size: should be \(\) but got \(2,\)\.$"),
    ("vjp v tuple length",
     lambda L, F: F.vjp(lambda a: (a * 2, a * 3), _t(L, [1, 2]), (_t(L, [1, 1]),)),
     r"^v is a tuple of invalid length: should be 2 but got 1\.$"),
    ("vjp v tuple for one output",
     lambda L, F: F.vjp(lambda a: a * 2, _t(L, [1, 2]), (_t(L, [1, 1]), _t(L, [1, 1]))),
     r"^The given v should contain a single Tensor\.$"),
    ("vjp v None", lambda L, F: F.vjp(lambda a: a * 2, _t(L, [1, 2])),
     r"^The vector v can only be None if the user-provided function returns a single Tensor "
     r"with a single element\.$"),
    ("jvp v shape", lambda L, F: F.jvp(lambda a: a * 2, _t(L, [1, 2]), _t(L, [1, 1, 1])),
     r"^v has invalid size: should be \(2,\) but got \(3,\)\.$"),
    ("jvp v None", lambda L, F: F.jvp(lambda a: a * 2, _t(L, [1, 2])),
     r"^The vector v can only be None if the input to the user-provided function is a single "
     r"Tensor with a single element\.$"),
    ("jacobian strict and vectorize",
     lambda L, F: F.jacobian(lambda a: a * 2, _t(L, [1, 2]), strict=True, vectorize=True),
     r"`strict=True` and `vectorize=True` are not supported together\. Please either set "
     r"`strict=False` or `vectorize=False`\.$"),
    ("hessian tuple output", lambda L, F: F.hessian(lambda a: (a.sum(), a.sum()), _t(L, [1, 2])),
     r"^The function given to hessian should return a single Tensor$"),
    ("hessian non-scalar output", lambda L, F: F.hessian(lambda a: a * 2, _t(L, [1, 2])),
     r"^The Tensor returned by the function given to hessian should contain a single element$"),
    ("vhp tuple output",
     lambda L, F: F.vhp(lambda a: (a.sum(), a.sum()), _t(L, [1, 2]), _t(L, [1, 1])),
     r"^The function given to vhp should return a single Tensor$"),
    ("vhp non-scalar output", lambda L, F: F.vhp(lambda a: a * 2, _t(L, [1, 2]), _t(L, [1, 1])),
     r"^The Tensor returned by the function given to vhp should contain a single element$"),
    ("vhp v shape", lambda L, F: F.vhp(lambda a: (a * a).sum(), _t(L, [1, 2]), _t(L, [1])),
     r"^v has invalid size: should be \(2,\) but got \(1,\)\.$"),
    ("vhp v None", lambda L, F: F.vhp(lambda a: (a * a).sum(), _t(L, [1, 2])),
     r"^The vector v can only be None if the input to the user-provided function is a single "
     r"Tensor with a single element\.$"),
    ("hvp tuple output",
     lambda L, F: F.hvp(lambda a: (a.sum(), a.sum()), _t(L, [1, 2]), _t(L, [1, 1])),
     r"^The function given to hvp should return a single Tensor$"),
    ("hvp non-scalar output", lambda L, F: F.hvp(lambda a: a * 2, _t(L, [1, 2]), _t(L, [1, 1])),
     r"^The Tensor returned by the function given to hvp should contain a single element$"),
    ("hvp v shape", lambda L, F: F.hvp(lambda a: (a * a).sum(), _t(L, [1, 2]), _t(L, [1])),
     r"^v has invalid size: should be \(2,\) but got \(1,\)\.$"),
    ("strict: output does not require grad",
     lambda L, F: F.vjp(lambda a: a.detach(), _t(L, [1, 2]), _t(L, [1, 1]), strict=True),
     r"^Output 0 of the user-provided function does not require gradients\."),
    ("strict: linear under create_graph",
     lambda L, F: F.jacobian(lambda a: a * 2, _t(L, [1, 2]), strict=True, create_graph=True),
     r"^The jacobian of the user-provided function is independent of input 0\. This is not "
     r"allowed in strict mode when create_graph=True\.$"),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "msg"), [m[1:] for m in MISUSE], ids=[m[0] for m in MISUSE])
def test_misuse_raises_runtime_error_like_torch(fn: Callable[..., Any], msg: str) -> None:
    torch = torch_or_skip()
    with pytest.raises(RuntimeError) as expected:
        fn(torch, torch.autograd.functional)
    assert type(expected.value) is RuntimeError
    # torch's text, with shapes written as tuples and aengine's name
    want = str(expected.value).replace("torch.Size([", "(").replace("])", ",)")
    want = want.replace("(,)", "()").replace("torch.autograd.functional", "ae.functional")
    want = want.replace("`vectorized=True`", "`vectorize=True`")  # a typo in torch's text
    with pytest.raises(RuntimeError, match=msg) as got:
        fn(ae, ae.sync.functional)
    assert str(got.value) == want


@pytest.mark.anyio
@pytest.mark.parametrize(("fn", "msg"), [m[1:] for m in MISUSE], ids=[m[0] for m in MISUSE])
async def test_misuse_raises_runtime_error_awaited(fn: Callable[..., Any], msg: str) -> None:
    with pytest.raises(RuntimeError, match=msg):
        await fn(ae, ae.functional)


def test_sync_functional_module() -> None:
    from aengine.sync.functional import jacobian

    assert jacobian is ae.sync.functional.jacobian
    assert ae.functional.__all__ == ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def test_inside_a_backward_hook() -> None:
    """The functional API nests like any reentrant call (sync twin inside a hook)."""
    seen: list[Any] = []
    x = ae.tensor(2.0, requires_grad=True)

    def hook(g: ae.Tensor) -> None:
        seen.append(ae.sync.functional.hessian(lambda t: t**3, ae.tensor(3.0)).item())

    y = x * 2.0
    y.register_hook(hook)
    ae.sync.backward(y)
    assert seen == [18.0] and x.grad.item() == 2.0


@pytest.mark.anyio
async def test_sync_twin_in_running_loop_warns_with_its_name() -> None:
    with pytest.warns(
        RuntimeWarning, match=r"ae\.sync\.functional\.jacobian\(\).*await ae\.functional\.jacobian"
    ):
        ae.sync.functional.jacobian(lambda t: t * t, ae.tensor([1.0]))
    assert (await ae.functional.jacobian(lambda t: t * t, ae.tensor([3.0]))).tolist() == [[6.0]]
