"""Group commit on SQLite (issue 41; chatfn/storage/threads.py, `Storage._run_group`): turns'
writes queued while the storage thread is busy share one transaction and one commit, no caller
hears of its write before that commit, and a member that fails alone fails alone."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from chatfn.storage.db import Storage, StorageError, TurnWrite, add_message_later
from tests.kit import until

CHATS = 40


def _incoming(chat: str, text: str) -> dict[str, Any]:
    return {
        "platform": "t",
        "chat_id": chat,
        "is_group": False,
        "role": "user",
        "sender_id": "u",
        "sender_name": "",
        "text": text,
        "message_id": text,
        "created_at": datetime.now(UTC),
    }


def _stored_elsewhere(path: Path, text: str) -> bool:
    """Whether `text` is a committed message, read through a connection of its own (not the
    storage's)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT 1 FROM messages WHERE text = ?", (text,)).fetchone() is not None
    finally:
        conn.close()


async def _hold_the_storage_thread(storage: Storage) -> tuple[threading.Event, asyncio.Task[Any]]:
    """A job that keeps the one storage thread busy until the event is set: what the test
    queues meanwhile is what a busy thread finds when it comes back."""
    release, started = threading.Event(), threading.Event()

    def busy() -> None:
        started.set()
        release.wait(10)

    task = asyncio.ensure_future(storage.run(busy))
    await asyncio.to_thread(started.wait, 10)
    return release, task


async def _queued(storage: Storage, n: int) -> None:
    await until(lambda: storage._threads._jobs.qsize() >= n, 5, "jobs not queued", interval=0.005)


async def test_many_chats_messages_share_commits_and_each_is_durable_before_its_answer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "group.db"
    storage = Storage(f"sqlite:///{path}")
    await storage.run(storage.create_tables)
    commits: list[int] = []
    event.listen(storage.engine, "commit", lambda _conn: commits.append(1))
    durable: dict[str, bool] = {}

    async def turn(i: int) -> None:
        chat, text = f"c{i}", f"hello {i}"
        await storage.run(storage.begin_turn, _incoming(chat, text), platform="t", chat_id=chat)
        # Told it is stored: a second connection must see it now.
        durable[text] = await asyncio.to_thread(_stored_elsewhere, path, text)
        await storage.run(storage.write_turn, TurnWrite("t", chat, handled=(text, "w", 0)))

    try:
        release, busy = await _hold_the_storage_thread(storage)
        tasks = [asyncio.ensure_future(turn(i)) for i in range(CHATS)]
        await _queued(storage, CHATS)
        release.set()
        await busy
        await asyncio.gather(*tasks)
    finally:
        storage.close()
    assert durable == {f"hello {i}": True for i in range(CHATS)}
    # 80 writes (each chat's incoming message and its turn's end) in far fewer commits: the 40
    # messages queued behind the busy thread went in one.
    assert len(commits) < 2 * CHATS
    assert storage.group_commits >= 1
    assert storage.group_members >= CHATS
    assert storage.group_retries == 0


async def test_a_lone_write_is_committed_alone_at_once(tmp_path: Path) -> None:
    path = tmp_path / "lone.db"
    storage = Storage(f"sqlite:///{path}")
    await storage.run(storage.create_tables)
    try:
        await storage.run(storage.begin_turn, _incoming("c", "alone"), platform="t", chat_id="c")
        assert await asyncio.to_thread(_stored_elsewhere, path, "alone")
    finally:
        storage.close()
    assert storage.group_commits == 0


@pytest.mark.parametrize("how", ["fence", "after_writing"])
async def test_one_failing_member_fails_alone_and_the_others_are_kept(
    tmp_path: Path, how: str
) -> None:
    """The group is rolled back and its members run again one by one: the bad one's error
    reaches its caller (and what it wrote before failing is gone), every other is stored."""
    path = tmp_path / "bad.db"
    storage = Storage(f"sqlite:///{path}")
    await storage.run(storage.create_tables)

    def fence(_conn: Any, _platform: str, chat_id: str) -> None:
        if chat_id == "bad":
            raise ValueError("not this chat's partition")

    def write_then_fail() -> None:
        with storage._begin() as conn:
            assert add_message_later(conn, _incoming("bad", "half written")).value()
            raise ValueError("the turn broke")

    if how == "fence":
        storage.set_fence(fence)
    else:
        storage._grouped = (*storage._grouped, write_then_fail)

    async def good(i: int) -> None:
        chat = f"c{i}"
        await storage.run(
            storage.begin_turn, _incoming(chat, f"ok {i}"), platform="t", chat_id=chat
        )

    async def bad() -> None:
        if how == "fence":
            await storage.run(
                storage.begin_turn, _incoming("bad", "half written"), platform="t", chat_id="bad"
            )
        else:
            await storage.run(write_then_fail)

    try:
        release, busy = await _hold_the_storage_thread(storage)
        before = [asyncio.ensure_future(good(i)) for i in range(5)]
        failing = asyncio.ensure_future(bad())
        after = [asyncio.ensure_future(good(i)) for i in range(5, 10)]
        await _queued(storage, 11)
        release.set()
        await busy
        await asyncio.gather(*before, *after)
        with pytest.raises(StorageError, match="partition|broke"):
            await failing
        for i in range(10):
            assert await asyncio.to_thread(_stored_elsewhere, path, f"ok {i}")
        assert not await asyncio.to_thread(_stored_elsewhere, path, "half written")
    finally:
        storage.close()
    assert storage.group_retries == 1


CHILD = r"""
import asyncio, sys, threading
from datetime import UTC, datetime
from chatfn.storage.db import Storage, add_message_later

def incoming(chat, text):
    return {"platform": "t", "chat_id": chat, "is_group": False, "role": "user",
            "sender_id": "u", "sender_name": "", "text": text, "message_id": text,
            "created_at": datetime.now(UTC)}

storage = Storage("sqlite:///" + sys.argv[1])

def hang():  # a group's last member: writes, says so, and never returns
    with storage._begin() as conn:
        add_message_later(conn, incoming("h", "hanging")).value()
        print("IN GROUP", flush=True)
        threading.Event().wait()  # until the test SIGKILLs this process

storage._grouped = (*storage._grouped, hang)

async def main():
    await storage.run(storage.create_tables)
    await storage.run(storage.begin_turn, incoming("b", "before"), platform="t", chat_id="b")
    print("STORED before", flush=True)
    release = threading.Event()
    busy = asyncio.ensure_future(storage.run(release.wait, 10))
    async def turn(i):
        await storage.run(storage.begin_turn, incoming(f"g{i}", f"group {i}"),
                          platform="t", chat_id=f"g{i}")
        print(f"STORED group {i}", flush=True)
    tasks = [asyncio.ensure_future(turn(i)) for i in range(5)]
    hung = asyncio.ensure_future(storage.run(hang))
    while storage._threads._jobs.qsize() < 6:
        await asyncio.sleep(0.005)
    release.set()
    await asyncio.gather(busy, hung, *tasks)

asyncio.run(main())
"""


def test_a_group_cut_by_sigkill_leaves_none_of_its_writes_and_no_caller_told(
    tmp_path: Path,
) -> None:
    """SIGKILL while a group's transaction is open (its last member hangs after writing): none
    of the group's messages is in the file and none of their callers was told they were
    stored; what was committed before is kept, and the file takes the messages again."""
    path = tmp_path / "killed.db"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
            if line.startswith("IN GROUP"):
                break
        assert lines[-1:] == ["IN GROUP"], lines
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        lines += [line.strip() for line in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lines == ["STORED before", "IN GROUP"]  # no group member was told it was stored
    assert _stored_elsewhere(path, "before")
    for text in ["hanging", *(f"group {i}" for i in range(5))]:
        assert not _stored_elsewhere(path, text)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    storage = Storage(f"sqlite:///{path}")
    try:
        for i in range(5):
            storage.begin_turn(_incoming(f"g{i}", f"group {i}"), platform="t", chat_id=f"g{i}")
    finally:
        storage.close()
    assert all(_stored_elsewhere(path, f"group {i}") for i in range(5))
