"""Basic layers: Identity, Flatten, Unflatten, Linear, Bilinear, Embedding, Dropout (torch.nn's)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..tensors._creation import empty
from ..tensors._tensor import Tensor
from . import functional as F
from . import init
from ._module import Module, Parameter

__all__ = ["Identity", "Flatten", "Unflatten", "Linear", "Bilinear", "Embedding", "Dropout"]


class Identity(Module):
    """Returns its input (any arguments to the constructor are ignored, as torch's).

    Example::

        >>> import aengine as ae
        >>> ae.nn.Identity()(ae.ones(2)).tolist()
        [1.0, 1.0]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Flatten(Module):
    """Flatten dims ``start_dim`` .. ``end_dim`` (by default all but the batch dim).

    Example::

        >>> import aengine as ae
        >>> ae.nn.Flatten()(ae.ones(2, 3, 4)).shape
        (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into the shape ``unflattened_size``.

    Example::

        >>> import aengine as ae
        >>> ae.nn.Unflatten(1, (3, 4))(ae.ones(2, 12)).shape
        (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        shape = list(input.shape)
        d = self.dim % len(shape)
        return input.reshape(*shape[:d], *self.unflattened_size, *shape[d + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def reset_linear_like(weight: Tensor, bias: Tensor | None) -> None:
    """torch's default init of Linear and Conv: kaiming_uniform_(a=sqrt(5)), bias U(±1/sqrt(fan_in))."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = weight.shape[1] * math.prod(weight.shape[2:]) if weight.ndim > 1 else 1
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(bias, -bound, bound)


def _param(*shape: int, dtype: Any = None, device: Any = None) -> Tensor:
    p: Tensor = Parameter(empty(*shape, dtype=dtype, device=device or "cpu"))
    return p


class Linear(Module):
    """``y = x @ weight.T + bias``; weight (out_features, in_features), torch's initialisation.

    Example::

        >>> import aengine as ae
        >>> fc = ae.nn.Linear(3, 2)
        >>> fc(ae.ones(4, 3)).shape, [n for n, _ in fc.named_parameters()]
        ((4, 2), ['weight', 'bias'])
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
        dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _param(out_features, in_features, dtype=dtype, device=device)
        if bias:
            self.bias = _param(out_features, dtype=dtype, device=device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the initial weights again (torch's distribution)."""
        reset_linear_like(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Bilinear(Module):
    """``y = x1ᵀ A x2 + b`` per output feature; weight (out, in1, in2), torch's initialisation.

    Example::

        >>> import aengine as ae
        >>> ae.nn.Bilinear(3, 4, 2)(ae.ones(5, 3), ae.ones(5, 4)).shape
        (5, 2)
    """

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
        device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = _param(out_features, in1_features, in2_features, dtype=dtype, device=device)
        if bias:
            self.bias = _param(out_features, dtype=dtype, device=device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the initial weights again: U(±1/sqrt(in1_features))."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class Embedding(Module):
    """A table of ``num_embeddings`` vectors looked up by index; weight N(0, 1) as torch's.

    Example::

        >>> import aengine as ae
        >>> emb = ae.nn.Embedding(10, 3, padding_idx=0)
        >>> emb(ae.tensor([[0, 4]])).shape, emb.weight[0].tolist()
        ((1, 2, 3), [0.0, 0.0, 0.0])
    """

    def __init__(
        self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
        max_norm: float | None = None, norm_type: float = 2.0,
        scale_grad_by_freq: bool = False, sparse: bool = False, _weight: Tensor | None = None,
        _freeze: bool = False, device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _param(num_embeddings, embedding_dim, dtype=dtype, device=device)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        """Draw N(0, 1) again; the padding row is zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
            self.scale_grad_by_freq, self.sparse,
        )  # fmt: skip

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class Dropout(Module):
    """Zero elements with probability ``p`` in training (scaling the rest by 1/(1-p)).

    Example::

        >>> import aengine as ae
        >>> ae.nn.Dropout(0.5).eval()(ae.ones(3)).tolist()
        [1.0, 1.0, 1.0]
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
