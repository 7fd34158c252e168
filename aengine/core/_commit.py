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

# NOTE [Stealing a leaf's gradient]
# A leaf's first gradient becomes its ``.grad``.  As torch's AccumulateGrad,
# the commit stores the computed array itself where no one else can see it,
# and a copy otherwise: copies would hold every gradient twice at the end of
# a backward.  The array is taken only when all of these hold: no
# create_graph (its ``.grad`` is a differentiable clone), no ``.grad`` yet
# (else the gradient is added in place), a numpy array of the leaf's dtype,
# C-contiguous (torch's layout contract gives ``.grad`` the parameter's
# strides; aengine's are C order) and writeable, and nothing but the commit
# refers to it, or to the arrays it is a view of.  That last is a reference
# count, as torch's ``use_count``: the commit pops the array out of its
# staged entry and drops its own names for it, so the references left are
# ``_take``'s own, whose number is measured once on a fresh object by the
# same function (it differs between Python versions, not between calls).
# Any other holder -- a tensor a hook kept, a retained non-leaf gradient
# still staged, the gradient a user passed to ``backward``, a saved tensor
# a custom Function returned, a second leaf staged with the same array (an
# add's backward passes one array to both), another view of the same
# memory, a weak reference -- shows in the count, and the commit copies.
# A free-threaded build (no GIL) always copies.
"""

from __future__ import annotations

import sys
import threading
import weakref
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
        for t, entry in staged.items():
            g, kind = entry
            if g is None:
                continue
            if kind == "retain":
                _commit_retained(t, to_tensor(g, t._device), create_graph)
            elif create_graph:
                _commit_graph(t, to_tensor(g, t._device))
            else:
                # the entry and this frame let go of the array: _commit_leaf can then
                # tell whether anyone else holds it (NOTE [Stealing a leaf's gradient])
                box = [to_raw(g)]
                entry[0] = g = None
                _commit_leaf(t, box)
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


def _commit_leaf(t: TensorBase, box: list[Any]) -> None:
    """Write the gradient in ``box`` (its only holder) into the leaf ``t``'s ``.grad``."""
    dev = t._device
    old = t._grad
    if old is None:
        arr, counts = _take(box)
        xp = dev.backend.xp
        if _unshared(xp, arr, counts, t.data.dtype):
            t._grad = new_tensor(arr, dev)  # NOTE [Stealing a leaf's gradient]
            return
        # a copy, in C order as torch gives .grad its parameter's layout: a transposed
        # product's gradient (F order) would make every later update of the parameter
        # walk memory across rows
        t._grad = new_tensor(xp.array(arr, dtype=t.data.dtype, copy=True, order="C"), dev)
        return
    arr = box.pop()
    if getattr(old.data, "flags", None) is not None and not old.data.flags.writeable:
        # e.g. a broadcast view assigned by the user: cannot add in place
        t._grad = new_tensor(old.data + arr, dev)
    else:
        # in place even when the old grad carries a graph (from a create_graph
        # backward), as PyTorch: same object, version bumped
        old.data += arr
        own_vc(old)[0] += 1


def _take(box: list[Any]) -> tuple[Any, list[int]]:
    """Pop the array out of ``box``; with the reference counts of it and of every array it views.

    The counts include this function's own references: compare them with
    ``_OWN`` (NOTE [Stealing a leaf's gradient]).
    """
    arr = box.pop()
    counts = [sys.getrefcount(arr)]
    base = getattr(arr, "base", None)
    while base is not None:
        counts.append(sys.getrefcount(base))
        base = getattr(base, "base", None)
    return arr, counts


class _Probe:
    """A stand-in array for measuring ``_take``'s own references: a view of a fresh one."""

    __slots__ = ("base",)

    def __init__(self, base: _Probe | None) -> None:
        self.base = base


#: ``_take``'s counts for an array that only the box held, and for the array it views
_OWN = tuple(_take([_Probe(_Probe(None))])[1])
#: where references may lag (no GIL), every gradient is copied
_COUNTS_EXACT = getattr(sys, "_is_gil_enabled", lambda: True)()


def _unshared(xp: Any, arr: Any, counts: list[int], dtype: Any) -> bool:
    """Whether ``arr`` may become a ``.grad`` of ``dtype`` as it is (NOTE [Stealing a leaf's gradient])."""
    if not _COUNTS_EXACT or xp.__name__ != "numpy" or counts[0] != _OWN[0]:
        return False
    if any(c != _OWN[1] for c in counts[1:]):
        return False
    flags = arr.flags
    if arr.dtype != dtype or not flags.c_contiguous or not flags.writeable:
        return False
    a = arr
    while True:
        if type(a) is not xp.ndarray or weakref.getweakrefcount(a):
            return False
        if a.base is None:
            return bool(a.flags.owndata)
        a = a.base
