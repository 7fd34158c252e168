"""Checking an Engine's settings: a wrong one fails at construction, naming it."""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..tensors import Device

__all__ = ["check_int", "check_seconds", "check_sim_latency"]


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
