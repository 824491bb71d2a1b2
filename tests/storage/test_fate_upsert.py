"""chatfn/storage/fates.py: a message's fate is one INSERT .. ON CONFLICT (issue 41: a statement
a message fewer than DELETE + INSERT), and a turn that decides again (a resumed one) replaces
the whole row, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chatfn.storage import fates
from chatfn.storage.db import Storage
from tests.cluster.conftest import pg_url  # noqa: F401  (fixture)


def _stored(storage: Storage) -> int:
    return storage.add_message(
        platform="http", chat_id="c1", role="user", sender_id="u1", text="hi", message_id="m1"
    )


def _decide_twice(storage: Storage) -> None:
    row = _stored(storage)
    first = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    values: dict[str, Any] = {
        "message": row,
        "platform": "http",
        "chat_id": "c1",
        "sender_id": "u1",
        "fate": "failed",
        "detail": "TimeoutError",
        "told": True,
        "decided_at": first,
    }
    with storage.engine.begin() as conn:
        fates.record_in(conn, values)
    assert (r := fates.read(storage.engine, row)) is not None
    assert (r.fate, r.detail, r.told) == ("failed", "TimeoutError", True)
    # Decided again: every column replaced, the detail cut to its width, `told` back to its
    # default when not given, and still one row.
    values = {
        "message": row,
        "platform": "http",
        "chat_id": "c1",
        "sender_id": "u1",
        "fate": "answered",
        "detail": "x" * 300,
    }
    with storage.engine.begin() as conn:
        fates.record_in(conn, values)
    r = fates.read(storage.engine, row)
    assert r is not None and r.fate == "answered" and r.told is False
    assert len(r.detail) == fates.DETAIL_MAX and r.detail.startswith("x")
    assert r.decided_at is not None and r.decided_at.replace(tzinfo=UTC) > first
    with storage.engine.connect() as conn:
        count = conn.exec_driver_sql("SELECT count(*) FROM message_fates").scalar()
    assert count == 1


def test_a_fate_decided_again_replaces_the_row_on_sqlite(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'f.db'}")
    storage.create_tables()
    try:
        assert fates._upsert("sqlite") is not None  # the one-statement path is the one run
        _decide_twice(storage)
    finally:
        storage.close()


@pytest.mark.services
def test_a_fate_decided_again_replaces_the_row_on_postgresql(pg_url: str) -> None:  # noqa: F811
    storage = Storage(pg_url)
    storage.create_tables()
    try:
        _decide_twice(storage)
    finally:
        storage.close()
