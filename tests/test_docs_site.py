"""The documentation site builds with `mkdocs build --strict` (issue 39 §2): no broken link or
anchor, no page left out of the nav. Skipped only where MkDocs is not installed; the `test`
extra brings it (mkdocs-material), so CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("mkdocs")
pytest.importorskip("material")

ROOT = Path(__file__).resolve().parents[1]


def _build(config: Path, site: Path) -> tuple[int, str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return done.returncode, done.stdout + done.stderr


def _warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    code, output = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert code == 0 and _warnings(output) == [], output
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert (tmp_path / "site" / "channels" / "index.html").is_file()


def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    """The check above could pass by checking nothing: the same configuration on a page with a
    broken link and a broken anchor fails."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md) [here](#no-such-heading)\n")
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    code, output = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert code != 0
    assert "missing.md" in output and "no-such-heading" in output
