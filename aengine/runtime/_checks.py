"""Checking an Engine's settings: a wrong one fails at construction, naming it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

from ..tensors import Device
from ._offload import DEFAULT_OFFLOAD_MIN_ELEMENTS
from ._settings import DEFAULT_TIME_SLICE

__all__ = [
    "EngineSettings",
    "check_engine_settings",
    "check_int",
    "check_seconds",
    "check_sim_latency",
]


class EngineSettings(NamedTuple):
    """ae.Engine's settings, checked, with their defaults filled in."""

    time_slice: float
    max_inflight: int | None
    offload: bool
    offload_threshold: int
    offload_threads: int | None
    offload_backward: bool
    blas_threads: int | None
    reentrant_depth_limit: int
    reentrant_overflow: str
    workers_per_device: int
    sim_latency: float | dict[str, float]
    on_node: Callable[..., Any] | None


def check_engine_settings(
    time_slice: float | None,
    max_inflight: int | None,
    offload: bool,
    offload_threshold: int | None,
    offload_threads: int | None,
    offload_backward: bool,
    blas_threads: int | None,
    reentrant_depth_limit: int,
    reentrant_overflow: str,
    workers_per_device: int,
    sim_latency: float | dict[str, float],
    on_node: Callable[..., Any] | None,
) -> EngineSettings:
    """Every setting of ae.Engine checked, naming it: a wrong one fails now, not in a backward.

    None for ``time_slice`` and ``offload_threshold``: their defaults.
    """
    seconds = check_seconds("time_slice", DEFAULT_TIME_SLICE if time_slice is None else time_slice)
    if not seconds > 0:
        raise ValueError(f"time_slice must be a positive number of seconds, got {seconds}")
    if max_inflight is not None:
        max_inflight = check_int("max_inflight", max_inflight, 1)
    _check_bool("offload", offload)
    threshold = DEFAULT_OFFLOAD_MIN_ELEMENTS if offload_threshold is None else offload_threshold
    threshold = check_int("offload_threshold", threshold, 0)
    if offload_threads is not None:
        offload_threads = check_int("offload_threads", offload_threads, 1)
    _check_bool("offload_backward", offload_backward)
    if blas_threads is not None:
        blas_threads = check_int("blas_threads", blas_threads, 1)
    depth = check_int("reentrant_depth_limit", reentrant_depth_limit, 1)
    overflow = _check_overflow(reentrant_overflow)
    workers = check_int("workers_per_device", workers_per_device, 1)
    latency = check_sim_latency(sim_latency)
    if on_node is not None and not callable(on_node):
        raise TypeError(
            "on_node must be a callable (node, where) or None, got "
            f"{type(on_node).__name__} {on_node!r}"
        )
    return EngineSettings(
        seconds,
        max_inflight,
        offload,
        threshold,
        offload_threads,
        offload_backward,
        blas_threads,
        depth,
        overflow,
        workers,
        latency,
        on_node,
    )


def _check_overflow(value: Any) -> str:
    """``reentrant_overflow``: 'thread' or 'task'."""
    if not isinstance(value, str):
        raise TypeError(
            f"reentrant_overflow must be 'thread' or 'task', got {type(value).__name__} {value!r}"
        )
    if value not in ("thread", "task"):
        raise ValueError(f"reentrant_overflow must be 'thread' or 'task', got {value!r}")
    return value


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")


def check_int(name: str, value: Any, least: int) -> int:
    """An int setting of ae.Engine (not a bool), at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")
    return int(value)


def check_seconds(name: str, value: Any, where: str = "") -> float:
    """A duration setting of ae.Engine: a finite real number (the caller checks its sign)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a number of seconds, got {type(value).__name__} {value!r}{where}"
        )
    seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite number of seconds, got {value}{where}")
    return seconds


def check_sim_latency(value: Any) -> float | dict[str, float]:
    """ae.Engine's ``sim_latency``: seconds >= 0, or a dict of them by sim device name."""
    if isinstance(value, dict):
        return {_sim_name(key): _latency(v, f" for {key!r}") for key, v in value.items()}
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return _latency(value)
    raise TypeError(
        "sim_latency must be a number of seconds or a dict {'sim:N': seconds}, got "
        f"{type(value).__name__} {value!r}"
    )


def _sim_name(key: Any) -> str:
    """A key of ``sim_latency``: the name of a sim device ('sim' is 'sim:0')."""
    hint = f"sim_latency: {key!r} is not a sim device; the keys are names like 'sim:0'"
    try:
        dev = Device(key)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{hint} ({exc})") from None
    if dev.type != "sim":
        raise ValueError(hint)
    return str(dev)


def _latency(value: Any, where: str = "") -> float:
    seconds = check_seconds("sim_latency", value, where)
    if seconds < 0:
        raise ValueError(f"sim_latency must be >= 0 seconds, got {value}{where}")
    return seconds
