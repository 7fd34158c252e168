"""``python -m bench``: see ``bench/cli.py``.

``--threads N`` must act before numpy and torch are imported (BLAS pools are
sized when the libraries load), so it is applied here, first.
"""

from __future__ import annotations

import sys

from .threads import apply_thread_env

apply_thread_env(sys.argv[1:])

from .cli import main  # noqa: E402

sys.exit(main())
