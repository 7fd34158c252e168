"""Errors of the engine: type, text (pinned with ``match=``) and what they leave behind.

Engine-state errors are ``ae.AutogradError`` (a ``RuntimeError``); bad
arguments are ``TypeError``/``ValueError``.  Texts follow PyTorch's where
tests match them.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest

import aengine as ae
from aengine.ops._core import node_class, record
from aengine.tensors._tensor import own_vc
from tests.oracle import torch_or_skip


class Driver:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def _call(self, fn: Callable[..., Any], sync_fn: Callable[..., Any], *a: Any, **k: Any) -> Any:
        if self.kind == "sync":
            return sync_fn(*a, **k)
        return anyio.run(functools.partial(fn, *a, **k), backend=self.kind)

    def backward(self, *a: Any, **k: Any) -> Any:
        return self._call(ae.backward, ae.sync.backward, *a, **k)

    def grad(self, *a: Any, **k: Any) -> Any:
        return self._call(ae.grad, ae.sync.grad, *a, **k)


@pytest.fixture(params=["sync", "asyncio", "trio"])
def drv(request: pytest.FixtureRequest) -> Driver:
    return Driver(request.param)


def _raising_rule(F: Any, g: Any, saved: Any, node: Any) -> Any:
    raise ValueError("something")  # the line the traceback must show


def _ok_rule(F: Any, g: Any, saved: Any, node: Any) -> Any:
    node.attrs.append(node.name())
    return (g,)


BoomBackward = node_class("BoomBackward", _raising_rule)
LogBackward = node_class("LogBackward", _ok_rule)


def boom(x: ae.Tensor) -> ae.Tensor:
    """Identity whose backward raises ``ValueError('something')``."""
    return record(BoomBackward, x.data.copy(), x.device, (x,))


def logged(x: ae.Tensor, log: list[str]) -> ae.Tensor:
    """Identity whose backward appends its node name to ``log``."""
    return record(LogBackward, x.data.copy(), x.device, (x,), attrs=log)


def leaf(*shape: int) -> ae.Tensor:
    return ae.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)


# ---- the error table ------------------------------------------------------------------


def test_errors_are_runtime_errors() -> None:
    assert issubclass(ae.AutogradError, RuntimeError)
    assert issubclass(ae.BackwardError, ae.AutogradError)


def test_freed_graph(drv: Driver) -> None:
    torch = torch_or_skip()
    x = leaf(3)
    y = (x * x).sum()
    drv.backward(y)
    with pytest.raises(ae.AutogradError, match="Specify retain_graph=True") as info:
        drv.backward(y)
    tx = torch.ones(3, requires_grad=True)
    ty = (tx * tx).sum()
    ty.backward()
    with pytest.raises(RuntimeError) as tinfo:
        ty.backward()
    assert str(info.value) == str(tinfo.value)  # the same text as PyTorch


def test_unused_input(drv: Driver) -> None:
    x, y = leaf(2), leaf(2)
    with pytest.raises(ae.AutogradError, match="Set allow_unused=True if this is the desired"):
        drv.grad((x * 2).sum(), [x, y])
    with pytest.raises(ae.AutogradError, match="Set allow_unused=True"):
        drv.grad((x * 2).sum(), [x, y], allow_unused=False)


def test_non_scalar_implicit_grad(drv: Driver) -> None:
    x = leaf(2, 3)
    with pytest.raises(ae.AutogradError, match="grad can be implicitly created only for scalar"):
        drv.backward(x * 2)
    with pytest.raises(ae.AutogradError, match=r"scalar outputs.*\(2, 3\)"):
        drv.grad(x * 2, x)
    with pytest.raises(ae.AutogradError, match="only for scalar outputs"):
        drv.backward([x.sum(), x * 2], [None, None])


def test_complex_scalar_root_needs_an_explicit_grad(drv: Driver) -> None:
    torch = torch_or_skip()
    w = leaf(1)
    with pytest.raises(ae.AutogradError, match="only for real scalar outputs"):
        drv.backward((w * ae.tensor([1 + 1j])).sum())
    tw = torch.ones(1, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for real scalar outputs"):
        (tw * torch.tensor([1 + 1j])).sum().backward()


def test_grad_shape_mismatch_names_both_shapes(drv: Driver) -> None:
    x = leaf(2, 2)
    with pytest.raises(
        ae.AutogradError,
        match=r"Mismatch in shape: grad_output\[0\] has a shape of \(2,\) and output\[0\] "
        r"has a shape of \(2, 2\)\.",
    ):
        drv.grad([x * 2], [x], grad_outputs=[ae.ones(2)])
    with pytest.raises(ae.AutogradError, match=r"Mismatch in shape.*\(3,\).*\(2, 2\)"):
        drv.backward(x * 2, ae.ones(3))


def test_grad_dtype_mismatch(drv: Driver) -> None:
    torch = torch_or_skip()
    x = leaf(2)
    with pytest.raises(ae.AutogradError, match="required to have the same dtype"):
        drv.backward(x * 2, ae.tensor([1 + 1j, 2]))
    tx = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="required to have the same dtype"):
        (tx * 2).backward(torch.tensor([1 + 1j, 2]))
    # a real gradient of another dtype (an integer one too) is cast, as in torch
    drv.backward(x * 2, ae.tensor([1, 2]))
    (tx * 2).backward(torch.tensor([1, 2]))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    assert x.grad.dtype == np.float64


def test_root_does_not_require_grad(drv: Driver) -> None:
    torch = torch_or_skip()
    x = ae.ones(2)
    with pytest.raises(ae.AutogradError, match="element 0 of tensors does not require grad"):
        drv.backward((x * 2).sum())
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        (torch.ones(2) * 2).sum().backward()
    y = leaf(2)
    with pytest.raises(ae.AutogradError, match="element 1 of tensors does not require grad"):
        drv.backward([y.sum(), x.sum()])
    with pytest.raises(ae.AutogradError, match="does not require grad"):
        drv.grad(x.sum(), y)
    with pytest.raises(ae.AutogradError, match="does not require grad"):
        drv.grad(y.sum(), x)
    with ae.no_grad():
        z = (y * 2).sum()
    with pytest.raises(ae.AutogradError, match="does not require grad"):
        drv.backward(z)


def test_empty_inputs(drv: Driver) -> None:
    x = leaf(2)
    with pytest.raises(ae.AutogradError, match="cannot be empty"):
        drv.backward(x.sum(), inputs=[])
    with pytest.raises(
        ae.AutogradError, match=r"^`inputs` argument to `grad\(\)` cannot be empty\.$"
    ):
        drv.grad(x.sum(), [])


def test_materialize_with_allow_unused_false(drv: Driver) -> None:
    x = leaf(2)
    with pytest.raises(ValueError, match="Expected allow_unused to be True or not passed when"):
        drv.grad(x.sum(), x, allow_unused=False, materialize_grads=True)


def test_bad_argument_types(drv: Driver) -> None:
    x = leaf(2)
    with pytest.raises(TypeError, match="gradients can be either Tensors or None"):
        drv.backward(x * 2, [[1.0, 2.0]])
    with pytest.raises(TypeError, match="grad_tensors must be a Tensor or a sequence"):
        drv.backward(x * 2, 3.0)
    with pytest.raises(TypeError, match="inputs must be Tensors"):
        drv.grad(x.sum(), [x, 3])
    with pytest.raises(TypeError, match="must be a Tensor or a sequence of Tensors"):
        drv.backward(x.sum(), inputs=3)


# ---- an exception raised inside a node -------------------------------------------------------


def test_node_exception_is_wrapped_with_node_name(drv: Driver) -> None:
    x = leaf(3)
    with pytest.raises(ae.BackwardError, match=r"ValueError: something.*BoomBackward") as info:
        drv.backward(boom(x * 2).sum())
    err = info.value
    assert isinstance(err, ae.AutogradError) and isinstance(err, RuntimeError)
    assert isinstance(err.__cause__, ValueError) and str(err.__cause__) == "something"
    assert err.node_name == "BoomBackward" and err.original is err.__cause__
    assert x.grad is None
    # the traceback contains the raising line
    text = "".join(traceback.format_exception(err))
    assert 'raise ValueError("something")  # the line the traceback must show' in text


def test_node_exception_in_grad(drv: Driver) -> None:
    x = leaf(3)
    with pytest.raises(ae.BackwardError, match="BoomBackward") as info:
        drv.grad(boom(x).sum(), x)
    assert isinstance(info.value.__cause__, ValueError)


def test_torch_oracle_reraises_original_message() -> None:
    torch = torch_or_skip()

    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            raise ValueError("something")

    tx = torch.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="something"):
        Boom.apply(tx).sum().backward()
    x = ae.ones(3, requires_grad=True)
    with pytest.raises(ae.BackwardError, match="something"):
        ae.sync.backward(boom(x).sum())


# ---- a failing node stops its graph task -----------------------------------------------------


def test_failing_node_stops_task_and_stages_nothing(drv: Driver) -> None:
    a, b = leaf(3), leaf(3)
    a.grad = ae.ones(3, dtype=ae.float64)
    before = a.grad.numpy().copy()
    log: list[str] = []
    # b's branch runs first (created later), so b's AccumulateGrad is staged
    # before the failing node runs; the commit must still not happen.
    out = boom(a * 2).sum() + logged(b * 3, log).sum()
    with pytest.raises(ae.BackwardError, match="BoomBackward"):
        drv.backward(out)
    assert log == ["LogBackward"]
    assert b.grad is None
    np.testing.assert_array_equal(a.grad.numpy(), before)


def test_nodes_after_the_failure_never_run(drv: Driver) -> None:
    a = leaf(3)
    log: list[str] = []
    out = logged(boom(a * 2), log).sum()  # Log runs, Boom fails, nothing below runs
    below: list[str] = []
    a.register_hook(lambda g: below.append("a"))
    with pytest.raises(ae.BackwardError):
        drv.backward(out)
    assert log == ["LogBackward"] and below == [] and a.grad is None


def test_error_nodes_off_the_executed_path_never_run(drv: Driver) -> None:
    x, y = leaf(3), leaf(3)
    y_safe = y * 1.0
    out = (x * 2).sum() + boom(y * 3).sum() + (y_safe * 2).sum()
    with pytest.raises(ae.BackwardError, match="BoomBackward"):
        drv.backward(out, retain_graph=True)
    with pytest.raises(ae.BackwardError, match="BoomBackward"):
        drv.grad(out, y, retain_graph=True)
    (gx,) = drv.grad(out, x, retain_graph=True)
    np.testing.assert_array_equal(gx.numpy(), np.full(3, 2.0))
    (gs,) = drv.grad(out, y_safe, retain_graph=True)
    np.testing.assert_array_equal(gs.numpy(), np.full(3, 2.0))
    drv.backward(out, inputs=[x])  # boom is not on a path to x
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0))
    assert y.grad is None


def test_engine_usable_after_an_error(drv: Driver) -> None:
    x = leaf(3)
    with pytest.raises(ae.BackwardError):
        drv.backward(boom(x).sum())
    drv.backward((x * 2).sum())
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0))
    assert ae.core._graph_task.current_graph_task() is None


def test_inplace_modified_saved_tensor(drv: Driver) -> None:
    torch = torch_or_skip()
    tx = torch.ones(5, requires_grad=True)
    ty = tx * torch.ones(5)
    tz = (ty * ty).sum()
    ty.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as tinfo:
        tz.backward()
    assert "is at version 1; expected version 0 instead" in str(tinfo.value)
    x = leaf(5)
    y = x * ae.ones(5, dtype=ae.float64)
    z = (y * y).sum()
    own_vc(y)[0] += 1  # what an in-place op does to the version counter
    with pytest.raises(
        ae.AutogradError,
        match=r"modified by an inplace operation: \[float64 tensor \[5\]\], which is output 0 "
        r"of MulBackward0, is at version 1; expected version 0 instead",
    ):
        drv.backward(z)
    assert x.grad is None


def test_freed_graph_message_stays_the_same_on_later_calls(drv: Driver) -> None:
    # A backward that fails on a graph freed by an earlier successful backward
    # freed nothing itself: later calls still get PyTorch's message.
    x = leaf(3)
    y = (x * x).sum()
    drv.backward(y)
    for _ in range(3):
        with pytest.raises(ae.AutogradError, match="Specify retain_graph=True"):
            drv.backward(y)


def test_error_with_nodes_still_queued_exits_without_hanging() -> None:
    # one branch raises the in-place error while a Python node waits in
    # the ready queue; the process must end with the error, not hang.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import aengine as ae

        class Ident(ae.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                return g

        x = ae.ones(5, requires_grad=True)
        y = x * 1.0
        saved = y * y          # saves y
        from aengine.tensors._tensor import own_vc
        own_vc(y)[0] += 1      # as an in-place op would
        waiting = Ident.apply(x * 2)
        ae.sync.backward(saved.sum() + waiting.sum())
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "one of the variables needed for gradient computation" in proc.stderr


# ---- driver misuse -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_sync_backward_inside_a_loop_warns_and_async_hook_cannot_suspend() -> None:
    x = leaf(2)
    with pytest.warns(RuntimeWarning, match=r"blocks the loop.*await ae.backward"):
        ae.sync.backward((x * 2).sum())
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])

    async def slow_hook(g: ae.Tensor) -> None:
        await anyio.sleep(0)

    y = x * 3
    y.register_hook(slow_hook)
    with pytest.warns(RuntimeWarning, match="blocks the loop"):
        with pytest.raises(ae.AutogradError, match="suspended during a synchronous backward"):
            ae.sync.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])  # nothing committed
    await ae.backward((x * 3).sum())  # the awaitable API runs async hooks
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


def test_async_hook_that_does_not_suspend_runs_under_sync() -> None:
    x = leaf(2)
    y = x * 3

    async def quick_hook(g: ae.Tensor) -> ae.Tensor:
        return g * 2

    y.register_hook(quick_hook)
    ae.sync.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("suspends", [False, True])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_from_a_hook_arrives_as_itself(
    backend: str, device: str, suspends: bool, exc_type: type[BaseException]
) -> None:
    """On cpu and on a device node (run by an Engine's worker), under both loops.

    Run in a loop of its own, so that one escaping the loop fails this test
    instead of stopping the test session.
    """
    seen: list[type[BaseException]] = []
    x = leaf(3)

    async def main() -> None:
        y = x.to(device) * 2

        async def hook(g: ae.Tensor) -> None:
            if suspends:
                await anyio.sleep(0)
            raise exc_type("stop")

        y.register_hook(hook)
        async with ae.Engine():
            try:
                await ae.backward(y.sum())
            except BaseException as exc:  # what the awaiting code sees
                seen.append(type(exc))
                raise

    with pytest.raises(exc_type, match="stop"):
        anyio.run(main, backend=backend)
    assert seen == [exc_type]
    assert x.grad is None


# -- Tensor attributes: numpy(), .grad assignment, hooks registered ---------------------------


def test_numpy_of_a_tensor_requiring_grad_works_where_grad_mode_is_off() -> None:
    torch = torch_or_skip()
    for lib in (torch, ae):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        with pytest.raises(
            RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"
        ):
            y.numpy()
        with lib.no_grad():
            assert y.numpy().tolist() == [2.0] * 3 and x.numpy().tolist() == [1.0] * 3
        with lib.inference_mode():
            assert y.numpy().tolist() == [2.0] * 3
        with lib.no_grad():
            v = x[:2]  # requires grad through its base: refused with grad mode on
        with pytest.raises(
            RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"
        ):
            v.numpy()


#: (the value assigned to x.grad for x = ones(3) float64 on cpu, error type, PyTorch's text)
GRAD_ASSIGNMENTS: dict[str, tuple[Callable[[Any, Any], Any], type, str]] = {
    "itself": (lambda lib, x: x, RuntimeError, r"^can't assign Variable as its own grad$"),
    "shape": (
        lambda lib, x: lib.ones(2, dtype=lib.float64),
        RuntimeError,
        r"^attempting to assign a gradient of size '\[2\]' to a tensor of size '\[3\]'\. "
        r"Please ensure that the gradient and the tensor are the same size$",
    ),
    "0-d": (
        lambda lib, x: lib.tensor(1.0, dtype=lib.float64),
        RuntimeError,
        r"^attempting to assign a gradient of size '\[\]' to a tensor of size '\[3\]'",
    ),
    "int": (
        lambda lib, x: 5,
        TypeError,
        r"^assigned grad expected to be a Tensor or None but got grad of type int$",
    ),
    "list": (
        lambda lib, x: [1.0, 2.0, 3.0],
        TypeError,
        r"^assigned grad expected to be a Tensor or None but got grad of type list$",
    ),
    "dtype": (
        lambda lib, x: lib.ones(3, dtype=lib.float32),
        RuntimeError,
        r"^attempting to assign a gradient with dtype '(float|Float)",
    ),
}


@pytest.mark.parametrize("case", list(GRAD_ASSIGNMENTS))
def test_grad_assignment_errors_are_pytorchs(case: str) -> None:
    torch = torch_or_skip()
    value, exc, text = GRAD_ASSIGNMENTS[case]
    t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(exc, match=text):
        t.grad = value(torch, t)
    x = ae.ones(3, dtype=ae.float64, requires_grad=True)
    with pytest.raises(exc, match=text):
        x.grad = value(ae, x)
    assert x.grad is None
    if exc is RuntimeError:
        with pytest.raises(ae.AutogradError):
            x.grad = value(ae, x)


def test_grad_assignment_to_another_device_names_both() -> None:
    x = ae.ones(3, requires_grad=True)
    with pytest.raises(
        ae.AutogradError,
        match=r"attempting to assign a gradient with device type 'sim' to a tensor with device "
        r"type 'cpu'\. Please ensure that the gradient and the tensor are on the same device",
    ):
        x.grad = ae.ones(3, device="sim:0")
    s = ae.ones(3, device="sim:0", requires_grad=True)
    with pytest.raises(
        ae.AutogradError,
        match=r"attempting to assign a gradient located on device with index '1' to a tensor "
        r"located on device with index '0'",
    ):
        s.grad = ae.ones(3, device="sim:1")
    s.grad = ae.ones(3, device="sim:0")
    x.grad = None
    assert s.grad is not None and x.grad is None


@pytest.mark.parametrize("kind", ["grad_fn post", "grad_fn pre", "tensor", "leaf"])
def test_a_non_callable_hook_registers_and_fails_when_the_backward_calls_it(kind: str) -> None:
    """As PyTorch: registration accepts it; the backward raises "'int' object is not callable"."""
    torch = torch_or_skip()
    for lib in (torch, ae):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        target = {
            "grad_fn post": y.grad_fn.register_hook,
            "grad_fn pre": y.grad_fn.register_prehook,
            "tensor": y.register_hook,
            "leaf": x.register_hook,
        }[kind]
        handle = target(5)
        assert hasattr(handle, "remove")
        # PyTorch raises the TypeError itself; aengine wraps it (BackwardError, a
        # RuntimeError) with the TypeError as its cause, as any error in a backward
        with pytest.raises((TypeError, ae.BackwardError), match="'int' object is not callable"):
            if lib is torch:
                y.sum().backward()
            else:
                ae.sync.backward(y.sum())
        assert x.grad is None
    handle.remove()
    ae.sync.backward(y.sum())  # removed: the backward runs
    assert x.grad is not None
