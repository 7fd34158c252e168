"""``vhp`` and ``hvp`` of ``ae.functional``: their generator definitions."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..core import GraphTask
from ..core._modes import enable_grad, is_grad_enabled, set_grad_enabled
from ..tensors import zeros_like
from ._common import (
    Gen,
    _as_tuple,
    _autograd_grad,
    _call,
    _check_requires_grad,
    _check_single_element,
    _dual_run,
    _fill_in_zeros,
    _GenFunc,
    _inputs_and_v,
    _outputs_and_result,
)


def _scalar_fn_setup(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool, name: str
) -> Gen:
    """Shared start of vhp/hvp: preprocess, evaluate, check, first-order gradient."""
    is_inputs_tuple, ins, vt = _inputs_and_v(inputs, v, create_graph, True, name)
    outputs = yield from _call(func, ins)
    is_outputs_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outs, "outputs", strict=strict)
    _check_single_element(outs, is_outputs_tuple, name)
    jac = yield from _autograd_grad(outs, ins, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, ins, vt, is_outputs_tuple, outs, jac


def _vhp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Generator[GraphTask, None, tuple[Any, Any]]:
    with enable_grad():
        setup = yield from _scalar_fn_setup(func, inputs, v, create_graph, strict, "vhp")
        is_inputs_tuple, ins, vt, is_outputs_tuple, outs, jac = setup
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = yield from _autograd_grad(jac, ins, vt, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, ins, strict, create_graph, "double_back")
    return _outputs_and_result(outs, res, create_graph, is_outputs_tuple, is_inputs_tuple)


def _hvp_forward(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool
) -> Generator[GraphTask, None, tuple[Any, Any] | None]:
    """``H v`` as the gradient of the forward-mode ``<grad f, v>`` (reverse over forward)."""
    if isinstance(func, _GenFunc):
        return None
    run = _dual_run(func, inputs, v, create_graph, True, "hvp")
    if run is None:
        return None
    is_inputs_tuple, ins, outputs, outs, tangents = run
    is_outputs_tuple = isinstance(outputs, (tuple, list))
    _check_single_element(outs, is_outputs_tuple, "hvp")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grads = yield from _autograd_grad(tangents, ins, create_graph=create_graph)
        res = _fill_in_zeros(grads, ins, False, create_graph, "double_back_trick")
    return _outputs_and_result(outs, res, create_graph, is_outputs_tuple, is_inputs_tuple)


def _hvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Generator[GraphTask, None, tuple[Any, Any]]:
    if not (strict or create_graph):
        fwd = yield from _hvp_forward(func, inputs, v, create_graph)
        if fwd is not None:
            return fwd
    with enable_grad():
        setup = yield from _scalar_fn_setup(func, inputs, v, create_graph, strict, "hvp")
        is_inputs_tuple, ins, vt, is_outputs_tuple, outs, jac = setup
        # NOTE [Forward-mode by double backward] in functional.py: H v = d<H^T u, v>/du
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in ins)
        double_back = yield from _autograd_grad(jac, ins, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = yield from _autograd_grad(double_back, grad_jac, vt, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, ins, strict, create_graph, "double_back_trick")
    return _outputs_and_result(outs, res, create_graph, is_outputs_tuple, is_inputs_tuple)
