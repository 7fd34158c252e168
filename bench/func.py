"""``python -m bench.func``: per-sample gradients, ``vmap(grad)`` beside its alternatives.

A batch of 256 samples through two models of the digits task (8x8 images,
10 classes), float32, cross-entropy loss per sample:

- ``mlp``: Linear(64, 128)-ReLU-Linear(128, 128)-ReLU-Linear(128, 10) on
  the flattened image;
- ``cnn``: the digits CNN of bench/models.py.

Per model, side by side in interleaved rounds (the median time of each):

- ``ae vmap(grad)``: ``ae.sync.func.vmap(ae.sync.func.grad(loss), in_dims=
  (None, 0, 0))(params, x, y)`` with ``functional_call``: every parameter's
  gradient for each of the 256 samples;
- ``ae per-sample loop``: the same gradients by one forward and one backward
  per sample (``ae.sync.grad`` 256 times);
- ``ae batched backward``: one forward and one backward of the batch's mean
  loss (the batch's gradient only: the reference of the target);
- ``torch.func vmap(grad)``: torch's per-sample gradients, the same way.

The targets (the issue): ``ae vmap(grad)`` within 2x ``ae batched
backward`` and at most ``torch.func``'s time.  The first round's gradients
are compared with torch's (printed max difference).

    python -m bench.func --threads 1      # one BLAS/OpenMP thread (the targets' setting)
    python -m bench.func --rounds 11
    python -m bench.func --quick          # a smoke test: batch 16, one round

``--threads N`` must act before numpy and torch load, so it is read first.
"""

from __future__ import annotations

import sys

from .threads import apply_thread_env

if __name__ == "__main__":
    apply_thread_env(sys.argv[1:])

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

__all__ = ["main", "measure"]


def _mlp(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def _cnn(lib: Any) -> Any:
    from .models import cnn  # (the CNN of the models benchmark)

    return cnn(lib)


MODELS: dict[str, Callable[[Any], Any]] = {"mlp": _mlp, "cnn": _cnn}


def _setup(name: str, batch: int) -> dict[str, Callable[[], Any]]:
    import torch

    import aengine as ae

    torch.manual_seed(0)
    tm = MODELS[name](torch)
    am = MODELS[name](ae)
    am.load_state_dict({k: ae.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    ax, ay, tx, ty = ae.tensor(x), ae.tensor(y), torch.tensor(x), torch.tensor(y)
    ap = {k: v.detach() for k, v in am.named_parameters()}
    tp = {k: v.detach() for k, v in tm.named_parameters()}
    aF, tF = ae.nn.functional, torch.nn.functional

    def aloss(p: Any, xb: Any, yb: Any) -> Any:
        out = ae.func.functional_call(am, p, (xb.unsqueeze(0),))
        return aF.cross_entropy(out, yb.unsqueeze(0))

    def tloss(p: Any, xb: Any, yb: Any) -> Any:
        out = torch.func.functional_call(tm, p, (xb.unsqueeze(0),))
        return tF.cross_entropy(out, yb.unsqueeze(0))

    a_psg = ae.sync.func.vmap(ae.sync.func.grad(aloss), in_dims=(None, 0, 0))
    t_psg = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))
    params = list(am.parameters())

    def a_loop() -> Any:
        return [
            ae.sync.grad(aF.cross_entropy(am(ax[i : i + 1]), ay[i : i + 1]), params)
            for i in range(batch)
        ]

    def a_batched() -> Any:
        return ae.sync.grad(aF.cross_entropy(am(ax), ay), params)

    got, want = a_psg(ap, ax, ay), t_psg(tp, tx, ty)
    diff = max(float(np.abs(got[k].numpy() - want[k].numpy()).max()) for k in got)
    size = sum(g.numpy().nbytes for g in got.values())
    print(
        f"{name}: max |ae - torch| of the per-sample gradients: {diff:.2e}; they hold {size / 2**20:.1f} MiB"
    )
    return {
        "ae vmap(grad)": lambda: a_psg(ap, ax, ay),
        "ae per-sample loop": a_loop,
        "ae batched backward": a_batched,
        "torch.func vmap(grad)": lambda: t_psg(tp, tx, ty),
    }


def measure(name: str, batch: int, rounds: int) -> dict[str, float]:
    """Median seconds of each way, over ``rounds`` interleaved rounds (the order rotates)."""
    fns = _setup(name, batch)
    for fn in fns.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        for k in order:
            t0 = time.perf_counter()
            fns[k]()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print one markdown table per model."""
    ap = argparse.ArgumentParser(prog="python -m bench.func", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--only", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=None, help="BLAS/OpenMP threads (read first)")
    ap.add_argument("--quick", action="store_true", help="batch 16, one round")
    args = ap.parse_args(argv)
    batch, rounds = (16, 1) if args.quick else (args.batch, args.rounds)
    for name in [args.only] if args.only else list(MODELS):
        res = measure(name, batch, rounds)
        ref = res["ae batched backward"]
        torch_t = res["torch.func vmap(grad)"]
        print(f"\n#### {name}, batch {batch} (median of {rounds} rounds)\n")
        print("| way | ms | / ae batched backward | / torch.func |")
        print("|---|---:|---:|---:|")
        for k, t in res.items():
            print(f"| {k} | {t * 1e3:.2f} | {t / ref:.2f} | {t / torch_t:.2f} |")


if __name__ == "__main__":
    main()
