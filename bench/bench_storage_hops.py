"""What one database transaction costs the bot's process, by the way it is run off the event
loop: the choice behind `Storage.run` (bench/README.md, "Storage off the event loop").

The unit is what a turn writes: one transaction inserting a history row and an outbox row, then
commit; and one read (the history window of a chat). Each way runs N of them one after another
and then N with `--concurrency` in flight, and prints process CPU (all threads) per
transaction and wall time.

Ways:
  executor     the synchronous engine (sqlite3 / psycopg), one thread hop per transaction
               through a ThreadPoolExecutor (`loop.run_in_executor`): what `Storage.run` does.
  async        SQLAlchemy's asyncio extension with an async driver (aiosqlite for SQLite,
               psycopg's async mode for PostgreSQL), greenlet-adapted.
  on-loop      the synchronous engine called on the event loop (the floor; what the guard
               forbids).

Run: `python bench/bench_storage_hops.py [--n 2000] [--concurrency 50] [--pg URL]`
(needs `greenlet` and `aiosqlite` for the async way; they are not dependencies of chatfn).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, event, text  # noqa: E402

from chatfn.storage.db import _RECENT, _sqlite_pragmas  # noqa: E402
from chatfn.storage.models import messages_table, metadata, outbox_table  # noqa: E402

_INSERT_MESSAGE = messages_table.insert()
_INSERT_OUTBOX = outbox_table.insert()


def _values(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    now = datetime.now(UTC)
    chat = f"c{i % 200}"
    msg = {
        "platform": "bench",
        "chat_id": chat,
        "is_group": False,
        "role": "assistant",
        "sender_id": "bot",
        "sender_name": "bot",
        "text": "It is sunny in Paris.",
        "message_id": "",
        "created_at": now,
        "thinking": None,
        "is_at_bot": None,
    }
    out = {
        "platform": "bench",
        "chat_id": chat,
        "payload": '{"text": "It is sunny in Paris."}',
        "key": None,
        "state": "pending",
        "attempts": 0,
        "created_at": now,
        "updated_at": now,
    }
    return msg, out


def _params(i: int) -> dict[str, Any]:
    return {"platform": "bench", "chat_id": f"c{i % 200}", "limit": 20}


def _prepare(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        metadata.drop_all(conn, tables=[messages_table, outbox_table])
        metadata.create_all(conn, tables=[messages_table, outbox_table])
    engine.dispose()


async def _measure(label: str, op: Any, n: int, concurrency: int) -> dict[str, float]:
    for i in range(50):
        await op(i)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(n):
        await op(i)
    seq_cpu = (time.process_time() - cpu0) / n * 1e6
    seq_wall = (time.perf_counter() - wall0) / n * 1e6
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await op(i)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    conc_cpu = (time.process_time() - cpu0) / n * 1e6
    conc_wall = time.perf_counter() - wall0
    return {
        "seq_cpu_us": seq_cpu,
        "seq_wall_us": seq_wall,
        "conc_cpu_us": conc_cpu,
        "conc_per_s": n / conc_wall,
    }


async def run_sync(url: str, mode: str, n: int, concurrency: int, kind: str) -> dict[str, float]:
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="storage")
    loop = asyncio.get_running_loop()

    def write(i: int) -> None:
        msg, out = _values(i)
        with engine.begin() as conn:
            conn.execute(_INSERT_MESSAGE, msg)
            conn.execute(_INSERT_OUTBOX, out)

    def read(i: int) -> None:
        with engine.connect() as conn:
            conn.execute(_RECENT, _params(i)).all()

    fn = write if kind == "write" else read

    async def op(i: int) -> None:
        if mode == "on-loop":
            fn(i)
        else:
            await loop.run_in_executor(pool, fn, i)

    try:
        return await _measure(mode, op, n, concurrency)
    finally:
        pool.shutdown()
        engine.dispose()


async def run_async(url: str, n: int, concurrency: int, kind: str) -> dict[str, float]:
    from sqlalchemy.ext.asyncio import create_async_engine

    if url.startswith("sqlite"):
        aurl = url.replace("sqlite://", "sqlite+aiosqlite://", 1)
    else:
        aurl = url.replace("postgresql://", "postgresql+psycopg_async://", 1)
        aurl = aurl.replace("postgresql+psycopg://", "postgresql+psycopg_async://", 1)
    engine = create_async_engine(aurl)
    if url.startswith("sqlite"):
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)

    async def write(i: int) -> None:
        msg, out = _values(i)
        async with engine.begin() as conn:
            await conn.execute(_INSERT_MESSAGE, msg)
            await conn.execute(_INSERT_OUTBOX, out)

    async def read(i: int) -> None:
        async with engine.connect() as conn:
            (await conn.execute(_RECENT, _params(i))).all()

    try:
        return await _measure("async", write if kind == "write" else read, n, concurrency)
    finally:
        await engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pg", default="", help="a PostgreSQL URL (postgresql+psycopg://...)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="chatfn-hops-")
    targets = [("sqlite", f"sqlite:///{tmp}/hops.db")]
    if args.pg:
        targets.append(("postgresql", args.pg))
    print(
        "database    op     way        CPU us/tx seq  wall us/tx seq  CPU us/tx @conc  tx/s @conc"
    )
    for db, url in targets:
        for kind in ("write", "read"):
            results: dict[str, list[dict[str, float]]] = {}
            for _ in range(args.repeats):  # the ways alternate, so load hits them alike
                for way in ("executor", "async", "on-loop"):
                    _prepare(url)
                    if kind == "read":  # something to read: 20 rows in each of 200 chats
                        asyncio.run(run_sync(url, "on-loop", 4000, 1, "write"))
                    if way == "async":
                        r = asyncio.run(run_async(url, args.n, args.concurrency, kind))
                    else:
                        r = asyncio.run(run_sync(url, way, args.n, args.concurrency, kind))
                    results.setdefault(way, []).append(r)
            for way, runs in results.items():
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                print(
                    f"{db:11} {kind:6} {way:9} {med['seq_cpu_us']:14.0f} {med['seq_wall_us']:15.0f}"
                    f" {med['conc_cpu_us']:16.0f} {med['conc_per_s']:11.0f}"
                )
    _ = text


if __name__ == "__main__":
    main()
