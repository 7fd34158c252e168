"""How a custom Function's outputs join the graph: ``connect`` (NOTE [Custom Function nodes] in _function.py).

Each tensor output becomes an output of the Function's node: inputs returned
unchanged become aliases, inputs marked dirty are rebased onto the node
(through CopySlices for a view), non-differentiable ones are marked so, and
the tensors given to ``save_for_backward`` are packed as SavedTensors.
"""

from __future__ import annotations

import warnings
from typing import Any

from .core import AutogradError, Node, SavedTensor, own_vc
from .core._graph import set_history
from .core._saved_hooks import pack_values
from .ops._core import as_view
from .tensors import CPU, Tensor
from .tensors._views import _ERR_LEAF_VIEW, _move_retains, _rebase_history, _view_error

__all__ = ["FunctionNode", "check_dirty", "connect", "mark_custom_view"]


class FunctionNode(Node):
    """The node class of custom Functions: what ``connect`` reads and sets of it.

    ``BackwardCFunction`` (_function.py, which imports this module) is its
    one subclass; the fields are set in its ``__init__``.
    """

    __slots__ = ()

    _dirty: tuple[Any, ...]
    _non_diff: tuple[Any, ...]
    _materialize_non_diff_grads: bool
    _to_save: tuple[Any, ...] | None
    _saved: Any
    _out_meta: tuple[Any, ...]
    out_devs: tuple[Any, ...]


def check_dirty(ctx: Any, args: tuple[Any, ...], outs: list[Any]) -> None:
    for t in ctx._dirty:
        if not any(o is t for o in outs):
            raise AutogradError(
                "Some elements marked as dirty during the forward method were not returned "
                "as output. The inputs that are modified inplace must all be outputs of the "
                "Function."
            )
        own_vc(t)[0] += 1  # as PyTorch: a dirty tensor's version is bumped once more


def connect(ctx: FunctionNode, args: tuple[Any, ...], outs: list[Any]) -> None:
    """Make the tensor outputs outputs of ``ctx`` (see NOTE [Custom Function nodes] in _function.py)."""
    dirty = ctx._dirty
    non_diff = ctx._non_diff
    # dropped now: ctx holding its outputs would make a cycle (NOTE [Graph ownership])
    ctx._dirty = ctx._non_diff = ()
    ctx.num_outputs = len(outs)
    out_meta: list[Any] = []
    devs: list[Any] = []
    seen: dict[int, Tensor] = {}
    diff_outputs = 0
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            out_meta.append(None)
            devs.append(CPU)
            continue
        is_input = any(a is o for a in args)
        if id(o) in seen:
            # the same tensor returned twice: one object, output of the last slot
            o = seen[id(o)]
            outs[i] = o
            if o._fn is ctx:
                set_history(o, ctx, i)
        elif any(d is o for d in dirty):
            _rebase_dirty(ctx, args, o, i, len(outs), is_input)
            diff_outputs += 1
        elif any(n is o for n in non_diff):
            if is_input:
                o = as_view(Tensor._make(o.data, False, o._device), o, _identity)
                outs[i] = o
            o._rg = False
            mark_custom_view(o)
            if not ctx._materialize_non_diff_grads:
                seen[id(o)] = o
                out_meta.append(None)  # backward gets None for it, not zeros
                devs.append(o._device)
                continue
        else:
            if is_input or o._rg or o._fn is not None:
                # an input (or a tensor already in a graph) returned: an alias of it
                o = as_view(Tensor._make(o.data, False, o._device), o, _identity)
                outs[i] = o
            set_history(o, ctx, i)
            mark_custom_view(o)
            if o.data.dtype.kind in "fc":
                diff_outputs += 1
        seen[id(outs[i])] = outs[i]
        out_meta.append((o.data.shape, o.data.dtype, o._device))
        devs.append(o._device)
    if diff_outputs > 1:  # views among several outputs may not be modified in place
        for o in outs:
            if isinstance(o, Tensor) and o._base is not None and o._view_meta is not None:
                o._creation = "multi_output:" + ctx.name()
    ctx._out_meta = tuple(out_meta)
    ctx.out_devs = tuple(devs)
    to_save = ctx._to_save
    if to_save:
        packed: list[SavedTensor | None] = []
        for t in to_save:
            if t is None:
                packed.append(None)
                continue
            j = next((j for j, o in enumerate(outs) if o is t), None)
            if j is not None and t._fn is ctx:
                packed.append(SavedTensor(t, True))
            elif j is not None and any(d is t for d in dirty):
                # a dirty view: its history went to its base (CopySlices of ctx); saved as
                # output j of ctx, without the tensor, so that no cycle keeps it alive
                saved = SavedTensor(t, True)
                saved.output_nr = j
                packed.append(saved)
            else:
                packed.append(SavedTensor(t))
        ctx._saved = pack_values(tuple(packed), to_save)  # NOTE [Saved-tensor hooks]
    else:
        ctx._saved = ()
    ctx._to_save = None


