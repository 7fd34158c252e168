"""The optimizers: torch's update formulas, operation by operation (NOTE [Optimizer steps])."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ..tensors import _views
from ..tensors._tensor import Tensor
from ._optimizer import Optimizer, bump

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "NAdam", "RAdam"]


def _check(value: float, what: str, low: float = 0.0) -> None:
    if not value >= low:
        raise ValueError(f"Invalid {what}: {value}")


def _betas(betas: tuple[float, float]) -> None:
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def _new(p: Tensor, arr: Any) -> Tensor:
    """A state tensor holding ``arr`` (an array of ``p``'s backend)."""
    return Tensor._make(arr, False, p.device)


def _zeros(p: Tensor) -> Tensor:
    return _new(p, p.device.backend.xp.zeros_like(p.data))


def _scalar(p: Tensor, value: float) -> Tensor:
    """A 0-d float32 state value (torch keeps ``step`` so)."""
    return _new(p, p.device.backend.xp.asarray(value, dtype="float32"))


def _with_grads(group: dict[str, Any]) -> Iterator[tuple[Tensor, Any]]:
    """(param, its gradient's array, negated when maximizing) of the params that have one."""
    for p in group["params"]:
        if p.grad is not None:
            if _views._before_inplace is not None:  # p is changed in place next
                _views._before_inplace(p)  # (NOTE [Mutation of saved tensors])
            g = p.grad.data
            yield p, (-g if group.get("maximize") else g)


def _lerp_(a: Any, b: Any, w: float) -> None:
    """``a.lerp_(b, w)`` as torch computes it (two formulas, by the size of ``w``)."""
    if w < 0.5:
        a += w * (b - a)
    else:
        a[...] = b - (b - a) * (1.0 - w)


def _weight_decay(p: Tensor, g: Any, lr: float, wd: float, decoupled: bool) -> Any:
    """The gradient with L2 weight decay added, or (decoupled, AdamW's) ``p`` shrunk in place."""
    if wd == 0:
        return g
    if decoupled:
        p.data *= 1 - lr * wd
        return g
    return g + wd * p.data


def _moments(state: dict[str, Any], g: Any, beta1: float, beta2: float) -> tuple[Any, Any]:
    """Adam's running moments updated in place: ``m`` lerps to ``g``, ``v`` to ``g * g``."""
    m, v = state["exp_avg"].data, state["exp_avg_sq"].data
    _lerp_(m, g, 1 - beta1)
    v *= beta2
    v += (1 - beta2) * g * g
    return m, v


def _count(state: dict[str, Any], p: Tensor) -> float:
    step = state["step"]
    step.data += 1
    return float(step.data)


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum, dampening, Nesterov, weight decay.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> w.grad = ae.tensor([1.0]); opt.step(); opt.step()
        >>> round(w.item(), 4)
        0.71
    """

    def __init__(
        self, params: Any, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
        weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
        foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None,
    ) -> None:  # fmt: skip
        _check(lr, "learning rate")
        _check(momentum, "momentum value")
        _check(weight_decay, "weight_decay value")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
            nesterov=nesterov, maximize=maximize, foreach=foreach,
            differentiable=differentiable, fused=fused,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, wd, mom = group["lr"], group["weight_decay"], group["momentum"]
        damp, nesterov = group["dampening"], group["nesterov"]
        for p, g in _with_grads(group):
            g = _weight_decay(p, g, lr, wd, False)
            if mom != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = _new(p, g.copy())
                else:
                    b = buf.data
                    b *= mom
                    b += (1 - damp) * g
                g = g + mom * buf.data if nesterov else buf.data
            p.data += -lr * g
            bump(p)


class Adam(Optimizer):
    """Adam (and AMSGrad; ``decoupled_weight_decay=True`` is AdamW), torch's formulas.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.Adam([w], lr=0.1)
        >>> w.grad = ae.tensor([3.0]); opt.step()
        >>> round(w.item(), 4)
        0.9
    """

    def __init__(
        self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
        foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
        differentiable: bool = False, fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:  # fmt: skip
        _check(lr, "learning rate")
        _check(eps, "epsilon value")
        _betas(betas)
        _check(weight_decay, "weight_decay value")
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
            maximize=maximize, foreach=foreach, capturable=capturable,
            differentiable=differentiable, fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad = group["weight_decay"], group["amsgrad"]
        decoupled = group.get("decoupled_weight_decay", False)
        for p, g in _with_grads(group):
            state = self.state[p]
            if not state:
                state["step"] = _scalar(p, 0.0)
                state["exp_avg"] = _zeros(p)
                state["exp_avg_sq"] = _zeros(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = _zeros(p)
            step = _count(state, p)
            g = _weight_decay(p, g, lr, wd, decoupled)
            m, v = _moments(state, g, beta1, beta2)
            bc1 = 1 - beta1**step
            bc2_sqrt = math.sqrt(1 - beta2**step)
            xp = p.device.backend.xp
            if amsgrad:
                vmax = state["max_exp_avg_sq"].data
                xp.maximum(vmax, v, out=vmax)
                denom = xp.sqrt(vmax) / bc2_sqrt + eps
            else:
                denom = xp.sqrt(v) / bc2_sqrt + eps
            p.data += -(lr / bc1) * m / denom
            bump(p)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2), torch's formulas.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.AdamW([w], lr=0.1, weight_decay=0.1)
        >>> w.grad = ae.tensor([3.0]); opt.step()
        >>> round(w.item(), 4)
        0.89
    """

    def __init__(
        self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
        maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
        differentiable: bool = False, fused: bool | None = None,
    ) -> None:  # fmt: skip
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
            capturable=capturable, differentiable=differentiable, fused=fused,
            decoupled_weight_decay=True,
        )  # fmt: skip


