"""The files generated from the operator table are up to date."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import ROOT


def test_generated_files_follow_the_table() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_ops.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
