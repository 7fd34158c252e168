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

    #: numpy's own function, without a Python frame: every op whose result is
    #: a numpy scalar (full reductions, 0-d arithmetic) goes through it
    asarray = staticmethod(np.asarray)  # type: ignore[assignment]

    def to_numpy(self, array: Any) -> Any:
        return np.asarray(array)

    def from_numpy(self, array: Any) -> Any:
        return np.asarray(array)