class RMSprop(Optimizer):
    """RMSprop (centered, momentum, weight decay), torch's formulas.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.RMSprop([w], lr=0.01)
        >>> w.grad = ae.tensor([2.0]); opt.step()
        >>> round(w.item(), 4)
        0.9
    """

    def __init__(
        self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
        weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
        capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
        differentiable: bool = False,
    ) -> None:  # fmt: skip
        _check(lr, "learning rate")
        _check(eps, "epsilon value")
        _check(momentum, "momentum value")
        _check(weight_decay, "weight_decay value")
        _check(alpha, "alpha value")
        defaults = dict(
            lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
            centered=centered, capturable=capturable, foreach=foreach, maximize=maximize,
            differentiable=differentiable,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p, g in _with_grads(group):
            state = self.state[p]
            if not state:
                state["step"] = _scalar(p, 0.0)
                state["square_avg"] = _zeros(p)
                if mom > 0:
                    state["momentum_buffer"] = _zeros(p)
                if centered:
                    state["grad_avg"] = _zeros(p)
            _count(state, p)
            g = _weight_decay(p, g, lr, wd, False)
            xp = p.device.backend.xp
            sq = state["square_avg"].data
            sq *= alpha
            sq += (1 - alpha) * g * g
            if centered:
                ga = state["grad_avg"].data
                _lerp_(ga, g, 1 - alpha)
                avg = xp.sqrt(sq + -1 * ga * ga)
            else:
                avg = xp.sqrt(sq)
            avg += eps
            if mom > 0:
                buf = state["momentum_buffer"].data
                buf *= mom
                buf += g / avg
                p.data += -lr * buf
            else:
                p.data += -lr * g / avg
            bump(p)


class Adagrad(Optimizer):
    """Adagrad (learning-rate decay, weight decay), torch's formulas; state made at once.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.Adagrad([w], lr=0.5)
        >>> w.grad = ae.tensor([2.0]); opt.step()
        >>> round(w.item(), 4)
        0.5
    """

    def __init__(
        self, params: Any, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0, eps: float = 1e-10,
        foreach: bool | None = None, *, maximize: bool = False, differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:  # fmt: skip
        _check(lr, "learning rate")
        _check(lr_decay, "lr_decay value")
        _check(weight_decay, "weight_decay value")
        _check(initial_accumulator_value, "initial_accumulator_value value")
        _check(eps, "epsilon value")
        defaults = dict(
            lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value, foreach=foreach,
            maximize=maximize, differentiable=differentiable, fused=fused,
        )  # fmt: skip
        super().__init__(params, defaults)
        for group in self.param_groups:  # torch makes Adagrad's state at construction
            for p in group["params"]:
                xp = p.device.backend.xp
                self.state[p]["step"] = _scalar(p, 0.0)
                init = group["initial_accumulator_value"]
                self.state[p]["sum"] = _new(p, xp.full_like(p.data, init))

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, lr_decay, wd, eps = group["lr"], group["lr_decay"], group["weight_decay"], group["eps"]
        for p, g in _with_grads(group):
            state = self.state[p]
            step = _count(state, p)
            g = _weight_decay(p, g, lr, wd, False)
            clr = lr / (1 + (step - 1) * lr_decay)
            s = state["sum"].data
            s += g * g
            std = p.device.backend.xp.sqrt(s) + eps
            p.data += -clr * g / std
            bump(p)


class NAdam(Optimizer):
    """NAdam (Nesterov momentum in Adam, momentum decay), torch's formulas.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.NAdam([w], lr=0.1)
        >>> w.grad = ae.tensor([1.0]); opt.step()
        >>> w.item() < 1.0
        True
    """

    def __init__(
        self, params: Any, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
        maximize: bool = False, capturable: bool = False, differentiable: bool = False,
    ) -> None:  # fmt: skip
        _check(lr, "learning rate")
        _check(eps, "epsilon value")
        _betas(betas)
        _check(weight_decay, "weight_decay value")
        _check(momentum_decay, "momentum_decay value")
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
            foreach=foreach, maximize=maximize, capturable=capturable,
            differentiable=differentiable,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd, mdecay = group["weight_decay"], group["momentum_decay"]
        for p, g in _with_grads(group):
            state = self.state[p]
            if not state:
                state["step"] = _scalar(p, 0.0)
                state["mu_product"] = _scalar(p, 1.0)
                state["exp_avg"] = _zeros(p)
                state["exp_avg_sq"] = _zeros(p)
            step = _count(state, p)
            bc2 = 1 - beta2**step
            g = _weight_decay(p, g, lr, wd, group["decoupled_weight_decay"])
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * mdecay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * mdecay)))
            prod = state["mu_product"]
            prod.data *= mu
            mu_product = float(prod.data)
            m, v = _moments(state, g, beta1, beta2)
            denom = p.device.backend.xp.sqrt(v / bc2) + eps
            p.data += (-lr * (1.0 - mu) / (1.0 - mu_product)) * g / denom
            p.data += ((-lr * mu_next) / (1.0 - mu_product * mu_next)) * m / denom
            bump(p)


