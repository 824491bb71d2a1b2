"""Fixtures for tests against the real PostgreSQL and RabbitMQ of the machine (marked
`services`): a fresh database and a queue prefix per test, both removed afterwards, and the
gateway / worker subprocesses. Unreachable services skip these tests with the reason, except
under CI=true, where they fail: CI runs where the services are."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.kit import free_port, until_sync  # noqa: F401 - free_port: bench/ imports it from here

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = os.environ.get("CHATFN_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
AMQP = os.environ.get("CHATFN_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")


def _unreachable(what: str, exc: Exception) -> None:
    reason = f"{what} not reachable ({type(exc).__name__}: {exc})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true runs where the services are, so this is a failure")
    pytest.skip(reason)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new PostgreSQL database for this test, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"chatfn_t_{uuid.uuid4().hex[:12]}"
    try:
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        _unreachable(f"PostgreSQL at {PG_ADMIN}", exc)
    try:
        yield make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def amqp_prefix() -> Iterator[str]:
    """A queue-name prefix for this test; its queues are deleted afterwards."""
    import aio_pika

    prefix = f"chatfn-t-{uuid.uuid4().hex[:10]}"

    async def probe() -> None:
        conn = await aio_pika.connect(AMQP, timeout=5)
        await conn.close()

    try:
        asyncio.run(probe())
    except Exception as exc:
        _unreachable(f"RabbitMQ at {AMQP}", exc)
    yield prefix
    asyncio.run(_delete_queues(prefix))


async def _delete_queues(prefix: str) -> None:
    import aio_pika

    conn = await aio_pika.connect(AMQP, timeout=5)
    try:
        names = [f"{prefix}.in.{k}" for k in range(64)]
        names += [f"{prefix}.out.{p}" for p in ("http", "console", "onebot", "telegram", "slack")]
        for name in names:
            channel = await conn.channel()
            try:
                await channel.queue_delete(name)
            except Exception:
                pass  # not declared by this test
            if not channel.is_closed:
                await channel.close()
    finally:
        await conn.close()


def cluster_config(
    tmp_path: Path, db_url: str, prefix: str, *, partitions: int = 8, **sections: object
) -> Path:
    data: dict[str, object] = {
        "storage": {"url": db_url},
        "broker": {
            "url": AMQP,
            "prefix": prefix,
            "partitions": partitions,
            "redelivery_timeout": 4,
        },
        "plugins": {"paths": [str(ROOT / "tests" / "cluster" / "echo_plugin.py")]},
        "logging": {"level": "INFO"},
        "reminders": {"timezone": "UTC"},
        **sections,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Proc:
    """`python bot.py ...` with its log in a file (read on failure)."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self._terminated = False
        self.handle = log.open("wb")
        self.p = subprocess.Popen(
            [sys.executable, str(ROOT / "bot.py"), *args],
            cwd=str(ROOT),
            stdin=subprocess.DEVNULL,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def wait_for(self, text: str, timeout: float = 30) -> None:
        """Until `text` is in the log; fails at once if the process exited first."""

        def seen() -> bool:
            if text in self.log.read_text(errors="replace"):
                return True
            if self.p.poll() is not None:
                raise AssertionError(f"exited before {text!r}; log:\n{self.tail()}")
            return False

        until_sync(seen, timeout, lambda: f"{text!r} not seen; log:\n{self.tail()}", interval=0.05)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def http_port(self, timeout: float = 30) -> int:
        """The port its HTTP channel bound (started with `--port 0`): read from its log, so no
        other process can take the port between a free-port probe and the bind (with the
        suite on two workers, that race refused a gateway's connections once)."""
        self.wait_for("HTTP channel listening on http://", timeout)
        found = re.search(r"HTTP channel listening on http://[^:\s]+:(\d+)", self.log.read_text())
        assert found, self.log.read_text()[-4000:]
        return int(found.group(1))

    def kill(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(10)

    def terminate(self) -> None:
        """SIGTERM without waiting: `procs` signals every process first, so their shutdowns
        overlap instead of adding up."""
        if self.p.poll() is None and not self._terminated:
            self.p.send_signal(signal.SIGTERM)
            self._terminated = True

    def stop(self) -> None:
        if self.p.poll() is None:
            self.terminate()
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)
        self.handle.close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.terminate()
    for proc in started:
        proc.stop()
