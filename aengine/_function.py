"""Custom differentiable functions: ``ae.Function`` and its backward node.

# NOTE [Custom Function nodes]
# As in PyTorch the ``ctx`` a forward receives IS the backward node: each
# subclass ``F`` of :class:`Function` gets a node class named ``FBackward``
# (subclass of :class:`BackwardCFunction`, which has a ``__dict__`` so the
# user can store any attribute on ctx).  ``F.apply`` creates the node, runs
# ``forward`` under no_grad, then, when grad mode is on and an input requires
# grad, connects the tensor outputs to the node (inputs returned unchanged
# become aliases, inputs marked dirty are rebased onto the node) and packs
# the tensors given to ``save_for_backward`` as version-checked SavedTensors.
# Outputs that are views get ``ctx`` as grad_fn as of their current version
# and may not be modified in place afterwards (PyTorch's IN_CUSTOM_FUNCTION,
# or multi-output views when several outputs are differentiable).  ``ctx``
# keeps no reference to its outputs once connected: the dirty / non-
# differentiable lists are dropped and a saved output is kept as its data
# (NOTE [Graph ownership] in core/_graph.py).
#
# The engine calls ``node.apply(grads, create_graph)``.  In a plain backward
# the gradients are raw arrays: they are materialized (zeros for None unless
# ``set_materialize_grads(False)``) and wrapped into Tensors for the user's
# ``backward``, whose results are validated (count, shape, dtype; see
# ``_finish``) and unwrapped.  Under create_graph grad mode is on while the
# user's backward runs, so its results carry graphs.  An ``async def``
# backward makes the node class ``_is_async`` (and ``_always_special``, so the
# engine takes the general path, which awaits the coroutine ``apply``
# returns).  With no event loop running in the thread (``ae.sync`` from plain
# code) the coroutine is run to completion by ``anyio.run`` instead, so an
# async backward also works synchronously.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from ._function_outputs import FunctionNode, check_dirty, connect, mark_custom_view
from .core import AutogradError, SavedTensor, gradient_edge, record_forward
from .core import running_node as _running_node
from .core._graph import freed_error
from .core._modes import _anomaly, _grad_enabled
from .core._saved_hooks import RawSaved
from .ops import sum_to
from .runtime import loop_running, run_detached
from .tensors import CPU, Tensor, _dual
from .tensors._creation import zeros_like

__all__ = ["Function", "FunctionCtx", "BackwardCFunction"]

_T = TypeVar("_T", bound=Callable[..., Any])


class FunctionCtx:
    """The methods a custom Function's ``ctx`` offers in ``forward``.

    ``ctx`` is the backward node itself (a :class:`BackwardCFunction`), so
    attributes set in forward (``ctx.k = 3``) are there in backward.

    Example::

        >>> import aengine as ae
        >>> class Mul2(ae.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.k = 2
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * ctx.k
        >>> x = ae.ones(2, requires_grad=True)
        >>> Mul2.apply(x).grad_fn.name()
        'Mul2Backward'
    """

    # Set by apply; declared here for type checkers.
    _to_save: tuple[Any, ...] | None
    _fw_to_save: tuple[Any, ...] | None = None
    _saved: tuple[SavedTensor | None, ...] | None
    _released: bool
    _dirty: tuple[Tensor, ...]
    _non_diff: tuple[Tensor, ...]
    _materialize: bool
    needs_input_grad: tuple[bool, ...]

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save tensors (or None) for backward; read them back as ``ctx.saved_tensors``.

        Saved tensors are version-checked: modifying one in place before
        backward makes ``saved_tensors`` raise.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save tensors or None, but argument {i} is "
                    f"{type(t).__name__}; store other values as ctx attributes (ctx.x = ...)"
                )
        self._to_save = tensors

    def save_for_forward(self, *tensors: Tensor | None) -> None:
        """Save tensors (or None) for ``jvp``, where ``ctx.saved_tensors`` gives them back.

        As PyTorch's: forward-mode AD (``ae.autograd.forward_ad``) calls the
        Function's ``jvp(ctx, *input_tangents)`` after ``forward``.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_forward expects all arguments to be tensors or None, but "
                    f"argument {i} is {type(t).__name__}; store other values as ctx attributes"
                )
        self._fw_to_save = tensors

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Declare input tensors that forward modified in place (they must be returned)."""
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"mark_dirty can only accept tensors, but argument {i} is "
                    f"{type(t).__name__}; pass the input tensors forward modified in place"
                )
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Declare outputs that get no gradient (``requires_grad`` False)."""
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):  # PyTorch: a RuntimeError when forward returns
                raise TypeError(
                    f"mark_non_differentiable only accepts tensors, but argument {i} is "
                    f"{type(t).__name__}; pass the output tensors that get no gradient"
                )
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether backward receives zeros (True, the default) or None for missing grads."""
        if value.__class__ is not bool:
            raise TypeError(f"set_materialize_grads expects a bool, got {type(value).__name__}")
        self._materialize = value


class BackwardCFunction(FunctionNode, FunctionCtx):
    """Backward node of a custom :class:`Function` (its class is ``<Name>Backward``).

    It is also the ``ctx`` of forward and backward: ``saved_tensors``,
    ``needs_input_grad`` and the user's attributes live here.
    """

    _forward_cls: Any = None

    def __init__(self, next_edges: tuple[Any, ...]) -> None:
        super().__init__(next_edges)
        self._to_save = None
        self._saved = None
        self._released = False
        self._dirty = ()
        self._non_diff = ()
        self._materialize = True
        #: False: non-differentiable outputs get None, not zeros (PyTorch's flag)
        self._materialize_non_diff_grads = True
        self.needs_input_grad = ()
        self._in_meta: tuple[Any, ...] = ()
        self._out_meta: tuple[Any, ...] = ()
        self.num_outputs = 1
        self.out_devs: tuple[Any, ...] = ()

    # -- saved tensors ------------------------------------------------------------------
    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        """The tensors given to ``save_for_backward`` (version-checked).

        Raises the "backward through the graph a second time" error once the
        graph was freed (a backward without ``retain_graph``).
        """
        if self._released:
            raise freed_error()
        saved = self._saved
        if saved is None:
            # during forward (not packed yet) or nothing saved
            return tuple(self._to_save or ())
        out: list[Tensor | None] = []
        for s in saved:
            if s is None:
                out.append(None)
                continue
            s.check(self)
            out.append(s.unpack_tensor(self))
        return tuple(out)

    @property
    def saved_variables(self) -> tuple[Tensor | None, ...]:
        """Alias of :attr:`saved_tensors` (PyTorch's older name; a DeprecationWarning, as torch)."""
        warnings.warn(
            "'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2
        )
        return self.saved_tensors

    @property
    def _raw_saved_tensors(self) -> tuple[RawSaved, ...]:
        """The saved values, each with ``register_hooks(pack, unpack)`` (torch's SavedTensors)."""
        if self._released:
            raise freed_error()
        return tuple(RawSaved(self, i) for i in range(len(self._saved or ())))

    # the saved values as RawSaved reads and packs them
    def _slots_freed(self) -> bool:
        return self._released

    def _slot_value(self, i: int) -> Any:
        return (self._saved or ())[i]

    def _set_slot_value(self, i: int, value: Any) -> None:
        saved = self._saved or ()
        self._saved = (*saved[:i], value, *saved[i + 1 :])

    def release_variables(self) -> None:
        if self._saved is not None:
            self._saved = None
            self._released = True

    # -- backward -----------------------------------------------------------------------
    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        args = self._prepare(grads, create_graph)
        cls = self._forward_cls
        if type(self)._is_async:
            if not loop_running():  # ae.sync from plain code: a loop of its own
                return run_detached(self._apply_async(args, create_graph))
            return self._apply_async(args, create_graph)
        res = cls._backward_fn(self, *args)
        if inspect.isawaitable(res):
            if hasattr(res, "close"):
                res.close()
            raise TypeError(
                f"the backward of {cls.__name__} returned an awaitable but is not an "
                "`async def`: declare it `async def backward(ctx, *grads)`"
            )
        return self._finish(res, create_graph)

    async def _apply_async(self, args: list[Any], create_graph: bool) -> Any:
        res = self._forward_cls._backward_fn(self, *args)
        if inspect.isawaitable(res):
            res = await res
        return self._finish(res, create_graph)

    def _prepare(self, grads: list[Any], create_graph: bool) -> list[Any]:
        """The gradients as the user's backward receives them (Tensors, maybe zeros)."""
        out_meta = self._out_meta
        args: list[Any] = []
        for i, g in enumerate(grads):
            meta = out_meta[i] if i < len(out_meta) else None
            if g is None:
                if meta is not None and self._materialize:
                    shape, dtype, dev = meta
                    g = Tensor._make(dev.backend.xp.zeros(shape, dtype=dtype), False, dev)
                args.append(g)
            elif isinstance(g, Tensor):
                args.append(g)
            else:
                dev = meta[2] if meta is not None else _cpu()
                args.append(Tensor._make(g, False, dev))
        return args

    def _finish(self, res: Any, create_graph: bool) -> list[Any]:
        """Validate the user's gradients: count, shape (sum broadcast), dtype."""
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self)
        if len(res) > n:
            extra = res[n:]
            if all(r is None for r in extra):
                res = res[:n]
        if len(res) != n:
            raise AutogradError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {n}, got {len(res)})"
            )
        in_meta = self._in_meta
        outs: list[Any] = []
        for i, g in enumerate(res):
            meta = in_meta[i]
            if g is None:
                outs.append(None)
                continue
            if meta is None:
                raise AutogradError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {i + 1}, but the corresponding forward input was not a Tensor"
                )
            if self[i] is None:
                outs.append(None)  # input does not require grad: the gradient is dropped
                continue
            shape, dtype, dev = meta
            if isinstance(g, Tensor):
                gshape = g.data.shape
            elif isinstance(g, dev.backend.array_types):
                g = Tensor._make(g, False, dev)
                gshape = g.data.shape
            else:
                raise TypeError(
                    f"function {self.name()} returned a {type(g).__name__} as gradient "
                    f"{i}; return Tensors (or None)"
                )
            if gshape != shape:
                if not _expandable(shape, gshape):
                    raise AutogradError(
                        f"Function {self.name()} returned an invalid gradient at index {i} - "
                        f"got {list(gshape)} but expected shape compatible with {list(shape)}"
                    )
                g = sum_to(g, shape)
            if g.data.dtype != dtype:
                g = g.to(dtype=dtype)
            outs.append(g if create_graph else g.data)
        return outs


