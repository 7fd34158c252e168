"""``backward`` and ``grad``: defined once, run by the async or the sync driver.

# NOTE [One definition, two drivers]
# ``_backward`` and ``_grad`` are generator functions: they validate the
# arguments, build a GraphTask, ``yield`` it for a driver to execute, and
# compute the result afterwards.  ``_twins`` turns each into the function
# exported as ``ae.backward`` / ``ae.grad``, which returns an awaitable
# (NOTE [The awaitable of an entry point] in _awaitables.py), and the plain function exported
# as ``ae.sync.backward`` / ``ae.sync.grad``, with the same parameters and
# results.  The generator is made when the entry point is called (argument
# binding errors come at once) and does nothing until a driver runs it.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from typing import Any

from ._awaitables import _DONE, _AeBackwardCall, _BackwardCall, _Call, _new_call
from .core import AutogradError, GraphTask, Node, current_graph_task, gradient_edge, to_tensor
from .core._edge import GradientEdge
from .core._modes import _anomaly
from .ops import ones_like, zeros_like
from .runtime import drive_async_entry, drive_sync_entry, loop_here
from .tensors import CPU as _CPU
from .tensors import Tensor

__all__ = ["backward", "grad", "sync_backward", "sync_grad", "queue_callback"]

TensorOrTensors = Tensor | Sequence[Tensor]

#: warned by every ``backward(create_graph=True)``, as PyTorch does (grad() does not)
WARNING_CREATE_GRAPH = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "ae.grad() when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break "
    "the cycle and avoid the leak."
)


def _as_tuple(x: Any, what: str) -> tuple[Any, ...]:
    if isinstance(x, Tensor):
        return (x,)
    if x is None:
        return ()
    if isinstance(x, (list, tuple)) and not isinstance(x, Node):  # (a node is a list)
        return tuple(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _requires_grad(t: Tensor) -> bool:
    """``t._rg``, after refreshing a view that may be stale.

    A view made before an in-place op gave its base a history reads
    ``_rg`` False until its grad_fn is rebuilt (NOTE [Views and CopySlices]);
    reading ``grad_fn`` rebuilds it.
    """
    return t._rg or (t._view_meta is not None and t.grad_fn is not None)


def _roots(
    outputs: tuple[Any, ...], grads: tuple[Any, ...], create_graph: bool
) -> tuple[list[Any], list[Any]]:
    """The root edges and their initial gradients, validated or made (PyTorch's _make_grads)."""
    result: list[Any] = []
    for i, (out, g) in enumerate(zip(outputs, grads, strict=True)):
        if out.__class__ is GradientEdge:  # a backward from an edge: its gradient is given
            result.append(_edge_grad(i, g, create_graph))
            continue
        if not isinstance(out, Tensor):
            raise TypeError(f"outputs must be Tensors, got {type(out).__name__} at position {i}")
        if g is not None:
            result.append(_given_grad(i, out, g, create_graph))
        elif not (out._rg or _requires_grad(out)):
            result.append(None)
        elif out.data.size != 1:
            raise AutogradError(
                "grad can be implicitly created only for scalar outputs; "
                f"output {i} has shape {tuple(out.data.shape)}: pass grad_tensors / "
                "grad_outputs, or reduce the output to a scalar (e.g. .sum())"
            )
        elif out.data.dtype.kind == "c":
            raise AutogradError("grad can be implicitly created only for real scalar outputs")
        elif create_graph:
            result.append(ones_like(out))
        else:  # a raw 1 (np.array is much cheaper than np.ones)
            dev = out._device
            one = (dev._backend or dev.backend).xp.array(1, dtype=out.data.dtype)
            result.append(one.reshape(out.data.shape) if out.data.ndim else one)
    edges: list[Any] = []
    for i, out in enumerate(outputs):
        if out.__class__ is GradientEdge:
            edges.append((out.node, out.output_nr))
            continue
        if not (out._rg or _requires_grad(out)):
            raise AutogradError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        edges.append(gradient_edge(out))
    return edges, result


def _edge_grad(i: int, g: Any, create_graph: bool) -> Any:
    """The gradient given for output ``i``, a GradientEdge (it cannot be made: no shape)."""
    if g is None:
        raise AutogradError(
            f"grad can be implicitly created only for scalar outputs; output {i} is a "
            "GradientEdge: pass its gradient in grad_outputs"
        )
    if not isinstance(g, Tensor):
        raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    return g if create_graph else g.data


def _given_grad(i: int, out: Tensor, g: Any, create_graph: bool) -> Any:
    """The initial gradient ``g`` given for output ``i``, checked (and cast) as PyTorch does."""
    if not isinstance(g, Tensor):
        raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
    if g.data.shape != out.data.shape:
        raise AutogradError(
            f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(g.data.shape)} "
            f"and output[{i}] has a shape of {tuple(out.data.shape)}."
        )
    if (g.data.dtype.kind == "c") != (out.data.dtype.kind == "c"):
        # other dtypes (an integer gradient too) are cast, as PyTorch does
        raise AutogradError(
            "For complex Tensors, both grad_output and output are required to have the "
            f"same dtype. Mismatch in dtype: grad_output[{i}] has a dtype of "
            f"{g.data.dtype} and output[{i}] has a dtype of {out.data.dtype}."
        )
    if g._device is not out._device:
        raise AutogradError(
            f"Mismatch in device: grad_output[{i}] is on {g._device} and output[{i}] "
            f"is on {out._device}; move the gradient with .to('{out._device}')"
        )
    if g.data.dtype != out.data.dtype:
        g = g.to(dtype=out.data.dtype)
    return g if create_graph else g.data