def mark_custom_view(o: Tensor) -> None:
    """An output of a custom Function that is a view: restricted, with ``ctx`` as grad_fn now.

    As PyTorch (IN_CUSTOM_FUNCTION): modifying it in place raises, since the
    view's history would bypass the Function's backward; and its grad_fn is
    the Function's node as of its current version, even if the view's base was
    modified in place inside forward (NOTE [Restricted views]).
    """
    if o._base is not None and o._view_meta is not None:
        o._creation = "custom_function"
        o._view_meta = o._vc[0]


_DIRTY_NOT_INPUT = (
    "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have "
    "been mutated should be passed to ctx.mark_dirty()."
)

_ERR_DIRTY_VIEW_OUTPUTS = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function "
    "cannot return more than one Tensor. This is not supported by the current autograd engine. "
    "You should either make sure the input is not a view (using .clone() for example) or make "
    "your Function only return one Tensor (potentially splitting it into two Functions: one "
    "doing the inplace that returns a single Tensor and a second one that does the other "
    "operations). You can ask on the forum https://discuss.pytorch.org/ if you need help to do "
    "this change."
)


def _rebase_dirty(
    ctx: FunctionNode, args: tuple[Any, ...], o: Tensor, i: int, n: int, is_input: bool
) -> None:
    """Make the dirty tensor ``o`` output ``i`` of ``ctx`` (PyTorch's rebase_history).

    For a view the new history goes to its base through CopySlices (see
    NOTE [Views and CopySlices] in tensors/_views.py), which supports a Function
    whose first input is the view and which has one output.  A dirty tensor
    that is not an input warns, as PyTorch, and is rebased all the same,
    unless it is a view: that raises.
    """
    base = o._base
    is_view = base is not None and o._view_meta is not None
    if not is_input:
        # As PyTorch, in this order: a leaf that requires grad (also a view made in
        # no_grad mode, a leaf to PyTorch) is refused; a view that is not an input is
        # refused (its history would have to go to a base the Function never saw);
        # any other tensor only warns and becomes an output of the Function.
        if o._fn is None and (
            (o._creation == "no_grad" and base._rg) if base is not None and is_view else o._rg
        ):
            raise AutogradError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )
        if is_view:
            raise AutogradError(_DIRTY_NOT_INPUT)
        # stacklevel: the user's F.apply (_rebase_dirty < connect < _apply < apply)
        warnings.warn(_DIRTY_NOT_INPUT, UserWarning, stacklevel=5)
    if base is not None and is_view:
        if o._fn is None and o._creation == "no_grad" and base._rg:
            # to PyTorch a view made in no_grad mode is a leaf that requires grad
            raise AutogradError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )
        if n != 1:  # PyTorch checks this before the view's own restrictions
            raise AutogradError(_ERR_DIRTY_VIEW_OUTPUTS)
        if o._creation is not None:
            raise AutogradError(_view_error(o, False))
        if base._rg and base._fn is None:
            raise AutogradError(_ERR_LEAF_VIEW)
        if not args or args[0] is not o or type(ctx)._is_async:
            raise AutogradError(
                f"{ctx.name()}: mark_dirty on a view is supported when the view is the first "
                "input of a Function and a plain (not async) backward; modify and mark dirty "
                "the base tensor instead"
            )
        _rebase_history(o, ctx)
        return
    if o._fn is None and o._rg:
        raise AutogradError(
            "a leaf Variable that requires grad has been used in an in-place operation."
        )
    old, old_nr = o._fn, o.output_nr
    set_history(o, ctx, i)
    if o._retains:
        _move_retains(o, old, old_nr, ctx)


def _identity(F: Any, x: Any) -> Any:
    return x
