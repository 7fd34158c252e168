"""``python -m bench.ops``: each operator's forward and backward beside torch's.

Three parts, each a table of aengine's time, torch's and their ratio (the
median over ``--rounds`` rounds of the time per call; calls alternate
between the two libraries round by round, so both see the same machine):

- small: every entry of the operator table that torch has, on its first
  sample (a few to a few hundred elements, float32): forward, then the
  gradient of every differentiable result (``ae.sync.grad`` beside
  ``torch.autograd.grad``).  This is the per-op overhead; the summary gives
  the median ratio over the ops.
- large: representative ops at sizes where the kernels dominate.
- block: a ResNet-like block (batch 32, 64 channels, 32x32, two 3x3
  convolutions with batch norm and ReLU, and the residual), forward and
  backward.

    python -m bench.ops --threads 1            # one BLAS thread (the default of the docs)
    python -m bench.ops                        # the libraries' default thread pools
    python -m bench.ops --only small --rounds 5
    python -m bench.ops --quick                # a smoke test: few ops, one round

``--threads N`` must act before numpy and torch load, so it is read first.
"""

from __future__ import annotations

import sys

from .threads import apply_thread_env

if __name__ == "__main__":
    apply_thread_env(sys.argv[1:])

import argparse  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Callable  # noqa: E402
from time import perf_counter  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

__all__ = ["main", "small_cases", "large_cases", "block_case", "timed_pair"]

Case = tuple[str, Callable[[], Any], Callable[[], Any]]


def timed_pair(
    a: Callable[[], Any], b: Callable[[], Any], rounds: int, budget: float = 0.02
) -> tuple[float, float]:
    """Median seconds per call of ``a`` and of ``b``, alternating round by round."""
    a()
    b()  # warm-up: caches, plans, lazy imports
    t0 = perf_counter()
    a()
    calls = max(1, min(200, int(budget / max(perf_counter() - t0, 1e-7))))
    ta: list[float] = []
    tb: list[float] = []
    for r in range(rounds):
        for fn, out in ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta)):
            t0 = perf_counter()
            for _ in range(calls):
                fn()
            out.append((perf_counter() - t0) / calls)
    return statistics.median(ta), statistics.median(tb)


def _convert(x: Any, make: Callable[[np.ndarray, bool], Any], rg: bool, leaves: list[Any]) -> Any:
    if isinstance(x, np.ndarray):
        want = rg and x.dtype.kind == "f"
        t = make(x, want)
        if want:
            leaves.append(t)
        return t
    if isinstance(x, (list, tuple)):
        return type(x)(_convert(v, make, rg, leaves) for v in x)
    return x


def _flat(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _flat(o)]
    return [out]


def _step(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Any],
    grad: Callable[[list[Any], list[Any]], Any], is_float: Callable[[Any], bool],
) -> Callable[[], Any]:  # fmt: skip
    """One forward and, where a result is differentiable, one backward."""

    def step() -> Any:
        outs = [o for o in _flat(fn(*args, **kwargs)) if is_float(o)]
        if leaves and outs:
            return grad([o.sum() for o in outs], leaves)
        return outs

    return step


def small_cases(names: list[str] | None = None) -> list[Case]:
    """Every table entry torch has, on its first float32 sample."""
    import torch

    import aengine as ae
    from aengine.ops._table import TABLE, Maker

    def ae_grad(outs: list[Any], leaves: list[Any]) -> Any:
        return ae.sync.grad(outs, leaves, allow_unused=True)

    def t_grad(outs: list[Any], leaves: list[Any]) -> Any:
        return torch.autograd.grad(outs, leaves, allow_unused=True)

    def ae_float(o: Any) -> bool:
        return isinstance(o, ae.Tensor) and o.requires_grad and o.dtype.kind == "f"

    def t_float(o: Any) -> bool:
        return isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()

    cases: list[Case] = []
    for name in sorted(TABLE):
        info = TABLE[name]
        if names is not None and name not in names:
            continue
        if info.random:
            continue
        dtype = "float32" if "float32" in info.dtypes else info.dtypes[0]
        samples = list(info.samples(Maker(dtype, seed=0)))
        if not samples:
            continue
        s = samples[0]
        try:
            tfn = info.torch_fn(torch)
        except AttributeError:
            continue
        pos = set(s.grad) if s.grad is not None else set(range(len(s.args)))
        rg = info.grad
        a_leaves: list[Any] = []
        t_leaves: list[Any] = []
        a_args = tuple(
            _convert(a, lambda x, g: ae.tensor(x, requires_grad=g), rg and i in pos, a_leaves)
            for i, a in enumerate(s.args)
        )
        t_args = tuple(
            _convert(
                a,
                lambda x, g: torch.from_numpy(x.copy()).requires_grad_(g),
                rg and i in pos,
                t_leaves,
            )  # fmt: skip
            for i, a in enumerate(s.args)
        )
        a_kw = {k: _convert(v, lambda x, g: ae.tensor(x), False, []) for k, v in s.kwargs.items()}
        t_kw = {
            k: _convert(v, lambda x, g: torch.from_numpy(x.copy()), False, [])
            for k, v in s.kwargs.items()
        }
        cases.append(
            (
                name,
                _step(info.fn, a_args, a_kw, a_leaves, ae_grad, ae_float),
                _step(tfn, t_args, t_kw, t_leaves, t_grad, t_float),
            )
        )
    return cases


