"""Progress bars of ``python -m bench`` on stderr (tqdm, when installed).

Bars are off unless ``enable()`` was called (``python -m bench`` calls it
when stderr is a terminal and ``--quiet`` is not given), so they never mix
into the JSON and markdown outputs, a log file or a test's captured output.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["enable", "enabled", "bar", "write"]

_state = {"on": False}


def enable(on: bool = True) -> bool:
    """Turn bars on (if tqdm imports and stderr is a terminal); returns whether they are."""
    if on:
        try:
            import tqdm  # noqa: F401  (optional: bars only where it is installed)
        except ImportError:
            on = False
    _state["on"] = on and sys.stderr.isatty()
    return _state["on"]


def enabled() -> bool:
    return _state["on"]


class _NoBar:
    """What ``bar`` returns when bars are off: the same calls, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def set_description_str(self, desc: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def bar(total: int | None, desc: str, unit: str = "it", leave: bool = False) -> Any:
    """A tqdm bar on stderr, or a bar that does nothing when bars are off."""
    if not _state["on"]:
        return _NoBar()
    from tqdm import tqdm  # optional dependency, checked by enable()

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        leave=leave,
        file=sys.stderr,
        dynamic_ncols=True,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
        "[{elapsed}<{remaining}]{postfix}"
        if total
        else None,
    )


def write(msg: str) -> None:
    """A log line on stderr that does not tear the bars."""
    if _state["on"]:
        from tqdm import tqdm  # optional dependency, checked by enable()

        tqdm.write(msg, file=sys.stderr)
    else:
        print(msg, file=sys.stderr, flush=True)
