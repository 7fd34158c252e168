"""Loss modules: each calls its ``ae.nn.functional`` loss (torch.nn's names, arguments, reprs)."""

from __future__ import annotations

from typing import Any

from ..tensors._tensor import Tensor
from . import functional as F
from ._module import Module

__all__ = [
    "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss",
]  # fmt: skip


def _legacy(size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's old ``size_average``/``reduce`` flags, as the reduction they mean."""
    if size_average is None and reduce is None:
        return reduction
    avg = True if size_average is None else size_average
    red = True if reduce is None else reduce
    if not red:
        return "none"
    return "mean" if avg else "sum"


class _Loss(Module):
    def __init__(
        self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.reduction = _legacy(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(
        self, weight: Tensor | None = None, size_average: Any = None, reduce: Any = None,
        reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits and class indices (or class probabilities).

    >>> import aengine as ae
    >>> round(ae.nn.CrossEntropyLoss()(ae.zeros(2, 4), ae.tensor([0, 3])).item(), 4)
    1.3863
    """

    def __init__(
        self, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
        reduce: Any = None, reduction: str = "mean", label_smoothing: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            input, target, weight=self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction, label_smoothing=self.label_smoothing,
        )  # fmt: skip


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities and class indices.

    >>> import aengine as ae
    >>> ae.nn.NLLLoss()(ae.full((2, 3), -1.0), ae.tensor([0, 2])).item()
    1.0
    """

    def __init__(
        self, weight: Tensor | None = None, size_average: Any = None, ignore_index: int = -100,
        reduce: Any = None, reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(
            input, target, weight=self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction,
        )  # fmt: skip


class MSELoss(_Loss):
    """Mean squared error.

    >>> import aengine as ae
    >>> ae.nn.MSELoss()(ae.ones(3), ae.zeros(3)).item()
    1.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    >>> import aengine as ae
    >>> ae.nn.L1Loss()(ae.ones(3), ae.zeros(3)).item()
    1.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above (Huber scaled by 1/beta).

    >>> import aengine as ae
    >>> ae.nn.SmoothL1Loss()(ae.ones(3), ae.zeros(3)).item()
    0.5
    """

    def __init__(
        self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
        beta: float = 1.0,
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, linear above.

    >>> import aengine as ae
    >>> ae.nn.HuberLoss()(ae.ones(3), ae.zeros(3)).item()
    0.5
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities.

    >>> import aengine as ae
    >>> round(ae.nn.BCELoss()(ae.full((2,), 0.5), ae.ones(2)).item(), 4)
    0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of logits (a stable sigmoid inside); ``pos_weight`` per class.

    >>> import aengine as ae
    >>> round(ae.nn.BCEWithLogitsLoss()(ae.zeros(2), ae.ones(2)).item(), 4)
    0.6931
    """

    def __init__(
        self, weight: Tensor | None = None, size_average: Any = None, reduce: Any = None,
        reduction: str = "mean", pos_weight: Tensor | None = None,
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, pos_weight=self.pos_weight, reduction=self.reduction
        )


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probabilities from a target distribution.

    >>> import aengine as ae
    >>> ae.nn.KLDivLoss(reduction="batchmean")(ae.zeros(1, 2), ae.ones(1, 2)).item()
    0.0
    """

    def __init__(
        self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
        log_target: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
