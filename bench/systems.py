"""One adapter per system for the graph workloads (chain, wide, mlp).

An adapter's ``trial(wl)`` converts the workload's arrays to its own tensors
(untimed), then times the forward (graph recording) and the backward apart,
and returns ``{"forward": s, "backward": s, "step": s, "grads": [...]}`` with
the gradients as numpy arrays for the check against torch.

The async aengine adapters time inside the event loop (``anyio.run`` start-up
is not counted): the forward runs in the coroutine as it would in a service,
the backward is ``await ae.grad(...)``.
"""

from __future__ import annotations

import importlib
from time import perf_counter
from typing import Any

import numpy as np

from .workloads import GraphWorkload

__all__ = ["System", "all_systems", "REFERENCE", "FLOOR"]

REFERENCE = "torch"
FLOOR = "numpy floor"


class System:
    """A system under test; ``available`` is False with ``reason`` if it cannot run."""

    name = ""
    module = ""

    def __init__(self) -> None:
        self.available = True
        self.reason = ""
        self.version = ""
        if self.module:
            try:
                mod = importlib.import_module(self.module)
                self.version = str(getattr(mod, "__version__", ""))
                if not self.version:
                    from importlib.metadata import version

                    self.version = version(self.module)
            except Exception as exc:
                self.available = False
                self.reason = f"import {self.module} failed: {type(exc).__name__}: {exc}"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        raise NotImplementedError


def _result(t0: float, t1: float, t2: float, grads: list[Any]) -> dict[str, Any]:
    return {"forward": t1 - t0, "backward": t2 - t1, "step": t2 - t0, "grads": grads}


class Torch(System):
    name = "torch"
    module = "torch"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        import torch

        ps = [torch.tensor(p, requires_grad=True) for p in wl.params]
        cs = [torch.from_numpy(c) for c in wl.consts]
        t0 = perf_counter()
        loss = wl.fn(torch, cs, *ps)
        t1 = perf_counter()
        grads = torch.autograd.grad(loss, ps)
        t2 = perf_counter()
        return _result(t0, t1, t2, [g.numpy() for g in grads])


class AengineSync(System):
    """``ae.sync.grad``; ``ae`` is the aengine module to measure (python -m bench.ab)."""

    name = "aengine sync"
    module = "aengine"

    def __init__(self, ae: Any = None) -> None:
        super().__init__()
        self.ae = ae

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        ae = self.ae
        if ae is None:
            import aengine as ae

        ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
        cs = [ae.as_tensor(c) for c in wl.consts]
        t0 = perf_counter()
        loss = wl.fn(ae, cs, *ps)
        t1 = perf_counter()
        grads = ae.sync.grad(loss, ps)
        t2 = perf_counter()
        return _result(t0, t1, t2, [g.numpy() for g in grads])


class AengineSyncBackward(System):
    """``ae.sync.backward`` (accumulates into ``.grad``): the engine without captures."""

    name = "aengine sync .backward()"
    module = "aengine"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        import aengine as ae

        ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
        cs = [ae.as_tensor(c) for c in wl.consts]
        t0 = perf_counter()
        loss = wl.fn(ae, cs, *ps)
        t1 = perf_counter()
        ae.sync.backward(loss)
        t2 = perf_counter()
        return _result(t0, t1, t2, [p.grad.numpy() for p in ps])


class AengineAsync(System):
    """``await ae.grad`` inline in a task, under asyncio or trio."""

    module = "aengine"

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = backend
        self.name = f"aengine async ({backend})"
        if backend == "trio" and self.available:
            try:
                import trio  # noqa: F401
            except Exception as exc:
                self.available = False
                self.reason = f"import trio failed: {exc}"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        import anyio

        import aengine as ae

        ps = [ae.tensor(p, requires_grad=True) for p in wl.params]
        cs = [ae.as_tensor(c) for c in wl.consts]

        async def run() -> dict[str, Any]:
            t0 = perf_counter()
            loss = wl.fn(ae, cs, *ps)
            t1 = perf_counter()
            grads = await ae.grad(loss, ps)
            t2 = perf_counter()
            return _result(t0, t1, t2, [g.numpy() for g in grads])

        return anyio.run(run, backend=self.backend)  # type: ignore[no-any-return]


class Hips(System):
    """HIPS autograd: ``make_vjp`` records the graph (forward), ``vjp`` is the backward."""

    name = "HIPS autograd"
    module = "autograd"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        import autograd.numpy as anp
        from autograd import make_vjp

        ps = [p.copy() for p in wl.params]

        def f(params: list[Any]) -> Any:
            return wl.fn(anp, wl.consts, *params)

        t0 = perf_counter()
        vjp, ans = make_vjp(f)(ps)
        t1 = perf_counter()
        grads = vjp(np.ones_like(ans))
        t2 = perf_counter()
        return _result(t0, t1, t2, list(grads))


class MyGrad(System):
    name = "MyGrad"
    module = "mygrad"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        import mygrad as mg

        ps = [mg.tensor(p) for p in wl.params]
        t0 = perf_counter()
        loss = wl.fn(mg, wl.consts, *ps)
        t1 = perf_counter()
        loss.backward()
        grads = [np.asarray(p.grad) for p in ps]
        t2 = perf_counter()
        return _result(t0, t1, t2, grads)


class NumpyFloor(System):
    """The hand-written numpy backward: the least work possible."""

    name = FLOOR
    module = "numpy"

    def trial(self, wl: GraphWorkload) -> dict[str, Any]:
        ps = [p.copy() for p in wl.params]
        t0 = perf_counter()
        state = wl.floor_forward(wl.consts, ps)
        t1 = perf_counter()
        grads = wl.floor_backward(state)
        t2 = perf_counter()
        return _result(t0, t1, t2, grads)


def all_systems() -> list[System]:
    """Every adapter, in report order (torch first: it is the reference)."""
    return [
        Torch(),
        AengineSync(),
        AengineSyncBackward(),
        AengineAsync("asyncio"),
        AengineAsync("trio"),
        Hips(),
        MyGrad(),
        NumpyFloor(),
    ]
