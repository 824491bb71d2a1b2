"""An outbox id committed after a higher one (several processes write the table; commit order
is not id order) reaches /v1/events and the webhook once, in id order; an id that never
commits (a rolled-back insert) is passed after `storage.outbox.gap_wait`.

The gap is planted by a second connection to the bot's database, as a worker process would
write: on PostgreSQL with two real transactions (the first takes its id from the sequence and
commits after the second); on a SQLite file, where a writer holds the lock until it commits,
by committing a row under an id reserved earlier than a higher one already committed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Connection, Engine

from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.event_stream import message_of
from chatfn.storage.models import outbox_table
from chatfn.storage.outbox import OutboxEntry
from tests.channels.test_outbox_delivery import make_bot
from tests.cluster.conftest import pg_url  # noqa: F401 - the fixture, for the PostgreSQL case
from tests.kit import serve, until

GAP_WAIT = 2.0


class Worker:
    """Another process's connection writing outbox rows, with the gateway's relay: each row
    committed is then published to the bot's event subscribers, as `pass_on` does."""

    def __init__(self, bot: Bot, url: str) -> None:
        self.bot = bot
        self.engine: Engine = create_engine(url)
        self.postgres = url.startswith("postgresql")
        self.open: dict[int, Connection] = {}
        self.taken = 0
        self.texts: dict[int, str] = {}

    def _values(self, text: str) -> dict[str, Any]:
        now = datetime.now(UTC)
        payload = {"text": text, "at": None, "reply_to": None, "is_group": False, "notice": False}
        return {
            "platform": "http",
            "chat_id": "c9",
            "payload": json.dumps(payload),
            "state": "pending",
            "attempts": 0,
            "created_at": now,
            "updated_at": now,
        }

    def reserve(self, text: str) -> int:
        """An id taken now, its row not committed yet."""
        if self.postgres:
            conn = self.engine.connect()
            conn.begin()
            eid = conn.execute(
                outbox_table.insert().values(**self._values(text)).returning(outbox_table.c.id)
            ).scalar_one()
            self.open[eid] = conn
            return eid
        # SQLite: a writer holds the lock until it commits, so the id is taken here (as a
        # sequence would) and its row inserted under it at commit (never, on rollback).
        with self.engine.connect() as conn:
            top = conn.execute(select(func.max(outbox_table.c.id))).scalar() or 0
        eid = self.taken = max(top, self.taken) + 1
        self.open[eid] = None  # type: ignore[assignment]
        self.texts[eid] = text
        return eid

    def commit(self, eid: int) -> None:
        conn = self.open.pop(eid)
        if self.postgres:
            conn.commit()
            conn.close()
        else:
            with self.engine.begin() as c:
                c.execute(outbox_table.insert().values(id=eid, **self._values(self.texts[eid])))
        self._publish(eid)

    def rollback(self, eid: int) -> None:
        conn = self.open.pop(eid)
        if self.postgres:
            conn.rollback()
            conn.close()

    def write(self, text: str) -> int:
        eid = self.reserve(text)
        self.commit(eid)
        return eid

    def _publish(self, eid: int) -> None:
        with self.engine.connect() as conn:
            row = conn.execute(select(outbox_table).where(outbox_table.c.id == eid)).one()
        entry = OutboxEntry(
            row.id, row.platform, row.chat_id, json.loads(row.payload), row.state, row.created_at
        )
        self.bot.delivery.publish(message_of(entry))

    def close(self) -> None:
        for eid in list(self.open):
            self.rollback(eid)
        self.engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'out.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
async def webhook() -> AsyncIterator[tuple[str, list[tuple[int, str]]]]:
    got: list[tuple[int, str]] = []

    async def hook(request: web.Request) -> web.Response:
        body = await request.json()
        got.append((int(request.headers["X-Chatfn-Event-Id"]), body["text"]))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner, port = await serve(app)
    yield f"http://127.0.0.1:{port}/hook", got
    await runner.cleanup()


async def sse_reader(url: str, got: list[tuple[int, str]], headers: dict[str, str]) -> None:
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers) as resp:
        event_id: int | None = None
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: ") and event_id is not None:
                got.append((event_id, json.loads(line[6:])["text"]))
                event_id = None


async def test_late_and_missing_ids_reach_sse_and_webhook_once_in_order(
    tmp_path: Path, db_url: str, webhook: tuple[str, list[tuple[int, str]]]
) -> None:
    hook_url, hooked = webhook
    bot = make_bot(
        tmp_path,
        storage={"url": db_url, "outbox": {"gap_wait": GAP_WAIT}},
        http={"webhook_url": hook_url},
    )
    channel = HttpChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    worker = Worker(bot, db_url)
    events_url = f"http://127.0.0.1:{channel.bound_port}/v1/events"
    streamed: list[tuple[int, str]] = []
    sse = asyncio.create_task(sse_reader(events_url, streamed, {}))
    try:
        await until(lambda: channel._sse_clients == 1)

        def both() -> list[list[tuple[int, str]]]:
            return [list(streamed), list(hooked)]

        one = worker.write("one")
        await until(lambda: both() == [[(one, "one")]] * 2)

        # A worker takes an id, another commits the next one first.
        two = worker.reserve("two")
        three = worker.write("three")
        assert three == two + 1
        # A client replaying from `one` meanwhile (?since=) waits for the same id.
        replayed: list[tuple[int, str]] = []
        since = asyncio.create_task(sse_reader(f"{events_url}?since={one}", replayed, {}))
        # Kept (about time itself: the hold lasts up to gap_wait, 2 s): half a second into it,
        # nothing after the missing id has gone.
        await asyncio.sleep(0.5)
        assert both() == [[(one, "one")]] * 2, "the event after a missing id must wait for it"
        assert replayed == []
        worker.commit(two)
        expected = [(one, "one"), (two, "two"), (three, "three")]
        await until(lambda: both() == [expected] * 2 and len(replayed) == 2)
        assert replayed == expected[1:]
        since.cancel()

        # An id whose insert is rolled back never appears: passed after the wait.
        four = worker.reserve("four")
        worker.rollback(four)
        five = worker.write("five")
        seen_at = time.monotonic()
        # Kept (about time itself): within gap_wait the rolled-back id still holds `five`.
        await asyncio.sleep(0.5)
        assert both() == [expected] * 2
        expected.append((five, "five"))
        await until(lambda: both() == [expected] * 2, GAP_WAIT + 5, lambda: f"got {both()}")
        assert time.monotonic() - seen_at >= GAP_WAIT - 0.3
        # Once each: an event written after it arrives next, so a repeat would be before it.
        six = worker.write("six")
        await until(lambda: len(streamed) > 4 and len(hooked) > 4, 5, lambda: f"got {both()}")
        expected.append((six, "six"))
        assert both() == [expected] * 2

        async def webhook_cursor_at_six() -> bool:
            return await bot.outbox.cursor("webhook") == six

        await until(webhook_cursor_at_six, 5, "the webhook's cursor did not reach the last id")

        # A client reconnecting across that old gap does not wait for it again.
        replay: list[tuple[int, str]] = []
        again = asyncio.create_task(sse_reader(events_url, replay, {"Last-Event-ID": str(two)}))
        started = time.monotonic()
        await until(lambda: len(replay) == 3, GAP_WAIT + 5, lambda: f"replayed {replay}")
        assert replay == [(three, "three"), (five, "five"), (six, "six")]
        assert time.monotonic() - started < GAP_WAIT
        again.cancel()
    finally:
        sse.cancel()
        worker.close()
        await channel.stop()
        await bot.aclose()
