"""check_system.py on PostgreSQL and RabbitMQ: pending migrations listed, run only with
--online --migrate; the broker reached; the role shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chatfn.storage.migrations.versions import __path__ as _versions
from tests.cluster.conftest import AMQP, pg_url  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
# The revision files, so a new migration does not need this test rewritten.
REVISIONS = sorted(p.name[:4] for p in Path(_versions[0]).glob("[0-9][0-9][0-9][0-9]_*.py"))
pytestmark = pytest.mark.services


def checks(cfg: Path, *flags: str) -> dict[str, dict]:
    run = [sys.executable, str(ROOT / "check_system.py"), "--json", "--config", str(cfg), *flags]
    out = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=ROOT)
    return {c["name"]: c for c in json.loads(out.stdout)["checks"]}


def test_migrations_listed_then_run_when_asked_broker_and_role(tmp_path, pg_url):  # noqa: F811
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"storage": {"url": pg_url}, "broker": {"url": AMQP}}))
    first = checks(cfg, "--role", "worker")
    pending = f"{len(REVISIONS)} pending"
    assert first["migrations"]["status"] == "warn" and pending in first["migrations"]["detail"]
    assert first["broker"]["status"] == "ok"
    assert first["role"]["detail"].startswith("worker")
    assert checks(cfg)["migrations"]["status"] == "warn"  # still pending: nothing ran
    ran = checks(cfg, "--online", "--migrate")
    assert ran["migrations"]["status"] == "ok"
    assert "ran " + ", ".join(REVISIONS) in ran["migrations"]["detail"]
    assert checks(cfg)["migrations"]["detail"].endswith("nothing pending")
    cfg.write_text(
        yaml.safe_dump({"storage": {"url": pg_url}, "broker": {"url": "amqp://127.0.0.1:1/"}})
    )
    assert checks(cfg)["broker"]["status"] == "fail"
