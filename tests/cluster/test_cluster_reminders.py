"""Reminders fire exactly once across two workers, also when both start at the same moment
with reminders that fell due while every worker was down."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

import aiohttp
import pytest
from sqlalchemy import create_engine, text

from tests.cluster.conftest import Proc
from tests.cluster.test_cluster import start_cluster

pytestmark = pytest.mark.services


def reminder_rows(pg_url: str) -> Counter[str]:
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        texts = conn.execute(
            text("SELECT text FROM messages WHERE role = 'assistant' AND text LIKE '⏰%'")
        ).scalars()
        found = Counter(
            m.group(1)
            for t in texts
            if (m := re.match(r"⏰ (?:Reminder: |Missed reminder: “)(r\d+)", t))
        )
    engine.dispose()
    return found


async def set_reminders(base: str, n: int, when: str, first: int = 0) -> None:
    async with aiohttp.ClientSession() as session:
        for i in range(first, first + n):
            body = {
                "chat_id": f"r{i % 3}",
                "sender_id": "alice",
                "text": f"/reminder_set {when} r{i}",
            }
            async with session.post(f"{base}/v1/messages", json=body) as r:
                data = await r.json()
            assert "r" in data["replies"][0]["text"], data


def wait_until(check, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not check():
        time.sleep(0.2)


def test_reminders_exactly_once_with_two_workers(tmp_path, pg_url, amqp_prefix, procs):
    base, workers = start_cluster(tmp_path, pg_url, amqp_prefix, procs)
    asyncio.run(set_reminders(base, 8, "in 3s"))
    wait_until(lambda: len(reminder_rows(pg_url)) == 8, 20)
    time.sleep(1.5)  # a second delivery, if any, would land by now
    assert reminder_rows(pg_url) == Counter({f"r{i}": 1 for i in range(8)})

    # Every worker down; reminders fall due; two workers start at the same moment.
    asyncio.run(set_reminders(base, 6, "in 4s", first=8))
    for w in workers:
        w.kill()
    time.sleep(5)
    cfg = tmp_path / "config.yaml"
    again = [
        Proc(["--config", str(cfg), "--role", "worker"], tmp_path / f"again{i}.log")
        for i in range(2)
    ]
    procs.extend(again)
    wait_until(lambda: len(reminder_rows(pg_url)) == 14, 30)
    time.sleep(1.5)
    found = reminder_rows(pg_url)
    assert found == Counter({f"r{i}": 1 for i in range(14)}), found
