"""Failing schedules saved to a file and replayed first by the next ``explore``.

The file is JSON: ``{key: {backend: [schedule, ...]}}``, ``key`` naming the
explored function (a pytest node id in the plugin).  At most ``KEEP``
schedules are kept per key and backend, the newest last.  A schedule that
no longer fits the code (``ScheduleMismatch``) is dropped when met.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["KEEP", "forget", "load", "remember"]

KEEP = 20


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"ae.testing's saved schedules at {str(path)!r} are not readable JSON ({exc}); "
            "delete the file to start afresh"
        ) from None
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)  # a reader never sees half a file


def load(path: Path, key: str, backend: str) -> list[str]:
    """The schedules saved for ``key`` on ``backend``."""
    got = _read(path).get(key, {}).get(backend, [])
    return [s for s in got if isinstance(s, str)]


def remember(path: Path, key: str, backend: str, schedule: str) -> None:
    """Save ``schedule`` for ``key`` on ``backend`` (once; the oldest go beyond ``KEEP``)."""
    data = _read(path)
    saved = data.setdefault(key, {}).setdefault(backend, [])
    if schedule in saved:
        saved.remove(schedule)
    saved.append(schedule)
    del saved[:-KEEP]
    _write(path, data)


def forget(path: Path, key: str, backend: str, schedule: str) -> None:
    """Drop a saved schedule (it no longer fits the code)."""
    data = _read(path)
    saved = data.get(key, {}).get(backend, [])
    if schedule in saved:
        saved.remove(schedule)
        _write(path, data)
