"""chatfn/storage/prepared.py: the statements of every message, run on the driver's cursor, store
and
read exactly what Core would, and fail as Core would (issue 27 §2, CPU per message)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError, OperationalError

from chatfn.storage.db import Storage
from chatfn.storage.loop_guard import LoopGuard
from chatfn.storage.models import messages_table, usage_table
from chatfn.storage.prepared import Prepared

WHEN = datetime(2026, 11, 24, 12, 30, 45, 123456, tzinfo=UTC)


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    s = Storage(f"sqlite:///{tmp_path / 'p.db'}")
    s.create_tables()
    yield s
    s.close()


def test_an_insert_takes_the_columns_defaults_and_the_types_processing(storage: Storage) -> None:
    insert = Prepared(usage_table.insert())
    with storage.engine.begin() as conn:  # only some columns given, a tz-aware time
        insert.executemany(
            conn,
            [
                {
                    "platform": "p",
                    "chat_id": "c",
                    "sender_id": "u",
                    "model_name": "m",
                    "outcome": "ok",
                    "created_at": WHEN,
                    "streamed": True,
                },
            ],
        )
    with storage.engine.connect() as conn:  # read back through Core: the same values
        row = conn.execute(select(usage_table)).one()
        raw = conn.exec_driver_sql("SELECT created_at, streamed FROM model_usage").one()
    assert row.created_at.replace(tzinfo=UTC) == WHEN
    assert (row.prompt_tokens, row.cached_tokens, row.estimated, row.streamed) == (
        0,
        0,
        False,
        True,
    )
    assert row.message_id == "" and row.cost is None
    assert raw == ("2026-11-24 12:30:45.123456", 1)  # what Core's SQLite DateTime writes


def test_rows_come_back_processed_and_scalar_reads_the_first_column(storage: Storage) -> None:
    storage.add_message(
        platform="p",
        chat_id="c",
        role="user",
        sender_id="u",
        text="hi",
        message_id="m1",
        created_at=WHEN,
    )
    read = Prepared(
        select(messages_table.c.id, messages_table.c.created_at, messages_table.c.is_group).where(
            messages_table.c.chat_id == bindparam("chat_id")
        )
    )
    with storage.engine.connect() as conn:
        ((row_id, created, is_group),) = read.rows(conn, {"chat_id": "c"})
        assert read.scalar(conn, {"chat_id": "c"}) == row_id
        assert read.scalar(conn, {"chat_id": "nobody"}) is None
    assert created == WHEN.replace(tzinfo=None) and is_group is False


def test_driver_errors_are_sqlalchemys(storage: Storage, tmp_path: Path) -> None:
    insert = Prepared(messages_table.insert())
    values = {
        "platform": "p",
        "chat_id": "c",
        "role": "user",
        "sender_id": "u",
        "text": "x",
        "message_id": "m1",
        "created_at": WHEN,
    }
    with storage.engine.begin() as conn:
        insert.executemany(conn, [values])
    with pytest.raises(IntegrityError), storage.engine.begin() as conn:  # ux_messages_incoming
        insert.executemany(conn, [values])
    # Another process holds the write lock: OperationalError "database is locked", the error
    # `Storage.run` retries.
    other = sqlite3.connect(tmp_path / "p.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with storage.engine.connect() as conn:
            conn.connection.dbapi_connection.execute("PRAGMA busy_timeout=0")  # type: ignore[union-attr]
            with pytest.raises(OperationalError, match="locked"), conn.begin():
                insert.executemany(conn, [{**values, "message_id": "m2"}])
    finally:
        other.execute("ROLLBACK")
        other.close()


# Plugin-like code (not a test module, whose own reads the guard lets through).
PLUGIN = compile(
    "def read(stmt, engine):\n"
    "    with engine.connect() as conn:\n"
    "        return stmt.rows(conn, {})\n",
    "/plugins/reader.py",
    "exec",
)


@pytest.mark.allow_db_on_loop  # it does on purpose what the guard is there to catch
async def test_the_loop_guard_sees_a_statement_on_the_cursor(storage: Storage) -> None:
    space: dict[str, object] = {}
    exec(PLUGIN, space)
    read = Prepared(select(messages_table.c.id))
    with LoopGuard() as guard:
        assert space["read"](read, storage.engine) == []  # type: ignore[operator]
        assert len(guard.violations) == 1
        assert "FROM messages" in guard.violations[0].statement
        assert "/plugins/reader.py" in guard.violations[0].stack
