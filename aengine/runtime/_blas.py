"""BLAS/OpenMP thread pools while an Engine is open (through threadpoolctl).

# NOTE [BLAS threads]
# An Engine runs kernels side by side in its compute threads (one per core
# by default).  If each of those kernels also used a BLAS pool of one thread
# per core, N kernels would start N x cores threads on cores busy already:
# such oversubscription collapsed a service's throughput and stalled its loop
# for seconds.  So an open Engine caps the pools (``blas_threads``, default
# 1) and the cap is lifted when the last Engine that asked for one closes.
# The pools are process-wide: the first Engine's cap holds until then.
"""

from __future__ import annotations

import threading
from typing import Any

from threadpoolctl import threadpool_limits

__all__ = ["cap", "uncap", "current_cap"]

_lock = threading.Lock()
_users = 0
_limits: Any = None
_cap: int | None = None


def cap(threads: int) -> None:
    """Cap BLAS/OpenMP pools at ``threads`` (the first caller's cap holds)."""
    global _users, _limits, _cap
    with _lock:
        _users += 1
        if _users == 1:
            _limits = threadpool_limits(limits=threads)
            _cap = threads


def uncap() -> None:
    """One caller is done; the last one restores the pools as they were."""
    global _users, _limits, _cap
    with _lock:
        _users -= 1
        if _users == 0 and _limits is not None:
            _limits.restore_original_limits()
            _limits = None
            _cap = None


def current_cap() -> int | None:
    """The cap in force, or None."""
    return _cap
