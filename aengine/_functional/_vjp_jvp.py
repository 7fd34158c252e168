"""``vjp`` and ``jvp`` of ``ae.functional``: their generator definitions."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..core import GraphTask
from ..core._modes import enable_grad, is_grad_enabled, set_grad_enabled
from ..tensors import zeros_like
from ._common import (
    _as_tuple,
    _autograd_grad,
    _call,
    _check_requires_grad,
    _dual_run,
    _fill_in_zeros,
    _GenFunc,
    _grad_preprocess,
    _inputs_and_v,
    _outputs_and_result,
    _prep_v,
)


def _vjp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Generator[GraphTask, None, tuple[Any, Any]]:
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=True)
        outputs = yield from _call(func, ins)
        is_outputs_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_requires_grad(outs, "outputs", strict=strict)
        vt = _prep_v(
            v, outs, is_outputs_tuple, create_graph, "vjp",
            "the user-provided function returns a single Tensor",
        )  # fmt: skip
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = yield from _autograd_grad(outs, ins, vt, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, ins, strict, create_graph, "back")
    return _outputs_and_result(outs, res, create_graph, is_outputs_tuple, is_inputs_tuple)


def _jvp_forward(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool
) -> tuple[Any, Any] | None:
    """``jvp`` by forward mode; None where it cannot run.

    NOTE [Forward-mode by double backward] in functional.py.
    """
    if isinstance(func, _GenFunc):
        return None
    run = _dual_run(func, inputs, v, create_graph, create_graph, "jvp")
    if run is None:
        return None
    _, _, outputs, outs, tangents = run
    is_outputs_tuple = isinstance(outputs, (tuple, list))
    res = tuple(t if t is not None else zeros_like(o) for o, t in zip(outs, tangents))
    return _outputs_and_result(outs, res, create_graph, is_outputs_tuple, is_outputs_tuple)


def _jvp(
    func: Callable[..., Any],
    inputs: Any,
    v: Any = None,
    create_graph: bool = False,
    strict: bool = False,
) -> Generator[GraphTask, None, tuple[Any, Any]]:
    if not (strict or create_graph):
        fwd = _jvp_forward(func, inputs, v, create_graph)
        if fwd is not None:
            return fwd
    with enable_grad():
        _, ins, vt = _inputs_and_v(inputs, v, create_graph, True, "jvp")
        outputs = yield from _call(func, ins)
        is_outputs_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_requires_grad(outs, "outputs", strict=strict)
        # NOTE [Forward-mode by double backward] in functional.py
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outs)
        grad_inputs = yield from _autograd_grad(outs, ins, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = yield from _autograd_grad(
            grad_inputs, grad_outputs, vt, create_graph=create_graph
        )
        res = _fill_in_zeros(grad_res, outs, strict, create_graph, "back_trick")
    return _outputs_and_result(outs, res, create_graph, is_outputs_tuple, is_outputs_tuple)
