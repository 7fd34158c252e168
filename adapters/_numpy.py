"""The numpy backend: cpu tensors and the simulated ``sim:N`` devices."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._backend import Backend

__all__ = ["NumpyBackend"]


class NumpyBackend(Backend):
    """Arrays are ``numpy.ndarray``; kernels run synchronously."""

    name = "numpy"
    xp = np
    array_types = (np.ndarray,)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return np.asarray(data, dtype=dtype)

    def to_numpy(self, array: Any) -> Any:
        return np.asarray(array)

    def from_numpy(self, array: Any) -> Any:
        return np.asarray(array)
