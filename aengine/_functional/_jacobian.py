"""``jacobian`` and ``hessian`` of ``ae.functional``: their generator definitions."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..core import AutogradError, GraphTask
from ..core._modes import enable_grad
from ..ops import stack
from ..tensors import Tensor, zeros_like
from ._common import (
    Gen,
    _as_tuple,
    _autograd_grad,
    _call,
    _check_requires_grad,
    _dual_call,
    _GenFunc,
    _grad_postprocess,
    _grad_preprocess,
    _tuple_postprocess,
)
from ._hvp import _hvp


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
    if False:  # (a generator: the signature of ae.functional's)
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
