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

    @property
    def special(self) -> Any:
        """``scipy.special`` (imported at first use: most programs never need it)."""
        import scipy.special  # lazily: 0.1 s of import that most programs never need

        return scipy.special

    def from_numpy(self, array: Any) -> Any:
        return np.asarray(array)
