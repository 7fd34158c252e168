"""Where a node runs, and the scheduler of an async backward without an Engine.

See NOTE [Device queues] in _engine.py.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from anyio.lowlevel import RunVar

from ..core import GraphTask, Node
from ..tensors import CPU, Device
from ._offload import DEFAULT_OFFLOAD_MIN_ELEMENTS, run_kernel

__all__ = ["LAZY", "NEED_ENGINE", "default_threads", "node_device"]

#: returned by ``Scheduler.dispatch`` when an async backward without an
#: Engine meets its first non-cpu node: the driver opens a short-lived Engine
NEED_ENGINE = object()


def node_device(node: Node) -> Device:
    """The device whose queue runs ``node`` (see NOTE [Device queues])."""
    dev = node.dev
    return CPU if dev is None else dev


def _loop_limiter() -> anyio.CapacityLimiter:
    """The kernel-thread limiter of the running event loop (backwards without an Engine)."""
    try:
        return _LIMITER_VAR.get()
    except LookupError:
        lim = anyio.CapacityLimiter(default_threads())
        _LIMITER_VAR.set(lim)
        return lim


_LIMITER_VAR: RunVar[anyio.CapacityLimiter] = RunVar("aengine_cpu_limiter")


class _Lazy:
    """Scheduler of an async backward without an Engine (cpu only until proven otherwise).

    The first non-cpu node makes ``dispatch`` return NEED_ENGINE: the driver
    then opens a short-lived Engine and continues inside it, so a cpu-only
    graph never pays for task groups.  Heavy kernels run in threads of the
    loop's own limiter.
    """

    __slots__ = ()
    home = CPU
    offload_min = DEFAULT_OFFLOAD_MIN_ELEMENTS

    def node_hook(self) -> None:
        return None

    def push(self, gt: GraphTask, node: Node, buffer: list[Any]) -> None:
        gt.keep(node, buffer)

    def dispatch(self, gt: GraphTask, node: Node, buffer: list[Any]) -> Any:
        if node_device(node) is CPU:
            return False
        gt.keep(node, buffer)
        return NEED_ENGINE

    def busy(self, gt: GraphTask) -> bool:
        return False

    def release(self, gt: GraphTask) -> None:
        pass

    async def kernel(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        return await run_kernel(node, inputs, gt.create_graph, _loop_limiter())


LAZY = _Lazy()


def default_threads() -> int:
    return max(2, os.cpu_count() or 2)
