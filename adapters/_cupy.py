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
    launches_async = True

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        return cupy.asarray(data, dtype=dtype)

    def to_numpy(self, array: Any) -> Any:
        return cupy.asnumpy(array)

    @property
    def special(self) -> Any:
        """``cupyx.scipy.special`` (imported at first use)."""
        import cupyx.scipy.special  # lazily, as the numpy backend's scipy.special

        return cupyx.scipy.special

    def from_numpy(self, array: Any) -> Any:
        return cupy.asarray(array)

    def check_index(self, device: str, index: int | None) -> None:
        """A GPU that does not exist fails at its first use, as torch's does.

        Without this check CuPy would put the data on the current GPU.
        """
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:  # no driver, an old one, no GPU
            raise RuntimeError(_driver_advice(device, exc)) from exc
        if index is None or index < count:
            return
        names = ", ".join(f"cuda:{i}" for i in range(count))
        have = f"{count} CUDA device(s)" + (f": {names}" if count else "")
        raise RuntimeError(
            f"CUDA error: invalid device ordinal: {device} does not exist; this machine has {have}"
        )

    def device_context(self, index: int) -> Any:
        """Make GPU ``index`` current in this thread for a ``with`` block.

        CUDA's current device is per host thread, so the engine enters it in
        every worker (task or thread) that runs a node of ``cuda:index``.
        """
        return cupy.cuda.Device(index)


def _driver_advice(device: str, exc: BaseException) -> str:
    """What to do when CuPy cannot reach a usable CUDA driver (CuPy's error names the cause)."""
    what = str(exc)
    try:
        runtime = cupy.cuda.runtime.runtimeGetVersion()
        wanted = f"CUDA {runtime // 1000}.{runtime % 1000 // 10}"
    except Exception:  # the version query needs no driver, but be safe
        wanted = "CuPy's CUDA version"
    if "InsufficientDriver" in what:
        cause = f"the NVIDIA driver on this machine is too old for {wanted}"
        fix = "update the driver, or install the CuPy build for the driver's CUDA version"
    elif "NoDevice" in what:
        cause = "no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES)"
        fix = "run on a machine with a GPU"
    else:
        cause = "CuPy could not reach a CUDA driver"
        fix = f"install an NVIDIA driver that supports {wanted}"
    return f"{device} is not usable: {cause} ({what}); {fix}, or keep the tensors on the cpu"
