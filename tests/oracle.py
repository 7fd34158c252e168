"""Compare aengine with PyTorch (the oracle) on first and second derivatives.

``check_op(ae_fn, torch_fn, shapes)`` builds random inputs of the given
shapes (float64 by default), runs both functions, and compares the outputs,
the first derivatives (grad of a random weighted sum of the outputs) and
the second derivatives (grad of the first derivatives, create_graph=True).

Both sides run on the cpu unless ``AENGINE_TEST_DEVICE`` names a GPU
(``cuda:0``) or a simulated one (``sim:0``): then aengine runs there and
torch on its CUDA twin (or on the cpu),
and every tensor made with ``ae.tensor`` / ``torch.tensor`` inside a check
(the inputs, the weights, an index or a mask a test builds) is made there.
``AENGINE_TEST_DTYPE`` changes the dtype of the checks that name none
(float64 by default).  ``make gpu-check`` runs the op tests that way, once
per dtype.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import aengine as ae

#: where check_op runs both sides, and the dtype of the checks that name none
DEVICE = os.environ.get("AENGINE_TEST_DEVICE", "cpu")
DEFAULT_DTYPE = os.environ.get("AENGINE_TEST_DTYPE", "float64")

RTOL = {np.dtype("float64"): 1e-7, np.dtype("float32"): 1e-4}
ATOL = {np.dtype("float64"): 1e-10, np.dtype("float32"): 1e-5}


def torch_or_skip() -> Any:
    """Import torch (the oracle) or skip the test with a visible reason."""
    return pytest.importorskip(
        "torch", reason="torch 2.13.0 (CPU) is not installed: oracle comparison skipped"
    )


def torch_texts_or_skip() -> Any:
    """torch for a comparison of error texts: those of torch 2.13, the pinned oracle.

    Older releases word some of them differently (``SliceBackward0`` where
    2.13 says ``Slice``); such a torch (a GPU machine's own) skips the test.
    """
    torch = torch_or_skip()
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 13):
        pytest.skip(f"error texts are torch 2.13's; this torch is {torch.__version__}")
    return torch


def _tnp(t: Any) -> np.ndarray:
    return t.detach().numpy(force=True)


@contextmanager
def _on_device(torch: Any) -> Iterator[None]:
    """Make ``ae.tensor`` and ``torch.tensor`` default to ``DEVICE`` (and its twin)."""
    if DEVICE == "cpu":
        yield
        return
    tensor = ae.tensor

    def on_device(data: Any, *args: Any, device: Any = DEVICE, **kwargs: Any) -> Any:
        return tensor(data, *args, device=device, **kwargs)

    ae.tensor = on_device  # type: ignore[assignment]
    # torch's twin: the same "cuda:N"; a simulated device's data is on the cpu
    torch.set_default_device("cpu" if DEVICE.startswith("sim") else DEVICE)
    try:
        yield
    finally:
        ae.tensor = tensor  # type: ignore[assignment]
        torch.set_default_device(None)


def _outputs(res: Any) -> list[Any]:
    return list(res) if isinstance(res, (tuple, list)) else [res]


def check_op(
    ae_fn: Callable[..., Any],
    torch_fn: Callable[..., Any],
    shapes: Sequence[tuple[int, ...]],
    *,
    dtype: str | None = None,
    second_order: bool = True,
    inputs: Sequence[np.ndarray] | None = None,
    positive: bool = False,
    seed: int = 0,
) -> None:
    """Assert that ``ae_fn`` and ``torch_fn`` agree in value, grad and grad-of-grad."""
    torch = torch_or_skip()
    with _on_device(torch):
        _check_op(
            torch,
            ae_fn,
            torch_fn,
            shapes,
            dtype=dtype or DEFAULT_DTYPE,
            second_order=second_order,
            inputs=inputs,
            positive=positive,
            seed=seed,
        )


def _check_op(
    torch: Any,
    ae_fn: Callable[..., Any],
    torch_fn: Callable[..., Any],
    shapes: Sequence[tuple[int, ...]],
    *,
    dtype: str,
    second_order: bool,
    inputs: Sequence[np.ndarray] | None,
    positive: bool,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    if inputs is None:
        arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
        if positive:
            arrays = [np.abs(a) + 0.5 for a in arrays]
    else:
        arrays = [np.asarray(a, dtype=dtype) for a in inputs]
    dt = np.dtype(dtype)
    rtol, atol = RTOL[dt], ATOL[dt]
    xs = [ae.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    outs = [o for o in _outputs(ae_fn(*xs)) if o.requires_grad]
    touts = [o for o in _outputs(torch_fn(*ts)) if o.requires_grad]
    assert len(outs) == len(touts), "different number of differentiable outputs"
    for o, to in zip(outs, touts):
        np.testing.assert_allclose(o.detach().numpy(), _tnp(to), rtol=rtol, atol=atol)
        assert o.dtype == np.dtype(str(to.dtype).replace("torch.", "")), (o.dtype, to.dtype)
        assert o.device == DEVICE, (o.device, DEVICE)
    if not outs:
        return
    weights = [rng.standard_normal(o.shape).astype(dtype) for o in outs]
    loss = sum((o * ae.tensor(w)).sum() for o, w in zip(outs, weights))
    tloss = sum((o * torch.tensor(w)).sum() for o, w in zip(touts, weights))
    grads = ae.sync.grad(loss, xs, create_graph=second_order, allow_unused=True)
    tgrads = torch.autograd.grad(tloss, ts, create_graph=second_order, allow_unused=True)
    for g, tg in zip(grads, tgrads):
        if tg is None:
            assert g is None or np.all(g.detach().numpy() == 0)
            continue
        assert g is not None
        assert g.shape == tuple(tg.shape)
        assert g.device == DEVICE, (g.device, DEVICE)
        np.testing.assert_allclose(g.detach().numpy(), _tnp(tg), rtol=rtol, atol=atol)
    if not second_order:
        return
    pairs = [(g, tg) for g, tg in zip(grads, tgrads) if tg is not None and tg.requires_grad]
    if not pairs:
        return
    vs = [rng.standard_normal(tuple(tg.shape)).astype(dtype) for _, tg in pairs]
    l2 = sum((g * ae.tensor(v)).sum() for (g, _), v in zip(pairs, vs))
    tl2 = sum((tg * torch.tensor(v)).sum() for (_, tg), v in zip(pairs, vs))
    if not l2.requires_grad:
        return
    g2 = ae.sync.grad(l2, xs, allow_unused=True)
    tg2 = torch.autograd.grad(tl2, ts, allow_unused=True)
    for g, tg in zip(g2, tg2):
        if tg is None:
            assert g is None or np.allclose(g.numpy(), 0)
            continue
        if g is None:
            np.testing.assert_allclose(_tnp(tg), 0, atol=atol)
            continue
        np.testing.assert_allclose(g.numpy(), _tnp(tg), rtol=rtol, atol=atol)