def _pair(
    name: str, build: Callable[[Any, Any], Callable[[], Any]], shapes: list[tuple[int, ...]]
) -> Case:
    """A large case: ``build(lib, inputs)`` -> step, for aengine and torch alike."""
    import torch

    import aengine as ae

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xa = [ae.tensor(a, requires_grad=True) for a in arrays]
    xt = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]

    def step(lib: Any, xs: list[Any], grad: Callable[..., Any]) -> Callable[[], Any]:
        f = build(lib, xs)

        def run() -> Any:
            return grad([f().sum()], xs, allow_unused=True)

        return run

    return (name, step(ae, xa, ae.sync.grad), step(torch, xt, torch.autograd.grad))


def large_cases() -> list[Case]:
    """Representative ops at sizes where the kernels dominate (float32)."""

    def nnf(lib: Any) -> Any:
        return lib.nn.functional

    specs: list[tuple[str, Callable[[Any, Any], Callable[[], Any]], list[tuple[int, ...]]]] = [
        ("exp 1M", lambda lib, x: lambda: lib.exp(x[0]), [(1 << 20,)]),
        ("mul 1M", lambda lib, x: lambda: x[0] * x[1], [(1 << 20,), (1 << 20,)]),
        ("sum 1024x1024 dim=1", lambda lib, x: lambda: x[0].sum(1), [(1024, 1024)]),
        ("softmax 1024x1024", lambda lib, x: lambda: lib.softmax(x[0], 1), [(1024, 1024)]),
        ("matmul 512", lambda lib, x: lambda: x[0] @ x[1], [(512, 512), (512, 512)]),
        ("erf 1M", lambda lib, x: lambda: lib.erf(x[0]), [(1 << 20,)]),
        ("gelu 1M", lambda lib, x: lambda: nnf(lib).gelu(x[0]), [(1 << 20,)]),
        ("cumsum 1024x1024", lambda lib, x: lambda: lib.cumsum(x[0], 1), [(1024, 1024)]),
        (
            "layer_norm 4096x256",
            lambda lib, x: lambda: nnf(lib).layer_norm(x[0], (256,)),
            [(4096, 256)],
        ),
        (
            "log_softmax 4096x1000",
            lambda lib, x: lambda: nnf(lib).log_softmax(x[0], 1),
            [(4096, 1000)],
        ),
        ("bmm 64x128x128", lambda lib, x: lambda: lib.bmm(x[0], x[1]), [(64, 128, 128)] * 2),
        (
            "conv2d 32x64x32x32 3x3",
            lambda lib, x: lambda: nnf(lib).conv2d(x[0], x[1], padding=1),
            [(32, 64, 32, 32), (64, 64, 3, 3)],
        ),
        (
            "max_pool2d 32x64x32x32",
            lambda lib, x: lambda: nnf(lib).max_pool2d(x[0], 2),
            [(32, 64, 32, 32)],
        ),
    ]
    cases = []
    for name, build, shapes in specs:
        case = _pair(name, build, shapes)
        try:
            case[1]()
        except AttributeError as exc:  # an op aengine lacks is left out, and said
            print(f"{name}: left out ({exc})", file=sys.stderr)
            continue
        cases.append(case)
    return cases


def block_case(batch: int = 32, channels: int = 64, size: int = 32) -> Case:
    """A ResNet-like basic block: conv-bn-relu-conv-bn, the residual, relu."""

    def build(lib: Any, xs: list[Any]) -> Callable[[], Any]:
        F = lib.nn.functional
        x, w1, w2, g1, b1, g2, b2 = xs

        def run() -> Any:
            h = F.conv2d(x, w1, padding=1)
            h = F.relu(F.batch_norm(h, None, None, g1, b1, training=True))
            h = F.conv2d(h, w2, padding=1)
            h = F.batch_norm(h, None, None, g2, b2, training=True)
            return F.relu(h + x)

        return run

    c = channels
    shapes = [(batch, c, size, size), (c, c, 3, 3), (c, c, 3, 3), (c,), (c,), (c,), (c,)]
    return _pair(f"resnet block {batch}x{c}x{size}x{size}", build, shapes)


def _table(title: str, rows: list[tuple[str, float, float]]) -> str:
    out = [f"### {title}\n", "| op | aengine ms | torch ms | ratio |", "|---|---:|---:|---:|"]
    for name, a, t in rows:
        out.append(f"| {name} | {a * 1e3:.3f} | {t * 1e3:.3f} | {a / t:.2f}x |")
    return "\n".join(out) + "\n"


def run(cases: list[Case], rounds: int) -> list[tuple[str, float, float]]:
    rows = []
    for name, a, b in cases:
        try:
            ta, tb = timed_pair(a, b, rounds)
        except Exception as exc:  # an op that fails here is reported, not fatal
            print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        rows.append((name, ta, tb))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ops", description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None, help="BLAS/OpenMP threads (read first)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", default="small,large,block", help="small, large, block")
    p.add_argument("--quick", action="store_true", help="a few ops, one round")
    args = p.parse_args(argv)
    parts = set(args.only.split(","))
    rounds = 1 if args.quick else args.rounds
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"threads: {args.threads or 'default'}, rounds: {rounds}\n")
    if "small" in parts:
        names = ["exp", "add", "sum", "matmul"] if args.quick else None
        rows = run(small_cases(names), rounds)
        print(_table("small: forward + backward, first sample of each op", rows))
        if rows:
            ratios = sorted(a / t for _, a, t in rows)
            print(f"median ratio over {len(rows)} ops: {statistics.median(ratios):.2f}x")
            print(f"ops faster than torch: {sum(r < 1 for r in ratios)} of {len(ratios)}\n")
    if "large" in parts and not args.quick:
        print(_table("large: forward + backward", run(large_cases(), rounds)))
    if "block" in parts:
        case = block_case(batch=2, channels=8, size=8) if args.quick else block_case()
        print(_table("ResNet-like block: forward + backward", run([case], rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
