"""``register_multi_grad_hook``: one hook over the gradients of several tensors.

# NOTE [Multi-grad hooks]
# As PyTorch's ``torch.autograd.graph.register_multi_grad_hook``: a tensor
# hook is registered on each tensor; state is kept per graph task (its id).
# Mode "all": at the first of these hooks to fire in a graph task, count how
# many of the tensors' nodes the task runs (``count_executed``: the nodes its
# dependency pass reached, and of those only the ones exec_info keeps for
# grad() / inputs=, as PyTorch's _will_engine_execute_node: an input the
# root does not reach never counts; the count is static, so a node already
# queued on a device worker counts); when that
# many hooks fired, call ``fn(grads)`` once, with None for the tensors whose
# gradient this backward does not compute.  A backward that fails (or is
# cancelled) before that never calls it.  Mode "any": call ``fn(grad)`` once
# per graph task, at the first gradient.  ``fn`` may be ``async def``
# (awaited like any hook).
#
# Concurrent backwards (threads, tasks) each have their own entry, made at
# their first hook and dropped when the graph task finishes, whatever its
# outcome (``add_on_finish``): a failed backward's partial gradients are not
# kept, and no entry outlives its backward.  A lock guards the entries:
# hooks of different backwards run in different threads at once.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .core import AutogradError, GraphTask, Node, current_graph_task
from .tensors import Tensor

__all__ = ["register_multi_grad_hook", "MultiHandle"]


class MultiHandle:
    """Removes all the tensor hooks of a multi-grad hook at once."""

    __slots__ = ("handles",)

    def __init__(self, handles: tuple[Any, ...]) -> None:
        self.handles = handles

    def remove(self) -> None:
        """Unregister the hook from every tensor; removing twice is harmless."""
        for h in self.handles:
            h.remove()

    def __enter__(self) -> MultiHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _node_of(t: Tensor) -> Node:
    fn = t.grad_fn
    return fn if fn is not None else t._grad_accumulator()


def register_multi_grad_hook(
    tensors: Sequence[Tensor], fn: Callable[..., Any], *, mode: str = "all"
) -> MultiHandle:
    """Call ``fn`` once per backward with the gradients of several tensors.

    ``mode="all"``: ``fn(grads)`` after the gradients of all the tensors this
    backward reaches were computed (None for the others); ``mode="any"``:
    ``fn(grad)`` at the first of them.  Returns a handle whose ``remove()``
    unregisters it.

    Example::

        >>> import aengine as ae
        >>> a = ae.ones(2, requires_grad=True)
        >>> b = ae.ones(2, requires_grad=True)
        >>> seen = []
        >>> h = ae.register_multi_grad_hook((a, b), lambda gs: seen.append(len(gs)))
        >>> ae.sync.backward((a * b).sum())
        >>> seen
        [2]
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"register_multi_grad_hook expects Tensors, got {type(t).__name__}")
    if mode == "all":
        return _hooks_for_all(tensors, fn)
    return _hook_for_any(tensors, fn)


def _hooks_for_all(tensors: tuple[Tensor, ...], fn: Callable[..., Any]) -> MultiHandle:
    """``mode="all"``: a hook per tensor; the last of a backward's calls ``fn(grads)``.

    Each backward (graph task) counts on its own; its state goes when it
    finishes, whatever the outcome, so a failed or cancelled backward keeps
    nothing.  The lock: concurrent backwards may run hooks in several threads.
    """
    n = len(tensors)
    nodes = [_node_of(t) for t in tensors]
    state: dict[int, list[Any]] = {}  # gt id -> [count, expected, buffer]
    lock = threading.Lock()

    def inner(idx: int) -> Callable[[Tensor], Any]:
        def hook(grad: Tensor) -> Any:
            gt = _current_gt()
            with lock:
                st = state.get(gt.id)
                if st is None:
                    expected = gt.count_executed(nodes)
                    st = state[gt.id] = [0, expected, [None] * n]
                    gt.add_on_finish(drop)
                st[0] += 1
                st[2][idx] = grad
                if st[0] < st[1]:
                    return None
                del state[gt.id]
            return _none(fn(st[2]))

        return hook

    def drop(gt: GraphTask) -> None:
        with lock:
            state.pop(gt.id, None)

    return MultiHandle(tuple(t.register_hook(inner(i)) for i, t in enumerate(tensors)))


def _hook_for_any(tensors: tuple[Tensor, ...], fn: Callable[..., Any]) -> MultiHandle:
    """``mode="any"``: one hook on every tensor; the first call of a backward calls ``fn(grad)``."""
    ran: set[int] = set()  # the graph tasks (ids) that called fn
    lock = threading.Lock()

    def any_hook(grad: Tensor) -> Any:
        gt = _current_gt()
        with lock:
            if gt.id in ran:
                return None
            ran.add(gt.id)
            gt.add_on_finish(forget)
        return _none(fn(grad))

    def forget(gt: GraphTask) -> None:
        with lock:
            ran.discard(gt.id)

    return MultiHandle(tuple(t.register_hook(any_hook) for t in tensors))


def _current_gt() -> GraphTask:
    gt = current_graph_task()
    if gt is None:
        raise AutogradError("a multi-grad hook can only run inside a backward call")
    return gt


def _none(res: Any) -> Any:
    """The hook never replaces the gradient; awaitables are passed on to be awaited."""
    if inspect.isawaitable(res):

        async def wait() -> None:
            await res

        return wait()
    return None
