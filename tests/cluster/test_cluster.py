"""A gateway and two workers as real subprocesses, on PostgreSQL and RabbitMQ: per-chat order,
every message answered exactly once, a SIGKILLed worker's message redelivered."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path

import aiohttp
import pytest
from sqlalchemy import create_engine, text

from tests.cluster.conftest import Proc, cluster_config

pytestmark = pytest.mark.services


def start_cluster(tmp_path: Path, pg_url: str, prefix: str, procs: list[Proc], **sections):
    cfg = cluster_config(tmp_path, pg_url, prefix, **sections)
    workers = []
    for i in range(2):
        w = Proc(["--config", str(cfg), "--role", "worker"], tmp_path / f"worker{i}.log")
        procs.append(w)
        workers.append(w)
    for w in workers:
        w.wait_for("consuming")
    gw = Proc(
        ["--config", str(cfg), "--role", "gateway", "--channel", "http", "--port", "0"],
        tmp_path / "gateway.log",
    )
    procs.append(gw)
    port = gw.http_port()
    gw.wait_for("chatfn started")
    # Both workers know of each other and have split the partitions.
    for w in workers:
        w.wait_for("2 live worker(s)")
    return f"http://127.0.0.1:{port}", workers


async def send_all(
    base: str,
    chats: int,
    per_chat: int,
    stagger: float,
    progress: dict[str, list[str]] | None = None,
) -> dict[str, list[str]]:
    """Every chat sends its messages a few ms apart without waiting for the answers (they
    reach the gateway in that order); returns the replies per message text."""
    replies: dict[str, list[str]] = {} if progress is None else progress
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def one(chat: int, i: int) -> None:
            await asyncio.sleep(i * stagger)
            body = {"chat_id": f"c{chat}", "sender_id": f"u{chat}", "text": f"/echo c{chat}m{i}"}
            async with session.post(f"{base}/v1/messages", json=body) as r:
                assert r.status == 200, await r.text()
                data = await r.json()
            replies[f"c{chat}m{i}"] = [x["text"] for x in data["replies"]]

        await asyncio.gather(*(one(c, i) for c in range(chats) for i in range(per_chat)))
    return replies


def check_history(pg_url: str, chats: int, per_chat: int) -> None:
    """Per chat: each message stored once and answered once, handled in arrival order (the
    gateway stamps the arrival time; the worker stores the row when the turn starts)."""
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT chat_id, role, text, created_at FROM messages ORDER BY id")
        ).all()
    engine.dispose()
    users: dict[str, list] = {}
    answers: Counter[str] = Counter()
    for chat_id, role, body, created in rows:
        if role == "user":
            users.setdefault(chat_id, []).append((created, body))
        elif role == "assistant":
            answers[body.split(" pid=")[0]] += 1
    assert len(users) == chats
    for chat_id, seq in users.items():
        assert len(seq) == per_chat, (chat_id, seq)
        times = [t for t, _ in seq]
        assert times == sorted(times), f"{chat_id} handled out of arrival order: {seq}"
    assert len(answers) == chats * per_chat
    assert set(answers.values()) == {1}, [k for k, v in answers.items() if v != 1]


def test_500_messages_50_chats_two_workers(tmp_path, pg_url, amqp_prefix, procs):
    base, _workers = start_cluster(tmp_path, pg_url, amqp_prefix, procs)
    t0 = time.monotonic()
    replies = asyncio.run(send_all(base, chats=50, per_chat=10, stagger=0.005))
    elapsed = time.monotonic() - t0
    assert len(replies) == 500
    pids = set()
    for key, texts in replies.items():
        assert len(texts) == 1 and texts[0].startswith(f"{key} pid="), (key, texts)
        pids.add(texts[0].split("pid=")[1])
    assert len(pids) == 2, f"one worker did all the work: {pids}"
    check_history(pg_url, 50, 10)
    print(f"500 messages in {elapsed:.1f} s")


def test_sigkill_worker_mid_run_every_message_answered_once(tmp_path, pg_url, amqp_prefix, procs):
    base, workers = start_cluster(tmp_path, pg_url, amqp_prefix, procs, echo={"delay": 0.05})
    progress: dict[str, list[str]] = {}
    victim = workers[0]

    async def run() -> dict[str, list[str]]:
        task = asyncio.create_task(
            send_all(base, chats=20, per_chat=10, stagger=0.005, progress=progress)
        )
        # Kill when about a fifth of the messages are answered: both workers are mid-turn.
        while len(progress) < 40 and not task.done():
            await asyncio.sleep(0.005)
        victim.kill()
        return await task

    t0 = time.monotonic()
    replies = asyncio.run(run())
    elapsed = time.monotonic() - t0
    assert len(replies) == 200
    for key, texts in replies.items():
        assert len(texts) == 1 and texts[0].startswith(f"{key} pid="), (key, texts)
    check_history(pg_url, 20, 10)
    survivor_pid = str(workers[1].p.pid)
    assert any(t[0].endswith(f"pid={survivor_pid}") for t in replies.values())
    assert victim.p.returncode == -9
    assert elapsed < 60, f"redelivery took too long: {elapsed:.1f} s"
    assert re.search(r"live worker", workers[1].log.read_text())
