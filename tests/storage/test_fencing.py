"""Fencing in the storage (chatfn/storage/fencing.py), on SQLite and the machine's PostgreSQL: a
partition's claims are ordered by epoch, every write of a turn checks its claim in its own
transaction, and an incoming message is stored once whoever stores it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from chatfn.storage.db import Storage
from chatfn.storage.fencing import Fenced, check_lease, current_lease
from chatfn.storage.models import messages_table, outbox_table
from tests.cluster.conftest import pg_url  # noqa: F401  (fixture)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def two_workers(request, tmp_path):
    """Two Storage objects on one database, as two worker processes have, fenced."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'chatfn.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    a, b = Storage(url), Storage(url)
    a.migrate()
    for s in (a, b):
        s.set_fence(check_lease)
    yield a, b
    a.close()
    b.close()


def incoming(storage: Storage, message_id: str = "m1") -> int:
    return storage.add_message(
        platform="http",
        chat_id="c1",
        role="user",
        sender_id="u",
        text="hello",
        message_id=message_id,
    )


def count(storage: Storage, table) -> int:
    with storage.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def test_a_newer_claim_fences_every_write_of_the_older_one(two_workers) -> None:
    a, b = two_workers
    now = datetime.now(UTC)
    lease_a = a.leases.claim(3, "worker-a", now)
    assert lease_a is not None and lease_a.epoch == 1
    token = current_lease.set(lease_a)
    try:
        stored = incoming(a)
        lease_b = b.leases.claim(3, "worker-b", datetime.now(UTC))
        assert lease_b is not None and lease_b.epoch == 2
        with pytest.raises(Fenced, match="partition 3 was claimed by worker-b"):
            incoming(a, "m2")
        with pytest.raises(Fenced):
            a.outbox.add_keyed("http", "c1", {"text": "hi"}, None, "m1#0")
        with pytest.raises(Fenced):
            a.cluster.finish("http", "c1", "m1", "worker-a", 1)
        with pytest.raises(Fenced):
            a.add_tool_call(
                platform="http",
                chat_id="c1",
                sender_id="u",
                message_id="m1",
                function="echo",
                arguments={},
                source="command",
                outcome="ok",
            )
    finally:
        current_lease.reset(token)
    assert count(a, messages_table) == 1 and count(a, outbox_table) == 0
    assert a.cluster.finished("http", "c1", "m1") is None
    # The newer claim writes; a write with no lease (a reminder) is not fenced.
    token = current_lease.set(lease_b)
    try:
        assert incoming(b) == stored  # stored once: the same row
        b.outbox.add_keyed("http", "c1", {"text": "hi"}, None, "m1#0")
    finally:
        current_lease.reset(token)
    a.outbox.add("http", "c1", {"text": "reminder"})
    assert count(a, outbox_table) == 2
    assert not a.leases.still_holds(lease_a) and a.leases.still_holds(lease_b)


def test_a_claim_for_a_delivery_older_than_the_last_claim_is_refused(two_workers) -> None:
    """A worker that stalled between receiving a message and claiming its partition must not
    take the partition back from the worker the broker gave it to meanwhile."""
    a, b = two_workers
    delivered = datetime.now(UTC) - timedelta(seconds=5)
    assert b.leases.claim(0, "worker-b", datetime.now(UTC)) is not None
    assert a.leases.claim(0, "worker-a", delivered) is None
    assert a.leases.holder(0) == ("worker-b", 1)


def test_the_lease_travels_with_the_turn_into_the_storage_thread(two_workers) -> None:
    a, b = two_workers
    lease = a.leases.claim(1, "worker-a", datetime.now(UTC))
    assert b.leases.claim(1, "worker-b", datetime.now(UTC)) is not None

    async def turn() -> None:
        current_lease.set(lease)
        await a.run(incoming, a)

    with pytest.raises(Fenced):
        asyncio.run(turn())
    assert count(a, messages_table) == 0


def test_an_incoming_message_stored_twice_keeps_one_row(two_workers) -> None:
    """A redelivery or a second worker stores the same platform message id: the first row's
    id comes back and the history holds it once (replies are not keyed this way)."""
    a, b = two_workers
    first = incoming(a)
    assert incoming(b) == first
    assert incoming(a, "m2") != first
    assert count(a, messages_table) == 2
