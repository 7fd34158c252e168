"""The helpers of ``ae.functional``'s generator definitions (torch.autograd.functional's).

Checking and preparing the inputs and ``v``, the engine call over the
outputs that require grad, zeros for the inputs an output does not depend
on, restoring the caller's tuple structure, and the forward-mode runs of
``jvp``, ``hvp`` and ``jacobian(strategy="forward-mode")``; the error texts
are torch's.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from .._autograd import _grad
from ..core import AutogradError, GraphTask
from ..core._modes import set_grad_enabled
from ..ops._forward import ForwardUnsupported
from ..tensors import Tensor, _dual, zeros_like

Gen = Generator[GraphTask, None, Any]


# -- helpers (torch.autograd.functional's, with the same error texts) ----------------------
def _as_tuple(inp: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple[Tensor, ...]]:
    is_tuple = isinstance(inp, (tuple, list))
    items = tuple(inp) if is_tuple else (inp,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but {where} has type {type(el).__name__}."
            )
    return is_tuple, items


def _tuple_postprocess(res: Any, to_unpack: Any) -> Any:
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(
    inputs: tuple[Tensor, ...], create_graph: bool, need_graph: bool
) -> tuple[Tensor, ...]:
    """Fresh leaves (or, under create_graph, differentiable aliases) of ``inputs``."""
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs: Any, create_graph: bool) -> Any:
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _outputs_and_result(
    outs: Any, res: Any, create_graph: bool, outs_tuple: bool, res_tuple: bool
) -> tuple[Any, Any]:
    """``(outputs, result)`` as the user gets them: detached unless ``create_graph``, each
    a single Tensor or a tuple as its function or inputs were."""
    outs = _tuple_postprocess(_grad_postprocess(outs, create_graph), outs_tuple)
    return outs, _tuple_postprocess(_grad_postprocess(res, create_graph), res_tuple)


def _check_single_element(outs: tuple[Any, ...], is_outputs_tuple: bool, name: str) -> None:
    """vhp's and hvp's function must return one Tensor of one element (torch's errors)."""
    if is_outputs_tuple or not isinstance(outs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outs[0].data.size != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element"
        )


def _validate_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other, strict=True)):
        if el_v.shape != el_other.shape:
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {tuple(el_other.shape)} but got "
                f"{tuple(el_v.shape)}."
            )


_STRICT_MSG = {
    "hessian": (
        "The hessian of the user-provided function with respect to input {i} is independent "
        "of the input. This is not allowed in strict mode. You should ensure that your "
        "function is thrice differentiable and that the hessian depends on the inputs."
    ),
    "jacobian": (
        "While computing the hessian, found that the jacobian of the user-provided function "
        "with respect to input {i} is independent of the input. This is not allowed in "
        "strict mode. You should ensure that your function is twice differentiable and that "
        "the jacobian depends on the inputs (this would be violated by a linear function for "
        "example)."
    ),
    "grad_inputs": (
        "The gradient with respect to input {i} is independent of the inputs of the "
        "user-provided function. This is not allowed in strict mode."
    ),
    "outputs": (
        "Output {i} of the user-provided function does not require gradients. The outputs "
        "must be computed in a differentiable manner from the input when running in strict "
        "mode."
    ),
}


def _check_requires_grad(inputs: Sequence[Any], input_type: str, strict: bool) -> None:
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise AutogradError(
                f"The output of the user-provided function is independent of input {i}. "
                "This is not allowed in strict mode."
            )
        if not inp.requires_grad:
            raise AutogradError(_STRICT_MSG[input_type].format(i=i))


