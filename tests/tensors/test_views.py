"""Views and in-place ops: CopySlices, stale view grad_fns, hooks and retain_grad (vs PyTorch)."""

from __future__ import annotations

import numpy as np
import pytest

import aengine as ae
from tests.oracle import check_op, torch_or_skip, torch_texts_or_skip


def _backward(lib, t, *args, **kw):  # type: ignore[no-untyped-def]
    if lib is ae:
        ae.sync.backward(t, *args, **kw)
    else:
        t.backward(*args, **kw)


def _name(fn):  # type: ignore[no-untyped-def]
    return None if fn is None else fn.name().split("::")[-1]


# -- in-place on a view rewrites the base's history ----------------------------------------------
def test_inplace_on_view_backprops_to_base():
    root = ae.ones(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v1.mul_(2)
    ae.sync.backward(x.sum())
    assert root.grad.tolist() == [[2.0, 2.0], [1.0, 1.0]]
    assert x.grad_fn.name() == "CopySlices"
    assert v1._base is x and v1._is_view() and v1._version == x._version == 1


def test_backprop_through_other_view_sees_inplace():
    root = ae.ones(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x.narrow(0, 0, 1)
    v2 = x.narrow(0, 0, 1)
    v1.mul_(2)
    ae.sync.backward(v2.sum())  # v2 was made before the in-place and sees it
    assert root.grad.tolist() == [[2.0, 2.0], [0.0, 0.0]]


def test_inplace_on_view_of_view():
    root = ae.ones(2, 2, requires_grad=True)
    x = root.clone()
    v1 = x[0]
    v2 = v1[1:]
    v2.mul_(2)
    ae.sync.backward(x.sum())
    assert root.grad.tolist() == [[1.0, 2.0], [1.0, 1.0]]
    assert v2._base is x


def test_inplace_on_non_contiguous_view():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        root = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        x = root.clone()
        v = x.transpose(0, 1)  # (3, 2), not contiguous
        v[1:].mul_(lib.tensor([[10.0, 20.0]]))
        w = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        _backward(lib, (x * w).sum())
        res.append((x.tolist(), root.grad.tolist()))
    assert res[0] == res[1]


VIEW_CASES = {
    "slice_mul": lambda x, b: x[1:].mul_(b[0]),
    "select_div": lambda x, b: x[:, 1].div_(b[:, 0] + 3.0),
    "transpose_mul": lambda x, b: x.transpose(0, 1)[0].mul_(b[:, 1]),
    "view_add": lambda x, b: x.view(-1)[1:4].add_(b[0]),
    "reshape_sub": lambda x, b: x.reshape(3, 2)[0].sub_(b[0, :2]),
    "view_of_view_mul": lambda x, b: x[0][1:].mul_(b[1, 1:]),
    "permute_copy": lambda x, b: x.permute(1, 0)[1:].copy_(b.transpose(0, 1)[1:] * 2),
    "relu": lambda x, b: x[1].relu_(),
    "clamp": lambda x, b: x[0].clamp_(-0.3, 0.3),
    "zero": lambda x, b: x[:, 0].zero_(),
    "fill": lambda x, b: x[:, 2].fill_(b[0, 0]),
    "setitem_on_view": lambda x, b: x[1].__setitem__([0, 2], b[0, :2]),
}


@pytest.mark.parametrize("case", sorted(VIEW_CASES))
def test_inplace_through_view_first_and_second_order(case):
    """mul_/div_/... on views: values, grads and create_graph grads equal torch's."""
    op = VIEW_CASES[case]

    def fn(a, b):  # type: ignore[no-untyped-def]
        x = a * b  # a non-leaf whose history depends on a and b
        op(x, b)
        return x * a

    check_op(fn, fn, [(2, 3), (2, 3)])


def test_inplace_on_view_of_plain_base_with_rg_operand():
    # the base does not require grad; the operand does: base gets CopySlices
    def fn(b):  # type: ignore[no-untyped-def]
        x = b.detach() * 0 + 1.0
        x[0].mul_(b[1])
        x.transpose(0, 1)[2].add_(b[0, :1] * 3)
        return x * b

    check_op(fn, fn, [(2, 3)])


def test_multiple_inplace_on_several_views():
    def fn(a, b):  # type: ignore[no-untyped-def]
        x = a.clone()
        v1 = x[0]
        v2 = x[:, 1]
        v1.mul_(b[0])
        v2.add_(b[:, 0])
        v1.div_(b[1] + 3.0)
        return x * v2.unsqueeze(1) + v1.sum()

    check_op(fn, fn, [(2, 3), (2, 3)], positive=True)


# -- stale grad_fns of views ------------------------------------------------------------------
def test_views_made_before_see_new_history():
    torch = torch_or_skip()
    names = []
    for lib in (ae, torch):
        root = lib.ones(2, 3, requires_grad=True)
        x = root.clone()
        va = x[0]
        vb = x[1]
        vb.mul_(3)
        names.append((_name(va.grad_fn), _name(va.grad_fn.next_functions[0][0])))
        _backward(lib, va.sum() + vb.sum())
        names.append(root.grad.tolist())
    assert names[1] == names[3] == [[1.0, 1.0, 1.0], [3.0, 3.0, 3.0]]
    assert names[0][1] == names[2][1] == "CopySlices"


def test_inplace_on_base_refreshes_views():
    root = ae.ones(3, requires_grad=True)
    x = root.clone()
    v = x[1:]
    old = v.grad_fn
    x.mul_(ae.tensor([1.0, 2.0, 3.0]))
    assert v.grad_fn is not old and v.grad_fn.next_functions[0][0] is x.grad_fn
    ae.sync.backward(v.sum())
    assert root.grad.tolist() == [0.0, 2.0, 3.0]


def test_view_of_leaf_regenerated_after_no_grad_update():
    w = ae.ones(3, requires_grad=True)
    vw = w[0:2]
    with ae.no_grad():
        w.mul_(2)
    fn = vw.grad_fn
    assert fn is not None and fn.next_functions[0][0].name() == "AccumulateGrad"
    ae.sync.backward((vw * vw).sum())
    assert w.grad.tolist() == [4.0, 4.0, 0.0]


def test_indirect_errors_for_restricted_views():
    x = ae.ones(3, requires_grad=True)
    b = x.clone()
    u = b.unbind()
    with ae.no_grad():
        b.mul_(2)
    with pytest.raises(
        ae.AutogradError,
        match="Output 0 of Unbind is a view and its base or another view of its base "
        "has been modified inplace",
    ):
        u[0].grad_fn  # noqa: B018
    b = x.clone()
    with ae.no_grad():
        v = b[0:2]
        b.mul_(2)
    with pytest.raises(
        ae.AutogradError,
        match="A view was created in no_grad mode and its base or another view of its base has "
        "been modified inplace with grad mode enabled",
    ):
        v.grad_fn  # noqa: B018


def test_views_made_in_no_grad_of_plain_tensor_are_fine():
    z = ae.zeros(3)
    with ae.no_grad():
        v = z[0:2]
    z.mul_(2)
    assert v.grad_fn is None and not v.requires_grad


# -- retain_grad and tensor hooks through in-place -----------------------------------------------
def test_retain_grad_through_inplace():
    leaf = ae.ones(3, requires_grad=True)
    a = leaf.clone()
    a.retain_grad()
    a.mul_(2)
    a.mul_(2)
    ae.sync.backward(a.sum())
    assert a.grad.tolist() == [1.0, 1.0, 1.0]
    assert leaf.grad.tolist() == [4.0, 4.0, 4.0]


def test_retain_grad_inplace_over_view():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        base = lib.tensor([1.0], requires_grad=True).clone()
        view = base[:]
        view2 = base[:]
        view.retain_grad()
        view2.retain_grad()
        view.mul_(2)
        _backward(lib, (view + view2).sum())
        res.append((view.grad.tolist(), view2.grad.tolist()))
    assert res[0] == res[1] == ([1.0], [1.0])


def test_retain_grad_on_base_moves_to_copyslices():
    leaf = ae.ones(3, requires_grad=True)
    base = leaf.clone()
    base.retain_grad()
    base[0:2].mul_(3)
    ae.sync.backward((base * 2).sum())
    assert base.grad.tolist() == [2.0, 2.0, 2.0]
    assert leaf.grad.tolist() == [6.0, 6.0, 2.0]


def test_tensor_hooks_before_and_after_inplace():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        a = lib.ones(2, requires_grad=True)
        b = a * 2
        seen = []
        b.register_hook(lambda g: seen.append(("old", g.tolist())))
        b.mul_(2)
        b.register_hook(lambda g: seen.append(("new", g.tolist())))
        _backward(lib, (b * 2).sum())
        res.append((sorted(seen), a.grad.tolist()))
    assert res[0] == res[1]
    assert res[0] == ([("new", [2.0, 2.0]), ("old", [4.0, 4.0])], [8.0, 8.0])


def test_tensor_hooks_inplace_over_view():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        base = lib.tensor([1.0, 2.0], requires_grad=True).clone()
        view = base[:]
        view2 = base[:]
        count = [0, 0, 0]

        def h(i):  # type: ignore[no-untyped-def]
            def hook(g):  # type: ignore[no-untyped-def]
                count[i] += 1

            return hook

        view.register_hook(h(0))
        view2.register_hook(h(1))
        view.mul_(2)
        view2.grad_fn  # noqa: B018  (refresh, then register)
        view2.register_hook(h(2))
        _backward(lib, view2.sum())
        res.append(count)
    assert res[0] == res[1] == [0, 0, 1]


# -- detach --------------------------------------------------------------------------------------
def test_detach_base_does_not_detach_view():
    x = ae.ones(3, requires_grad=True)
    b = x * 2
    v = b[1:]
    b.detach_()
    assert b.grad_fn is None and not b.requires_grad
    assert v.requires_grad and v.grad_fn is not None
    ae.sync.backward(v.sum())
    assert x.grad.tolist() == [0.0, 2.0, 2.0]


def test_detach_then_inplace():
    x = ae.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.detach()
    z.add_(1)  # detached: no history, but shares the version
    assert y._version == 1 and z.grad_fn is None
    assert y.tolist() == [3.0, 5.0]


# -- create_graph through CopySlices -------------------------------------------------------------------
def test_double_backward_through_copyslices_matches_torch():
    torch = torch_or_skip()
    data = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]])
    res = []
    for lib in (ae, torch):
        a = lib.tensor(data, requires_grad=True)
        x = a * a
        x[1].mul_(a[0])
        x[:, 0].div_(a[1, :1] + 2.0)
        loss = (x * x).sum()
        if lib is ae:
            (g,) = ae.sync.grad(loss, [a], create_graph=True)
            (gg,) = ae.sync.grad((g * g).sum(), [a])
        else:
            (g,) = torch.autograd.grad(loss, [a], create_graph=True)
            (gg,) = torch.autograd.grad((g * g).sum(), [a])
        res.append((g.detach().numpy(), gg.detach().numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-10)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-10)


