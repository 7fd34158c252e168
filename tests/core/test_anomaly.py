"""Anomaly mode: NaN checks, forward tracebacks, parent traces, warnings."""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import numpy as np
import pytest

import aengine as ae
from aengine.tensors._tensor import own_vc
from tests.api.test_hooks import AeAsyncLib, AeSyncLib, TorchLib, run_plain


def _anomaly(L: Any, check_nan: bool = True) -> Any:
    if L.name == "torch":
        return L.torch.autograd.detect_anomaly(check_nan=check_nan)
    return ae.detect_anomaly(check_nan=check_nan)


def make_nan_func(L: Any) -> Any:
    class MyFunc(L.Function):
        @staticmethod
        def forward(ctx: Any, inp1: Any, inp2: Any, fail_0th: bool) -> Any:
            ctx.fail_0th = fail_0th
            return inp1.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            gi = g.expand(10, 10) * L.tensor(np.where(np.eye(10) > 0, np.nan, 1.0))
            if ctx.fail_0th:
                return gi, None, None
            return None, gi, None

    return MyFunc


async def nan_in_backward(L: Any) -> Any:
    """Returns (message of the error, joined warnings) for each case."""
    MyFunc = make_nan_func(L)
    out: list[Any] = []
    inp = L.tensor(np.ones((10, 10)), requires_grad=True)
    inp2 = L.tensor(np.ones((10, 10)), requires_grad=True)
    # outside anomaly mode the NaN goes through
    await L.backward(MyFunc.apply(inp, inp2, True).sum())
    out.append(bool(np.isnan(inp.grad.detach().numpy()).any()))
    for fail_0th in (True, False):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with _anomaly(L):
                y = MyFunc.apply(inp, inp2, fail_0th)
                try:
                    await L.backward(y.sum())
                    out.append("no error")
                except RuntimeError as exc:
                    out.append(str(exc))
        text = "\n".join(str(x.message) for x in w)
        out.append(["MyFunc.apply" in text, "Error detected in MyFuncBackward" in text])
    # forward outside anomaly mode: no forward pass information
    y = MyFunc.apply(inp, inp2, True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with _anomaly(L):
            try:
                await L.backward(y.sum())
            except RuntimeError as exc:
                out.append(str(exc))
    out.append("No forward pass information" in "\n".join(str(x.message) for x in w))
    return out


async def nan_in_double_backward_parent_trace(L: Any) -> Any:
    class MyFunc2(L.Function):
        @staticmethod
        def forward(ctx: Any, g: Any) -> Any:
            return g * 1

        @staticmethod
        def backward(ctx: Any, gg: Any) -> Any:
            return gg * L.tensor(np.full(gg.shape, np.nan))

    class MyFunc(L.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return MyFunc2.apply(g * 2)

    out: list[Any] = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with _anomaly(L):
            x = L.tensor([1.0, 2.0], requires_grad=True)
            go = L.tensor([1.0, 1.0], requires_grad=True)
            (gx,) = await L.grad(MyFunc.apply(x), x, go, create_graph=True)
            try:
                await L.backward(gx.sum())
            except RuntimeError as exc:
                out.append(str(exc))
    msgs = [
        str(x.message)
        for x in w
        if "Error detected" in str(x.message) or "induced" in str(x.message)
    ]
    text = "\n".join(msgs)
    out.append("Error detected in MyFunc2Backward" in text)
    out.append("MyFunc2.apply" in text and "MyFunc.apply" in text)
    out.append("Previous calculation was induced by MyFuncBackward" in text)
    return out


async def inplace_error_warnings(L: Any) -> Any:
    out: list[Any] = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with _anomaly(L):
            a = L.tensor(np.ones(5), requires_grad=True)
            d1 = a + 1
            d2 = d1**2
            _inplace_add(L, d1)
            try:
                await L.grad(d2.sum(), a)
            except RuntimeError as exc:
                msg = str(exc)
                out.append("modified by an inplace operation" in msg)
                out.append("The variable in question was changed in there or anywhere later" in msg)
    out.append(len(w))
    out.append("Anomaly Detection has been enabled" in str(w[0].message))
    out.append("Error detected in PowBackward0" in str(w[1].message))
    return out


def _inplace_add(L: Any, t: Any) -> None:
    if L.name == "torch":
        with L.torch.no_grad():
            t.add_(1)
    else:
        t.data += 1
        own_vc(t)[0] += 1


async def no_check_nan(L: Any) -> Any:
    MyFunc = make_nan_func(L)
    out: list[Any] = []
    inp = L.tensor(np.ones((10, 10)), requires_grad=True)
    inp2 = L.tensor(np.ones((10, 10)), requires_grad=True)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with _anomaly(L, check_nan=False):
            y = MyFunc.apply(inp, inp2, True)
            await L.backward(y.sum())
            out.append("passed")
            y = MyFunc.apply(inp, inp2, True)
            with _anomaly(L, check_nan=True):
                try:
                    await L.backward(y.sum())
                except RuntimeError as exc:
                    out.append(str(exc))
    return out


SCENARIOS = [
    nan_in_backward,
    nan_in_double_backward_parent_trace,
    inplace_error_warnings,
    no_check_nan,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sync_matches_torch(scenario: Any) -> None:
    expected = run_plain(scenario(TorchLib()))
    got = run_plain(scenario(AeSyncLib()))
    assert got == expected


@pytest.mark.anyio
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
async def test_async_matches_torch(scenario: Any) -> None:
    expected = run_plain(scenario(TorchLib()))
    got = await scenario(AeAsyncLib())
    assert got == expected


def test_nan_message_text() -> None:
    MyFunc = make_nan_func(AeSyncLib())
    inp = ae.ones(10, 10, requires_grad=True)
    inp2 = ae.ones(10, 10, requires_grad=True)
    with pytest.warns(UserWarning) as record:
        with ae.detect_anomaly():
            y = MyFunc.apply(inp, inp2, False)
            with pytest.raises(
                ae.AutogradError,
                match=r"Function 'MyFuncBackward' returned nan values in its 1th output\.",
            ):
                ae.sync.backward(y.sum())
    assert any("MyFunc.apply" in str(r.message) for r in record)
    assert inp.grad is None and inp2.grad is None


def test_warnings_as_errors_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """With warnings turned into errors the report is printed, the original error raised."""
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        mode = ae.detect_anomaly()
    with mode:
        a = ae.ones(5, requires_grad=True)
        d1 = a + 1
        d2 = d1**2
        d1.data += 1
        own_vc(d1)[0] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
                ae.sync.grad(d2.sum(), a)
    err = capsys.readouterr().err
    assert "Error detected in PowBackward0" in err
    assert "Traceback of forward call that caused the error" in err


def test_version_hint_without_anomaly() -> None:
    a = ae.ones(5, requires_grad=True)
    d1 = a + 1
    d2 = d1**2
    own_vc(d1)[0] += 1
    with pytest.raises(ae.AutogradError, match="Hint: enable anomaly detection"):
        ae.sync.grad(d2.sum(), a)


def test_parent_references_are_weak() -> None:
    """Anomaly metadata of a node built in backward keeps no node alive (NOTE [Anomaly parents])."""

    class Foo:
        pass

    with pytest.warns(UserWarning, match="Anomaly Detection"):
        with ae.detect_anomaly():
            x = ae.tensor([1.0, 2.0], requires_grad=True)
            t = x * 3.0  # its backward builds g * 3: a graph not reaching t.grad_fn
            (grad,) = ae.sync.grad(t, x, ae.ones(2, requires_grad=True), create_graph=True)
    info = grad.grad_fn._anomaly
    assert info is not None and info.parent_name == "MulBackward0"
    my_obj = Foo()
    t.grad_fn.metadata[0] = my_obj
    ref = weakref.ref(my_obj)
    del my_obj
    assert ref() is not None
    del t
    gc.collect()
    assert ref() is None  # grad (alive) does not keep its parent node alive
    assert grad.grad_fn is not None and "Traceback" not in info.parent_name


def test_set_detect_anomaly_as_torch() -> None:
    """set_detect_anomaly: on or off at once, restored by its with block, no warning."""
    from tests.oracle import torch_or_skip

    torch = torch_or_skip()
    for lib, enabled, check_nan in (
        (ae, ae.is_anomaly_enabled, ae.is_anomaly_check_nan_enabled),
        (torch.autograd, torch.is_anomaly_enabled, torch.is_anomaly_check_nan_enabled),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # it does not warn, unlike detect_anomaly()
            with lib.set_detect_anomaly(True, check_nan=False):
                assert (enabled(), check_nan()) == (True, False)
                with lib.set_detect_anomaly(False):
                    assert (enabled(), check_nan()) == (False, True)
                assert (enabled(), check_nan()) == (True, False)
            assert (enabled(), check_nan()) == (False, True)
            lib.set_detect_anomaly(True)  # as a function: at once, until set back
            assert enabled()
            lib.set_detect_anomaly(False)
            assert not enabled()


def test_set_detect_anomaly_reports_nan_and_refuses_non_bools() -> None:
    x = ae.tensor([-1.0, 4.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's sqrt of -1
        with ae.set_detect_anomaly(True):
            y = x.sqrt()  # NaN at -1: SqrtBackward0's gradient is NaN there
            with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values"):
                ae.sync.backward(y.sum())
        with ae.set_detect_anomaly(True, check_nan=False):
            y = x.sqrt()
            ae.sync.backward(y.sum())  # not checked: the NaN reaches .grad, as torch's
    assert np.isnan(x.grad.numpy()[0])
    with pytest.raises(TypeError, match=r"argument 'mode' must be bool, not int"):
        ae.set_detect_anomaly(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"argument 'check_nan' must be bool, not str"):
        ae.set_detect_anomaly(True, check_nan="yes")  # type: ignore[arg-type]
    assert not ae.is_anomaly_enabled()


@pytest.mark.anyio
async def test_set_detect_anomaly_is_task_local() -> None:
    import anyio

    seen: list[bool] = []

    async def other() -> None:
        seen.append(ae.is_anomaly_enabled())

    async with anyio.create_task_group() as tg:
        ae.set_detect_anomaly(True)
        tg.start_soon(other)  # the child task copies the context when it starts: on there too
    seen.append(ae.is_anomaly_enabled())
    ae.set_detect_anomaly(False)

    async def started_after() -> None:
        seen.append(ae.is_anomaly_enabled())

    async with anyio.create_task_group() as tg:
        tg.start_soon(started_after)
    assert seen == [True, True, False]
