"""Layers that need no parameters of their own: Identity, Flatten, Unflatten (torch.nn's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensors._tensor import Tensor
from ._module import Module

__all__ = ["Identity", "Flatten", "Unflatten"]


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
