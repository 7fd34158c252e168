"""In-place ops: values, first and second derivatives, versions and errors, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip, torch_texts_or_skip


def _np(t):  # type: ignore[no-untyped-def]
    return t.detach().numpy()


# -- values and derivatives ----------------------------------------------------------------
BIN_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (2, 1)), ((2, 2), ()), ((0, 3), (3,))]


@pytest.mark.parametrize("shapes", BIN_SHAPES)
@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_binary_inplace(op, shapes):
    def fn(a, b):  # type: ignore[no-untyped-def]
        return getattr(a.clone(), op)(b)

    check_op(fn, fn, shapes, positive=op == "div_")


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
def test_binary_inplace_scalar(op):
    def fn(a):  # type: ignore[no-untyped-def]
        return getattr(a.clone(), op)(2.5)

    check_op(fn, fn, [(2, 3)])


@pytest.mark.parametrize("op", ["add_", "mul_", "div_"])
def test_binary_inplace_only_other_requires_grad(op):
    # self is a plain tensor: its old value is saved for other's gradient
    def fn(b):  # type: ignore[no-untyped-def]
        base = b.detach() * 0 + 3.0
        return getattr(base, op)(b)

    check_op(fn, fn, [(2, 3)], positive=True)


def test_mixed_dtype_inplace_keeps_self_dtype():
    torch = torch_or_skip()
    a = ae.ones(3, dtype=ae.float32, requires_grad=True)
    b = ae.tensor([1.0, 2.0, 3.0], dtype=ae.float64, requires_grad=True)
    c = a.clone()
    c.mul_(b)
    assert c.dtype == ae.float32
    ae.sync.backward(c.sum())
    ta = torch.ones(3, dtype=torch.float32, requires_grad=True)
    tb = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    tc = ta.clone()
    tc.mul_(tb)
    tc.sum().backward()
    assert a.grad.dtype == ae.float32 and b.grad.dtype == ae.float64
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy())


@pytest.mark.parametrize(
    "name",
    ["zero_", "fill_", "fill_tensor", "copy_", "copy_bcast", "clamp_", "clamp_min", "relu_"],
)
def test_unary_inplace(name):
    fns = {
        "zero_": lambda a, b: a.clone().zero_() + b,
        "fill_": lambda a, b: a.clone().fill_(1.5) * b,
        "fill_tensor": lambda a, b: a.clone().fill_(b.sum() * 2) * b,
        "copy_": lambda a, b: a.clone().copy_(b * b) * a,
        "copy_bcast": lambda a, b: a.clone().copy_(b[0] * 3) * a,
        "clamp_": lambda a, b: a.clone().clamp_(-0.5, 0.5) * b,
        "clamp_min": lambda a, b: a.clone().clamp_(min=0.1) * b,
        "relu_": lambda a, b: (a * b).relu_() * a,
    }
    fn = fns[name]
    check_op(fn, fn, [(2, 3), (2, 3)])


def test_clamp_tensor_bounds():
    def fn(a, lo):  # type: ignore[no-untyped-def]
        return a.clone().clamp_(min=lo)

    check_op(fn, fn, [(2, 3), (3,)])


def test_chained_inplace():
    def fn(a, b):  # type: ignore[no-untyped-def]
        c = a.clone()
        c.mul_(b)
        c.add_(b)
        c.div_(b + 3.0)
        c += a
        c *= 2
        return c

    check_op(fn, fn, [(3,), (3,)], positive=True)


# -- version counters -------------------------------------------------------------------------
def test_version_counter_sequence_matches_torch():
    torch = torch_or_skip()

    def run(lib):  # type: ignore[no-untyped-def]
        x = lib.ones(2, 3, requires_grad=True)
        a = x.clone()
        v = a[0:1]
        seen = [a._version]
        v.add_(1)
        seen += [a._version, v._version]
        a[0] = 2.0
        seen.append(a._version)
        a[[0, 1]] = 0.5
        seen.append(a._version)
        a.zero_()
        a.fill_(1.0)
        a.copy_(x)
        seen.append(a._version)
        a += 1
        a -= 1
        a *= 2
        a /= 2
        seen.append(a._version)
        d = a.detach()
        d.relu_()
        d.clamp_(0, 1)
        seen += [a._version, d._version, v._version]
        with lib.no_grad():
            a.mul_(2)
        seen.append(a._version)
        return seen

    assert run(ae) == run(torch)


def test_no_grad_inplace_on_leaf_bumps_version_records_nothing():
    w = ae.tensor([1.0, 2.0], requires_grad=True)
    with ae.no_grad():
        w.mul_(2)
    assert w._version == 1
    assert w.grad_fn is None and w.is_leaf and w.requires_grad
    assert w.tolist() == [2.0, 4.0]


def test_optimizer_step_pattern():
    torch = torch_or_skip()
    w = ae.tensor([1.0, -2.0, 3.0], requires_grad=True)
    tw = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    for _ in range(3):
        ae.sync.backward((w * w).sum())
        (tw * tw).sum().backward()
        with ae.no_grad():
            w -= 0.1 * w.grad
        with torch.no_grad():
            tw -= 0.1 * tw.grad
        w.grad.zero_()
        tw.grad.zero_()
    np.testing.assert_allclose(_np(w), tw.detach().numpy())
    assert w.is_leaf and w.requires_grad and w._version == tw._version


# -- saved tensors modified in place ---------------------------------------------------------------
def test_inplace_on_saved_tensor_after_use():
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = ae.tensor([3.0, 4.0], requires_grad=True)
    z = x * y
    q = z + y
    w = z * y
    z.add_(2)
    ae.sync.backward(q.sum(), retain_graph=True)  # add saved nothing
    assert x.grad.tolist() == [3.0, 4.0]
    with pytest.raises(
        ae.AutogradError,
        match=r"modified by an inplace operation: \[float32 tensor \[2\]\], which is output 0 of "
        r"AddBackward0, is at version 1; expected version 0 instead\. Hint: enable anomaly",
    ):
        ae.sync.backward(w.sum())
    # the in-place result itself is differentiable
    x.grad = None
    ae.sync.backward(z.sum())
    assert x.grad.tolist() == [3.0, 4.0]


def test_inplace_on_saved_input():
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    z = a * a
    a.add_(2)
    with pytest.raises(ae.AutogradError, match="which is output 0 of AddBackward0"):
        ae.sync.backward(z.sum())


def test_error_text_matches_torch_parts():
    torch = torch_or_skip()
    a = ae.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    ta = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    msgs = []
    for lib, x in ((ae, a), (torch, ta)):
        b = x**2
        c = b * b  # saves b
        b.mul_(2)
        b.mul_(2)
        try:
            c.sum().backward() if lib is torch else ae.sync.backward(c.sum())
        except RuntimeError as exc:
            msgs.append(str(exc))
    assert len(msgs) == 2
    for m in msgs:
        assert "is at version 2; expected version 0 instead" in m
        assert "[5]], which is output 0 of Mul" in m


def test_saved_tensor_check_with_anomaly_no_grad_and_detach():
    a = ae.tensor([1.0, 2.0], requires_grad=True)
    d1 = a + 1
    d2 = d1**2
    d1 += 1
    with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
        ae.sync.grad(d2.sum(), a)
    with pytest.warns(UserWarning), ae.detect_anomaly():
        d1 = a + 1
        d2 = d1**2
        d1.add_(1)
        with pytest.raises(ae.AutogradError, match="variable in question was changed"):
            ae.sync.grad(d2.sum(), a)
    # no_grad in-place still bumps the version
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y * y
    with ae.no_grad():
        y.add_(1)
    with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
        ae.sync.backward(z.sum())
    # detach shares the version counter
    y = x * 1
    z = y * y
    y.detach().zero_()
    with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
        ae.sync.backward(z.sum())


def test_self_multiplication_inplace_errors_like_torch():
    x = ae.ones(3, requires_grad=True)
    a = x.clone()
    a.mul_(a)  # other (a itself) was saved at version 0
    with pytest.raises(ae.AutogradError, match="is at version 1; expected version 0"):
        ae.sync.backward(a.sum())


def test_output_saved_by_relu_is_checked():
    x = ae.tensor([-1.0, 2.0], requires_grad=True)
    a = x.clone()
    a.relu_()  # saves its output: a at version 1
    a.add_(1)
    with pytest.raises(
        ae.AutogradError, match="which is output 0 of ReluBackward0, is at version 2; expected "
    ):
        ae.sync.backward(a.sum())


# -- errors ---------------------------------------------------------------------------------------
def test_leaf_errors():
    x = ae.ones(3, requires_grad=True)
    with pytest.raises(
        ae.AutogradError, match=r"^a leaf Variable that requires grad is being used"
    ):
        x.add_(1)
    with pytest.raises(ae.AutogradError, match="a leaf Variable that requires grad"):
        x += 1
    with pytest.raises(ae.AutogradError, match="a view of a leaf Variable that requires grad"):
        x.view_as(x).add_(1)  # raised at the in-place, not at backward
    with pytest.raises(ae.AutogradError, match="a view of a leaf Variable that requires grad"):
        x[0] = 1.0
    with pytest.raises(ae.AutogradError, match="^a leaf Variable that requires grad"):
        x[[0]] = 1.0
    assert x._version == 0
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_errors_match_torch():
    torch = torch_texts_or_skip()

    def errors(lib):  # type: ignore[no-untyped-def]
        out = []
        x = lib.ones(3, requires_grad=True)
        for f in (
            lambda: x.mul_(2),
            lambda: x[0:2].mul_(2),
            lambda: x.clone().unbind()[1].mul_(2),
        ):
            try:
                f()
                out.append(None)
            except RuntimeError as exc:
                out.append(str(exc))
        return out

    assert errors(ae) == errors(torch)


def test_multi_output_view_error():
    x = ae.ones(3, requires_grad=True)
    u = x.clone().unbind()
    with pytest.raises(
        ae.AutogradError,
        match=r"Output 0 of Unbind is a view and is being modified inplace\. This view "
        r"is the output of a function that returns multiple views\. Such functions do not allow "
        r"the output views to be modified inplace\. You should replace the inplace operation by "
        r"an out-of-place one\.",
    ):
        u[0].mul_(2)
    with pytest.raises(ae.AutogradError, match="Output 1 of Unbind is a view"):
        u[1].add_(1)
    # allowed when nothing requires grad
    p = ae.ones(3).unbind()
    p[0].mul_(2)


def test_no_grad_view_error():
    x = ae.ones(3, requires_grad=True)
    b = x.clone()
    with ae.no_grad():
        v = b[0:2]
    with pytest.raises(
        ae.AutogradError,
        match=r"A view was created in no_grad mode and is being modified inplace with grad mode "
        r"enabled\. Given that this use case is ambiguous",
    ):
        v.mul_(2)
    # and for a base that does not require grad, once the operand does (as torch)
    z = ae.zeros(3)
    with ae.no_grad():
        w = z[0:2]
    with pytest.raises(ae.AutogradError, match="A view was created in no_grad mode"):
        w.copy_(x[:2])
    # inside no_grad it is fine
    with ae.no_grad():
        v.mul_(2)
    assert b.tolist() == [2.0, 2.0, 1.0]


def test_inference_tensor_inplace_error():
    with ae.inference_mode():
        t = ae.ones(3)
        t.add_(1)  # fine inside
    with pytest.raises(
        ae.AutogradError,
        match=r"Inplace update to inference tensor outside InferenceMode is not allowed\.You can "
        r"make a clone",
    ):
        t.add_(1)
    with pytest.raises(ae.AutogradError, match="Inplace update to inference tensor"):
        t[0] = 2.0
    assert t.tolist() == [2.0, 2.0, 2.0]


def test_argument_errors():
    x = ae.zeros(3, dtype=ae.int64)
    with pytest.raises(TypeError, match="can't be cast to the desired output type int64"):
        x.add_(1.5)
    with pytest.raises(TypeError, match="can't be cast"):
        x.div_(2)
    with pytest.raises(ValueError, match=r"output with shape \[3\] doesn't match the broadcast "):
        ae.zeros(3).add_(ae.ones(2, 3))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        ae.zeros(3).mul_(ae.ones(2))
    with pytest.raises(ValueError, match="fill_ only supports 0-dimension value tensor"):
        ae.zeros(3).fill_(ae.ones(2))
    with pytest.raises(ae.AutogradError, match="more than one element of the written-to tensor"):
        ae.ones(3).expand(2, 3).add_(1)
    x.add_(2)
    assert x.tolist() == [2, 2, 2] and x.dtype == ae.int64


def test_detach_inplace_on_view_raises():
    x = ae.ones(2, requires_grad=True).clone()
    with pytest.raises(ae.AutogradError, match="Can't detach views in-place"):
        x[0:1].detach_()


# -- requires_grad through in-place ----------------------------------------------------------------
def test_iadd_makes_tensor_require_grad():
    a = ae.zeros(3)
    b = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a_id = id(a)
    a += b
    assert id(a) == a_id and a.requires_grad and a.grad_fn.name() == "AddBackward0"
    ae.sync.backward((a * a).sum())
    assert b.grad.tolist() == [2.0, 4.0, 6.0]


def test_inplace_before_and_after_requires_grad():
    a = ae.zeros(2)
    a.add_(1)  # before: fine
    a.requires_grad_()
    with pytest.raises(ae.AutogradError, match="a leaf Variable that requires grad"):
        a.add_(1)


def test_leaf_assignment():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        x = lib.zeros(4)
        y = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        z = lib.tensor([5.0, 6.0, 7.0, 8.0], requires_grad=True)
        x[0] = y.sum()
        x[1] = 2 * z[1]
        if lib is ae:
            ae.sync.backward(x.sum())
        else:
            x.sum().backward()
        res.append((y.grad.tolist(), z.grad.tolist(), x.grad_fn.name().split("::")[-1]))
    assert res[0] == res[1]


# -- x[idx] = v ----------------------------------------------------------------------------------
SETITEM_CASES = {
    "slice_row": (lambda c, v: c.__setitem__(slice(1, None), v), (3, 4), (4,)),
    "int_col": (lambda c, v: c.__setitem__((slice(None), 1), v), (3, 4), (3,)),
    "ellipsis": (lambda c, v: c.__setitem__((Ellipsis, 0), v), (3, 4), (1,)),
    "list": (lambda c, v: c.__setitem__([0, 2], v), (3, 4), (2, 4)),
    "list_bcast": (lambda c, v: c.__setitem__([0, 2], v), (3, 4), (4,)),
    "dup": (lambda c, v: c.__setitem__([0, 0, 1], v), (3, 4), (3, 4)),
    "int_and_list": (lambda c, v: c.__setitem__((0, [1, 3]), v), (3, 4), (2,)),
    "two_lists": (lambda c, v: c.__setitem__(([0, 1], [1, 3]), v), (3, 4), (2,)),
    "step_slice": (lambda c, v: c.__setitem__((slice(None, None, 2), slice(1, 3)), v), (3, 4), ()),
}


@pytest.mark.parametrize("case", sorted(SETITEM_CASES))
def test_setitem_tensor_value(case):
    put, xs, vs = SETITEM_CASES[case]

    def fn(x, v):  # type: ignore[no-untyped-def]
        c = x * 1.0
        put(c, v * 2.0)
        return c * x

    check_op(fn, fn, [xs, vs])


def test_setitem_mask_and_scalar():
    torch = torch_or_skip()

    def fn(lib, x):  # type: ignore[no-untyped-def]
        c = x * 2.0
        c[c > 0] = 0.5
        c[1] = -1.0
        c[:, 0] = lib.tensor(3.0)
        return c * x

    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 4))
    x = ae.tensor(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    out, tout = fn(ae, x), fn(torch, tx)
    np.testing.assert_allclose(_np(out), tout.detach().numpy())
    ae.sync.backward(out.sum())
    tout.sum().backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy())


def test_setitem_duplicates_last_write_value_and_grad():
    torch = torch_or_skip()
    v = ae.tensor([1.0, 2.0, 3.0], requires_grad=True)
    tv = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = ae.zeros(2)
    tc = torch.zeros(2)
    c[[0, 0, 1]] = v * 1.0
    tc[[0, 0, 1]] = tv * 1.0
    assert c.tolist() == tc.tolist() == [2.0, 3.0]
    w = ae.tensor([10.0, 20.0])
    ae.sync.backward((c * w).sum())
    (tc * torch.tensor([10.0, 20.0])).sum().backward()
    assert v.grad.tolist() == tv.grad.tolist()
    assert c.grad_fn.name() == tc.grad_fn.name() == "IndexPutBackward0"


def test_setitem_names_match_torch():
    torch = torch_or_skip()
    for lib in (ae, torch):
        y = lib.ones(2, requires_grad=True)
        c = lib.zeros(3, 2)
        c[0] = y
        assert c.grad_fn.name().split("::")[-1] == "CopySlices"
        d = lib.zeros(3, 2)
        d[[0, 2]] = y
        assert d.grad_fn.name() == "IndexPutBackward0"


def test_setitem_no_grad_is_plain_write():
    x = ae.ones(3, requires_grad=True)
    with ae.no_grad():
        x[1] = 5.0
        x[[0, 2]] = ae.tensor([7.0, 8.0])
    assert x.tolist() == [7.0, 5.0, 8.0] and x.is_leaf and x._version == 2


def test_setitem_errors():
    x = ae.zeros(3)
    with pytest.raises(ValueError, match="shape mismatch"):
        x[[0, 1]] = ae.ones(3)
    with pytest.raises(IndexError):
        x[5] = 1.0


def test_inplace_on_another_device_and_cross_device_copy():
    x = ae.ones(2, 3, requires_grad=True, device="sim:0")
    b = x * 1
    b[0].mul_(3)
    b[[1]] = ae.tensor([[5.0, 6.0, 7.0]], device="sim:0")
    ae.sync.backward(b.sum())
    assert x.grad.device == x.device
    assert x.grad.tolist() == [[3.0, 3.0, 3.0], [0.0, 0.0, 0.0]]
    c = ae.zeros(3, device="sim:0")
    y = ae.ones(3, requires_grad=True)
    c.copy_(y * 2)
    assert c.device == ae.device("sim:0") and c.tolist() == [2.0, 2.0, 2.0]
    ae.sync.backward(c.sum())
    assert y.grad.device == y.device and y.grad.tolist() == [2.0, 2.0, 2.0]


def test_clamp_int_tensor_float_bounds_error():
    x = ae.tensor([0, 5, 9])
    with pytest.raises(TypeError, match="can't be cast to the desired output type int64"):
        x.clamp_(0.5, 3.5)
    x.clamp_(1, 4)
    assert x.tolist() == [1, 4, 4] and x._version == 1


# -- NOTE [The shared zero version counter] ------------------------------------------------


def test_fresh_tensors_share_the_zero_counter_and_never_bump_each_other():
    from aengine.tensors._tensor import ZERO_VC

    a = ae.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2.0
    c = b + 1.0
    assert a._vc is ZERO_VC and b._vc is ZERO_VC and c._vc is ZERO_VC
    c.add_(1.0)
    c.mul_(3.0)
    assert c._version == 2 and b._version == 0 and a._version == 0
    assert ae.tensor([0.0])._version == 0  # a new tensor starts at 0 whatever ran before
    assert ZERO_VC == (0,)


@pytest.mark.parametrize("how", ["direct", "view", "detach", "view_made_after_saving"])
def test_modifying_a_saved_input_after_it_was_saved_is_caught(how):
    x = ae.tensor([0.5, 1.0, 1.5], requires_grad=True)
    h = x * 1.0  # never versioned: the shared zero counter
    y = ae.sin(h)  # saves h, at version 0
    if how == "direct":
        h.mul_(2.0)
    elif how == "view":
        h[1:].mul_(2.0)
    elif how == "detach":
        h.detach().mul_(2.0)
    else:
        v = h[:2]
        y2 = ae.sin(v)  # saves the view (the counter is h's now)
        v.add_(1.0)
        with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
            ae.sync.backward(y2.sum(), retain_graph=True)
    with pytest.raises(ae.AutogradError, match="is at version 1; expected version 0"):
        ae.sync.backward(y.sum())


def test_a_saved_output_keeps_watching_its_tensor():
    x = ae.tensor([0.5, 1.0], requires_grad=True)
    y = ae.exp(x * 1.0)  # saves its output
    y.add_(1.0)
    with pytest.raises(ae.AutogradError, match="output 0 of ExpBackward0"):
        ae.sync.backward(y.sum())


def test_a_single_saved_value_is_kept_bare_and_acts_as_saved():
    # NOTE [Saved tensors of built-in ops]: one saved value is not put in a tuple
    x = ae.tensor([0.5, 1.0, 1.5], dtype=ae.float64, requires_grad=True)  # as numpy's oracle
    h = x * 1.0
    y = ae.sin(h)  # saves its input
    z = ae.exp(h)  # saves its output
    assert y.grad_fn.saved is h
    (sy,) = y.grad_fn.saved_tensors
    (sz,) = z.grad_fn.saved_tensors
    assert sy is h
    np.testing.assert_array_equal(sz.data, z.data)
    ae.sync.backward((y + z).sum())
    np.testing.assert_allclose(x.grad.data, np.cos(x.data) + np.exp(x.data))
    for fn in (y.grad_fn, z.grad_fn):
        assert fn.saved is None
        with pytest.raises(ae.AutogradError, match="after they have already been freed"):
            fn.saved_tensors
    # retained: a second backward reads the same bare values
    y2 = ae.sin(h)
    ae.sync.backward(y2.sum(), retain_graph=True)
    ae.sync.backward(y2.sum())
    np.testing.assert_allclose(x.grad.data, 3 * np.cos(x.data) + np.exp(x.data))


def test_an_inplace_op_saving_its_output_alone_updates_it():
    # relu_ saves its output (bare): commit_inplace points it at the new version
    x = ae.tensor([-1.0, 2.0], requires_grad=True)
    h = x * 1.0
    h.relu_()
    (g,) = ae.sync.grad(h.sum(), [x], retain_graph=True)
    np.testing.assert_array_equal(g.data, [0.0, 1.0])
    h.add_(1.0)
    with pytest.raises(ae.AutogradError, match="output 0 of ReluBackward0"):
        ae.sync.grad(h.sum(), [x])


# -- writing through expanded tensors (NOTE [Writing through expanded tensors]) ----------------
EXPANDED_CASES = [
    "g[0] = 5",
    "g[0:1] = 5",
    "g[0] = lib.tensor(7.0)",
    "g[0].add_(2)",
    "g[0].mul_(lib.tensor(3.0))",
    "g[0].clamp_(0, 0.5)",
    "g.fill_(2.0)",
    "g.zero_()",
    "g[:] = 5",
    "g[...] = 5",
    "g += 1",
    "g.add_(1)",
    "g.mul_(lib.ones(3))",
    "g.copy_(lib.ones(3))",
    "g.fill_(lib.tensor(3.0))",
    "g.relu_()",
    "g.clamp_(0, 0.5)",
    "h[1, 2] = 5",
    "h[:, 0] = 5",
    "h[1] = 5",
    "h[:, 0].mul_(3)",
]


def _expanded_case(lib, stmt, rg):  # type: ignore[no-untyped-def]
    leaf = lib.ones(1, dtype=lib.float64, requires_grad=True)
    base = leaf.clone() if rg else lib.ones(1, dtype=lib.float64)
    g = base.expand(3)
    h = lib.ones(2, 1, dtype=lib.float64).expand(2, 3)
    try:
        exec(stmt, {"g": g, "h": h, "lib": lib})
    except RuntimeError as exc:
        return str(exc)
    out = [g.tolist(), h.tolist()]
    if rg:
        loss = (g * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum()
        try:  # CopySlices writes the gradient of an expanded region: PyTorch raises there
            if lib is ae:
                ae.sync.backward(loss)
            else:
                loss.backward()
        except RuntimeError as exc:
            return out + [str(exc)]
        out.append(leaf.grad.tolist())
    return out


@pytest.mark.parametrize(
    "stmt,rg",
    [(stmt, False) for stmt in EXPANDED_CASES]
    + [(stmt, True) for stmt in EXPANDED_CASES if stmt.startswith("g")],  # g's base: rg
)
def test_writing_through_an_expanded_tensor_matches_torch(stmt, rg):
    # g = ones(1).expand(3): one memory location; g[0] = 5 writes it (g reads [5, 5, 5]),
    # an op writing g as a whole raises the overlap error (fill_ / zero_ with a number not)
    torch = torch_or_skip()
    assert _expanded_case(ae, stmt, rg) == _expanded_case(torch, stmt, rg)


def test_expanded_write_values_and_errors():
    g = ae.ones(1).expand(3)
    g[0] = 5
    assert g.tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(
        ae.AutogradError,
        match=r"^unsupported operation: more than one element of the written-to tensor refers to "
        r"a single memory location\. Please clone\(\) the tensor before performing the "
        r"operation\.$",
    ):
        g.add_(1)
    assert g.tolist() == [5.0, 5.0, 5.0]
    # with autograd: the leaf check comes first, as PyTorch
    leaf = ae.ones(1, requires_grad=True)
    with pytest.raises(ae.AutogradError, match="a view of a leaf Variable that requires grad"):
        leaf.expand(3)[0] = 5.0
    with pytest.raises(ae.AutogradError, match="refers to a single memory location"):
        leaf.clone().expand(3).mul_(3)


def test_advanced_index_assignment_on_an_expanded_tensor_warns():
    # PyTorch writes through (deprecated) and warns; a single boolean mask with one
    # value is its masked_fill_, which warns too
    torch = torch_or_skip()
    put = (
        "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
        "performing this operation. This also applies to advanced indexing e.g. tensor[indices] "
        "= tensor"
    )
    fill = (
        "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
        "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = "
        "scalar"
    )
    for lib in (ae, torch):
        g = lib.ones(1).expand(3)
        with pytest.warns(UserWarning) as rec:
            g[[0]] = 5.0
        assert [str(w.message).partition(" (Triggered")[0] for w in rec] == [put]
        assert g.tolist() == [5.0, 5.0, 5.0]
        if lib is ae:
            assert rec[0].filename == __file__  # points at the assignment
        with pytest.warns(UserWarning) as rec:
            g[lib.tensor([True, False, False])] = 6.0
        assert [str(w.message).partition(" (Triggered")[0] for w in rec] == [put, fill]
        assert g.tolist() == [6.0, 6.0, 6.0]
        h = lib.ones(3, 1).expand(3, 2)
        h[[0, 1], 1] = 5.0  # the int goes first: no overlap left, no warning
        assert h.tolist() == [[5.0, 5.0], [5.0, 5.0], [1.0, 1.0]]


def test_read_only_memory_is_not_written():
    arr = np.ones(3)
    arr.flags.writeable = False
    t = ae.as_tensor(arr)  # shares the read-only array
    assert np.shares_memory(t.data, arr)
    with pytest.raises(ae.AutogradError, match="^the tensor's memory is read-only"):
        t.add_(1)
    with pytest.raises(ae.AutogradError, match="^the tensor's memory is read-only"):
        t.expand(2, 3)[0] = 5.0
    assert arr.tolist() == [1.0, 1.0, 1.0]
