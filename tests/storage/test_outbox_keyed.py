"""The outbox statements a worker and a gateway rely on (real SQLite file): a keyed row is
written once with its history row, and a state change is a compare-and-set on `pending`."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from chatfn.storage.db import Storage
from chatfn.storage.models import messages_table, outbox_table


def history(text: str, message_id: str) -> dict[str, object]:
    return {
        "platform": "http",
        "chat_id": "c1",
        "role": "assistant",
        "sender_id": "bot",
        "sender_name": "bot",
        "text": text,
        "is_group": False,
        "message_id": message_id,
        "thinking": None,
    }


def counts(storage: Storage) -> tuple[int, int]:
    with storage.engine.connect() as conn:
        outbox = conn.execute(select(func.count()).select_from(outbox_table)).scalar()
        messages = conn.execute(select(func.count()).select_from(messages_table)).scalar()
    return int(outbox or 0), int(messages or 0)


def test_a_keyed_reply_is_written_once_and_keeps_its_event_id(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'bot.db'}")
    storage.create_tables()
    store = storage.outbox
    first = store.add_keyed("http", "c1", {"text": "hi"}, history("hi", "m1#0"), "m1#0")
    assert first[1] == "pending"
    again = store.add_keyed("http", "c1", {"text": "hi"}, history("hi", "m1#0"), "m1#0")
    assert again == first and counts(storage) == (1, 1)
    # Another position, another chat with the same key, and unkeyed rows are all new rows.
    store.add_keyed("http", "c1", {"text": "2"}, history("2", "m1#1"), "m1#1")
    store.add_keyed("http", "c2", {"text": "x"}, None, "m1#0")
    store.add("http", "c1", {"text": "r"}, history("r", ""))
    store.add("http", "c1", {"text": "r"}, history("r", ""))
    assert counts(storage) == (5, 4)
    # Delivered once: the re-run turn learns its reply needs no second sending.
    assert store.mark(first[0], "delivered") is True
    assert store.add_keyed("http", "c1", {"text": "hi"}, None, "m1#0") == (first[0], "delivered")
    storage.close()


def test_mark_is_a_compare_and_set_on_pending(tmp_path: Path) -> None:
    storage = Storage(f"sqlite:///{tmp_path / 'bot.db'}")
    storage.create_tables()
    store = storage.outbox
    eid = store.add("http", "c1", {"text": "a b"})
    assert store.mark(eid, "pending", text="b") is True  # the part still owed
    assert store.pending()[0].payload["text"] == "b"
    assert store.mark(eid, "delivered") is True
    assert store.mark(eid, "delivered") is False  # another path finished it: not again
    assert store.mark(eid, "failed") is False
    assert [e.state for e in store.since(0)] == ["delivered"]
    storage.close()
