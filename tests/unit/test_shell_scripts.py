"""Runs the shell tests under tests/shell/ so pytest reports them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SHELL_TESTS = sorted((Path(__file__).resolve().parents[1] / "shell").glob("test_*.sh"))


@pytest.mark.parametrize("script", SHELL_TESTS, ids=[p.name for p in SHELL_TESTS])
def test_shell_script(script: Path) -> None:
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " passed, 0 failed" in proc.stdout
