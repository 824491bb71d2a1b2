"""Delivery across processes goes through the outbox in PostgreSQL: /v1/events on the gateway
and the webhook see each worker's reply once, with its event id; `Last-Event-ID` replays what
follows; a gateway SIGKILLed while replies are on their way sends them after its restart, each
once (counted at the receiving side by event id). Real subprocesses, PostgreSQL, RabbitMQ."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import pytest
from sqlalchemy import create_engine, text

from tests.cluster.conftest import Proc, cluster_config
from tests.cluster.test_cluster import send_all, start_cluster
from tests.kit import until, until_sync

pytestmark = pytest.mark.services

Event = tuple[int, dict]


class WebhookReceiver:
    """An HTTP server on a thread recording (X-Chatfn-Event-Id, body) of every POST."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        events = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                events.append((int(self.headers["X-Chatfn-Event-Id"]), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    yield receiver
    receiver.close()


async def read_events(
    session: aiohttp.ClientSession,
    base: str,
    into: list[Event],
    connected: asyncio.Event,
    last_event_id: int | None = None,
) -> None:
    """Append every `message` event of /v1/events to `into` until cancelled."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    async with session.get(f"{base}/v1/events", headers=headers) as r:
        assert r.status == 200
        eid: int | None = None
        kind = ""
        async for raw in r.content:
            line = raw.decode().rstrip("\n")
            if line == ": connected":
                connected.set()
            elif line.startswith("id: "):
                eid = int(line[4:])
            elif line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: ") and kind == "message":
                assert eid is not None, "an event without an id"
                into.append((eid, json.loads(line[6:])))
            elif not line:
                eid, kind = None, ""


LAST = "last"  # the chat of a message sent after all the others


async def send_last(base: str) -> str:
    """One more message, after every other one: its event has the highest id. A stream sends
    in id order and never goes back (runtime/event_stream.py), so once its event is seen, a
    second copy of any earlier event can no longer come."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        body = {"chat_id": LAST, "sender_id": "u", "text": f"/echo {LAST}"}
        async with session.post(f"{base}/v1/messages", json=body) as r:
            assert r.status == 200, await r.text()
            return (await r.json())["replies"][0]["text"]


def saw_last(events: list[Event]) -> bool:
    return any(data["chat_id"] == LAST for _, data in events)


def delivered_rows(pg_url: str, wait: float = 10.0) -> list[tuple]:
    """The outbox rows once every one is marked delivered (marks are written in batches after
    the send, so the last batch may land a moment after the event was seen), or as they are
    when `wait` runs out."""
    end = time.monotonic() + wait
    rows = outbox_rows(pg_url)
    while time.monotonic() < end and {r[2] for r in rows} != {"delivered"}:
        time.sleep(0.1)
        rows = outbox_rows(pg_url)
    return rows


def outbox_rows(pg_url: str) -> list[tuple[int, str, str, str | None]]:
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        rows = conn.execute(text('SELECT id, chat_id, state, "key" FROM outbox ORDER BY id')).all()
    engine.dispose()
    return [tuple(r) for r in rows]


