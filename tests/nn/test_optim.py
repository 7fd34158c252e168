"""Optimizers and learning-rate schedules: parameters after N steps equal torch's.

Both libraries start from the same float64 arrays and take the same
gradients (those of a fixed quadratic-plus-sine loss, computed by each
library); the parameters after each step agree to 1e-10 relative.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import aengine as ae
from tests.oracle import torch_or_skip

STEPS = 6

OPTIMIZERS: list[tuple[str, dict[str, Any]]] = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "dampening": 0.3, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.9), "maximize": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.5, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1}),
    (
        "Adagrad",
        {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1, "initial_accumulator_value": 0.5},
    ),
    ("NAdam", {"lr": 0.01}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.01}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1}),
]


def _start() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((3, 4)), rng.standard_normal(4)]


def _loss(lib: Any, w: Any, b: Any) -> Any:
    return ((w * w).sum() * 0.5 + lib.sin(b).sum() + (w.sum(0) * b).sum() * 0.3) * 1.0


def _run(lib: Any, params: list[Any], opt: Any, steps: int) -> list[list[np.ndarray]]:
    out = []
    for _ in range(steps):
        opt.zero_grad()
        loss = _loss(lib, *params)
        if lib is ae:
            ae.sync.backward(loss)
        else:
            loss.backward()
        opt.step()
        out.append([np.array(p.detach().numpy()) for p in params])
    return out


@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS, ids=lambda v: str(v))
def test_optimizer_steps_equal_torch(name: str, kwargs: dict[str, Any]) -> None:
    torch = torch_or_skip()
    ap = [ae.nn.Parameter(ae.tensor(a)) for a in _start()]
    tp = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in _start()]
    aopt = getattr(ae.optim, name)(ap, **kwargs)
    topt = getattr(torch.optim, name)(tp, **kwargs)
    for k, (xs, ys) in enumerate(zip(_run(ae, ap, aopt, STEPS), _run(torch, tp, topt, STEPS))):
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12, err_msg=f"step {k + 1}")
    # the state dict has torch's layout and keys, and the same values
    sd, tsd = aopt.state_dict(), topt.state_dict()
    assert sd["state"].keys() == tsd["state"].keys()
    for i in sd["state"]:
        assert sd["state"][i].keys() == tsd["state"][i].keys()
        for key, v in sd["state"][i].items():
            np.testing.assert_allclose(v.numpy(), tsd["state"][i][key].numpy(), rtol=1e-10)
    assert [sorted(g) for g in sd["param_groups"]] == [sorted(g) for g in tsd["param_groups"]]


def test_optimizer_state_dict_round_trip_continues_the_same() -> None:
    params = [ae.nn.Parameter(ae.tensor(a)) for a in _start()]
    opt = ae.optim.Adam(params, lr=0.01)
    _run(ae, params, opt, 2)
    twin = [ae.nn.Parameter(ae.tensor(p.detach().numpy().copy())) for p in params]
    opt2 = ae.optim.Adam(twin, lr=0.5)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == 0.01
    a = _run(ae, params, opt, 3)
    b = _run(ae, twin, opt2, 3)
    for x, y in zip(a[-1], b[-1]):
        np.testing.assert_array_equal(x, y)


def test_optimizer_loads_torch_state_dict() -> None:
    torch = torch_or_skip()
    tp = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in _start()]
    topt = torch.optim.AdamW(tp, lr=0.01)
    _run(torch, tp, topt, 2)
    ap = [ae.nn.Parameter(ae.tensor(p.detach().numpy().copy())) for p in tp]
    aopt = ae.optim.AdamW(ap, lr=0.01)
    aopt.load_state_dict(topt.state_dict())
    ra, rt = _run(ae, ap, aopt, 3), _run(torch, tp, topt, 3)
    for x, y in zip(ra[-1], rt[-1]):
        np.testing.assert_allclose(x, y, rtol=1e-10)


def test_param_groups_and_closure() -> None:
    w, b = (ae.nn.Parameter(ae.tensor(a)) for a in _start())
    opt = ae.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9

    def closure() -> Any:
        opt.zero_grad()
        loss = _loss(ae, w, b)
        ae.sync.backward(loss)
        return loss

    before = float(_loss(ae, w, b))
    loss = opt.step(closure)
    assert float(loss) == pytest.approx(before)
    assert "Parameter Group 1" in repr(opt)


def test_optimizer_errors_say_what_is_wrong() -> None:
    w = ae.nn.Parameter(ae.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        ae.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        ae.optim.Adam([w], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        ae.optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        ae.optim.Adam([w], betas=(0.9, 1.5))
    with pytest.raises(ValueError, match="non-leaf"):
        ae.optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        ae.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        ae.optim.SGD(w, lr=0.1)
    opt = ae.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})


def test_step_bumps_the_version_so_saved_graphs_notice() -> None:
    w = ae.nn.Parameter(ae.ones(2))
    y = (w * w).sum()  # saves w
    w.grad = ae.ones(2)
    ae.optim.SGD([w], lr=0.1).step()
    with pytest.raises(ae.AutogradError, match="modified by an inplace operation"):
        ae.sync.backward(y)


def _inverse_epoch(epoch: int) -> float:
    return 1.0 / (1 + epoch)


def _stable_id(value: Any) -> str:
    """A test id that is the same in every process: a function by its name, not its address."""
    if isinstance(value, dict):
        return str({k: v.__name__ if callable(v) else v for k, v in value.items()})
    return str(value)


SCHEDULERS: list[tuple[str, dict[str, Any]]] = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [2, 5, 5], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 4, "eta_min": 0.01}),
    ("LinearLR", {"start_factor": 0.25, "total_iters": 4}),
    ("LambdaLR", {"lr_lambda": _inverse_epoch}),
    ("OneCycleLR", {"max_lr": 0.5, "total_steps": 12}),
    (
        "OneCycleLR",
        {"max_lr": 0.5, "total_steps": 12, "three_phase": True, "anneal_strategy": "linear"},
    ),
]


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULERS, ids=_stable_id)
def test_scheduler_rates_equal_torch(name: str, kwargs: dict[str, Any]) -> None:
    torch = torch_or_skip()
    aopt = ae.optim.SGD([ae.nn.Parameter(ae.ones(1))], lr=0.2, momentum=0.9)
    topt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.2, momentum=0.9)
    a = getattr(ae.optim.lr_scheduler, name)(aopt, **kwargs)
    t = getattr(torch.optim.lr_scheduler, name)(topt, **kwargs)
    for _ in range(11):
        aopt.step()
        topt.step()
        a.step()
        t.step()
        assert a.get_last_lr() == pytest.approx(t.get_last_lr(), rel=1e-12)
        assert aopt.param_groups[0]["momentum"] == pytest.approx(topt.param_groups[0]["momentum"])


def test_sequential_and_plateau_equal_torch() -> None:
    torch = torch_or_skip()
    aopt = ae.optim.SGD([ae.nn.Parameter(ae.ones(1))], lr=0.2)
    topt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.2)

    def seq(lib: Any, opt: Any) -> Any:
        s = lib.optim.lr_scheduler
        return s.SequentialLR(
            opt,
            [s.LinearLR(opt, start_factor=0.1, total_iters=3), s.ExponentialLR(opt, gamma=0.8)],
            milestones=[3],
        )

    a, t = seq(ae, aopt), seq(torch, topt)
    for _ in range(8):
        aopt.step(), topt.step(), a.step(), t.step()
        assert a.get_last_lr() == pytest.approx(t.get_last_lr(), rel=1e-12)
    aopt2 = ae.optim.Adam([ae.nn.Parameter(ae.ones(1))], lr=1.0)
    topt2 = torch.optim.Adam([torch.nn.Parameter(torch.ones(1))], lr=1.0)
    kw = {"patience": 1, "factor": 0.5, "cooldown": 1, "min_lr": 0.1}
    pa = ae.optim.lr_scheduler.ReduceLROnPlateau(aopt2, **kw)
    pt = torch.optim.lr_scheduler.ReduceLROnPlateau(topt2, **kw)
    for metric in [5.0, 4.0, 4.0, 4.0, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]:
        pa.step(metric)
        pt.step(metric)
        assert pa.get_last_lr() == pytest.approx(pt.get_last_lr())


def test_scheduler_errors() -> None:
    opt = ae.optim.SGD([ae.nn.Parameter(ae.ones(1))], lr=0.2)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        ae.optim.lr_scheduler.LinearLR(opt, start_factor=2.0)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        ae.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=2.0)
    with pytest.raises(ValueError, match="total_steps OR"):
        ae.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0)
    sched = ae.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        sched.step()
    assert math.isfinite(opt.param_groups[0]["lr"])
