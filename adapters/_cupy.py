"""The CuPy backend for ``cuda:N`` devices (``pip install 'aengine[cupy]'``)."""

from __future__ import annotations

from typing import Any

import cupy

from ._backend import Backend

__all__ = ["CupyBackend"]


class CupyBackend(Backend):
    """Arrays are ``cupy.ndarray``; ``device_context`` selects a GPU per thread."""

    name = "cupy"
    xp = cupy
    array_types = (cupy.ndarray,)

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return cupy.asarray(data, dtype=dtype)

    def to_numpy(self, array: Any) -> Any:
        return cupy.asnumpy(array)

    def from_numpy(self, array: Any) -> Any:
        return cupy.asarray(array)

    def device_context(self, index: int) -> Any:
        """Make GPU ``index`` current in this thread for a ``with`` block.

        CUDA's current device is per host thread, so the engine enters it in
        every worker (task or thread) that runs a node of ``cuda:index``.
        """
        return cupy.cuda.Device(index)
