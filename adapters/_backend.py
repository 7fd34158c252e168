"""The backend interface and the registry of backends by device type.

# NOTE [Backends]
# Operators never import numpy or CuPy: they reach the array library through
# ``tensor.device.backend`` (its ``xp`` module and helpers).  A device type
# ("cpu", "sim", "cuda") maps to one Backend instance; a backend is created on
# first use, so CuPy is imported only when a cuda tensor is made.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ._raw import RawOps

__all__ = ["Backend", "backend_for", "register_backend"]


class Backend:
    """What aengine needs of an array library.

    Subclasses set ``name`` and ``xp`` and may override the conversions.
    ``raw`` is the ops namespace that backward formulas use when no graph is
    recorded (``RawOps``, NOTE [The F namespace] in _raw.py).
    """

    name: str = "abstract"
    xp: Any = None
    #: array type(s) this backend produces
    array_types: tuple[type, ...] = ()
    #: whether a kernel call only launches the kernel (a GPU's stream runs it
    #: and orders it after the kernels before it): such a kernel is never worth
    #: a thread hop
    launches_async: bool = False

    def __init__(self) -> None:
        self.raw = RawOps(self)

    @property
    def special(self) -> Any:
        """The backend's special functions (scipy.special's names: erf, gammaln, digamma...)."""
        raise NotImplementedError(f"the {self.name} backend has no special functions")

    def asarray(self, data: Any, dtype: Any = None) -> Any:
        """An array of this backend from arbitrary data (copy when needed)."""
        return self.xp.asarray(data, dtype=dtype)

    def to_numpy(self, array: Any) -> Any:
        """A host numpy array with the same values."""
        return array

    def from_numpy(self, array: Any) -> Any:
        """An array of this backend holding the values of a host numpy array."""
        return self.xp.asarray(array)

    def check_index(self, device: str, index: int | None) -> None:
        """Raise if this machine has no device ``index`` (the first use of a device)."""

    def __repr__(self) -> str:
        return f"<{self.name} backend>"


_factories: dict[str, Callable[[], Backend]] = {}
_instances: dict[str, Backend] = {}

_LAZY = {
    "cpu": ("aengine.adapters._numpy", "NumpyBackend", None),
    "sim": ("aengine.adapters._numpy", "NumpyBackend", None),
    "cuda": ("aengine.adapters._cupy", "CupyBackend", "cupy"),
}


def register_backend(device_type: str, factory: Callable[[], Backend]) -> None:
    """Serve tensors of ``device_type`` with the backend ``factory()`` makes."""
    _factories[device_type] = factory
    _instances.pop(device_type, None)


def backend_for(device_type: str) -> Backend:
    """The backend serving ``device_type`` ("cpu", "sim", "cuda"...)."""
    backend = _instances.get(device_type)
    if backend is not None:
        return backend
    factory = _factories.get(device_type)
    if factory is None:
        spec = _LAZY.get(device_type)
        if spec is None:
            raise ValueError(
                f"unknown device type {device_type!r}; expected one of "
                f"{sorted(set(_LAZY) | set(_factories))}"
            )
        module_name, cls_name, extra = spec
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(
                f"device type {device_type!r} needs an optional dependency: "
                f"pip install 'aengine[{extra}]' ({exc})"
            ) from exc
        factory = getattr(module, cls_name)
    if device_type == "cpu" or device_type == "sim":
        # cpu and every sim:N share one numpy backend.
        shared = _instances.get("cpu") or _instances.get("sim") or factory()
        _instances["cpu"] = _instances["sim"] = shared
        return shared
    backend = factory()
    _instances[device_type] = backend
    return backend
