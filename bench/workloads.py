"""The graph workloads (chain, wide, mlp): one definition for every system.

A workload's ``fn(ns, consts, *params)`` builds the loss with the ops of a
namespace ``ns`` (``torch``, ``aengine``, ``mygrad``, ``autograd.numpy``):
they share operator overloading, ``sin``, ``tanh``, ``@``, ``.sum()`` and
``.mean()``, so each system runs exactly the same graph.  The numpy floor is
written by hand next to it: the least work any system could do (each node's
backward formula, no graph, no bookkeeping).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["GraphWorkload", "chain", "wide", "mlp", "mlp_params"]


@dataclass
class GraphWorkload:
    """A loss over ``params`` (the tensors differentiated) and ``consts``."""

    name: str
    family: str
    description: str
    params: list[np.ndarray]
    consts: list[np.ndarray]
    fn: Callable[..., Any]
    floor_forward: Callable[[list[np.ndarray], list[np.ndarray]], Any]
    floor_backward: Callable[[Any], list[np.ndarray]]
    #: "split": forward and backward timed apart; "step": one forward+backward
    timing: str = "split"
    rtol: float = 1e-7
    atol: float = 1e-10
    nodes: int = 0
    info: dict[str, Any] = field(default_factory=dict)


# -- chain: y = sin(y * 1.0001 + 0.001), 3 nodes per link ----------------------


def chain(nodes: int) -> GraphWorkload:
    """A chain of ``nodes`` small nodes on a (16,) float64 vector, loss = y.sum()."""
    links = nodes // 3

    def fn(ns: Any, consts: list[Any], x: Any) -> Any:
        y = x
        for _ in range(links):
            y = ns.sin(y * 1.0001 + 0.001)
        return y.sum()

    def floor_forward(consts: list[np.ndarray], params: list[np.ndarray]) -> Any:
        y = params[0]
        zs = []
        for _ in range(links):
            z = y * 1.0001 + 0.001
            zs.append(z)
            y = np.sin(z)
        return zs, y.sum()

    def floor_backward(state: Any) -> list[np.ndarray]:
        zs, _ = state
        g = np.ones_like(zs[-1]) if zs else np.ones(16)
        for z in reversed(zs):
            g = g * np.cos(z)
            g = g * 1.0001
        return [g]

    return GraphWorkload(
        name=f"chain-{_k(nodes)}",
        family="chain",
        description=f"x (16,) float64; y = sin(y*1.0001 + 0.001) x {links} ({3 * links} nodes); loss = y.sum()",
        params=[np.linspace(-1.0, 1.0, 16)],
        consts=[],
        fn=fn,
        floor_forward=floor_forward,
        floor_backward=floor_backward,
        nodes=3 * links + 1,
    )


# -- wide: loss = sum_i sin(x * c_i).sum(), 4 nodes per branch -----------------


def wide(branches: int) -> GraphWorkload:
    """``branches`` branches sin(x * c_i) summed one by one into the loss."""
    cs = [float(c) for c in np.linspace(0.5, 1.5, branches)]

    def fn(ns: Any, consts: list[Any], x: Any) -> Any:
        loss = ns.sin(x * cs[0]).sum()
        for c in cs[1:]:
            loss = loss + ns.sin(x * c).sum()
        return loss

    def floor_forward(consts: list[np.ndarray], params: list[np.ndarray]) -> Any:
        x = params[0]
        zs = []
        loss = 0.0
        for c in cs:
            z = x * c
            zs.append(z)
            loss = loss + np.sin(z).sum()
        return zs, loss

    def floor_backward(state: Any) -> list[np.ndarray]:
        zs, _ = state
        gx = np.zeros_like(zs[0])
        for z, c in zip(reversed(zs), reversed(cs)):
            gx += np.cos(z) * c
        return [gx]

    return GraphWorkload(
        name=f"wide-{_k(branches)}",
        family="wide",
        description=f"x (16,) float64; {branches} branches sin(x*c_i).sum() added one by one ({4 * branches} nodes)",
        params=[np.linspace(-1.0, 1.0, 16)],
        consts=[],
        fn=fn,
        floor_forward=floor_forward,
        floor_backward=floor_backward,
        nodes=4 * branches,
    )


# -- mlp: tanh MLP with MSE loss, float32 ---------------------------------------


def mlp_params(
    width: int, depth: int, batch: int, seed: int = 0, dtype: Any = np.float32
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(params = [W1, b1, ..., Wd, bd], consts = [X, Y]) of a ``depth``-layer MLP."""
    rng = np.random.default_rng(seed)
    params: list[np.ndarray] = []
    for _ in range(depth):
        params.append((rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype))
        params.append((rng.standard_normal(width) * 0.1).astype(dtype))
    x = rng.standard_normal((batch, width)).astype(dtype)
    y = (rng.standard_normal((batch, width)) * 0.5).astype(dtype)
    return params, [x, y]


def mlp_fn(ns: Any, consts: list[Any], *params: Any) -> Any:
    """h = tanh(h @ W + b) for every layer but the last (linear); MSE against Y."""
    x, y = consts
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = ns.tanh(h)
    return ((h - y) ** 2).mean()


def mlp_floor_forward(consts: list[np.ndarray], params: list[np.ndarray]) -> Any:
    x, y = consts
    hs = [x]
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = np.tanh(h)
        hs.append(h)
    diff = h - y
    return hs, params, diff, float((diff * diff).mean())


def mlp_floor_backward(state: Any) -> list[np.ndarray]:
    """The hand-written backward; frees each activation once used (retain_graph=False)."""
    hs, params, diff, _ = state
    n = len(params) // 2
    g = diff * np.asarray(2.0 / diff.size, dtype=diff.dtype)
    grads: list[np.ndarray] = [None] * len(params)  # type: ignore[list-item]
    hs.pop()  # the output: its gradient is g
    for i in reversed(range(n)):
        h_in = hs.pop()
        grads[2 * i] = h_in.T @ g
        grads[2 * i + 1] = g.sum(axis=0)
        if i > 0:
            g = (g @ params[2 * i].T) * (1 - h_in * h_in)
    return grads


def mlp(width: int, depth: int, batch: int) -> GraphWorkload:
    """One forward+backward step of a float32 tanh MLP, gradients of every W and b."""
    params, consts = mlp_params(width, depth, batch)
    return GraphWorkload(
        name=f"mlp-{width}",
        family="mlp",
        description=f"float32 batch {batch}, {depth} layers of width {width}, tanh, MSE; forward+backward",
        params=params,
        consts=consts,
        fn=mlp_fn,
        floor_forward=mlp_floor_forward,
        floor_backward=mlp_floor_backward,
        timing="step",
        rtol=2e-3,
        atol=2e-4,
        nodes=3 * depth + 2,
    )


def _k(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)
