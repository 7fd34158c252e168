"""``ae.optim.lr_scheduler``: learning-rate schedules with torch's formulas and state.

Each scheduler sets ``group["lr"]`` of its optimizer's param groups at
construction and at every ``step()``, by the same (recursive where torch's
is) formulas as torch.optim.lr_scheduler, so the learning rates of a run
equal torch's step by step.

Example::

    >>> import aengine as ae
    >>> w = ae.nn.Parameter(ae.zeros(1))
    >>> opt = ae.optim.SGD([w], lr=1.0)
    >>> sched = ae.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ._optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR",
    "LambdaLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
    "SequentialLR",
]


class LRScheduler:
    """The base of the schedulers: ``step()``, ``get_last_lr()``, ``state_dict()``."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming an optimizer"
                    )
        self.base_lrs: list[float] = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        """The learning rates of the current epoch (from the last ones, as torch's)."""
        raise NotImplementedError

    def _closed_form(self) -> list[float] | None:
        """The rates at ``last_epoch`` from the base rates (None: use get_lr)."""
        return None

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last step."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``) and set the param groups' rates."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._closed_form() or self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (torch's keys)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the scheduler's state."""
        self.__dict__.update(state_dict)

    def _lrs(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the rate by ``gamma`` at each milestone epoch."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Sequence[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _closed_form(self) -> list[float]:
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(ms, self.last_epoch) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the rate by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form(self) -> list[float]:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base rate to ``eta_min`` over ``T_max`` epochs."""

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / T)) / 2 for b in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [
                lr + (b - lo) * (1 - math.cos(math.pi / T)) / 2
                for b, lr in zip(self.base_lrs, self._lrs())
            ]
        return [
            (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lr - lo) + lo
            for lr in self._lrs()
        ]

    def _closed_form(self) -> list[float]:
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * e / T)) / 2 for b in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the rate linearly from ``start_factor`` to ``end_factor`` over ``total_iters``."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or "
                "equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = (
            start_factor,
            end_factor,
            total_iters,
        )
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [lr * s for lr in self._lrs()]
        if e > n:
            return self._lrs()
        return [lr * (1.0 + (f - s) / (n * s + (e - 1) * (f - s))) for lr in self._lrs()]

    def _closed_form(self) -> list[float]:
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        return [b * (s + (f - s) * min(n, e) / n) for b in self.base_lrs]


class LambdaLR(LRScheduler):
    """The base rate times ``lr_lambda(epoch)`` (one function, or one per param group)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [b * f(self.last_epoch) for f, b in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """The state without the functions (as torch, which keeps only callable objects' state)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up to ``max_lr``, anneal far below the start (momentum cycled)."""

    def __init__(
        self, optimizer: Optimizer, max_lr: float | Sequence[float],
        total_steps: int | None = None, epochs: int | None = None,
        steps_per_epoch: int | None = None, pct_start: float = 0.3,
        anneal_strategy: str = "cos", cycle_momentum: bool = True,
        base_momentum: float = 0.85, max_momentum: float = 0.95, div_factor: float = 25.0,
        final_div_factor: float = 1e4, three_phase: bool = False, last_epoch: int = -1,
    ) -> None:  # fmt: skip
        if total_steps is not None:
            if total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if epochs <= 0 or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer epochs and steps_per_epoch")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._cos = anneal_strategy == "cos"
        t = self.total_steps
        if three_phase:
            self._phases = [
                (pct_start * t - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * pct_start * t - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (t - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (pct_start * t - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (t - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        max_lrs = (
            [float(v) for v in max_lr]
            if isinstance(max_lr, (list, tuple))
            else [float(max_lr)] * len(groups)  # type: ignore[arg-type]
        )
        if last_epoch == -1:
            for lr, g in zip(max_lrs, groups):
                g["initial_lr"] = lr / div_factor
                g["max_lr"] = lr
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for g in groups:
                    self._set_momentum(g, max_momentum)
                    g["max_momentum"] = max_momentum
                    g["base_momentum"] = base_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, g: dict[str, Any], m: float) -> None:
        if self.use_beta1:
            g["betas"] = (m, *g["betas"][1:])
        else:
            g["momentum"] = m

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._cos:
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"Tried to step {step} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            lr = mom = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(g[lr0], g[lr1], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(g[m0], g[m1], pct)
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                self._set_momentum(g, mom)
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by ``factor`` when a metric stops improving for ``patience`` epochs."""

    def __init__(
        self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
        patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
        cooldown: int = 0, min_lr: float | Sequence[float] = 0, eps: float = 1e-8,
    ) -> None:  # fmt: skip
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * n
        self.factor, self.patience, self.cooldown = factor, patience, cooldown
        self.mode, self.threshold, self.threshold_mode, self.eps = (
            mode,
            threshold,
            threshold_mode,
            eps,
        )
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = self._lrs()

    def _better(self, a: float) -> bool:
        best, t = self.best, self.threshold
        if self.mode == "min":
            return a < best * (1.0 - t) if self.threshold_mode == "rel" else a < best - t
        return a > best * (t + 1.0) if self.threshold_mode == "rel" else a > best + t

    def step(self, metrics: Any = None, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record this epoch's ``metrics`` (a number); reduce the rates on a plateau."""
        if metrics is None:
            raise TypeError("ReduceLROnPlateau.step() needs the metric: step(val_loss)")
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for i, g in enumerate(self.optimizer.param_groups):
                old = float(g["lr"])
                new = max(old * self.factor, self.min_lrs[i])
                if old - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._lrs()


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after the other, switching at the ``milestones`` epochs."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
    ) -> None:
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"SequentialLR expects all schedulers to belong to the same optimizer, but "
                    f"got scheduler at index {i} to be different"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to {len(milestones)}"
            )
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self, epoch: int | None = None) -> None:
        """Step the scheduler whose turn it is (restarted at its milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched.step(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()
