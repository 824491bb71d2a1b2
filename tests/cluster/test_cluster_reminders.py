"""Reminders fire exactly once across two workers, also when both start at the same moment
with reminders that fell due while every worker was down."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from datetime import datetime, timedelta

import aiohttp
import pytest
from sqlalchemy import create_engine, select, text, update

from function_calls.builtins.reminders.service import reminders_table
from tests.cluster.conftest import Proc
from tests.cluster.test_cluster import start_cluster
from tests.kit import until_sync

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


def active_reminders(pg_url: str) -> int:
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        found = conn.execute(text("SELECT count(*) FROM reminders WHERE status = 'active'"))
        count = int(found.scalar() or 0)
    engine.dispose()
    return count


def settled(pg_url: str, n: int) -> bool:
    """`n` reminders delivered and none left active: every fire claims the active row first
    (a compare-and-set), so with none active nothing is left that could deliver one again."""
    return len(reminder_rows(pg_url)) == n and active_reminders(pg_url) == 0


def move_back(pg_url: str, seconds: float) -> None:
    """Every reminder falls due `seconds` earlier (`at` and `next_run`): time passing while
    the workers are down, without waiting for it."""
    delta = timedelta(seconds=seconds)
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        for row in conn.execute(select(reminders_table)).all():
            conn.execute(
                update(reminders_table)
                .where(reminders_table.c.id == row.id)
                .values(
                    at=(datetime.fromisoformat(row.at) - delta).isoformat(),
                    next_run=row.next_run - delta,
                )
            )
    engine.dispose()


def test_reminders_exactly_once_with_two_workers(tmp_path, pg_url, amqp_prefix, procs):
    base, workers = start_cluster(tmp_path, pg_url, amqp_prefix, procs)
    asyncio.run(set_reminders(base, 8, "in 3s"))
    until_sync(lambda: settled(pg_url, 8), 20, lambda: str(reminder_rows(pg_url)), interval=0.2)
    assert reminder_rows(pg_url) == Counter({f"r{i}": 1 for i in range(8)})

    # Every worker down; reminders fall due; two workers start at the same moment.
    asyncio.run(set_reminders(base, 6, "in 4s", first=8))
    for w in workers:
        w.kill()
    move_back(pg_url, 60)  # due while every worker is down
    cfg = tmp_path / "config.yaml"
    again = [
        Proc(["--config", str(cfg), "--role", "worker"], tmp_path / f"again{i}.log")
        for i in range(2)
    ]
    procs.extend(again)
    until_sync(lambda: settled(pg_url, 14), 30, lambda: str(reminder_rows(pg_url)), interval=0.2)
    found = reminder_rows(pg_url)
    assert found == Counter({f"r{i}": 1 for i in range(14)}), found