class RAdam(Optimizer):
    """RAdam (rectified Adam), torch's formulas.

    Example::

        >>> import aengine as ae
        >>> w = ae.nn.Parameter(ae.tensor([1.0]))
        >>> opt = ae.optim.RAdam([w], lr=0.1)
        >>> w.grad = ae.tensor([1.0]); opt.step()
        >>> round(w.item(), 4)
        0.9
    """

    def __init__(
        self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, weight_decay: float = 0.0, decoupled_weight_decay: bool = False,
        *, foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
        differentiable: bool = False,
    ) -> None:  # fmt: skip
        _check(lr, "learning rate")
        _check(eps, "epsilon value")
        _betas(betas)
        _check(weight_decay, "weight_decay value")
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, foreach=foreach, maximize=maximize,
            capturable=capturable, differentiable=differentiable,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps, wd = (
            group["lr"],
            group["betas"],
            group["eps"],
            group["weight_decay"],
        )
        rho_inf = 2 / (1 - beta2) - 1
        for p, g in _with_grads(group):
            state = self.state[p]
            if not state:
                state["step"] = _scalar(p, 0.0)
                state["exp_avg"] = _zeros(p)
                state["exp_avg_sq"] = _zeros(p)
            step = _count(state, p)
            g = _weight_decay(p, g, lr, wd, group["decoupled_weight_decay"])
            m, v = _moments(state, g, beta1, beta2)
            bc1 = 1 - beta1**step
            bc2 = 1 - beta2**step
            m_hat = m / bc1
            rho_t = rho_inf - 2 * step * (beta2**step) / bc2
            if rho_t > 5.0:
                rect = math.sqrt(
                    (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
                )
                adaptive = math.sqrt(bc2) / (p.device.backend.xp.sqrt(v) + eps)
                p.data += -1.0 * (m_hat * lr * adaptive * rect)
            else:
                p.data += -1.0 * (m_hat * lr)
            bump(p)
