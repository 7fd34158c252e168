"""Normalisation layers: BatchNorm1d/2d, LayerNorm, GroupNorm, RMSNorm (torch.nn's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensors._creation import ones, tensor, zeros
from ..tensors._tensor import Tensor
from . import functional as F
from ._module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "RMSNorm"]


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _affine_params(m: Module, affine: bool, bias: bool, n: int, dtype: Any, device: Any) -> None:
    """Register ``weight`` (ones) and ``bias`` (zeros) of ``n`` features, or None for each."""
    if affine:
        m.weight = Parameter(ones(n, dtype=dtype, device=device))
    else:
        m.register_parameter("weight", None)
    if affine and bias:
        m.bias = Parameter(zeros(n, dtype=dtype, device=device))
    else:
        m.register_parameter("bias", None)


class _BatchNorm(Module):
    _dims: tuple[int, ...] = ()

    def __init__(
        self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
        affine: bool = True, track_running_stats: bool = True, device: Any = None,
        dtype: Any = None, *, bias: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dev = device or "cpu"
        _affine_params(self, affine, bias, num_features, dtype, dev)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=dev))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=dev))
            self.register_buffer("num_batches_tracked", tensor(0, device=dev))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(
            input, self.running_mean if keep else None, self.running_var if keep else None,
            self.weight, self.bias, use_batch, factor, self.eps,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) inputs, with running statistics.

    Example::

        >>> import aengine as ae
        >>> bn = ae.nn.BatchNorm1d(3)
        >>> bn(ae.randn(8, 3)).shape, bn.num_batches_tracked.item()
        ((8, 3), 1)
    """

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) inputs, with running statistics.

    Example::

        >>> import aengine as ae
        >>> ae.nn.BatchNorm2d(3)(ae.randn(2, 3, 4, 4)).shape
        (2, 3, 4, 4)
    """

    _dims = (4,)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims, then scale and shift.

    Example::

        >>> import aengine as ae
        >>> ln = ae.nn.LayerNorm(4)
        >>> round(float(ln(ae.arange(8.0).reshape(2, 4)).mean()), 6)
        0.0
    """

    def __init__(
        self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
        elementwise_affine: bool = True, bias: bool = True, device: Any = None,
        dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        dev = device or "cpu"
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape, dtype=dtype, device=dev))
            if bias:
                self.bias = Parameter(zeros(*self.normalized_shape, dtype=dtype, device=dev))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class GroupNorm(Module):
    """Normalise each of ``num_groups`` groups of channels, then scale and shift per channel.

    Example::

        >>> import aengine as ae
        >>> ae.nn.GroupNorm(2, 4)(ae.randn(3, 4, 5)).shape
        (3, 4, 5)
    """

    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
        device: Any = None, dtype: Any = None, *, bias: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups,
            num_channels,
            eps,
            affine,
        )
        _affine_params(self, affine, bias, num_channels, dtype, device or "cpu")

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """Scale by the root mean square over the trailing ``normalized_shape`` dims.

    Example::

        >>> import aengine as ae
        >>> ae.nn.RMSNorm(4)(ae.ones(2, 4)).tolist()[0]
        [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(
        self, normalized_shape: int | Sequence[int], eps: float | None = None,
        elementwise_affine: bool = True, device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(
                ones(*self.normalized_shape, dtype=dtype, device=device or "cpu")
            )
        else:
            self.register_parameter("weight", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
