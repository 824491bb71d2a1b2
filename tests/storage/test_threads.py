"""The storage threads (chatfn/storage/threads.py) and the SQLite storage thread's held connection
(chatfn/storage/held.py): what `Storage.run` relies on from them, on real threads and a real SQLite
file."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from chatfn.storage.db import Storage, StorageError, TurnWrite, add_message_later
from chatfn.storage.models import messages_table
from chatfn.storage.threads import StorageThreads
from tests.kit import until

LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("LABEL", default="none")


async def test_a_job_runs_off_the_loop_in_the_callers_context() -> None:
    threads = StorageThreads(2, "t")
    LABEL.set("turn 7")
    try:
        name, label = await threads.run(lambda: (threading.current_thread().name, LABEL.get()))
        assert name == "t_0" and name != threading.current_thread().name
        assert label == "turn 7"
        with pytest.raises(KeyError, match="gone"):
            await threads.run(lambda: {}["gone"])
    finally:
        threads.shutdown()


async def test_threads_start_as_work_needs_them_up_to_size() -> None:
    threads = StorageThreads(2, "t")
    gate = threading.Event()
    running: list[str] = []

    def held() -> str:
        running.append(threading.current_thread().name)
        gate.wait(5)
        return threading.current_thread().name

    try:
        jobs = [asyncio.create_task(threads.run(held)) for _ in range(3)]
        await until(lambda: len(running) >= 2, 5, "two held jobs not running")
        await asyncio.sleep(0.1)
        assert sorted(running) == ["t_0", "t_1"]  # the third waits: two threads at most
        gate.set()
        assert sorted(await asyncio.gather(*jobs))[-1] in {"t_0", "t_1"}
        assert len(running) == 3
    finally:
        gate.set()
        threads.shutdown()


async def test_a_job_cancelled_before_a_thread_took_it_does_not_run() -> None:
    threads = StorageThreads(1, "t")
    gate, ran = threading.Event(), []
    try:
        first = asyncio.create_task(threads.run(lambda: gate.wait(5)))
        second = asyncio.create_task(threads.run(lambda: ran.append("second")))
        await asyncio.sleep(0.05)
        second.cancel()
        gate.set()
        assert await first is True
        with pytest.raises(asyncio.CancelledError):
            await second
        assert await threads.run(lambda: "after") == "after"
        assert ran == []
    finally:
        gate.set()
        threads.shutdown()


async def test_shutdown_lets_queued_jobs_finish_and_refuses_new_ones() -> None:
    threads = StorageThreads(1, "t")
    done: list[int] = []
    jobs = [
        asyncio.create_task(threads.run(lambda i=i: (time.sleep(0.02), done.append(i))))
        for i in range(5)
    ]
    await asyncio.sleep(0)  # every job queued
    await asyncio.to_thread(threads.shutdown)
    assert done == [0, 1, 2, 3, 4]  # in order, all of them
    await asyncio.gather(*jobs)
    with pytest.raises(RuntimeError, match="shut down"):
        await threads.run(lambda: None)


def test_a_caller_without_a_loop_waits_for_its_result() -> None:
    threads = StorageThreads(1, "t")
    try:
        assert threads.call(lambda: threading.current_thread().name) == "t_0"
        with pytest.raises(ZeroDivisionError):
            threads.call(lambda: 1 / 0)
    finally:
        threads.shutdown()


async def test_threads_of_a_collected_instance_stop() -> None:
    threads = StorageThreads(2, "collected")
    await threads.run(lambda: None)
    del threads
    gc.collect()
    await until(
        lambda: not any(t.name.startswith("collected_") for t in threading.enumerate()),
        5,
        "the collected instance's threads did not stop",
    )


def _incoming(i: int) -> dict[str, Any]:
    return {
        "platform": "t",
        "chat_id": f"c{i % 3}",
        "is_group": False,
        "role": "user",
        "sender_id": "u",
        "sender_name": "",
        "text": f"hi {i}",
        "message_id": f"m{i}",
        "created_at": datetime.now(UTC),
    }


async def _turn(storage: Storage, i: int) -> None:
    chat = f"c{i % 3}"
    await storage.run(storage.begin_turn, _incoming(i), platform="t", chat_id=chat)


async def test_a_sqlite_bots_turns_run_on_one_thread_and_one_connection(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'held.db'}")
    await storage.run(storage.create_tables)
    checkouts: list[object] = []
    event.listen(
        storage.engine.pool, "checkout", lambda dbapi, _rec, _proxy: checkouts.append(dbapi)
    )
    names: set[str] = set()
    try:
        for i in range(20):
            await _turn(storage, i)
            names.add(await storage.run(lambda: threading.current_thread().name))
            batch = TurnWrite("t", f"c{i % 3}", handled=(f"m{i}", "w", 0))
            await storage.run(storage.write_turn, batch)
        assert names == {"storage_0"}
        # One checkout for 40 transactions: the storage thread's connection, held from its first
        # turn to the last (a pooled transaction each would be 40).
        assert len(checkouts) == 1
        assert await storage.run(_count_messages, storage) == 20
    finally:
        storage.close()
    assert storage._held is not None and storage._held._all == []


def _count_messages(storage: Storage) -> int:
    return len(_texts(storage))


def _texts(storage: Storage) -> list[str]:
    with storage.engine.connect() as conn:
        return [r.text for r in conn.execute(select(messages_table.c.text))]


@pytest.mark.parametrize("through", ["prepared", "core"])
async def test_a_failed_transaction_on_the_held_connection_leaves_the_next_one_clean(
    tmp_path: Path, through: str
) -> None:
    """Rolled back either way: on the driver when only `Prepared` statements ran (a turn's),
    through SQLAlchemy's transaction when a Core statement began one."""
    storage = Storage(f"sqlite:///{tmp_path / 'held.db'}")
    await storage.run(storage.create_tables)

    def half_then_fail() -> None:
        with storage._begin() as conn:
            if through == "prepared":
                assert add_message_later(conn, _incoming(0)).value()
                assert not conn.in_transaction()
            else:
                conn.execute(messages_table.insert().values(_incoming(0)))
                assert conn.in_transaction()
            raise ValueError("the turn broke")

    try:
        with pytest.raises(StorageError, match="the turn broke"):
            await storage.run(half_then_fail)
        await _turn(storage, 1)
        texts = await storage.run(_texts, storage)
        assert texts == ["hi 1"]  # the failed one rolled back; the next committed
    finally:
        storage.close()


async def test_an_invalidated_held_connection_is_replaced(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'held.db'}")
    await storage.run(storage.create_tables)
    try:
        await _turn(storage, 1)
        first = await storage.run(lambda: storage._held._local.conn)  # type: ignore[union-attr]
        await storage.run(first.invalidate)
        await _turn(storage, 2)
        second = await storage.run(lambda: storage._held._local.conn)  # type: ignore[union-attr]
        assert second is not first and first.closed
        assert await storage.run(_count_messages, storage) == 2
    finally:
        storage.close()


async def test_a_slow_read_aside_does_not_hold_up_a_turn(tmp_path: Path) -> None:
    """The admin console's pages run with `run_aside`: on SQLite, a page still reading (its
    read transaction open) must not keep a turn waiting on the one storage thread."""
    storage = Storage(f"sqlite:///{tmp_path / 'aside.db'}")
    await storage.run(storage.create_tables)
    await _turn(storage, 0)
    gate = threading.Event()

    def slow_page() -> str:
        with storage.engine.connect() as conn:
            conn.execute(select(messages_table.c.id)).all()
            gate.wait(5)  # still reading, as an overview of a week of messages does
            conn.execute(select(messages_table.c.id)).all()
        return threading.current_thread().name

    try:
        page = asyncio.create_task(storage.run_aside(slow_page))
        await asyncio.sleep(0.05)
        async with asyncio.timeout(2):
            await _turn(storage, 1)  # written while the page reads
        assert not page.done()
        gate.set()
        assert (await page).startswith("storage-aside_")
        assert await storage.run(_count_messages, storage) == 2
    finally:
        gate.set()
        storage.close()