def _autograd_grad(
    outputs: Sequence[Any],
    inputs: Sequence[Tensor],
    grad_outputs: Sequence[Any] | None = None,
    create_graph: bool = False,
    retain_graph: bool | None = None,
) -> Gen:
    """grad() over the outputs that require grad; all None when none does."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs = []
    new_grad_outputs = []
    for out, g in zip(outputs, grad_outputs, strict=True):
        if out is not None and out.requires_grad:
            new_outputs.append(out)
            new_grad_outputs.append(g)
    if not new_outputs:
        return (None,) * len(inputs)
    return (
        yield from _grad(
            new_outputs,
            list(inputs),
            new_grad_outputs,
            retain_graph=retain_graph,
            create_graph=create_graph,
            allow_unused=True,
        )
    )


_FILL_MSG = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
    "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
    "grad_outputs when using the double backward trick to compute forward mode gradients. "
    "This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
    "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
    "{i} in the grad_jacobian. This is not allowed in strict mode as it prevents from using "
    "the double backward trick to replace forward mode AD.",
}


def _fill_in_zeros(
    grads: Sequence[Any], refs: Sequence[Tensor], strict: bool, create_graph: bool, stage: str
) -> tuple[Tensor, ...]:
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise AutogradError(_FILL_MSG[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise AutogradError(
                f"The {what} of the user-provided function is independent of input {i}. "
                "This is not allowed in strict mode when create_graph=True."
            )
        res.append(g)
    return tuple(res)


class _GenFunc:
    """A function of ae.functional's own that needs the engine (hessian's inner jacobian)."""

    def __init__(self, fn: Callable[..., Gen]) -> None:
        self.fn = fn


def _call(func: Any, inputs: tuple[Tensor, ...]) -> Gen:
    if isinstance(func, _GenFunc):
        return (yield from func.fn(*inputs))
    return func(*inputs)


def _prep_v(
    v: Any, others: tuple[Tensor, ...], is_tuple: bool, create_graph: bool, name: str, what: str
) -> Any:
    if v is not None:
        _, vt = _as_tuple(v, "v", name)
        vt = _grad_preprocess(vt, create_graph=create_graph, need_graph=False)
        _validate_v(vt, others, is_tuple)
        return vt
    if len(others) != 1 or others[0].data.size != 1:
        raise RuntimeError(f"The vector v can only be None if {what} with a single element.")
    return None


def _dual_call(
    func: Callable[..., Any], ins: tuple[Tensor, ...], vs: Any, record: bool, name: str
) -> tuple[Any, tuple[Tensor, ...], list[Any]] | None:
    """``func`` on ``ins`` carrying tangents ``vs``: (outputs, as a tuple, their tangents).

    None where forward mode cannot run (NOTE [Forward-mode by double backward] in
    functional.py).
    ``record``: grad mode on (the tangents' graph is recorded, for create_graph
    and hvp); off, nothing is recorded.
    """
    if _dual.LEVEL is not None:
        return None
    _dual.enter_level()
    try:
        for x, t in zip(ins, vs):
            _dual.set_tangent(x, t)
        try:
            with set_grad_enabled(record):
                outputs = func(*ins)
        except ForwardUnsupported:
            return None
        _, outs = _as_tuple(outputs, "outputs of the user-provided function", name)
        tangents = [o._fw for o in outs]
    finally:
        _dual.exit_level()
    return outputs, outs, tangents


def _inputs_and_v(
    inputs: Any, v: Any, create_graph: bool, need_graph: bool, name: str
) -> tuple[bool, tuple[Tensor, ...], Any]:
    """Whether ``inputs`` is a tuple, the inputs prepared, and ``v`` checked against them."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", name)
    ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=need_graph)
    vt = _prep_v(
        v, ins, is_inputs_tuple, create_graph, name,
        "the input to the user-provided function is a single Tensor",
    )  # fmt: skip
    return is_inputs_tuple, ins, vt


def _dual_run(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, record: bool, who: str
) -> tuple[bool, tuple[Any, ...], Any, Any, Any] | None:
    """``func`` run on dual inputs with tangents ``v`` (ones by default), for ``jvp`` and ``hvp``.

    ``record``: whether the inputs and the forward record a graph (``jvp``
    with create_graph; ``hvp`` always: it differentiates the tangents).
    Returns whether the inputs were a tuple, the inputs, and what
    ``_dual_call`` returns; None where forward mode cannot run.
    """
    is_inputs_tuple, ins, vt = _inputs_and_v(inputs, v, create_graph, record, who)
    if vt is None:
        vt = tuple(zeros_like(x) + 1 for x in ins)
    run = _dual_call(func, ins, vt, record, who)
    if run is None:
        return None
    return (is_inputs_tuple, ins, *run)
