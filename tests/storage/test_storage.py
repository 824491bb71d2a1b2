"""Storage details the rest of the bot relies on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from chatfn.storage.db import Storage


def test_times_in_other_zones_are_stored_as_utc(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'x.db'}")
    storage.create_tables()
    tokyo = timezone(timedelta(hours=9))
    sent = datetime(2026, 5, 1, 18, 0, tzinfo=tokyo)
    storage.add_message(
        platform="p", chat_id="c", role="user", sender_id="u", text="hi", created_at=sent
    )
    [row] = storage.recent_messages("p", "c", 5)
    assert row.created_at == sent and row.created_at.tzinfo == UTC
    assert storage.messages_since("p", "c", datetime(2026, 5, 1, 17, 59, tzinfo=tokyo))
    assert not storage.messages_since("p", "c", datetime(2026, 5, 1, 18, 1, tzinfo=tokyo))


def test_database_directory_is_created(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'deep' / 'er' / 'x.db'}")
    storage.create_tables()
    storage.check_writable()
    assert (tmp_path / "deep" / "er" / "x.db").exists()


def test_sqlite_runs_in_wal_mode_with_synchronous_normal(tmp_path: Path) -> None:
    """README "Delivery": WAL, synchronous=NORMAL (1): a commit survives a crash of the
    process, and a power loss can lose what was committed since the last checkpoint."""
    from sqlalchemy import text

    storage = Storage(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        with storage.engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA synchronous")).scalar() == 1
            assert conn.execute(text("PRAGMA wal_autocheckpoint")).scalar() == 1000
    finally:
        storage.close()
