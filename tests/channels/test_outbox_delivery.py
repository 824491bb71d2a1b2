"""The durable outbox seen from the receiving side: /v1/events ids and replays, the webhook's
retries, OneBot messages owed across a restart, expiry. Real aiohttp servers, real SQLite."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import select

from chatfn.channels.http.channel import HttpChannel
from chatfn.channels.onebot.channel import OneBotChannel
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.logging import secret_values
from chatfn.runtime.settings import parse_settings
from chatfn.storage.models import outbox_table
from tests.channels.conftest import TOKEN, make_registry
from tests.channels.onebot.onebot_sim import OneBotSim, plain
from tests.kit import serve, until


def make_bot(tmp_path: Path, **channels: Any) -> Bot:
    settings = parse_settings(
        {
            "storage": {"url": f"sqlite:///{tmp_path / 'out.db'}", **channels.pop("storage", {})},
            "plugins": {"paths": []},
            "channels": {
                "http": {"host": "127.0.0.1", "port": 0, **channels.pop("http", {})},
                "onebot": {
                    "host": "127.0.0.1",
                    "port": 0,
                    "access_token": TOKEN,
                    "send_rate": 0,
                    "reconnect_wait": 0.2,
                    "action_timeout": 2.0,
                    **channels.pop("onebot", {}),
                },
            },
        },
        base_dir=tmp_path,
    )
    return Bot(settings, registry=make_registry(), model=None, builtins=False, load_plugins=False)


def states(bot: Bot) -> list[tuple[int, str]]:
    q = select(outbox_table.c.id, outbox_table.c.state).order_by(outbox_table.c.id)
    with bot.storage.engine.connect() as conn:
        return [(r.id, r.state) for r in conn.execute(q)]


async def until_states(bot: Bot, expected: list[tuple[int, str]]) -> None:
    """The rows reach `expected` (marking runs on the storage thread, just after the send)."""
    await until(lambda: states(bot) == expected, 3, lambda: f"outbox rows: {states(bot)}")


async def read_events(resp: aiohttp.ClientResponse, count: int) -> list[tuple[int, dict]]:
    """`count` SSE message events as (id, data)."""
    found: list[tuple[int, dict]] = []
    event_id: int | None = None
    async with asyncio.timeout(5):
        while len(found) < count:
            line = (await resp.content.readline()).decode().rstrip("\n")
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: ") and event_id is not None:
                found.append((event_id, json.loads(line[6:])))
                event_id = None
    return found


@pytest.fixture
async def http_bot(tmp_path: Path) -> AsyncIterator[tuple[Bot, str]]:
    bot = make_bot(tmp_path)
    channel = HttpChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    yield bot, f"http://127.0.0.1:{channel.bound_port}"
    await channel.stop()
    await bot.aclose()


def out(text: str, chat: str = "c1", platform: str = "http") -> OutgoingMessage:
    return OutgoingMessage(platform, chat, text)


async def test_a_message_with_no_subscriber_waits_then_reaches_the_first_one(
    http_bot: tuple[Bot, str],
) -> None:
    bot, url = http_bot
    await bot.send(out("reminder: ping"))  # no /v1/events client, no webhook
    assert states(bot) == [(1, "pending")]
    async with aiohttp.ClientSession() as s, s.get(f"{url}/v1/events") as events:
        [(eid, data)] = await read_events(events, 1)
        assert (eid, data["text"]) == (1, "reminder: ping")
        await bot.send(out("live one"))
        [(eid2, data2)] = await read_events(events, 1)
        assert (eid2, data2["text"]) == (2, "live one")
    await until_states(bot, [(1, "delivered"), (2, "delivered")])


@pytest.mark.parametrize("how", ["header", "query"])
async def test_reconnect_with_last_event_id_gets_every_missed_event_in_order(
    http_bot: tuple[Bot, str], how: str
) -> None:
    bot, url = http_bot
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{url}/v1/events") as events:
            await events.content.readline()  # ": connected": subscribed
            await bot.send(out("one"))
            [(first, _)] = await read_events(events, 1)
        for text in ("two", "three", "four"):  # while the client is away
            await bot.send(out(text, chat="c2"))
        kw: dict[str, Any] = (
            {"headers": {"Last-Event-ID": str(first)}}
            if how == "header"
            else {"params": {"since": str(first)}}
        )
        async with s.get(f"{url}/v1/events", **kw) as events:
            missed = await read_events(events, 3)
            await bot.send(out("five"))
            live = await read_events(events, 1)
    assert [(i, d["text"]) for i, d in missed + live] == [
        (2, "two"),
        (3, "three"),
        (4, "four"),
        (5, "five"),
    ]


async def test_a_reader_that_falls_1000_events_behind_still_gets_every_event(
    http_bot: tuple[Bot, str],
) -> None:
    """The soak found it: a /v1/events reader that fell behind under load silently lost the
    oldest events its queue dropped (507 HTTP replies in one run). Dropped ids are now fetched
    again from the outbox."""
    bot, url = http_bot
    async with aiohttp.ClientSession() as s, s.get(f"{url}/v1/events") as events:
        await events.content.readline()  # ": connected": subscribed
        written = []
        for i in range(1500):
            message = out(f"m{i}", chat="c9")
            await bot.outbox.write(message)
            written.append(message)
        for message in written:  # all at once: the stream cannot keep up
            bot.delivery.publish(message)
        got = await read_events(events, 1500)
    assert [i for i, _ in got] == list(range(1, 1501))


@pytest.mark.parametrize("where", ["header", "query"])
async def test_bad_last_event_id_is_a_400(http_bot: tuple[Bot, str], where: str) -> None:
    """Not an integer, negative, or beyond 64 bits: a 400 naming the range, never a 200 whose
    stream is then cut by an OverflowError."""
    bot, url = http_bot
    await bot.send(out("kept"))  # an event to replay: the query would compare against it
    bad = ["abc", "-1", "9223372036854775808", "1" + "0" * 40, "1e3", ""]
    async with aiohttp.ClientSession() as s:
        for value in bad:
            kw: dict[str, Any] = (
                {"headers": {"Last-Event-ID": value}}
                if where == "header"
                else {"params": {"since": value}}
            )
            if value == "" and where == "header":
                continue  # an empty Last-Event-ID is "none", as for a first connection
            async with s.get(f"{url}/v1/events", **kw) as r:
                assert r.status == 400, value
                assert "0 to 9223372036854775807" in (await r.json())["error"]
        # The largest id is accepted (nothing after it yet): the stream opens.
        kw = (
            {"headers": {"Last-Event-ID": "9223372036854775807"}}
            if where == "header"
            else {"params": {"since": "9223372036854775807"}}
        )
        async with s.get(f"{url}/v1/events", **kw) as r:
            assert r.status == 200
            assert await r.content.readline() == b": connected\n"


async def test_webhook_retried_on_5xx_and_errors_not_on_4xx(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    answers = [500, 503, 200, 404, 200]

    async def hook(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append((request.headers["X-Chatfn-Event-Id"], body["text"]))
        return web.Response(status=answers.pop(0) if answers else 200)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner, port = await serve(app)
    bot = make_bot(tmp_path, http={"webhook_url": f"http://127.0.0.1:{port}/hook"})
    channel = HttpChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    try:
        await bot.send(out("first"))
        await bot.send(out("refused"))
        await bot.send(out("third"))
        await until(lambda: len(seen) >= 5, 10, lambda: f"webhook calls: {seen}")

        async def settled() -> bool:
            """Marked, and the webhook's reader past the last event: nothing is retried."""
            marked = dict(states(bot))
            done = marked.get(1) == marked.get(3) == "delivered"
            return done and await bot.outbox.cursor("webhook") == 3

        await until(settled, 5, lambda: f"not settled: {states(bot)}")
    finally:
        await channel.stop()
        await runner.cleanup()
    # first: 500, 503 (backoff 0.5 s, 1 s), then 200; refused: 404, not retried; third: 200.
    assert seen == [("1", "first")] * 3 + [("2", "refused"), ("3", "third")]
    assert dict(states(bot))[1] == "delivered" and dict(states(bot))[3] == "delivered"
    assert await bot.outbox.cursor("webhook") == 3  # a restart resumes after event 3
    await bot.aclose()