def new_graph_task(keep_graph: bool, create_graph: bool) -> GraphTask:
    """A GraphTask nested in the running one, if any (depth + 1)."""
    parent = current_graph_task()
    return GraphTask(
        keep_graph=keep_graph,
        create_graph=create_graph,
        depth=0 if parent is None else parent.depth + 1,
        anomaly=_anomaly.get()[0],  # (is_anomaly_enabled(), without its frame)
        # valid only if every enclosing backward is plain
        checkpoint_valid=parent is None or parent.checkpoint_valid,
    )


def _backward(
    tensors: TensorOrTensors,
    grad_tensors: TensorOrTensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: TensorOrTensors | None = None,
) -> Generator[GraphTask, None, None]:
    outputs = (tensors,) if isinstance(tensors, Tensor) else _as_tuple(tensors, "tensors")
    if not outputs:
        raise AutogradError("backward() needs at least one tensor")
    grads = (
        _as_tuple(grad_tensors, "grad_tensors")
        if grad_tensors is not None
        else (None,) * len(outputs)
    )
    if len(grads) != len(outputs):
        raise AutogradError(
            f"got {len(grads)} gradients for {len(outputs)} tensors; pass one per tensor (or None)"
        )
    input_list: tuple[Tensor, ...] | None = None
    if inputs is not None:
        input_list = _as_tuple(inputs, "inputs")
        if not input_list:
            raise AutogradError("`inputs` argument to `backward()` cannot be empty.")
    if retain_graph is None:
        retain_graph = create_graph
    edges, root_grads = _roots(outputs, grads, create_graph)
    gt = new_graph_task(bool(retain_graph), create_graph)
    out_edges = None
    if input_list is not None:
        out_edges = []
        for t in input_list:
            if not isinstance(t, Tensor):
                raise TypeError(f"inputs must be Tensors, got {type(t).__name__}")
            if not (t._rg or _requires_grad(t)):
                raise AutogradError("One of the differentiated Tensors does not require grad")
            if t.grad_fn is not None:
                t.retain_grad()
            out_edges.append(gradient_edge(t))
    gt.plan(outputs, edges, root_grads, out_edges, accumulate=True)
    if create_graph:
        warnings.warn(WARNING_CREATE_GRAPH, UserWarning, stacklevel=3)
    yield gt


def _grad(
    outputs: TensorOrTensors,
    inputs: TensorOrTensors,
    grad_outputs: TensorOrTensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> Generator[GraphTask, None, tuple[Tensor | None, ...]]:
    outs = (outputs,) if isinstance(outputs, _ONE) else _as_tuple(outputs, "outputs")
    ins = (inputs,) if isinstance(inputs, _ONE) else _as_tuple(inputs, "inputs")
    if not ins:
        raise AutogradError("`inputs` argument to `grad()` cannot be empty.")
    if not outs:
        raise ValueError("grad requires non-empty outputs.")
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    grads = (
        _as_tuple(grad_outputs, "grad_outputs") if grad_outputs is not None else (None,) * len(outs)
    )
    if len(grads) != len(outs):
        raise AutogradError(
            f"grad_outputs has {len(grads)} entries for {len(outs)} outputs; pass one per output"
        )
    if retain_graph is None:
        retain_graph = create_graph
    edges, root_grads = _roots(outs, grads, create_graph)
    out_edges = []
    for t in ins:
        if t.__class__ is GradientEdge:  # the gradient arriving at that edge
            out_edges.append((t.node, t.output_nr))
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"inputs must be Tensors, got {type(t).__name__}")
        if not (t._rg or _requires_grad(t)):
            raise AutogradError("One of the differentiated Tensors does not require grad")
        out_edges.append(gradient_edge(t))
    gt = new_graph_task(bool(retain_graph), create_graph)
    gt.plan(outs, edges, root_grads, out_edges, accumulate=False)
    yield gt
    result: list[Tensor | None] = []
    for t, g in zip(ins, gt.captured, strict=True):
        if t.__class__ is GradientEdge:
            result.append(_edge_result(t, g, bool(allow_unused)))
            continue
        if g is None:
            result.append(_unused(t, bool(allow_unused), materialize_grads, create_graph))
            continue
        g = to_tensor(g, t._device)
        if g.data.dtype != t.data.dtype and g.data.dtype.kind in "fc":
            g = g.to(dtype=t.data.dtype)
        result.append(g)
    return tuple(result)


