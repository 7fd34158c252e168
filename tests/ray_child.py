"""Test cases that start Ray's driver, run in a pytest process of their own.

NOTE [Ray's driver in a process of its own]
``ray.shutdown()`` leaves about ten of gRPC's native threads running in the
driver's process (its event engine, timer and resolver threads).  When the
interpreter then finalises, after every test has passed, one of them can
still call into it, and the process may die with a segmentation fault, which
fails the run.  So the cases that call ``ray.init()`` in the test process
live in files pytest does not collect (``ray_*_cases.py``), and one test in
the main run runs each such file here, in a child pytest that leaves with
``os._exit`` once it has reported: nothing of Ray's runs after that.  Tests
that start Ray in a subprocess of their own (an example run as a script) stay
where they are.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import ROOT

#: the whole file's bound, generous for a loaded 2-core machine (each case has
#: its own hang guard of minutes inside the child)
TIMEOUT = 1800.0

#: Ray Serve's proxy answers its readiness and health checks within 5 and 10 s
#: by default; on a 2-core machine kept busy beside the tests it may not, and
#: Serve then kills it and fails to start.  The tests' clusters (and the
#: processes Ray starts from them, which inherit the environment) wait longer.
RAY_ENV = {
    "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60",
    "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "60",
}


def run_cases(path: str) -> None:
    """Run the Ray cases in ``path`` (relative to the checkout) in a child pytest.

    Passes when the child reports them passed; skips, with the child's
    reasons, where it skipped them all (Ray is not installed); fails with the
    child's report otherwise.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "tests.ray_child", path, "-q", "-rs"],
        cwd=ROOT,
        env={**os.environ, **RAY_ENV},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    report = proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else ""
    if proc.returncode != 0:
        pytest.fail(f"{path} failed in its own process (rc {proc.returncode}):\n{report[-8000:]}")
    if " passed" not in summary:
        pytest.skip(f"{path}: {summary}; {report[-1500:]}")


def _main() -> None:
    rc = pytest.main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(rc))  # see NOTE [Ray's driver in a process of its own]


if __name__ == "__main__":
    _main()