def test_copyslices_saved_version_error():
    x = ae.ones(3, requires_grad=True)
    b = x.clone()
    o = ae.tensor([1.0, 2.0], requires_grad=True)
    m = o * 1
    b[0:2].mul_(m)  # saves m
    m.add_(1)
    with pytest.raises(
        ae.AutogradError, match="which is output 0 of AddBackward0, is at version 1"
    ):
        ae.sync.backward(b.sum())


@pytest.mark.anyio
async def test_copyslices_under_async_backward():
    root = ae.ones(2, 2, requires_grad=True)
    x = root.clone()
    x[0].mul_(3)
    await x.sum().backward()
    assert root.grad.tolist() == [[3.0, 3.0], [1.0, 1.0]]


def test_reshape_copy_is_not_a_view():
    torch = torch_or_skip()
    for lib in (ae, torch):
        x = lib.ones(2, 3)
        r = x.T.reshape(-1)  # not contiguous: a copy
        assert r._base is None
        r.add_(1)
        assert x._version == 0 and x.tolist() == [[1.0] * 3] * 2


def test_inference_mode_view_error():
    torch = torch_or_skip()
    msgs = []
    for lib in (ae, torch):
        b = lib.ones(3, requires_grad=True).clone()
        with lib.inference_mode():
            v = b[0:2]
            v.mul_(2)  # fine inside
        assert not v.is_inference()
        with pytest.raises(RuntimeError) as info:
            v.mul_(2)
        msgs.append(str(info.value))
        assert b.tolist() == [2.0, 2.0, 1.0]
    assert msgs[0] == msgs[1]
    assert msgs[0].startswith("A view was created in inference mode and is being modified inplace")


