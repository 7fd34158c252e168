"""Version counters and the errors of saved values: what the core checks of a saved tensor.

A tensor's version counter (NOTE [The shared zero version counter]), its
mark after ``detach_`` (NOTE [Saved tensors detached in place]) and the
errors a saved value raises when it was modified, freed or saved from an
inference tensor.  The graph (_graph.py) builds on this module and
re-exports its names.
"""

from __future__ import annotations

from typing import Any, Protocol

from ._errors import ERR_BACKWARD_TWICE, AutogradError
from ._modes import is_anomaly_enabled

__all__ = [
    "DETACHED",
    "ERR_DETACHED_SAVED",
    "ZERO_VC",
    "DetachedVC",
    "Versioned",
    "current_version",
    "describe",
    "detach_vc",
    "freed_error",
    "inference_saved_error",
    "own_vc",
    "version_error",
]


class Versioned(Protocol):
    """What has a version counter: a tensor (``TensorBase``) or a saved value."""

    _vc: list[int] | tuple[int]


class _Named(Protocol):
    """A node, as the in-place error names it."""

    def name(self) -> str: ...


def describe(array: Any) -> str:
    """``float32 tensor [2, 3]``: a tensor's dtype and shape, for messages."""
    shape = ", ".join(str(s) for s in array.shape)
    return f"{array.dtype} tensor [{shape}]"


# NOTE [The shared zero version counter]
# Most tensors are never modified in place nor viewed: they all hold the one
# immutable ``ZERO_VC`` = (0,) as version counter, and get a list of their
# own (``own_vc``) the first time something must share or bump it: a view or
# ``detach()`` (they share the base's counter), an in-place op, a saved output
# (its SavedTensor keeps the counter, not the tensor).  A saved *input* is
# kept as the tensor itself (NOTE [Saved tensors of built-in ops]), so the
# check reads its counter at backward time, whichever it is by then.  A list
# per tensor was one more allocation per op, and for every saved input one
# more object for the garbage collector to walk while the graph lives.
# ``ZERO_VC`` being a tuple, a write that skipped ``own_vc`` fails loudly
# instead of bumping every tensor's version.
ZERO_VC: tuple[int] = (0,)


def own_vc(t: Versioned) -> list[int]:
    """``t``'s version counter as a list of its own, to share, keep or bump."""
    vc = t._vc
    if vc.__class__ is not list:
        if vc.__class__ is DetachedVC:
            return vc.shared
        vc = t._vc = [vc[0]]  # ZERO_VC (or a copy of it, e.g. unpickled)
    return vc


# NOTE [Saved tensors detached in place]
# PyTorch refuses to unpack a saved input that had a grad_fn when it was
# saved and lost it since to ``detach_()`` ("Trying to use a saved tensor
# that has been detached in-place").  The saved-value check of a built-in op
# reads only the saved tensor's version counter (``t._vc[0]``, NOTE [Saved
# tensors of built-in ops]), so ``detach_`` of a tensor with a grad_fn gives
# the tensor a ``DetachedVC``: a view of its counter that reads DETACHED more
# than the counter itself.  A version recorded before ``detach_`` never
# matches it again, so the check fails on its existing (rare) error path,
# where ``version_error`` tells the two causes apart by the class; a save
# after ``detach_`` records the shifted value and matches as long as the
# tensor is not modified.  The counter stays shared: ``own_vc`` hands out the
# shared list (views, ``detach()``, in-place bumps), so the tensor's aliases
# see no change, and the plain backward pays nothing for the check.  As in
# PyTorch, only a saved input that had a grad_fn is refused: a leaf detached
# in place, a saved output and a custom Function's saved tensor (a
# SavedTensor keeps the shared counter) unpack fine.
DETACHED = 1 << 40


class DetachedVC(list):  # type: ignore[type-arg]
    """The version counter of a tensor detached in place (NOTE [Saved tensors detached in place])."""

    __slots__ = ("shared",)

    def __init__(self, shared: list[int]) -> None:
        super().__init__(shared)
        self.shared = shared

    def __getitem__(self, i: Any) -> Any:
        return self.shared[i] + DETACHED

    def __setitem__(self, i: Any, value: Any) -> None:
        self.shared[i] = value - DETACHED


def detach_vc(t: Versioned) -> None:
    """``detach_`` of ``t``, which has a grad_fn: mark its counter (NOTE [Saved tensors detached in place])."""
    if t._vc.__class__ is not DetachedVC:
        t._vc = DetachedVC(own_vc(t))


def current_version(t: Any) -> int:
    """The version of a tensor (or SavedTensor), unshifted by ``detach_``."""
    vc = t._vc
    return vc.shared[0] if vc.__class__ is DetachedVC else vc[0]


def inference_saved_error() -> AutogradError:
    return AutogradError(
        "Inference tensors cannot be saved for backward. To work around "
        "you can make a clone to get a normal tensor and use it in autograd."
    )


#: PyTorch's text, word for word (saved_variable.cpp)
ERR_DETACHED_SAVED = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."
    "This is not supported, please use out-of-place `.detach()` instead"
)


def version_error(saved: Any, version: int, node: _Named) -> str:
    """The in-place error for ``saved`` (a SavedTensor or a saved input Tensor).

    Or the error of a saved input detached in place since (NOTE [Saved
    tensors detached in place]).
    """
    if saved._vc.__class__ is DetachedVC:  # a saved input Tensor, detached in place
        if version >= DETACHED:  # saved after detach_: modified in place since
            version -= DETACHED
        elif saved._fn is None:  # saved before detach_, and still detached
            return ERR_DETACHED_SAVED
    where = ""
    if getattr(saved, "is_output", False):
        where = f", which is output {saved.output_nr} of {node.name()},"
    else:
        # a SavedTensor of an input (is_output False) keeps the tensor, else it is one
        t = saved.tensor if getattr(saved, "is_output", None) is False else saved
        if t is not None and t.grad_fn is not None:
            fn = t.grad_fn
            where = f", which is output {t.output_nr} of {fn.name()},"
    if is_anomaly_enabled():
        hint = (
            "Hint: the backtrace further above shows the operation that failed to compute "
            "its gradient. The variable in question was changed in there or anywhere later. "
            "Good luck!"
        )
    else:
        hint = (
            "Hint: enable anomaly detection to find the operation that failed to compute its "
            "gradient, with ae.detect_anomaly()."
        )
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{describe(saved.data)}]{where} is at version "
        f"{current_version(saved)}; "
        f"expected version {version} instead. {hint}"
    )


def freed_error() -> AutogradError:
    return AutogradError(ERR_BACKWARD_TWICE)
