"""Higher-level differentiation: vjp, jvp, jacobian, hessian, vhp, hvp.

The same functions as ``torch.autograd.functional``, with the same
parameters, results and errors (RuntimeError for misuse, as PyTorch's).
``ae.functional.<name>`` returns an awaitable (``await
ae.functional.jacobian(f, x)``; called where no event loop runs it raises
AutogradError naming its twin); ``ae.sync.functional.<name>`` is its
synchronous twin.  Both come from one
generator definition per function that ``yield from``\\ s the engine's
``_grad`` for every backward it needs (NOTE [One definition, two drivers] in
_autograd.py), so a Jacobian of an ``n``-element output is ``n`` engine calls
sharing one retained graph.

``func`` is a plain (sync) function of Tensors returning a Tensor or a tuple
of Tensors; ``inputs`` a Tensor or a tuple of Tensors.  Results mirror the
structure: a single Tensor in, a single Tensor out; a tuple in, a tuple out
(the Jacobian of a tuple-valued function of a tuple is a tuple of tuples,
``J[i][j]`` of shape ``outputs[i].shape + inputs[j].shape``).  Unless
``create_graph=True`` the results are detached.

Example::

    >>> import aengine as ae
    >>> x = ae.tensor([1.0, 2.0])
    >>> ae.sync.functional.jacobian(lambda t: t * t, x).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    >>> out, vjp = ae.sync.functional.vjp(lambda t: (t ** 3).sum(), x)
    >>> vjp.tolist()
    [3.0, 12.0]

# NOTE [Forward-mode by double backward]
# ``jvp`` runs forward-mode AD (NOTE [Forward-mode AD] in tensors/_dual.py):
# one forward that carries the tangents, no engine call.  ``hvp`` is reverse
# over forward: the forward carries ``v`` and records the tangent's graph,
# one backward of the tangent gives ``H v``.  ``jacobian(strategy=
# "forward-mode")`` is one forward per input element.  Where forward mode
# cannot run (an op without a JVP rule, a dual level already open: one level
# at a time), they fall back to the double-backward trick, as
# torch.autograd.functional computes them: with ``u`` a zero Tensor that
# requires grad, ``g(u) = J^T u`` is linear in ``u`` and built with
# create_graph, so ``d<g(u), v>/du = J v``.  Every operator's rule is written
# once for arrays and Tensors (NOTE [Operator rules]), so that works for all
# of them.  ``strict=True`` and ``create_graph=True`` take that path too (their
# checks and which results require grad are the double backward's, as torch's).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Generator, Sequence
from typing import Any

from ._autograd import _grad, _twins
from .core import AutogradError, GraphTask
from .core._modes import enable_grad, is_grad_enabled, set_grad_enabled
from .ops import stack
from .ops._forward import ForwardUnsupported
from .tensors import Tensor, _dual, zeros_like

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

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
    """A function of the module's own that needs the engine (hessian's inner jacobian)."""

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


# -- the functions (generator definitions) ----------------------------------------------------
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
    outs = _grad_postprocess(outs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_inputs_tuple)


def _dual_call(
    func: Callable[..., Any], ins: tuple[Tensor, ...], vs: Any, record: bool, name: str
) -> tuple[Any, tuple[Tensor, ...], list[Any]] | None:
    """``func`` on ``ins`` carrying tangents ``vs``: (outputs, as a tuple, their tangents).

    None where forward mode cannot run (NOTE [Forward-mode by double backward]).
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


