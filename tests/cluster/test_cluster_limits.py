"""Per-chat state shared through PostgreSQL by several workers: limit counts stay exact when
the messages of one user reach two workers at once, and a chat override set on one worker
applies on the other. Real subprocesses (gateway + two workers), real RabbitMQ, a fake
OpenAI-compatible model server in this process that says which model it was asked for."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import pytest
from sqlalchemy import create_engine, text

from chatfn.storage.db import Storage
from tests.cluster.test_cluster import start_cluster
from tests.fakes.cassette import openai_chat_response
from tests.storage.test_chat_state import race_for_slots

pytestmark = pytest.mark.services


class FakeModel:
    """Chat Completions on a thread: answers `[<model>] <last user text>` and records
    (model, last user text) for every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        lock = threading.Lock()
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
                if isinstance(user, list):
                    user = " ".join(p.get("text", "") for p in user)
                user = user.split("</context>\n", 1)[-1]  # the newest turn's note
                with lock:
                    requests.append((body["model"], user))
                data = json.dumps(
                    openai_chat_response(content=f"[{body['model']}] {user}", model=body["model"])
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    model = FakeModel()
    yield model
    model.close()


def models(url: str) -> dict[str, object]:
    one = {"provider": "openai", "base_url": url, "api_key": "test", "native_tools": True}
    return {"default": {**one, "model": "model-a"}, "other": {**one, "model": "model-b"}}


async def post(base: str, chat: str, sender: str, body: str) -> list[str]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        payload = {"chat_id": chat, "sender_id": sender, "text": body}
        async with session.post(f"{base}/v1/messages", json=payload) as r:
            assert r.status == 200, await r.text()
            return [x["text"] for x in (await r.json())["replies"]]


def query(pg_url: str, sql: str, **params: object) -> list:
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        rows = conn.execute(text(sql), params).all()
    engine.dispose()
    return rows


def away_from_minute_end(margin: float = 8.0) -> None:
    """messages_per_minute counts in the current minute: start where every message of the
    test lands in one minute (the workers' clocks are this machine's)."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.1)


def test_take_is_exact_under_concurrent_connections(pg_url):
    """The storage primitive alone: 8 connections race for 25 slots (tests/storage)."""
    storage = Storage(pg_url)
    storage.create_tables()
    race_for_slots(storage.chat_state)
    storage.engine.dispose()


def test_limits_exact_and_overrides_shared_across_two_workers(
    tmp_path, pg_url, amqp_prefix, procs, fake_model
):
    base, workers = start_cluster(
        tmp_path,
        pg_url,
        amqp_prefix,
        procs,
        models=models(fake_model.url),
        bot={"admins": ["boss"]},
        limits={"per_user": {"messages_per_minute": 6}},
    )

    # 1. One user, 20 chats (spread over both workers' partitions), all at once: 6 turns.
    n = 20
    away_from_minute_end()

    async def burst() -> list[list[str]]:
        return await asyncio.gather(*(post(base, f"L{i}", "u1", f"lim {i}") for i in range(n)))

    replies = asyncio.run(burst())
    answered = [r for r in replies if r and r[0].startswith("[model-a] lim ")]
    refused = [r for r in replies if r and "reached the limit of 6 messages per minute" in r[0]]
    silent = [r for r in replies if not r]
    assert (len(answered), len(refused), len(silent)) == (6, 1, n - 7), replies
    assert len([u for _, u in fake_model.requests if u.startswith("lim ")]) == 6
    handlers = query(pg_url, "SELECT DISTINCT worker FROM handled_messages WHERE chat_id LIKE 'L%'")
    assert len(handlers) == 2, f"one worker handled every chat: {handlers}"
    usage = query(pg_url, "SELECT count(*) FROM model_usage WHERE sender_id = 'u1'")
    assert usage[0][0] == 6
    rows = query(pg_url, "SELECT metric, value FROM limit_counters WHERE key = 'u1'")
    counts = {metric: value for metric, value in rows}
    assert counts == {"messages": 6, "told:messages_per_minute": n - 6}, counts

    # 2. /model switched on the worker that holds chat M; that worker leaves; the other one
    #    takes the chat and answers with the new model.
    assert (asyncio.run(post(base, "M", "boss", "first")))[0] == "[model-a] first"
    assert asyncio.run(post(base, "M", "boss", "/model other")) == ["This chat now uses other."]
    (holder,) = query(pg_url, "SELECT DISTINCT worker FROM handled_messages WHERE chat_id = 'M'")
    leaving = next(w for w in workers if f"-{w.p.pid}-" in holder[0])
    staying = next(w for w in workers if w is not leaving)
    leaving.stop()
    assert asyncio.run(post(base, "M", "boss", "second")) == ["[model-b] second"]
    rows = query(
        pg_url,
        "SELECT worker FROM handled_messages WHERE chat_id = 'M' ORDER BY finished_at",
    )
    assert f"-{staying.p.pid}-" in rows[-1][0], (rows, staying.p.pid)
    assert fake_model.requests[-1] == ("model-b", "second")
