"""The staged ``.grad`` commit of a finished graph task.

Leaf gradients (and retained non-leaf ones) are staged by the graph task
(``GraphTask.stage``) and written here only when the whole backward
succeeded, so that a failed or cancelled backward leaves every ``.grad`` as
it was (NOTE [Scheduler invariants]).

# NOTE [Post-accumulate hooks run at commit]
# PyTorch runs ``register_post_accumulate_grad_hook`` hooks inside
# AccumulateGrad, right after ``.grad`` is written, so they come before that
# node's post-hooks and before the rest of the graph runs.  aengine writes
# leaf gradients only when the whole graph task succeeded, so these hooks run
# at commit, after every node (and every AccumulateGrad post-hook) ran and
# every ``.grad`` was written, in the order the leaves were reached; final
# callbacks (``queue_callback``) run after them.
"""

from __future__ import annotations

import threading
from typing import Any

from ._errors import AutogradError
from ._graph import TensorBase, new_tensor, own_vc, to_raw, to_tensor
from ._graph_task import GraphTask

__all__ = ["commit"]

#: commits of graph tasks of different threads (each with its own loop, or sync)
#: update shared leaves one at a time: the sum of all their gradients lands
_COMMIT_LOCK = threading.Lock()


def commit(gt: GraphTask) -> list[tuple[Any, TensorBase]]:
    """Write ``gt``'s staged gradients into ``.grad``; return post-accumulate hooks to run.

    Follows PyTorch's AccumulateGrad: the first gradient is stored (a copy,
    or a differentiable clone under create_graph); later ones are added in
    place, or out of place building a graph under create_graph.  Atomic
    with respect to other threads' commits.
    """
    staged = gt.take_staged()
    create_graph = gt.create_graph
    hooks: list[tuple[Any, TensorBase]] = []
    _check_staged(staged)  # all or nothing: nothing is written if one is wrong
    with _COMMIT_LOCK:
        for t, (g, kind) in staged.items():
            if g is None:
                continue
            if kind == "retain":
                _commit_retained(t, to_tensor(g, t._device), create_graph)
            elif create_graph:
                _commit_graph(t, to_tensor(g, t._device))
            else:
                _commit_leaf(t, to_raw(g))
            if t._post_acc_hooks:
                for fn in list(t._post_acc_hooks.values()):
                    hooks.append((fn, t))
    return hooks


def _check_staged(staged: dict[Any, list[Any]]) -> None:
    """Raise before anything is written if a staged gradient does not fit its tensor.

    Hooks are checked as they return (NOTE [Checking what a hook returns]);
    this guards the rest (a user-assigned ``.grad``, a tensor whose ``data``
    was replaced since the forward).
    """
    for t, (g, _) in staged.items():
        if g is None:
            continue
        shape = tuple(g.shape)
        if shape != tuple(t.data.shape):
            raise AutogradError(
                f"the gradient computed for a tensor of shape {tuple(t.data.shape)} has shape "
                f"{shape}; no .grad was written"
            )
        old = t._grad
        if old is not None and tuple(old.data.shape) != shape:
            raise AutogradError(
                f"the gradient computed for a tensor of shape {shape} cannot be added to its "
                f".grad of shape {tuple(old.data.shape)}; no .grad was written"
            )


def _commit_retained(t: TensorBase, new: TensorBase, create_graph: bool) -> None:
    if t._grad is None:
        t._grad = new.clone() if create_graph else new_tensor(new.data.copy(), new._device)
    elif create_graph:
        t._grad = t._grad + new
    else:
        t._grad = new_tensor(t._grad.data + new.data, new._device)


def _commit_graph(t: TensorBase, g: TensorBase) -> None:
    """create_graph: ``.grad`` becomes (or adds) a differentiable copy."""
    if g.data.dtype != t.data.dtype:
        g = g.to(dtype=t.data.dtype)
    t._grad = g.clone() if t._grad is None else t._grad + g


def _commit_leaf(t: TensorBase, arr: Any) -> None:
    dev = t._device
    old = t._grad
    if old is None:
        # a copy (``arr`` may be shared with other buffers), in C order as torch gives .grad
        # its parameter's layout: a transposed product's gradient (F order) would make
        # every later update of the parameter walk memory across rows
        xp = dev.backend.xp
        t._grad = new_tensor(xp.array(arr, dtype=t.data.dtype, copy=True, order="C"), dev)
    elif getattr(old.data, "flags", None) is not None and not old.data.flags.writeable:
        # e.g. a broadcast view assigned by the user: cannot add in place
        t._grad = new_tensor(old.data + arr, dev)
    else:
        # in place even when the old grad carries a graph (from a create_graph
        # backward), as PyTorch: same object, version bumped
        old.data += arr
        own_vc(old)[0] += 1