def test_events_and_webhook_see_each_worker_reply_once(
    tmp_path, pg_url, amqp_prefix, procs, webhook
):
    base, _workers = start_cluster(
        tmp_path, pg_url, amqp_prefix, procs, channels={"http": {"webhook_url": webhook.url}}
    )
    chats, per_chat = 10, 3
    n = chats * per_chat

    async def run() -> tuple[list[Event], list[Event], dict[str, list[str]]]:
        live: list[Event] = []
        replayed: list[Event] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            connected = asyncio.Event()
            reader = asyncio.create_task(read_events(session, base, live, connected))
            await asyncio.wait_for(connected.wait(), 10)
            replies = await send_all(base, chats=chats, per_chat=per_chat, stagger=0.005)
            await until(lambda: len(live) >= n, 10, lambda: f"{len(live)} of {n} events")
            replies[LAST] = [await send_last(base)]
            await until(lambda: saw_last(live), 10, "the last event did not come")
            reader.cancel()
            # Reconnect as if the stream had broken after the 15th event in id order.
            after = sorted(e for e, _ in live)[n // 2 - 1]
            connected = asyncio.Event()
            reader = asyncio.create_task(read_events(session, base, replayed, connected, after))
            await until(lambda: saw_last(replayed), 10, "the replay did not reach the end")
            reader.cancel()
        return live, replayed, replies

    live, replayed, replies = asyncio.run(run())
    total = n + 1  # and the last one
    expected = {texts[0] for texts in replies.values()}
    assert len(expected) == total
    ids = [e for e, _ in live]
    assert len(live) == total and len(set(ids)) == total, Counter(ids).most_common(3)
    assert {d["text"] for _, d in live} == expected
    per_chat_ids: dict[str, list[int]] = {}
    for eid, data in live:
        per_chat_ids.setdefault(data["chat_id"], []).append(eid)
    for chat, seq in per_chat_ids.items():
        assert seq == sorted(seq), f"{chat}: event ids not increasing: {seq}"
    # The events are the rows the workers wrote: one per reply, keyed, all delivered.
    rows = delivered_rows(pg_url)
    assert sorted(ids) == [r[0] for r in rows]
    assert {r[2] for r in rows} == {"delivered"}
    assert len({(r[1], r[3]) for r in rows}) == total and all(r[3] for r in rows)
    # Last-Event-ID: exactly the events after it, in id order, from the database.
    tail = sorted(ids)[n // 2 :]
    assert [e for e, _ in replayed] == tail
    by_id = dict(live)
    assert all(by_id[e]["text"] == d["text"] for e, d in replayed)
    # The webhook (the gateway's loop over the shared outbox) posts each once, in id order:
    # once it posted the last, it posts none of the others again.
    until_sync(lambda: saw_last(webhook.events), 10, lambda: f"{len(webhook.events)} posted")
    hooked = Counter(e for e, _ in webhook.events)
    assert set(hooked) == set(ids) and set(hooked.values()) == {1}, hooked.most_common(3)


def test_gateway_sigkilled_with_replies_on_their_way_sends_each_once_after_restart(
    tmp_path, pg_url, amqp_prefix, procs
):
    # k0-k2 answer 1 s after the gateway died (rows pending before it restarts: its drain
    # sends them); k3-k5 answer after the restart, through the platform queue (the worker
    # finds the old gateway's queue gone). "After the restart": 12 s leaves a loaded machine
    # ten seconds to start the second gateway (5 s was once too few).
    cfg = cluster_config(tmp_path, pg_url, amqp_prefix, echo={"delay": 1.0, "slow": 12.0})
    worker = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / "worker.log")
    procs.append(worker)
    worker.wait_for("consuming")

    def gateway(name: str) -> tuple[Proc, str]:
        args = ["--config", str(cfg), "--role", "gateway", "--channel", "http", "--port", "0"]
        proc = Proc(args, tmp_path / f"{name}.log")
        procs.append(proc)
        port = proc.http_port()
        proc.wait_for("chatfn started")
        return proc, f"http://127.0.0.1:{port}"

    first, base = gateway("gateway1")
    chats = 6
    texts = [f"{'slow' if i >= 3 else 'fast'}k{i}" for i in range(chats)]
    engine = create_engine(pg_url)

    def count(q: str) -> int:
        with engine.connect() as conn:
            return int(conn.execute(text(q)).scalar() or 0)

    async def post_and_kill() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:

            async def post(i: int) -> None:
                body = {"chat_id": f"k{i}", "sender_id": "u", "text": f"/echo {texts[i]}"}
                try:
                    async with session.post(f"{base}/v1/messages", json=body) as r:
                        await r.read()
                except aiohttp.ClientError:
                    pass  # the gateway died under this request

            posts = [asyncio.create_task(post(i)) for i in range(chats)]
            await until(lambda: count("SELECT count(*) FROM messages WHERE role='user'") == 6, 15)
            first.kill()  # every turn is running: no reply has been sent yet
            await asyncio.gather(*posts)
            await until(lambda: count("SELECT count(*) FROM outbox") >= 3, 10)

    try:
        asyncio.run(post_and_kill())
        assert count("SELECT count(*) FROM outbox WHERE state <> 'pending'") == 0
        assert count("SELECT count(*) FROM outbox") == 3
    finally:
        engine.dispose()
    _second, base = gateway("gateway2")
    restarted = datetime.now(UTC)

    async def receive() -> list[Event]:
        got: list[Event] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            connected = asyncio.Event()
            reader = asyncio.create_task(read_events(session, base, got, connected))
            await until(lambda: len(got) >= chats, 40, lambda: f"{len(got)} of {chats}")
            await send_last(base)  # once its event is in, no repeat of the others can come
            await until(lambda: saw_last(got), 20, "the last event did not come")
            reader.cancel()
        return got

    got = asyncio.run(receive())
    counted = Counter(e for e, _ in got)
    assert len(counted) == chats + 1 and set(counted.values()) == {1}, got
    assert {d["text"].split(" pid=")[0] for _, d in got} == {*texts, LAST}
    rows = delivered_rows(pg_url)
    assert sorted(counted) == [r[0] for r in rows]
    assert {r[2] for r in rows} == {"delivered"}
    # All six found the old gateway's queue gone; the slow three were written after the
    # restart (passed on from the platform queue, not by the drain).
    assert worker.log.read_text().count("is gone: event") == 6
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        late = conn.execute(
            text("SELECT count(*) FROM outbox WHERE created_at > :t AND chat_id <> :last"),
            {"t": restarted, "last": LAST},
        ).scalar()
    engine.dispose()
    assert late == 3
