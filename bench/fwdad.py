"""``python -m bench.fwdad``: forward-mode AD's cost against one forward.

Per workload, interleaved rounds of:

- ``forward``: the function with recording off (``ae.no_grad``): the floor;
- ``forward (recorded)``: the same with inputs that require grad;
- ``jvp (forward mode)``: ``ae.sync.functional.jvp`` (one forward carrying
  the tangents, recording off);
- ``jvp (double backward)``: the same product by torch.autograd.functional's
  trick (``strict=True`` takes that path: a forward and two backwards);
- ``torch forward AD``: ``torch.func.jvp`` on the same arrays, where torch
  is installed.

Workloads: an MLP (batch 64, 784-256-256-10, tanh), small elementwise ops
(a chain of 200 sin/mul/add on 64 elements: the per-op overhead), and a
convolution (batch 16, 1x28x28, 8 3x3 filters, relu, avg-pool, linear).
The report gives medians and the ratio of each to ``forward``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import aengine as ae


def _mlp(lib: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    ws = [
        rng.standard_normal((256, 784)) * 0.05,
        rng.standard_normal(256) * 0.1,
        rng.standard_normal((256, 256)) * 0.05,
        rng.standard_normal(256) * 0.1,
        rng.standard_normal((10, 256)) * 0.05,
        rng.standard_normal(10) * 0.1,
    ]
    F = lib.nn.functional
    arrays = [np.asarray(w, dtype=np.float32) for w in ws]

    def make(params: list[Any]) -> Callable[[Any], Any]:
        w1, b1, w2, b2, w3, b3 = params

        def f(x: Any) -> Any:
            h = lib.tanh(F.linear(x, w1, b1))
            h = lib.tanh(F.linear(h, w2, b2))
            return F.linear(h, w3, b3)

        return f

    x = np.asarray(rng.standard_normal((64, 784)), dtype=np.float32)
    return make, [x, *arrays]


def _chain(lib: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    def make(params: list[Any]) -> Callable[[Any], Any]:
        def f(x: Any) -> Any:
            for _ in range(200):
                x = lib.sin(x) * 0.9 + 0.1
            return x

        return f

    return make, [np.asarray(rng.standard_normal(64), dtype=np.float32)]


def _conv(lib: Any, rng: np.random.Generator) -> tuple[Callable[..., Any], list[np.ndarray]]:
    F = lib.nn.functional
    ws = [
        np.asarray(rng.standard_normal((8, 1, 3, 3)) * 0.3, dtype=np.float32),
        np.asarray(rng.standard_normal(8) * 0.1, dtype=np.float32),
        np.asarray(rng.standard_normal((10, 8 * 14 * 14)) * 0.02, dtype=np.float32),
    ]

    def make(params: list[Any]) -> Callable[[Any], Any]:
        w, b, fc = params

        def f(x: Any) -> Any:
            h = F.avg_pool2d(F.relu(F.conv2d(x, w, b, padding=1)), 2)
            return F.linear(h.flatten(1), fc)

        return f

    x = np.asarray(rng.standard_normal((16, 1, 28, 28)), dtype=np.float32)
    return make, [x, *ws]


WORKLOADS = {"mlp": _mlp, "chain": _chain, "conv": _conv}


def _systems(name: str) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    make, arrays = WORKLOADS[name](ae, rng)
    x = ae.tensor(arrays[0])
    params = [ae.tensor(a) for a in arrays[1:]]
    f = make(params)
    v = ae.tensor(np.random.default_rng(1).standard_normal(arrays[0].shape).astype(np.float32))
    xr = ae.tensor(arrays[0], requires_grad=True)

    def forward() -> Any:
        with ae.no_grad():
            return f(x)

    systems: dict[str, Callable[[], Any]] = {
        "forward": forward,
        "forward (recorded)": lambda: f(xr),
        "jvp (forward mode)": lambda: ae.sync.functional.jvp(f, x, v),
        "jvp (double backward)": lambda: ae.sync.functional.jvp(f, x, v, strict=True),
    }
    try:
        import torch
    except ImportError:  # torch is optional: the comparison is skipped
        return systems
    torch.set_num_threads(1)  # one thread, as aengine's numpy kernels here (a fair floor)
    tmake, tarrays = WORKLOADS[name](torch, np.random.default_rng(0))
    tx = torch.from_numpy(tarrays[0])
    tf = tmake([torch.from_numpy(a) for a in tarrays[1:]])
    tv = torch.from_numpy(np.asarray(v.numpy()))
    systems["torch forward"] = lambda: _torch_nograd(torch, tf, tx)
    systems["torch forward AD"] = lambda: torch.func.jvp(tf, (tx,), (tv,))
    return systems


def _torch_nograd(torch: Any, f: Callable[[Any], Any], x: Any) -> Any:
    with torch.no_grad():
        return f(x)


def _check(name: str) -> None:
    """The forward-mode product equals the double-backward one (the bench measures a right answer)."""
    s = _systems(name)
    _, a = s["jvp (forward mode)"]()
    _, b = s["jvp (double backward)"]()
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-5)


def run(names: list[str], rounds: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name in names:
        _check(name)
        systems = _systems(name)
        times: dict[str, list[float]] = {k: [] for k in systems}
        for fn in systems.values():  # warm up
            fn()
        for r in range(rounds):
            order = list(systems.items())
            if r % 2:
                order.reverse()
            for key, fn in order:
                t0 = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - t0)
        results[name] = {k: statistics.median(v) for k, v in times.items()}
    return results


def report(results: dict[str, dict[str, float]]) -> str:
    lines = ["| workload | measured | median | / forward |", "| --- | --- | --- | --- |"]
    for name, res in results.items():
        base = res["forward"]
        for key, t in res.items():
            lines.append(f"| {name} | {key} | {t * 1e3:.3f} ms | {t / base:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(WORKLOADS), help="workloads, comma-separated")
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args(argv)
    print(report(run(args.only.split(","), args.rounds)))


if __name__ == "__main__":
    main()