async def test_onebot_message_owed_to_an_offline_account_survives_a_restart(
    tmp_path: Path,
) -> None:
    bot = make_bot(tmp_path)
    channel = OneBotChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    await bot.send(OutgoingMessage("onebot", "group:42", "owed across a restart", True))
    assert states(bot) == [(1, "pending")]  # nobody online: waiting, not lost, not "done"
    await channel.stop()
    await bot.aclose()

    bot2 = make_bot(tmp_path)
    channel2 = OneBotChannel(bot2.channel_host)
    await bot2.start()
    await channel2.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel2.bound_port}/onebot/v11/ws", 10001000, token=TOKEN)
    try:
        await sim.connect()
        [action] = await sim.wait_actions(1, "send_group_msg")
        assert plain(action["params"]["message"]) == "owed across a restart"
        await until_states(bot2, [(1, "delivered")])
    finally:
        await sim.close()
        await channel2.stop()
        await bot2.aclose()


async def test_a_message_waiting_past_max_wait_is_expired_logged_and_counted(
    tmp_path: Path,
) -> None:
    bot = make_bot(tmp_path, storage={"outbox": {"max_wait": 30}})
    await bot.start()
    await bot.send(OutgoingMessage("onebot", "group:42", "nobody takes this", True))
    await bot.outbox._housekeeping()
    assert states(bot) == [(1, "pending")]  # not waited long enough yet
    with bot.storage.engine.begin() as conn:  # a minute passes (the row's age, not a sleep)
        conn.execute(
            outbox_table.update().values(created_at=datetime.now(UTC) - timedelta(seconds=60))
        )
    await bot.outbox._housekeeping()
    assert states(bot) == [(1, "expired")]
    assert bot.outbox.stats()["expired"] == 1
    await bot.aclose()


