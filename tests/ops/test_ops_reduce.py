"""Reductions against PyTorch: values, first and second derivatives, errors.

Every op runs over 1-d, 2-d, 3-d and 0-d inputs, dim=None, every dim (also
negative) and keepdim True/False, in float64 and float32; ties, zeros and
empty inputs get their own cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip

SHAPES = [(5,), (3, 4), (2, 3, 4), ()]


def _dim_cases(all_dims: bool = True, tuples: bool = False) -> list[tuple[tuple[int, ...], object]]:
    """(shape, dim) pairs: None (when ``all_dims``), every dim, and negative dims."""
    cases: list[tuple[tuple[int, ...], object]] = []
    for shape in SHAPES:
        if all_dims:
            cases.append((shape, None))
        nd = len(shape)
        for d in range(max(nd, 1)):
            cases.append((shape, d))
        if nd != 1:
            cases.append((shape, -1))
        if tuples and nd >= 2:
            cases.append((shape, (0, -1)))
    return cases


def _ids(cases: list[tuple[tuple[int, ...], object]]) -> list[str]:
    return [f"{s}-dim{d}" for s, d in cases]


def _kw(dim: object, keepdim: bool) -> dict[str, object]:
    return {} if dim is None else {"dim": dim, "keepdim": keepdim}


def _grid(cases: list[tuple[tuple[int, ...], object]]) -> list[object]:
    """(shape, dim, keepdim, dtype): every case in float64, keepdim=False ones in float32."""
    out = []
    for shape, dim in cases:
        for keepdim, dtype in ((False, "float64"), (True, "float64"), (False, "float32")):
            if keepdim and dim is None and shape == ():
                continue
            out.append(
                pytest.param(shape, dim, keepdim, dtype, id=f"{shape}-{dim}-{keepdim}-{dtype}")
            )
    return out


GRID_ARGS = ("shape", "dim", "keepdim", "dtype")
DTYPES = ["float64", "float32"]
ALL = _dim_cases(tuples=False)
ONE_DIM = _dim_cases(all_dims=False)


# -- sum, mean, prod -----------------------------------------------------------------------
@pytest.mark.parametrize(GRID_ARGS, _grid(_dim_cases(tuples=True)))
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_mean(name, shape, dim, keepdim, dtype):
    def f(x):
        return getattr(x, name)(**_kw(dim, keepdim))

    check_op(f, f, [shape], dtype=dtype)


@pytest.mark.parametrize(GRID_ARGS, _grid(ALL))
def test_prod(shape, dim, keepdim, dtype):
    def f(x):
        return x.prod(**_kw(dim, keepdim))

    check_op(f, f, [shape], dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "values",
    [
        [[1.5, 0.0, 2.0], [3.0, 4.0, -1.0]],  # one zero in one row
        [[0.0, 0.0, 2.0], [3.0, 0.0, -1.0]],  # two zeros in a row, one in the other
        [[0.0, 2.0, 0.5], [0.0, 1.5, -2.0]],  # a zero column
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    ],
)
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_prod_with_zeros(values, dim, dtype):
    """Exact first and second derivatives with zeros (NOTE [prod with zeros])."""

    def f(x):
        return x.prod() if dim is None else x.prod(dim)

    check_op(f, f, [], inputs=[values], dtype=dtype)


def test_prod_zero_cases_first_derivative():
    """One zero: only it gets the product of the others; two zeros: all zero."""
    x = ae.tensor([2.0, 0.0, 3.0, 4.0], requires_grad=True)
    (g,) = ae.sync.grad(x.prod(), [x])
    assert g.tolist() == [0.0, 24.0, 0.0, 0.0]
    y = ae.tensor([2.0, 0.0, 3.0, 0.0], requires_grad=True)
    (g,) = ae.sync.grad(y.prod(), [y])
    assert g.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_prod_0d_and_empty():
    check_op(lambda x: x.prod(), lambda x: x.prod(), [], inputs=[0.0])
    check_op(lambda x: x.prod(0), lambda x: x.prod(0), [], inputs=[0.0])
    for shape, dim in [((0,), None), ((2, 0), 1), ((0, 3), 0), ((0, 3), 1)]:

        def f(x, dim=dim):
            return x.prod() if dim is None else x.prod(dim)

        check_op(f, f, [shape])


def test_prod_dtype_argument():
    torch = torch_or_skip()
    a = np.array([[1.5, -2.0], [0.5, 3.0]], dtype=np.float32)
    x = ae.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    out, tout = x.prod(1, dtype=ae.float64), t.prod(1, dtype=torch.float64)
    assert out.dtype == ae.float64
    (g,) = ae.sync.grad(out.sum(), [x])
    (tg,) = torch.autograd.grad(tout.sum(), [t])
    assert g.dtype == ae.float32
    np.testing.assert_allclose(g.numpy(), tg.numpy())


def test_prod_and_sum_of_ints_give_int64():
    x = ae.tensor([[1, 2], [3, 4]])
    assert x.prod().dtype == ae.int64 and x.prod().item() == 24
    assert x.prod(1).tolist() == [2, 12]


@pytest.mark.parametrize(("shape", "dim"), [((0,), 0), ((2, 0), 1), ((0, 3), 0), ((0, 3), None)])
def test_sum_mean_empty(shape, dim):
    torch = torch_or_skip()
    check_op(lambda x: x.sum(dim), lambda x: x.sum(dim), [shape])
    check_op(lambda x: x.mean(dim), lambda x: x.mean(dim), [shape])
    # the mean of an empty slice is NaN, without a warning
    out = ae.zeros(*shape).mean(dim)
    tout = torch.zeros(*shape).mean(dim)
    np.testing.assert_array_equal(out.numpy(), tout.numpy())


# -- amax, amin, max, min -------------------------------------------------------------------
@pytest.mark.parametrize(GRID_ARGS, _grid(_dim_cases(tuples=True)))
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin(name, shape, dim, keepdim, dtype):
    def f(x):
        return getattr(x, name)(**_kw(dim, keepdim))

    check_op(f, f, [shape], dtype=dtype)


@pytest.mark.parametrize(GRID_ARGS, _grid(ALL))
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min(name, shape, dim, keepdim, dtype):
    torch = torch_or_skip()

    def f(x):
        return getattr(x, name)() if dim is None else getattr(x, name)(dim, keepdim)

    check_op(f, f, [shape], dtype=dtype)
    if dim is not None:
        a = np.random.default_rng(1).standard_normal(shape).astype(dtype)
        res = f(ae.tensor(a))
        tres = f(torch.tensor(a))
        assert isinstance(res, tuple) and res._fields == ("values", "indices")
        assert res.indices.dtype == ae.int64 and not res.indices.requires_grad
        np.testing.assert_array_equal(res.indices.numpy(), tres.indices.numpy())


TIES = [[1.0, 3.0, 3.0, -2.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 0.5, 0.5, -1.0]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_amin_ties_share_the_gradient(name, dim, dtype):
    def f(x):
        return getattr(x, name)() if dim is None else getattr(x, name)(dim)

    check_op(f, f, [], inputs=[TIES], dtype=dtype)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_ties(name):
    """Without dim ties share the gradient; with dim it goes to the first index."""
    check_op(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(), [], inputs=[TIES])
    for d in (0, 1):
        check_op(
            lambda x, d=d: getattr(x, name)(d),
            lambda x, d=d: getattr(x, name)(d),
            [],
            inputs=[TIES],
        )
    x = ae.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    (g,) = ae.sync.grad(x.max(1).values.sum(), [x])
    assert g.tolist() == [[0.0, 1.0, 0.0]]
    (g,) = ae.sync.grad(x.max(), [x])
    assert g.tolist() == [[0.0, 0.5, 0.5]]


def test_max_min_0d_and_with_tensor():
    check_op(lambda x: x.max(0), lambda x: x.max(0), [()])
    check_op(lambda x: x.min(0, True), lambda x: x.min(0, True), [()])
    res = ae.tensor(3.0).max(0)
    assert res.values.item() == 3.0 and res.indices.item() == 0 and res.indices.shape == ()
    check_op(lambda a, b: a.max(b), lambda a, b: a.max(b), [(3,), (3,)])
    check_op(lambda a, b: ae.min(a, b), lambda a, b: a.min(b), [(2, 3), (3,)])


def test_max_result_repr_and_function_form():
    res = ae.max(ae.tensor([[1.0, 5.0]]), dim=1)
    assert repr(res).startswith("MaxResult(values=")
    values, indices = res
    assert values.tolist() == [5.0] and indices.tolist() == [1]
    assert ae.amax(ae.tensor([1.0, 4.0])).item() == 4.0


@pytest.mark.parametrize(
    ("fn", "exc", "msg"),
    [
        (lambda x: x.amax(), RuntimeError, r"amax\(\): Expected reduction dim to be specified"),
        (lambda x: x.max(), RuntimeError, r"max\(\): Expected reduction dim to be specified"),
        (lambda x: x.min(), RuntimeError, r"min\(\): Expected reduction dim to be specified"),
    ],
)
def test_empty_without_dim_raises_like_torch(fn, exc, msg):
    torch = torch_or_skip()
    with pytest.raises(exc, match=msg):
        fn(torch.empty(0))
    with pytest.raises(exc, match=msg):
        fn(ae.zeros(0))


@pytest.mark.parametrize("name", ["amax", "amin", "max", "min"])
def test_empty_reduced_dim_raises_like_torch(name):
    torch = torch_or_skip()
    msg = rf"{name}\(\): Expected reduction dim 1 to have non-zero size\."
    with pytest.raises(IndexError, match=msg):
        getattr(torch.empty(2, 0), name)(1)
    with pytest.raises(IndexError, match=msg):
        getattr(ae.zeros(2, 0), name)(1)
    # reducing a non-empty dim of an empty tensor is fine
    check_op(lambda x: x.amax(1), lambda x: x.amax(1), [(0, 3)])
    assert ae.zeros(0, 3).max(1).values.shape == (0,)


# -- var, std ----------------------------------------------------------------------------------
@pytest.mark.parametrize(GRID_ARGS, _grid([c for c in _dim_cases(tuples=True) if c[0] != ()]))
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(name, shape, dim, keepdim, dtype):
    def f(x):
        return getattr(x, name)(**_kw(dim, keepdim))

    # std over 2 elements is piecewise linear: its float32 second derivative is rounding noise
    check_op(f, f, [shape], dtype=dtype, second_order=dtype == "float64" or name == "var")


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize(
    "kw", [{"correction": 0}, {"correction": 2}, {"unbiased": False}, {"unbiased": True}]
)
def test_var_std_correction(name, kw):
    def f(x):
        return getattr(x, name)(1, **kw)

    check_op(f, f, [(3, 5)])
    check_op(lambda x: getattr(x, name)(**kw), lambda x: getattr(x, name)(**kw), [(4,)])


def test_var_positional_unbiased_overload():
    check_op(lambda x: x.var(0, False), lambda x: x.var(0, False), [(4, 2)])
    check_op(lambda x: x.std(False), lambda x: x.std(False), [(4, 2)])


def test_std_of_constant_has_zero_gradient_like_torch():
    check_op(
        lambda x: x.std(1), lambda x: x.std(1), [], inputs=[[[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]]
    )
    x = ae.tensor([3.0, 3.0], requires_grad=True)
    (g,) = ae.sync.grad(x.std(), [x])
    assert g.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_without_degrees_of_freedom_warn(name):
    torch = torch_or_skip()
    msg = rf"{name}\(\): degrees of freedom is <= 0"
    with pytest.warns(UserWarning, match=msg):
        t = getattr(torch.tensor([1.0], dtype=torch.float64), name)()
    with pytest.warns(UserWarning, match=msg), np.errstate(invalid="ignore", divide="ignore"):
        a = getattr(ae.tensor([1.0]), name)()
    assert math.isnan(a.item()) and math.isnan(t.item())


def test_var_errors():
    with pytest.raises(TypeError, match=r"var\(\): pass either unbiased= or correction="):
        ae.ones(3).var(unbiased=True, correction=1)
    with pytest.raises(TypeError, match=r"std\(\): expected a floating point input, got int64"):
        ae.tensor([1, 2]).std()


# -- logsumexp, softmax, log_softmax ---------------------------------------------------------------
@pytest.mark.parametrize(GRID_ARGS, _grid(_dim_cases(all_dims=False, tuples=True)))
def test_logsumexp(shape, dim, keepdim, dtype):
    check_op(
        lambda x: x.logsumexp(dim, keepdim),
        lambda x: x.logsumexp(dim, keepdim),
        [shape],
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "dim"), ONE_DIM, ids=_ids(ONE_DIM))
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(name, shape, dim, dtype):
    def f(x):
        return getattr(x, name)(dim)

    check_op(f, f, [shape], dtype=dtype)


@pytest.mark.parametrize("name", ["logsumexp", "softmax", "log_softmax"])
def test_exponentials_are_stable(name):
    """Large inputs neither overflow nor lose the gradient (NOTE [Stable exponentials])."""
    big = [[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]]
    check_op(lambda x: getattr(x, name)(1), lambda x: getattr(x, name)(1), [], inputs=[big])
    check_op(
        lambda x: getattr(x, name)(1),
        lambda x: getattr(x, name)(1),
        [],
        inputs=[big],
        dtype="float32",
    )


def test_logsumexp_and_softmax_of_empty_and_infinite():
    torch = torch_or_skip()
    out = ae.zeros(2, 0).logsumexp(1)
    assert out.tolist() == torch.empty(2, 0).logsumexp(1).tolist() == [-math.inf, -math.inf]
    assert ae.zeros(2, 0).softmax(1).shape == (2, 0)
    x = np.array([[-math.inf, 0.0, 1.0]])  # float64 on both sides
    np.testing.assert_allclose(
        ae.tensor(x).logsumexp(1).numpy(), torch.tensor(x).logsumexp(1).numpy()
    )
    np.testing.assert_allclose(ae.tensor(x).softmax(1).numpy(), torch.tensor(x).softmax(1).numpy())


def test_softmax_dtype_argument():
    torch = torch_or_skip()
    a = np.arange(6.0).reshape(2, 3)
    out = ae.tensor(a, dtype=ae.float32).softmax(1, dtype=ae.float64)
    assert out.dtype == ae.float64
    ref = torch.tensor(a, dtype=torch.float32).softmax(1, dtype=torch.float64)
    np.testing.assert_allclose(out.numpy(), ref.numpy())


# -- norm ------------------------------------------------------------------------------------------
NORM_PS = [2, "fro", 1, math.inf, -math.inf, 3, 1.5]


NORM_CASES = [((5,), None), ((3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), (0, 2)), ((), None)]


@pytest.mark.parametrize(GRID_ARGS, _grid(NORM_CASES))
@pytest.mark.parametrize("p", NORM_PS, ids=[str(p) for p in NORM_PS])
def test_norm(p, shape, dim, keepdim, dtype):
    def f(x):
        return x.norm(p, dim, keepdim)

    check_op(f, f, [shape], dtype=dtype)


ZERO_PS = [2, "fro", 1, math.inf, -math.inf, 3]


@pytest.mark.parametrize("p", ZERO_PS, ids=[str(p) for p in ZERO_PS])
def test_norm_at_zero_has_zero_gradient_like_torch(p):
    torch = torch_or_skip()
    inputs = [[[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]]]
    # torch's second derivative of the 2-norm at the zero vector is NaN (0 * inf
    # in its masked formula); aengine gives 0 there and agrees everywhere else.
    check_op(
        lambda x: x.norm(p, 1),
        lambda x: x.norm(p, 1),
        [],
        inputs=inputs,
        second_order=p not in (2, "fro"),
    )
    x = ae.tensor(inputs[0], dtype=ae.float64, requires_grad=True)
    (g,) = ae.sync.grad(ae.norm(x, p, 1).sum(), [x], create_graph=True)
    assert g.detach().numpy()[0].tolist() == [0.0, 0.0, 0.0]
    if p in (2, "fro"):
        (g2,) = ae.sync.grad(g.sum(), [x])
        t = torch.tensor(inputs[0], dtype=torch.float64, requires_grad=True)
        (tg,) = torch.autograd.grad(t.norm(2, 1).sum(), [t], create_graph=True)
        (tg2,) = torch.autograd.grad(tg.sum(), [t])
        assert g2.numpy()[0].tolist() == [0.0, 0.0, 0.0] and tg2[0].isnan().all()
        np.testing.assert_allclose(g2.numpy()[1], tg2[1].numpy(), rtol=1e-7)


@pytest.mark.parametrize(("shape", "dim"), [((0,), None), ((2, 0), 1), ((0, 3), 1)])
def test_norm_of_empty(shape, dim):
    for p in (2, 1, 3):
        check_op(lambda x, p=p: x.norm(p, dim), lambda x, p=p: x.norm(p, dim), [shape])
    if dim is None or shape[dim] == 0:  # the inf norm has no identity: PyTorch raises
        with pytest.raises(RuntimeError, match=r"cannot compute the inf norm of an empty"):
            ae.zeros(*shape).norm(math.inf, dim)
    else:
        check_op(lambda x: x.norm(math.inf, dim), lambda x: x.norm(math.inf, dim), [shape])


def test_norm_errors():
    # as torch.norm: 'nuc' is a matrix norm (RuntimeError for a vector); p < 1 is a norm too
    with pytest.raises(RuntimeError, match=r"at least 2 dimensions"):
        ae.ones(3).norm("nuc")
    assert ae.ones(4).norm(0.5).item() == pytest.approx(16.0)
    with pytest.raises(TypeError, match=r"norm\(\): expected a floating point input"):
        ae.tensor([1, 2]).norm()


# -- common behaviour ---------------------------------------------------------------------------
REDUCERS = {
    "sum": lambda x, d: x.sum(d),
    "mean": lambda x, d: x.mean(d),
    "prod": lambda x, d: x.prod(d),
    "amax": lambda x, d: x.amax(d),
    "amin": lambda x, d: x.amin(d),
    "max": lambda x, d: x.max(d),
    "min": lambda x, d: x.min(d),
    "var": lambda x, d: x.var(d),
    "std": lambda x, d: x.std(d),
    "logsumexp": lambda x, d: x.logsumexp(d),
    "softmax": lambda x, d: x.softmax(d),
    "log_softmax": lambda x, d: x.log_softmax(d),
    "norm": lambda x, d: x.norm(2, d),
}


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_bad_dim_raises_index_error_with_range(name):
    torch = torch_or_skip()
    msg = r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"
    with pytest.raises(IndexError, match=msg):
        REDUCERS[name](torch.ones(2, 3), 2)
    with pytest.raises(IndexError, match=msg):
        REDUCERS[name](ae.ones(2, 3), 2)
    with pytest.raises(IndexError, match=r"but got -3\)"):
        REDUCERS[name](ae.ones(2, 3), -3)


def test_single_dim_ops_reject_tuples():
    for fn in (lambda x: x.prod((0, 1)), lambda x: x.softmax((0,)), lambda x: x.max((0, 1))):
        with pytest.raises(TypeError, match=r"dim must be an int, got tuple"):
            fn(ae.ones(2, 3))


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_float32_stays_float32(name):
    x = ae.ones(2, 3, dtype=ae.float32, requires_grad=True)
    out = REDUCERS[name](x, 1)
    out = out.values if isinstance(out, tuple) else out
    assert out.dtype == ae.float32
    (g,) = ae.sync.grad(out.sum(), [x])
    assert g.dtype == ae.float32


def test_grad_fn_names_of_primitives_match_torch():
    torch = torch_or_skip()
    cases = [
        lambda x: x.prod(),
        lambda x: x.prod(1),
        lambda x: x.amax(1),
        lambda x: x.amin(1),
        lambda x: x.max(),
        lambda x: x.min(),
        lambda x: x.max(1)[0],
        lambda x: x.min(1)[0],
        lambda x: x.logsumexp(1),
        lambda x: x.softmax(1),
        lambda x: x.log_softmax(1),
        lambda x: x.norm(),
    ]
    a = np.random.default_rng(0).standard_normal((2, 3))
    for f in cases:
        x = ae.tensor(a, requires_grad=True)
        t = torch.tensor(a, requires_grad=True)
        assert f(x).grad_fn.name() == type(f(t).grad_fn).__name__


LONG_WITH_ZEROS = [1.1, -0.9, 0.0, 1.3, 0.8, -1.2, 0.0, 1.05, 0.95, -1.1, 1.2]


@pytest.mark.parametrize("a", [[0.7, -1.2, 0.0, 2.0], LONG_WITH_ZEROS, [0.5, 1.5, -2.0]])
def test_third_order_of_prod_and_softmax(a):
    """Rules are written with F ops, so gradients nest to any order (prod: even at zeros)."""
    torch = torch_or_skip()
    a = np.array(a)
    fns = (lambda x: x.prod(), lambda x: x.prod(0, True).sum(), lambda x: (x.softmax(0) * x).sum())
    for f in fns:
        x = ae.tensor(a, requires_grad=True)
        t = torch.tensor(a, requires_grad=True)
        (g1,) = ae.sync.grad(f(x), [x], create_graph=True)
        (g2,) = ae.sync.grad(g1.sum(), [x], create_graph=True)
        (g3,) = ae.sync.grad(g2.sum(), [x])
        (t1,) = torch.autograd.grad(f(t), [t], create_graph=True)
        (t2,) = torch.autograd.grad(t1.sum(), [t], create_graph=True)
        (t3,) = torch.autograd.grad(t2.sum(), [t])
        np.testing.assert_allclose(g3.numpy(), t3.numpy(), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name", sorted(REDUCERS))
def test_second_order_on_another_device(name):
    """Saved outputs unpack on their own device under create_graph (sim:0 here)."""
    a = np.array([[0.5, 0.0, 2.0], [1.0, -3.0, 0.25]])
    ref = ae.tensor(a, requires_grad=True)
    x = ae.tensor(a, device="sim:0", requires_grad=True)
    results = []
    for t in (ref, x):
        out = REDUCERS[name](t, 1)
        out = out.values if isinstance(out, tuple) else out
        w = ae.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape), device=t.device)
        (g,) = ae.sync.grad((out * w).sum(), [t], create_graph=True)
        assert g.device == t.device
        g2 = ae.sync.grad((g * g).sum(), [t])[0] if g.requires_grad else ae.zeros_like(t)
        assert g2.device == t.device
        results.append((g.detach().to("cpu").numpy(), g2.to("cpu").numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1])


# -- NaN in max / min / amax / amin (NOTE [Gradients of extremes and NaN]) --------------------------
NAN_INPUTS = [
    [math.nan, math.nan, math.nan],
    [1.0, math.nan, 2.0],
    [math.nan, 3.0, math.nan, 3.0],
    [[1.0, math.nan], [3.0, 4.0]],
    [[math.nan, 2.0, math.nan], [5.0, 5.0, 1.0]],
]
NAN_OPS = {
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "amax": lambda x: x.amax(),
    "amin": lambda x: x.amin(),
    "amax_dim0": lambda x: x.amax(0),
    "amin_last_keepdim": lambda x: x.amin(-1, keepdim=True),
    "max_dim": lambda x: x.max(0)[0],
    "min_dim_keepdim": lambda x: x.min(-1, keepdim=True)[0],
}


@pytest.mark.parametrize("name", list(NAN_OPS))
@pytest.mark.parametrize("values", NAN_INPUTS, ids=str)
def test_extremes_with_nan_match_torch(name, values):
    # max()/min(): NaN counts as equal to a NaN result (1/3 each for three NaNs);
    # amax/amin: a slice whose result is NaN gets NaN; max(dim): the index's element
    torch = torch_or_skip()
    op = NAN_OPS[name]
    grads = []
    for lib in (ae, torch):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        y = op(x)
        w = lib.arange(1.0, y.numel() + 1.0, dtype=lib.float64).reshape(y.shape)
        if lib is ae:
            ae.sync.backward((y * w).sum())
        else:
            (y * w).sum().backward()
        grads.append(np.asarray(x.grad.tolist()))
    np.testing.assert_array_equal(grads[0], grads[1])


def test_max_of_nans_shares_the_gradient():
    x = ae.tensor([math.nan, math.nan, math.nan], requires_grad=True)
    ae.sync.backward(x.max())
    np.testing.assert_allclose(x.grad.numpy(), [1 / 3, 1 / 3, 1 / 3])
    x = ae.tensor([1.0, math.nan, 2.0], requires_grad=True)
    (g,) = ae.sync.grad(x.min(), [x], create_graph=True)
    assert g.tolist() == [0.0, 1.0, 0.0]


# -- any / all: bool reductions without gradient (what bool(t)'s message advises) ----------------
ANY_ALL_INPUTS = {
    "float": [[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]],
    "bool": [[True, False, True], [True, True, True]],
    "int": [[1, 2, 0], [3, 4, 5]],
    "nan": [[math.nan, 0.0, 1.0], [2.0, 3.0, 4.0]],
}
ANY_ALL_KWARGS = [
    {}, {"dim": 0}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": (0, 1)},
    {"dim": (1, 0), "keepdim": True}, {"dim": ()}, {"keepdim": True},
]  # fmt: skip


@pytest.mark.parametrize("method", ["any", "all"])
@pytest.mark.parametrize("data", list(ANY_ALL_INPUTS.values()), ids=list(ANY_ALL_INPUTS))
@pytest.mark.parametrize("kwargs", ANY_ALL_KWARGS, ids=str)
def test_any_all_match_torch(method: str, data: list[list[object]], kwargs: dict[str, object]):
    torch = torch_or_skip()
    got = getattr(ae.tensor(data), method)(**kwargs)
    want = getattr(torch.tensor(data), method)(**kwargs)
    assert got.tolist() == want.tolist()
    assert got.shape == tuple(want.shape)
    assert got.dtype == ae.bool_
    assert got.grad_fn is None and not got.requires_grad


@pytest.mark.parametrize("method", ["any", "all"])
def test_any_all_of_0d_empty_and_uint8_match_torch(method: str) -> None:
    torch = torch_or_skip()
    cases = [
        (lambda lib: lib.tensor(3.0), {}),
        (lambda lib: lib.tensor(0.0), {"dim": -1}),
        (lambda lib: lib.tensor(3.0), {"keepdim": True}),
        (lambda lib: lib.ones(0, 3), {}),
        (lambda lib: lib.ones(0, 3), {"dim": 0}),
        (lambda lib: lib.tensor([0, 2], dtype=lib.uint8), {}),
    ]
    for make, kwargs in cases:
        got = getattr(make(ae), method)(**kwargs)
        want = getattr(make(torch), method)(**kwargs)
        assert got.tolist() == want.tolist(), (make, kwargs)
        assert got.shape == tuple(want.shape)
        assert str(got.dtype) == str(want.dtype).removeprefix("torch.")


def test_any_all_follow_the_advice_of_bool() -> None:
    x = ae.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"use t\.any\(\) or t\.all\(\)"):
        bool(x > 0)
    assert bool((x > 0).any()) and not bool((x > 0).all())