def test_view_of_multi_output_view_is_restricted():
    b = ae.ones(2, 3, requires_grad=True).clone()
    row = b.unbind()[1]
    with pytest.raises(ae.AutogradError, match="Output 0 of Slice is a view and is being modified"):
        row[1:].mul_(2)


def test_detach_inplace_cuts_later_gradient():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(2, requires_grad=True)
        a = x * 2
        _backward(lib, (y + a).sum(), retain_graph=True)
        a.detach_()
        assert not a.requires_grad and a.grad_fn is None
        _backward(lib, (y + a).sum())
        res.append((x.grad.tolist(), y.grad.tolist()))
    assert res[0] == res[1] == ([2.0, 2.0], [2.0, 2.0])


def test_setitem_with_tensor_indices():
    def fn(a, v):  # type: ignore[no-untyped-def]
        lib = ae if isinstance(a, ae.Tensor) else __import__("torch")
        c = a * 1.0
        c[lib.tensor([2, 0])] = v
        c[lib.tensor([True, False, True]), 1] = v[:, 0] * 3
        return c * a

    check_op(fn, fn, [(3, 2), (2, 2)])


def test_views_made_before_base_required_grad():
    torch = torch_or_skip()
    res = []
    for lib in (ae, torch):
        z = lib.zeros(2, 3)
        row = z[0]
        col = z[:, 2]
        untouched = z[1, :1]
        y = lib.ones(2, requires_grad=True)
        z[0, 1:] = y * 2
        flags = (row.requires_grad, col.requires_grad, untouched.requires_grad)
        _backward(lib, (row * 3).sum() + (col * 5).sum() + (untouched * 7).sum())
        res.append((flags, y.grad.tolist()))
    assert res[0] == res[1] == ((True, True, True), [6.0, 16.0])