def _jvp_forward(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool
) -> tuple[Any, Any] | None:
    """``jvp`` by forward mode; None where it cannot run (NOTE [Forward-mode by double backward])."""
    if isinstance(func, _GenFunc):
        return None
    run = _dual_run(func, inputs, v, create_graph, create_graph, "jvp")
    if run is None:
        return None
    _, _, outputs, outs, tangents = run
    is_outputs_tuple = isinstance(outputs, (tuple, list))
    res = tuple(t if t is not None else zeros_like(o) for o, t in zip(outs, tangents))
    outs = _grad_postprocess(outs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_outputs_tuple)


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
        # NOTE [Forward-mode by double backward]
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outs)
        grad_inputs = yield from _autograd_grad(outs, ins, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = yield from _autograd_grad(
            grad_inputs, grad_outputs, vt, create_graph=create_graph
        )
        res = _fill_in_zeros(grad_res, outs, strict, create_graph, "back_trick")
    outs = _grad_postprocess(outs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_outputs_tuple)


def _one_hot(out: Tensor, j: int) -> Tensor:
    xp = out._device.backend.xp
    e = xp.zeros(out.data.size, dtype=out.data.dtype)
    e[j] = 1
    return Tensor._make(e.reshape(out.data.shape), False, out._device)


def _assemble(rows: list[Any], out: Tensor, inp: Tensor, create_graph: bool) -> Tensor:
    """Stack the rows d out.flat[k] / d inp into a Tensor of shape out.shape + inp.shape."""
    shape = tuple(out.data.shape) + tuple(inp.data.shape)
    if not create_graph:
        xp = inp._device.backend.xp
        arr = xp.stack([r.data for r in rows]) if rows else xp.zeros((0,), inp.data.dtype)
        return Tensor._make(arr.reshape(shape), False, inp._device)
    return stack(rows).reshape(shape)


def _jacobian(
    func: Callable[..., Any] | _GenFunc,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Gen:
    _check_jacobian_options(strategy, vectorize, strict)
    if strategy == "forward-mode":
        if not vectorize:  # NotImplementedError, as torch's
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                "implemented for `vectorize=True`."
            )
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian does not support `create_graph=True` with "
                '`strategy="forward-mode"`'
            )
        return (yield from _jacobian_forward(func, inputs))
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        ins = _grad_preprocess(ins, create_graph=create_graph, need_graph=True)
        outputs = yield from _call(func, ins)
        is_outputs_tuple, outs = _as_tuple(
            outputs, "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outs, "outputs", strict=strict)
        jac: list[tuple[Tensor, ...]] = []
        for i, out in enumerate(outs):
            rows = yield from _jacobian_rows(i, out, ins, create_graph, strict)
            jac.append(
                tuple(_assemble(rows[k], out, inp, create_graph) for k, inp in enumerate(ins))
            )
    res = _grad_postprocess(tuple(jac), create_graph)
    return _tuple_postprocess(res, (is_outputs_tuple, is_inputs_tuple))


def _check_jacobian_options(strategy: str, vectorize: bool, strict: bool) -> None:
    """``jacobian``'s strategy, and the options that go together (torch's errors)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more '
            f'performant. Otherwise, prefer to use "reverse-mode". Got {strategy!r}'
        )
    if vectorize and strict:
        raise RuntimeError(
            "ae.functional.jacobian: `strict=True` and `vectorize=True` are not supported "
            "together. Please either set `strict=False` or `vectorize=False`."
        )


def _jacobian_rows(
    i: int, out: Tensor, ins: tuple[Tensor, ...], create_graph: bool, strict: bool
) -> Generator[GraphTask, None, list[list[Any]]]:
    """Output ``i``'s Jacobian rows per input: one backward per element of ``out``."""
    rows: list[list[Any]] = [[] for _ in ins]
    for j in range(out.data.size):
        vj = yield from _autograd_grad(
            (out,), ins, (_one_hot(out, j),), retain_graph=True, create_graph=create_graph
        )
        for k, (vj_el, inp_el) in enumerate(zip(vj, ins, strict=True)):
            if vj_el is not None:
                if strict and create_graph and not vj_el.requires_grad:
                    raise AutogradError(
                        "The jacobian of the user-provided function is independent of "
                        f"input {i}. This is not allowed in strict mode when "
                        "create_graph=True."
                    )
                rows[k].append(vj_el)
            else:
                if strict:
                    raise AutogradError(
                        f"Output {i} of the user-provided function is independent of "
                        f"input {k}. This is not allowed in strict mode."
                    )
                rows[k].append(zeros_like(inp_el))
    return rows


def _jacobian_forward(func: Callable[..., Any] | _GenFunc, inputs: Any) -> Gen:
    """The Jacobian column by column: one forward-mode pass per input element."""
    if isinstance(func, _GenFunc):
        raise NotImplementedError(
            'jacobian(strategy="forward-mode") of a reverse-mode gradient (forward over '
            "reverse) is not implemented; use strategy='reverse-mode'"
        )
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
    ins = tuple(x.detach() for x in ins)
    cols: list[list[list[Tensor]]] | None = None  # [output][input][column]
    is_outputs_tuple = False
    outs: tuple[Tensor, ...] = ()
    for k, x in enumerate(ins):
        for j in range(x.data.size):
            vs = tuple(_one_hot(y, j) if i == k else zeros_like(y) for i, y in enumerate(ins))
            run = _dual_call(func, tuple(y.detach() for y in ins), vs, False, "jacobian")
            if run is None:
                raise RuntimeError(
                    'jacobian(strategy="forward-mode"): forward mode cannot run here (an op '
                    "without a JVP rule, or a dual level already open); use "
                    'strategy="reverse-mode"'
                )
            outputs, outs, tangents = run
            is_outputs_tuple = isinstance(outputs, (tuple, list))
            if cols is None:
                cols = [[[] for _ in ins] for _ in outs]
            for i, (o, t) in enumerate(zip(outs, tangents)):
                cols[i][k].append(t.detach() if t is not None else zeros_like(o))
    if False:  # (a generator: the signature of the module's functions)
        yield
    jac = []
    for i, out in enumerate(outs):
        row = []
        for k, x in enumerate(ins):
            shape = tuple(out.data.shape) + tuple(x.data.shape)
            if cols is None or not cols[i][k]:
                row.append(zeros_like(x).reshape(shape) if x.data.size else _empty(shape, x))
                continue
            xp = x._device.backend.xp
            arr = xp.stack([c.data for c in cols[i][k]], axis=-1)
            row.append(Tensor._make(arr.reshape(shape), False, x._device))
        jac.append(tuple(row))
    return _tuple_postprocess(tuple(jac), (is_outputs_tuple, is_inputs_tuple))


def _empty(shape: tuple[int, ...], like: Tensor) -> Tensor:
    xp = like._device.backend.xp
    return Tensor._make(xp.zeros(shape, dtype=like.data.dtype), False, like._device)


def _hessian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Gen:
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "hessian")

    def ensure_single_output_function(*inp: Tensor) -> Tensor:
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.data.size != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element"
            )
        return out.squeeze()

    if outer_jacobian_strategy == "forward-mode" and vectorize and not create_graph:
        # forward over reverse, as H v columns (reverse over forward: H is symmetric)
        cols = []
        for k, x in enumerate(ins):
            for j in range(x.data.size):
                vs = tuple(_one_hot(y, j) if i == k else zeros_like(y) for i, y in enumerate(ins))
                _, hv = yield from _hvp(ensure_single_output_function, ins, vs, strict=strict)
                cols.append(hv)
        return _hessian_from_columns(cols, ins, is_inputs_tuple)

    def jac_func(*inp: Tensor) -> Gen:
        jac = yield from _jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = yield from _jacobian(
        _GenFunc(jac_func),
        ins,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _hessian_from_columns(cols: list[Any], ins: tuple[Tensor, ...], is_inputs_tuple: bool) -> Any:
    """``H[i][k]`` from the columns ``H v`` (one per element of every input, in order)."""
    hv = [c if isinstance(c, tuple) else (c,) for c in cols]
    res = []
    start = 0
    bounds = []
    for x in ins:
        bounds.append((start, start + x.data.size))
        start += x.data.size
    for i, xi in enumerate(ins):
        row = []
        for k, xk in enumerate(ins):
            a, b = bounds[k]
            xp = xi._device.backend.xp
            shape = tuple(xi.data.shape) + tuple(xk.data.shape)
            if a == b:
                arr = xp.zeros(shape, dtype=xi.data.dtype)
            else:
                arr = xp.stack([hv[c][i].data for c in range(a, b)], axis=-1).reshape(shape)
            row.append(Tensor._make(arr, False, xi._device))
        res.append(tuple(row))
    return _tuple_postprocess(tuple(res), (is_inputs_tuple, is_inputs_tuple))


def _scalar_fn_setup(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool, name: str
) -> Gen:
    """Shared start of vhp/hvp: preprocess, evaluate, check, first-order gradient."""
    is_inputs_tuple, ins, vt = _inputs_and_v(inputs, v, create_graph, True, name)
    outputs = yield from _call(func, ins)
    is_outputs_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outs[0].data.size != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {name} should contain a single element"
        )
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
    outs = _grad_postprocess(outs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_inputs_tuple)


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
    if is_outputs_tuple or not isinstance(outs[0], Tensor):
        raise RuntimeError("The function given to hvp should return a single Tensor")
    if outs[0].data.size != 1:
        raise RuntimeError(
            "The Tensor returned by the function given to hvp should contain a single element"
        )
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grads = yield from _autograd_grad(tangents, ins, create_graph=create_graph)
        res = _fill_in_zeros(grads, ins, False, create_graph, "double_back_trick")
    outs = _grad_postprocess(outs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_inputs_tuple)


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
        # NOTE [Forward-mode by double backward]: H v = d<H^T u, v>/du
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in ins)
        double_back = yield from _autograd_grad(jac, ins, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = yield from _autograd_grad(double_back, grad_jac, vt, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, ins, strict, create_graph, "double_back_trick")
    outs = _grad_postprocess(outs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_inputs_tuple)


# -- the async functions and their sync twins ----------------------------------------------------
vjp, _sync_vjp = _twins(_vjp)
jvp, _sync_jvp = _twins(_jvp)
jacobian, _sync_jacobian = _twins(_jacobian)
hessian, _sync_hessian = _twins(_hessian)
vhp, _sync_vhp = _twins(_vhp)
hvp, _sync_hvp = _twins(_hvp)

vjp.__doc__ = """Return ``(func(*inputs), v^T J)``: a vector-Jacobian product.

    ``v`` has the shape of the output(s) (optional for a single-element
    output); the product has the shape of the inputs.  ``strict=True`` raises
    when an output does not depend on an input (instead of returning zeros);
    ``create_graph=True`` makes both results differentiable.

    Example::

        >>> import aengine as ae, anyio
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, g = anyio.run(ae.functional.vjp, lambda t: t * t, x, ae.ones(2))
        >>> g.tolist()
        [2.0, 4.0]
"""
jvp.__doc__ = """Return ``(func(*inputs), J v)``: a Jacobian-vector product.

    ``v`` has the shape of the input(s) (optional for a single-element
    input); the product has the shape of the outputs.  Computed by
    forward-mode AD: one forward carrying the tangents, no backward (the
    double-backward trick of torch.autograd.functional where an op has no
    JVP rule, inside an open dual level, with ``strict=True`` or
    ``create_graph=True``).

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, jv = ae.sync.functional.jvp(lambda t: t * t, x, ae.ones(2))
        >>> jv.tolist()
        [2.0, 4.0]
"""
jacobian.__doc__ = """Return the Jacobian of ``func`` at ``inputs``.

    For one input and one output a Tensor of shape ``output.shape +
    input.shape``; a tuple per tuple level otherwise (``J[i][j]`` for output i
    and input j).  Reverse mode: one engine call per output element, on one
    retained graph.  ``strategy="forward-mode"`` (with ``vectorize=True``,
    as torch requires) computes it by columns: one forward-mode pass per
    input element, better where outputs outnumber inputs.  ``vectorize=True``
    gives the same result by the same per-row (per-column) computation
    (nothing batches the rows yet); as in torch it cannot be combined with
    ``strict=True``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> ae.sync.functional.jacobian(lambda t: t.sum() * t, x).tolist()
        [[4.0, 1.0], [2.0, 5.0]]
"""
hessian.__doc__ = """Return the Hessian of the scalar function ``func`` at ``inputs``.

    A Tensor of shape ``input.shape + input.shape`` for one input; for a tuple
    of inputs a tuple of tuples ``H[i][j]``.  Computed as the Jacobian of the
    (differentiable) Jacobian.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> ae.sync.functional.hessian(lambda t: (t ** 3).sum(), x).tolist()
        [[6.0, 0.0], [0.0, 12.0]]
"""
vhp.__doc__ = """Return ``(func(*inputs), v^T H)`` for a scalar function ``func``.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, r = ae.sync.functional.vhp(lambda t: (t ** 3).sum(), x, ae.ones(2))
        >>> r.tolist()
        [6.0, 12.0]
"""
hvp.__doc__ = """Return ``(func(*inputs), H v)`` for a scalar function ``func``.

    Reverse over forward: one forward carrying ``v`` (forward-mode AD) and
    one backward of the tangent (the double-backward trick, three engine
    calls, where forward mode cannot run, with ``strict=True`` or
    ``create_graph=True``); equal to
    ``vhp`` for functions with a symmetric Hessian.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor([1.0, 2.0])
        >>> out, r = ae.sync.functional.hvp(lambda t: (t ** 3).sum(), x, ae.ones(2))
        >>> r.tolist()
        [6.0, 12.0]
"""
for _a, _s in (
    (vjp, _sync_vjp),
    (jvp, _sync_jvp),
    (jacobian, _sync_jacobian),
    (hessian, _sync_hessian),
    (vhp, _sync_vhp),
    (hvp, _sync_hvp),
):
    _s.__doc__ = _a.__doc__
    _a.__module__ = "aengine.functional"
    _s.__module__ = "aengine.sync.functional"

#: ``ae.sync.functional``: the synchronous twins (same names and parameters).
sync_functional = types.ModuleType(
    "aengine.sync.functional",
    "Synchronous twins of ae.functional: vjp, jvp, jacobian, hessian, vhp, hvp.",
)
sync_functional.vjp = _sync_vjp  # type: ignore[attr-defined]
sync_functional.jvp = _sync_jvp  # type: ignore[attr-defined]
sync_functional.jacobian = _sync_jacobian  # type: ignore[attr-defined]
sync_functional.hessian = _sync_hessian  # type: ignore[attr-defined]
sync_functional.vhp = _sync_vhp  # type: ignore[attr-defined]
sync_functional.hvp = _sync_hvp  # type: ignore[attr-defined]
sync_functional.__all__ = list(__all__)  # type: ignore[attr-defined]
sys.modules["aengine.sync.functional"] = sync_functional
