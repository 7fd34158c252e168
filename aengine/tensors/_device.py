"""Devices: where a tensor's data lives and which queue runs its nodes.

``cpu`` is the host; ``sim:N`` are numpy-backed virtual devices with their
own ready queues and workers (for tests and demos); ``cuda:N`` are GPUs
through CuPy.  A device knows its backend (``aengine.adapters``).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["device", "Device"]


class Device:
    """A device such as ``cpu``, ``sim:0`` or ``cuda:1``.

    Devices are interned: ``ae.device("sim:0") is ae.device("sim:0")``.

    Example::

        >>> import aengine as ae
        >>> ae.device("sim:1").type, ae.device("sim:1").index
        ('sim', 1)
    """

    __slots__ = ("_array_type", "_backend", "_str", "index", "type")
    _cache: ClassVar[dict[str, Device]] = {}

    type: str
    index: int | None
    _backend: Any
    _str: str
    #: the backend's array class once the backend is loaded (None before):
    #: ops compare a result's class with it before wrapping it
    _array_type: Any

    def __new__(cls, spec: str | Device = "cpu", index: int | None = None) -> Device:
        if isinstance(spec, Device):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"a device is a string like 'cpu' or 'sim:0', got {spec!r}")
        key = spec if index is None else f"{spec}:{index}"
        dev = cls._cache.get(key)
        if dev is not None:
            return dev
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise TypeError(f"a device index is an int, got {type(index).__name__}")
        kind, colon, idx = key.partition(":")
        if kind not in ("cpu", "sim", "cuda"):
            raise ValueError(
                f"unknown device {key!r}: use 'cpu', 'sim:N' (simulated) or 'cuda:N' (CuPy)"
            )
        if colon:
            # ASCII digits only: str.isdigit() also accepts '²', which int() refuses
            if not (idx.isascii() and idx.isdigit()):
                raise ValueError(
                    f"invalid device string {key!r}: the index after ':' must be a "
                    f"non-negative integer, e.g. '{kind}:0'"
                )
            number: int | None = int(idx)
        else:
            number = None if kind == "cpu" else 0
        if kind == "cpu" and number not in (None, 0):
            raise ValueError(f"there is only one cpu device, got {key!r}")
        if kind == "cpu":
            number = None
        canonical = kind if number is None else f"{kind}:{number}"
        dev = cls._cache.get(canonical)
        if dev is None:
            dev = object.__new__(cls)
            dev.type = kind
            dev.index = number
            dev._backend = None
            dev._array_type = None
            dev._str = canonical
            cls._cache[canonical] = dev
        cls._cache[key] = dev
        return dev

    @property
    def backend(self) -> Any:
        """The array backend serving this device (imported on first use)."""
        backend = self._backend
        if backend is None:
            # backends load on first use: a device whose optional backend
            # (CuPy) is missing fails only when it is used, naming its extra
            from aengine.adapters import backend_for

            backend = backend_for(self.type)
            backend.check_index(self._str, self.index)
            self._backend = backend
            self._array_type = backend.array_types[0]
        return backend

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + (
            f", index={self.index})" if self.index is not None else ")"
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except (ValueError, TypeError):
                return False
        return self is other

    def __hash__(self) -> int:
        return hash(self._str)

    def __reduce__(self) -> Any:
        return (Device, (self._str,))


device = Device
CPU = Device("cpu")