def test_view_requires_grad_follows_base():
    x = ae.ones(3, requires_grad=True)
    b = x * 1
    with ae.no_grad():
        v = b[0:2]
    # as PyTorch: requires_grad=True, no grad_fn (a leaf); aengine records
    # nothing for ops on v, where PyTorch records a node whose gradient is lost
    assert v.requires_grad and v.grad_fn is None and v.is_leaf
    assert not (v * 2).requires_grad
    assert b[0:2].requires_grad
    assert not ae.zeros(3)[0:2].requires_grad


def test_anomaly_trace_of_copyslices_names_the_inplace_line():
    import warnings

    x = ae.ones(3, requires_grad=True)
    m = x * 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ae.detect_anomaly():
            b = x.clone()
            b[0:2].mul_(m[:2])  # the line the trace must show
            m.add_(1)
            with pytest.raises(ae.AutogradError, match="variable in question was changed"):
                ae.sync.backward(b.sum())
    texts = [str(w.message) for w in caught]
    assert any("Error detected in CopySlices" in t and "b[0:2].mul_(m[:2])" in t for t in texts)


# -- PyTorch's texts for restricted views (NOTE [Restricted views]) ------------------------------
def _restricted_view_error(lib, case):  # type: ignore[no-untyped-def]
    b = lib.ones(3, 2, dtype=lib.float64, requires_grad=True).clone()
    if case == "view of a no_grad view":
        with lib.no_grad():
            v = b[:2]
        v[:1].mul_(2)
    elif case == "view of a no_grad view, rg operand":
        with lib.no_grad():
            v = b[:2]
        v[0].mul_(lib.ones(2, requires_grad=True))
    elif case == "view of a no_grad view, base changed":
        with lib.no_grad():
            v = b[:2]
        w = v[1:]
        b.mul_(2)
        w.grad_fn  # noqa: B018
    elif case == "view of an inference-mode view":
        with lib.inference_mode():
            v = b[:2]
        v[1].mul_(2)
    elif case == "split of a no_grad view":
        with lib.no_grad():
            v = b[0]
        v.split(1)[0].mul_(2)  # (aengine says output 0 for every piece of it)
    elif case == "no_grad view of a plain tensor, rg operand":
        p = lib.ones(3)
        with lib.no_grad():
            w = p[:2]
        w[:1].mul_(lib.ones(1, requires_grad=True))
    elif case == "unbind of a plain tensor, rg operand":
        lib.ones(3).unbind()[0].mul_(lib.ones((), requires_grad=True))
    elif case == "view of an unbind output":
        b.unbind()[1][1:].mul_(2)
    else:
        raise AssertionError(case)
    return None


@pytest.mark.parametrize(
    "case",
    [
        "view of a no_grad view",
        "view of a no_grad view, rg operand",
        "view of a no_grad view, base changed",
        "view of an inference-mode view",
        "split of a no_grad view",
        "no_grad view of a plain tensor, rg operand",
        "unbind of a plain tensor, rg operand",
        "view of an unbind output",
    ],
)
def test_restricted_view_errors_are_torchs(case):
    torch = torch_texts_or_skip()
    msgs = []
    for lib in (ae, torch):
        with pytest.raises(RuntimeError) as info:
            _restricted_view_error(lib, case)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_view_of_a_no_grad_view_names_its_op():
    b = ae.ones(3, requires_grad=True).clone()
    with ae.no_grad():
        v = b[:2]
    with pytest.raises(
        ae.AutogradError,
        match=r"^Output 0 of Slice is a view of a view which was created in no_grad mode and is "
        r"being modified inplace with grad mode enabled\. Given that this use case is ambiguous",
    ):
        v[:1].mul_(2)
    with pytest.raises(ae.AutogradError, match=r"^A view was created in no_grad mode and is"):
        v.mul_(2)  # the no_grad view itself
    with ae.no_grad():
        w = v[:1]  # made in no_grad mode: the plain text again
    with pytest.raises(ae.AutogradError, match=r"^A view was created in no_grad mode and is"):
        w.mul_(2)