def _cpu() -> Any:
    return CPU


def _expandable(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target`` (so target sums down to it)."""
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target), strict=False):
        if s != t and s != 1:
            return False
    return True


class _FunctionMeta(type):
    """Gives each Function subclass its backward node class ``<Name>Backward``."""

    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> None:
        super().__init__(name, bases, ns)
        backward = ns.get("backward")
        vjp = ns.get("vjp")
        fn = backward if backward is not None else vjp
        if fn is None:
            for base in cls.__mro__[1:]:
                fn = base.__dict__.get("backward") or base.__dict__.get("vjp")
                if fn is not None:
                    break
        raw = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
        is_async = inspect.iscoroutinefunction(raw) or bool(getattr(raw, "_ae_async", False))
        node_cls = type(
            f"{name}Backward",
            (BackwardCFunction,),
            {
                "_forward_cls": cls,
                "_is_async": is_async,
                "_always_special": is_async,
                "__module__": cls.__module__,
            },
        )
        cls._backward_cls = node_cls
        cls._both = backward is not None and vjp is not None


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable functions.

    Subclass it with static ``forward(ctx, *args)`` and ``backward(ctx,
    *grads)`` (a plain ``def`` or an ``async def``, awaited by the async
    engine without blocking the event loop) and call ``F.apply(*args)``.
    ``backward`` returns one gradient per forward argument (None where there
    is none).

    Example::

        >>> import aengine as ae
        >>> class Scale(ae.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, k):
        ...         ctx.k = k
        ...         return x * k
        ...     @staticmethod
        ...     async def backward(ctx, g):
        ...         return g * ctx.k, None
        >>> x = ae.ones(2, requires_grad=True)
        >>> ae.sync.backward(Scale.apply(x, 3.0).sum())
        >>> x.grad.tolist()
        [3.0, 3.0]
    """

    _backward_cls: type[BackwardCFunction]
    _both: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"{type(self).__name__} is a custom Function: do not instantiate it, call "
            f"{type(self).__name__}.apply(*args)"
        )

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        """Compute the outputs from the inputs (runs under no_grad)."""
        raise NotImplementedError(
            "You must implement the forward function for custom aengine Function."
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        """Optional: fill ``ctx`` after a ``forward(*args)`` that takes no ctx."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """Return one gradient per forward input given one per forward output."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "aengine Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        """Forward mode: one tangent per output given one per forward input (zeros for none).

        Runs after ``forward`` inside a dual level (``ae.autograd.forward_ad``)
        when an input carries a tangent; tensors saved with
        ``ctx.save_for_forward`` are ``ctx.saved_tensors`` here.
        """
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    @classmethod
    def _backward_fn(cls, ctx: Any, *grads: Any) -> Any:
        if cls._both:
            raise AutogradError(
                "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. "
                "You should only implement one of them."
            )
        backward = cls.backward
        if backward is Function.backward and cls.vjp is not Function.vjp:
            backward = cls.vjp
        return backward(ctx, *grads)

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` and record the backward node (when grad is needed).

        With ``setup_context``, the arguments are bound to ``forward``'s
        signature with its defaults applied, so ``setup_context`` receives
        every input (as PyTorch); without it, keyword arguments are bound so.
        """
        if cls.setup_context is not Function.setup_context:
            if kwargs or _has_defaults(cls):
                args = _bind(cls, inspect.signature(cls.forward).bind(*args, **kwargs))
        elif kwargs:
            bound = inspect.signature(cls.forward).bind(None, *args, **kwargs)  # forward(ctx, ...)
            args = _bind(cls, bound)[1:]
        return _apply(cls, args)


def _has_defaults(cls: Any) -> bool:
    """Whether ``cls.forward`` has parameters with defaults (cached on the class)."""
    has = cls.__dict__.get("_ae_forward_defaults")
    if has is None:
        params = inspect.signature(cls.forward).parameters.values()
        has = any(p.default is not inspect.Parameter.empty for p in params)
        cls._ae_forward_defaults = has
    return bool(has)


def _bind(cls: Any, bound: inspect.BoundArguments) -> tuple[Any, ...]:
    """The positional arguments of ``forward`` with its defaults applied."""
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(
            f"{cls.__name__}.forward takes keyword-only arguments ({', '.join(bound.kwargs)}), "
            "which apply cannot pass on: make them positional parameters"
        )
    return tuple(bound.args)


def _apply(cls: Any, args: tuple[Any, ...]) -> Any:
    grad_on = _grad_enabled.get()
    rg = [isinstance(a, Tensor) and a._rg for a in args]
    is_recording = grad_on and any(rg)
    edges = tuple(gradient_edge(a) if r else None for a, r in zip(args, rg, strict=True))
    ctx = cls._backward_cls(edges if is_recording else ())
    ctx.needs_input_grad = tuple(r and grad_on for r in rg)
    ctx._in_meta = tuple(
        (a.data.shape, a.data.dtype, a._device) if isinstance(a, Tensor) else None for a in args
    )
    new_style = cls.setup_context is not Function.setup_context
    tangents = _input_tangents(args)
    token = _grad_enabled.set(False)
    # forward's own ops compute no tangents: jvp gives the outputs theirs
    fw_token = _dual.computing.set(True) if tangents is not None else None
    try:
        if new_style:
            outputs = cls.forward(*args)
            cls.setup_context(ctx, args, outputs)
        else:
            outputs = cls.forward(ctx, *args)
    finally:
        _grad_enabled.reset(token)
        if fw_token is not None:
            _dual.computing.reset(fw_token)
    is_tuple = isinstance(outputs, tuple)
    outs = list(outputs) if is_tuple else [outputs]
    out_tangents = _run_jvp(cls, ctx, args, outs, tangents) if tangents is not None else None
    if ctx._dirty:
        check_dirty(ctx, args, outs)
    if not is_recording:
        if out_tangents is not None:
            _give_tangents(outs, out_tangents)
        # views made by forward are restricted all the same, as PyTorch (an input
        # returned as is stays the caller's tensor: not marked)
        for o in outs:
            if isinstance(o, Tensor) and o._base is not None and not any(a is o for a in args):
                mark_custom_view(o)
        return outputs
    connect(ctx, args, outs)
    if out_tangents is not None:
        _give_tangents(outs, out_tangents)
    if _anomaly.get()[0]:
        record_forward(
            ctx, _running_node(), skip=3
        )  # the trace ends at the user's ``F.apply(...)``
    return tuple(outs) if is_tuple else outs[0]


def _input_tangents(args: tuple[Any, ...]) -> list[Any] | None:
    """The inputs' tangents inside a dual level, None where none has one (or outside)."""
    if _dual.LEVEL is None or _dual.computing.get():
        return None
    ts = [a._fw if isinstance(a, Tensor) else None for a in args]
    return ts if any(t is not None for t in ts) else None


def _run_jvp(
    cls: Any, ctx: Any, args: tuple[Any, ...], outs: list[Any], tangents: list[Any]
) -> list[Any]:
    """The outputs' tangents from ``cls.jvp`` (NOTE [Forward-mode AD] in tensors/_dual.py)."""
    if cls.jvp is Function.jvp:
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )
    given = [
        t if t is not None else zeros_like(a) if isinstance(a, Tensor) else None
        for a, t in zip(args, tangents)
    ]
    kept = ctx._to_save
    ctx._to_save = ctx._fw_to_save or ()
    token = _dual.computing.set(True)
    try:
        res = cls.jvp(ctx, *given)
    finally:
        _dual.computing.reset(token)
        ctx._to_save = kept
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    n = sum(1 for o in outs if isinstance(o, Tensor))
    if len(res) != len(outs):
        raise AutogradError(
            f"{cls.__name__}.jvp returned {len(res)} tangents for {len(outs)} outputs "
            f"({n} of them tensors); return one tangent (or None) per forward output"
        )
    for o, t in zip(outs, res):
        if t is not None and isinstance(o, Tensor) and tuple(t.shape) != tuple(o.shape):
            raise AutogradError(
                f"{cls.__name__}.jvp returned a tangent of shape {tuple(t.shape)} for an output "
                f"of shape {tuple(o.shape)}; a tangent has its output's shape"
            )
    return res


def _give_tangents(outs: list[Any], tangents: list[Any]) -> None:
    for o, t in zip(outs, tangents):
        if isinstance(o, Tensor) and o.data.dtype.kind in "fc":
            _dual.set_tangent(o, t if t is not None else zeros_like(o))
