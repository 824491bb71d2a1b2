"""The house lint and format rules (pyproject's [tool.ruff]) hold for the whole tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    if shutil.which("ruff") is None and not Path(sys.executable).with_name("ruff").exists():
        pytest.skip("ruff is not installed (it is in the test extra)")
    return shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))


def test_ruff_check_is_clean() -> None:
    proc = subprocess.run(
        [_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_applied() -> None:
    proc = subprocess.run(
        [_ruff(), "format", "--check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, "run `ruff format .`:\n" + proc.stdout + proc.stderr