async def test_later_messages_to_a_waiting_chat_queue_behind_it(tmp_path: Path) -> None:
    bot = make_bot(tmp_path)
    channel = OneBotChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    sim = OneBotSim(f"ws://127.0.0.1:{channel.bound_port}/onebot/v11/ws", 10001000, token=TOKEN)
    try:
        await bot.send(OutgoingMessage("onebot", "group:42", "one", True))
        await bot.send(OutgoingMessage("onebot", "group:42", "two", True))
        await sim.connect()
        await bot.send(OutgoingMessage("onebot", "group:42", "three", True))
        actions = await sim.wait_actions(3, "send_group_msg")
    finally:
        await sim.close()
        await channel.stop()
        await bot.aclose()
    assert [plain(a["params"]["message"]) for a in actions] == ["one", "two", "three"]


def readme_verify() -> Any:
    """The receiver's check exactly as docs/delivery.md shows it (so the documented snippet is
    the one tested)."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "delivery.md"
    readme = doc.read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```python")[1:]]
    [snippet] = [b for b in blocks if "def verify(" in b]
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(snippet), namespace)  # noqa: S102 - our own README's snippet
    return namespace["verify"]


async def test_webhook_is_signed_and_never_carries_the_token(tmp_path: Path) -> None:
    """A real receiver checks every POST with README's snippet: the signature holds over the
    raw body (a retry re-signed too), and neither the Authorization header nor the token's
    bytes arrive anywhere."""
    verify = readme_verify()
    secret = "whsec-7f3a9c"
    seen: list[tuple[dict[str, str], bytes]] = []
    answers = [503]  # the first attempt fails: the retry is signed again

    async def hook(request: web.Request) -> web.Response:
        seen.append((dict(request.headers), await request.read()))
        return web.Response(status=answers.pop(0) if answers else 200)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner, port = await serve(app)
    bot = make_bot(
        tmp_path,
        http={
            "token": TOKEN,
            "webhook_url": f"http://127.0.0.1:{port}/hook",
            "webhook_secret": secret,
        },
    )
    channel = HttpChannel(bot.channel_host)
    await bot.start()
    await channel.start()
    try:
        await bot.send(out("signed ✓"))
        await bot.send(out("second"))
        await until(lambda: len(seen) >= 3, 10, lambda: f"webhook calls: {len(seen)}")
    finally:
        await channel.stop()
        await runner.cleanup()
        await bot.aclose()
    assert [json.loads(body)["text"] for _, body in seen] == ["signed ✓"] * 2 + ["second"]
    for headers, body in seen:
        assert verify(secret, headers, body)
        assert not verify("another secret", headers, body)
        assert not verify(secret, headers, body + b" ")  # a changed body fails
        assert "Authorization" not in headers
        assert TOKEN not in json.dumps(headers) and TOKEN.encode() not in body
        assert headers["X-Chatfn-Signature"].startswith("sha256=")
    assert secret in secret_values(bot.settings)  # masked in every log line
    stale = {**seen[0][0], "X-Chatfn-Timestamp": str(int(seen[0][0]["X-Chatfn-Timestamp"]) - 600)}
    assert not verify(secret, stale, seen[0][1])  # an old timestamp: a replay