#: what ``outputs`` / ``inputs`` may be alone (a GradientEdge is a tuple, not a sequence of them)
_ONE = (Tensor, GradientEdge)


def _edge_result(edge: GradientEdge, g: Any, allow_unused: bool) -> Tensor | None:
    """grad()'s result for an input given as a GradientEdge: the gradient arriving there."""
    if g is None:
        if not allow_unused:
            raise AutogradError(_ERR_UNUSED)
        return None
    dev = getattr(edge.node, "dev", None)
    return to_tensor(g, dev if dev is not None else _CPU)  # type: ignore[no-any-return]


_ERR_UNUSED = (
    "One of the differentiated Tensors appears to not have been used in the "
    "graph. Set allow_unused=True if this is the desired behavior."
)


def _unused(t: Tensor, allow_unused: bool, materialize: bool, create_graph: bool) -> Any:
    """grad()'s result for an input that got no gradient: zeros, None or the error."""
    if materialize:
        # as PyTorch: the zeros require grad under create_graph
        return zeros_like(t).requires_grad_(create_graph)
    if not allow_unused:
        raise AutogradError(_ERR_UNUSED)
    return None


def _warn_if_in_loop(name: str) -> None:
    if current_graph_task() is not None:
        return  # reentrant call from a backward function: nests, no warning
    lib = loop_here()
    if lib is None:
        return
    warnings.warn(
        f"ae.sync.{name}() called inside a running {lib} event loop blocks the loop until "
        f"it finishes; use `await ae.{name}(...)` instead",
        RuntimeWarning,
        stacklevel=3,
    )


def _no_loop_here(public: str) -> None:
    """Raise for an async entry point called where no event loop runs.

    Not from inside a backward the engine runs (a custom Function's
    backward, a hook, a callback): there the awaitable is returned as always
    (NOTE [Reentrant stacks]).
    """
    if current_graph_task() is not None:
        return
    raise AutogradError(
        f"ae.{public}() was called where no event loop runs; call ae.sync.{public}(...) in "
        f"plain code, or await ae.{public}(...) inside async code (asyncio.run(ae.{public}(...)) "
        "calls it before the loop starts: use anyio.run(ae."
        f"{public}, ...) or await it in an async def)"
    )


def _twins(
    gen_fn: Callable[..., Generator[GraphTask, None, Any]], module: str | None = None
) -> tuple[Any, Any]:
    """Make the async and the sync function from one generator definition.

    The generator yields each GraphTask it needs executed (any number of
    them: composite functions such as gradcheck or jacobian use
    ``yield from _grad(...)`` several times) and returns the result.  The
    async function checks that an event loop runs and returns the call's
    coroutine in a ``_Call`` (NOTE [The awaitable of an entry point] in _awaitables.py).
    ``module``: the public module the functions are reached through, which
    their errors name ('functional' for ``ae.functional.jacobian``); None for
    ``ae.<name>``.
    """
    name = gen_fn.__name__.lstrip("_")
    # the name users call, in errors: 'functional.jacobian' for a public module's functions
    public = name if module is None else f"{module}.{name}"
    run = _async_runner(name, public)
    call_class = _AeBackwardCall if public == "backward" else _Call

    @functools.wraps(gen_fn)
    def async_fn(*args: Any, **kwargs: Any) -> Any:
        if loop_here() is None:  # NOTE [Is a loop running here]
            _no_loop_here(public)
        call = _new_call(call_class)  # no __init__: a Python frame less per call
        call._coro = run(gen_fn(*args, **kwargs))  # the generator does nothing until run
        return call

    @functools.wraps(gen_fn)
    def sync_fn(*args: Any, **kwargs: Any) -> Any:
        _warn_if_in_loop(public)
        return _run_sync(gen_fn(*args, **kwargs))

    # help() and editors show the call's result, not the generator's type
    signature = inspect.signature(gen_fn)
    signature = signature.replace(return_annotation=_result_type(signature.return_annotation))
    for fn in (async_fn, sync_fn):
        fn.__name__ = fn.__qualname__ = name
        fn.__wrapped__ = gen_fn
        fn.__signature__ = signature  # type: ignore[attr-defined]
        fn.__annotations__ = {**gen_fn.__annotations__, "return": signature.return_annotation}
    return async_fn, sync_fn


