"""``--threads N``: cap the BLAS / OpenMP thread pools of every system alike.

# NOTE [BLAS threads on a busy machine]
# numpy's OpenBLAS and torch's OpenMP pools default to one thread per core.
# On a machine whose cores are also busy with other processes, a pool thread
# that is descheduled makes the others spin: a 64x512 @ 512x512 float32 matmul
# measured 0.56 ms with one OpenBLAS thread and 54 ms (median) with two while
# the 2-core machine ran a load of 6.  ``--threads 1`` gives every system the
# same single-threaded kernels, which keeps such a run comparable; a run
# without it measures the libraries' defaults.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["apply_thread_env", "thread_count", "ENV_VARS"]

ENV_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_count(argv: Sequence[str]) -> int | None:
    """The N of ``--threads N`` / ``--threads=N`` in ``argv``, else None."""
    for i, a in enumerate(argv):
        value = None
        if a == "--threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith("--threads="):
            value = a.split("=", 1)[1]
        if value is not None:
            try:
                return max(1, int(value))
            except ValueError:
                return None
    return None


def apply_thread_env(argv: Sequence[str]) -> None:
    """Set the thread-count environment variables before numpy/torch load."""
    n = thread_count(argv)
    if n is not None:
        for var in ENV_VARS:
            os.environ[var] = str(n)
