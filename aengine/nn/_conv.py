"""Convolution and pooling modules (torch.nn's arguments, parameters, initialisation, reprs)."""

from __future__ import annotations

from typing import Any

from ..tensors._creation import empty
from ..tensors._tensor import Tensor
from . import functional as F
from ._layers import reset_linear_like
from ._module import Module, Parameter

__all__ = [
    "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d",
    "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
]  # fmt: skip

_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v: Any, n: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _n = 2
    _transposed = False

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
        padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
        padding_mode: str = "zeros", device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _MODES:
            raise ValueError(
                f"padding_mode must be one of {list(_MODES)}, but got padding_mode='{padding_mode}'"
            )
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}"
                )
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n)
        self.stride, self.dilation = _tuple(stride, n), _tuple(dilation, n)
        self.padding: Any = padding if isinstance(padding, str) else _tuple(padding, n)
        self.output_padding = (0,) * n  # (a transposed convolution's: set after this)
        self.transposed, self.padding_mode = self._transposed, padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        dev = device or "cpu"
        self.weight = Parameter(empty(*shape, dtype=dtype, device=dev))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=dev))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation: kaiming_uniform_(a=sqrt(5)), bias U(±1/sqrt(fan_in))."""
        reset_linear_like(self.weight, self.bias)

    _fn = ""

    def forward(self, input: Tensor) -> Tensor:
        x, pad = self._mode_pad(input)
        out: Tensor = getattr(F, self._fn)(
            x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups
        )
        return out

    def _mode_pad(self, input: Tensor) -> tuple[Tensor, Any]:
        """Pad by ``padding_mode`` (not zeros) first, as torch: the conv then pads nothing."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if self.padding == "valid":
            return input, 0
        pads: list[int] = []
        for i in reversed(range(self._n)):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                left = total // 2
                pads += [left, total - left]
            else:
                pads += [self.padding[i], self.padding[i]]
        return F.pad(input, tuple(pads), mode=self.padding_mode), 0

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        pad = self.padding
        if isinstance(pad, str) or pad != (0,) * len(pad):
            s += f", padding={pad}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) inputs; weight (out, in // groups, k).

    >>> import aengine as ae
    >>> ae.nn.Conv1d(3, 4, 3, padding=1)(ae.ones(2, 3, 5)).shape
    (2, 4, 5)
    """

    _n = 1
    _fn = "conv1d"


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) inputs; weight (out, in // groups, kh, kw).

    >>> import aengine as ae
    >>> ae.nn.Conv2d(1, 8, 3, padding=1)(ae.ones(2, 1, 8, 8)).shape
    (2, 8, 8, 8)
    """

    _n = 2
    _fn = "conv2d"


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
        padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
        dilation: Any = 1, padding_mode: str = "zeros", device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype,
        )  # fmt: skip
        self.output_padding = _tuple(output_padding, self._n)

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        size = list(output_size)[-self._n :]
        extra = []
        for i in range(self._n):
            n_in = input.shape[-self._n + i]
            least = (
                (n_in - 1) * self.stride[i] - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1) + 1
            )  # fmt: skip
            pad = size[i] - least
            if not 0 <= pad < max(self.stride[i], self.dilation[i]):
                raise ValueError(
                    f"requested an output size of {size}, but valid sizes range from {least} "
                    f"to {least + max(self.stride[i], self.dilation[i]) - 1} (for an input of "
                    f"{list(input.shape[2:])})"
                )
            extra.append(pad)
        return tuple(extra)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution; weight (in, out // groups, k).

    >>> import aengine as ae
    >>> ae.nn.ConvTranspose1d(3, 2, 3, stride=2)(ae.ones(1, 3, 4)).shape
    (1, 2, 9)
    """

    _n = 1

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        op = self._output_padding(input, output_size)
        return F.conv_transpose1d(
            input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
            self.dilation,
        )  # fmt: skip


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution; weight (in, out // groups, kh, kw).

    >>> import aengine as ae
    >>> ae.nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1)(ae.ones(1, 3, 4, 4)).shape
    (1, 2, 10, 10)
    """

    _n = 2

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        op = self._output_padding(input, output_size)
        return F.conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
            self.dilation,
        )  # fmt: skip


class _MaxPoolNd(Module):
    _fn = ""

    def __init__(
        self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
        return_indices: bool = False, ceil_mode: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Any:
        return getattr(F, self._fn)(
            input, self.kernel_size, self.stride, self.padding, self.dilation,
            ceil_mode=self.ceil_mode, return_indices=self.return_indices,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """The maximum of each window over (N, C, L) inputs.

    >>> import aengine as ae
    >>> ae.nn.MaxPool1d(2)(ae.tensor([[[1.0, 3.0, 2.0, 0.0]]])).tolist()
    [[[3.0, 2.0]]]
    """

    _fn = "max_pool1d"


class MaxPool2d(_MaxPoolNd):
    """The maximum of each window over (N, C, H, W) inputs.

    >>> import aengine as ae
    >>> ae.nn.MaxPool2d(2)(ae.ones(1, 1, 4, 4)).shape
    (1, 1, 2, 2)
    """

    _fn = "max_pool2d"


class AvgPool1d(Module):
    """The mean of each window over (N, C, L) inputs.

    >>> import aengine as ae
    >>> ae.nn.AvgPool1d(2)(ae.tensor([[[1.0, 3.0, 2.0, 0.0]]])).tolist()
    [[[2.0, 1.0]]]
    """

    def __init__(
        self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = _tuple(kernel_size, 1)
        self.stride = _tuple(stride if stride is not None else kernel_size, 1)
        self.padding = _tuple(padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """The mean of each window over (N, C, H, W) inputs.

    >>> import aengine as ae
    >>> ae.nn.AvgPool2d(2)(ae.ones(1, 1, 4, 4)).shape
    (1, 1, 2, 2)
    """

    def __init__(
        self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
        count_include_pad: bool = True, divisor_override: int | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _Adaptive(Module):
    _fn = ""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Any:
        if self.return_indices:
            return getattr(F, self._fn)(input, self.output_size, self.return_indices)
        return getattr(F, self._fn)(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_Adaptive):
    """Average pooling to a fixed output length.

    >>> import aengine as ae
    >>> ae.nn.AdaptiveAvgPool1d(1)(ae.tensor([[[1.0, 3.0]]])).tolist()
    [[[2.0]]]
    """

    _fn = "adaptive_avg_pool1d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool2d(_Adaptive):
    """Average pooling to a fixed output size (``(1, 1)``: global average pooling).

    >>> import aengine as ae
    >>> ae.nn.AdaptiveAvgPool2d((1, 1))(ae.ones(2, 3, 5, 5)).shape
    (2, 3, 1, 1)
    """

    _fn = "adaptive_avg_pool2d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool2d(_Adaptive):
    """Max pooling to a fixed output size.

    >>> import aengine as ae
    >>> ae.nn.AdaptiveMaxPool2d(1)(ae.ones(2, 3, 5, 5)).shape
    (2, 3, 1, 1)
    """

    _fn = "adaptive_max_pool2d"