def _result_type(annotation: Any) -> Any:
    """``X`` of a generator's ``Generator[GraphTask, None, X]`` annotation (a string here)."""
    text = str(annotation)
    if text.startswith("Generator[") and text.endswith("]"):
        return text[len("Generator[") : -1].split(", ", 2)[2]
    return "Any"


def _run_sync(gen: Generator[GraphTask, None, Any]) -> Any:
    """Drive an entry point's generator to its end with the sync driver: its result."""
    try:
        gt = next(gen)
        while True:
            drive_sync_entry(gt)
            gt = gen.send(None)
    except StopIteration as stop:
        return stop.value


def _async_runner(
    name: str, public: str
) -> Callable[[Generator[GraphTask, None, Any]], Coroutine[Any, Any, Any]]:
    """The coroutine function that drives an entry point's generator with the async driver."""

    async def run(gen: Generator[GraphTask, None, Any]) -> Any:
        try:
            gt = next(gen)
            while True:
                await drive_async_entry(gt)  # (the time slice of the settings here)
                gt = gen.send(None)
        except StopIteration as stop:
            return stop.value

    run.__name__ = name
    run.__qualname__ = public  # a coroutine left un-awaited is named so in the warning
    return run


backward, sync_backward = _twins(_backward)
grad, sync_grad = _twins(_grad)
_run_backward = _async_runner("backward", "backward")  # Tensor.backward's (checks its own way)

backward.__doc__ = """Compute the gradients of ``tensors`` and accumulate them into leaves' ``.grad``.

    ``await ae.backward(loss)``; ``grad_tensors`` gives the gradient for each
    non-scalar tensor; ``inputs`` restricts accumulation to those tensors;
    ``retain_graph`` (default: ``create_graph``) keeps saved tensors for
    another backward; ``create_graph`` records the backward for higher-order
    gradients.  ``ae.sync.backward`` is the same without an event loop;
    ``ae.backward`` called where none runs raises AutogradError naming it
    (``tensor.backward()`` runs there at once, as PyTorch's).

    Example::

        >>> import aengine as ae, anyio
        >>> x = ae.tensor([1.0, 2.0], requires_grad=True)
        >>> anyio.run(ae.backward, (x * x).sum())
        >>> x.grad.tolist()
        [2.0, 4.0]
"""
grad.__doc__ = """Return the gradients of ``outputs`` with respect to ``inputs``.

    A tuple with one entry per input; leaves' ``.grad`` are not touched.
    ``allow_unused=True`` gives None for inputs the outputs do not depend on
    (``materialize_grads=True`` gives zeros).  ``ae.sync.grad`` is the same
    without an event loop; ``ae.grad`` called where none runs raises
    AutogradError naming it.

    Example::

        >>> import aengine as ae
        >>> x = ae.tensor(3.0, requires_grad=True)
        >>> ae.sync.grad(x ** 2, [x])[0].item()
        6.0
"""
sync_backward.__doc__ = backward.__doc__
sync_grad.__doc__ = grad.__doc__


def queue_callback(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` when the backward currently running completes.

    Only valid from inside a backward (a hook or a backward function);
    ``fn`` may be an ``async def`` under the async engine.
    """
    gt = current_graph_task()
    if gt is None:
        raise AutogradError("Final callbacks can only be installed during backward pass.")
    if not callable(fn):
        raise TypeError(f"queue_callback expects a callable, got {type(fn).__name__}")
    gt.add_callback(functools.partial(fn, *args) if args else fn)


def _tensor_backward(
    self: Tensor,
    gradient: Any = None,
    retain_graph: Any = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> Awaitable[None]:
    """Compute gradients of this tensor w.r.t. graph leaves, as PyTorch's ``Tensor.backward``.

    Where no event loop runs (a plain script) it runs the backward at once,
    as ``ae.sync.backward(self, ...)``, and returns an object that may still
    be awaited (awaiting it does nothing more).  Inside async code it returns
    an awaitable that runs the backward when awaited: ``await loss.backward()``.
    From inside a backward the engine runs (a custom Function's backward, a
    hook) it returns the awaitable too, as ``ae.backward`` does.

    Example::

        >>> import aengine as ae, anyio
        >>> x = ae.tensor(2.0, requires_grad=True)
        >>> _ = (x * x).backward()            # plain code: runs now
        >>> x.grad.item()
        4.0
        >>> anyio.run((x * x).backward)       # awaited in an event loop
        >>> x.grad.item()
        8.0
    """
    if loop_here() is None and current_graph_task() is None:
        for gt in _backward(self, gradient, retain_graph, create_graph, inputs):
            drive_sync_entry(gt)
        return _DONE
    call = _new_call(_BackwardCall)
    call._coro = _run_backward(_backward(self, gradient, retain_graph, create_graph, inputs))
    return call


_T: Any = Tensor  # the method is declared in the Tensor class for type checkers
_T.backward = _tensor_backward
