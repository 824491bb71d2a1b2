"""The outbox table's statements (synchronous; the runtime runs them off the event loop through
`Storage.run`). The delivery policy (when to retry, expire, replay) lives in
chatfn/runtime/outbox.py.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from chatfn.storage.inserts import conflict_insert
from chatfn.storage.models import messages_table, outbox_cursors_table, outbox_table
from chatfn.storage.pipeline import Later
from chatfn.storage.prepared import Prepared

PAYLOAD_FIELDS = ("text", "is_group", "at", "reply_to", "notice", "images", "audio", "buttons")


@dataclass(slots=True, frozen=True)
class OutboxEntry:
    id: int
    platform: str
    chat_id: str
    payload: dict[str, Any]
    state: str
    created_at: datetime


def _entry(r: Any) -> OutboxEntry:
    created = r.created_at if r.created_at.tzinfo else r.created_at.replace(tzinfo=UTC)
    return OutboxEntry(r.id, r.platform, r.chat_id, json.loads(r.payload), r.state, created)


_COLUMNS = (
    outbox_table.c.id,
    outbox_table.c.platform,
    outbox_table.c.chat_id,
    outbox_table.c.payload,
    outbox_table.c.state,
    outbox_table.c.created_at,
)


def mark_delivered_in(conn: Connection, event_ids: list[int]) -> None:
    """`OutboxStore.mark_delivered` inside a transaction the caller holds (a turn's last marks
    and its handled-message row are one write: `Storage.finish_turn`)."""
    if event_ids:
        now = datetime.now(UTC)
        _DELIVERED.executemany(conn, [{"id": i, "now": now} for i in event_ids])


def add_in(
    conn: Connection,
    platform: str,
    chat_id: str,
    payload: dict[str, Any],
    history: dict[str, Any] | None = None,
    key: str | None = None,
) -> tuple[int, str]:
    """`OutboxStore.add_keyed` inside a transaction the caller holds. Returns (event id,
    state)."""
    return add_later(conn, platform, chat_id, payload, history, key).value()


def add_later(
    conn: Connection,
    platform: str,
    chat_id: str,
    payload: dict[str, Any],
    history: dict[str, Any] | None = None,
    key: str | None = None,
) -> Later:
    """`add_in`, its (event id, state) read when wanted (`Storage.write_turn`: on a pipelined
    connection the rows of a turn go out without waiting for each other's ids)."""
    now = datetime.now(UTC)
    values = {
        "platform": platform,
        "chat_id": chat_id,
        "payload": json.dumps(payload, ensure_ascii=False),
        "key": key,
        "state": "pending",
        "attempts": 0,
        "created_at": now,
        "updated_at": now,
    }
    if key is not None:
        keyed = _keyed_insert(conn.dialect.name)
        if keyed is not None:
            # One statement for a worker's reply (bench/README.md, "Several processes"): the
            # row, unless an earlier run of the turn wrote it (then that row, and no history).
            row_id = keyed.scalar(conn, values)
            if row_id is None:
                found = _by_key_in(conn, platform, chat_id, key)
                assert found is not None, "ON CONFLICT skipped the insert, so the row exists"
                return Later(found)
            if history is not None:
                _INSERT_MESSAGE.executemany(conn, [{"created_at": now, **history}])
            return Later((int(row_id), "pending"))
        found = _by_key_in(conn, platform, chat_id, key)
        if found is not None:
            return Later(found)
    if history is not None:
        _INSERT_MESSAGE.executemany(conn, [{"created_at": now, **history}])
    inserted = _INSERT.later_scalar(conn, values)
    return Later(read=lambda: (int(inserted.value()), "pending"))


@functools.cache
def _keyed_insert(dialect: str) -> Prepared | None:
    """INSERT .. ON CONFLICT (`ux_outbox_key`) DO NOTHING RETURNING id, built once per dialect
    (imported by name: a bot on SQLite does not load PostgreSQL's); None elsewhere."""
    insert = conflict_insert(dialect)
    if insert is None:
        return None
    return Prepared(
        insert(outbox_table)
        .on_conflict_do_nothing(index_elements=["platform", "chat_id", "key"])
        .returning(outbox_table.c.id)
    )


def _by_key_in(conn: Connection, platform: str, chat_id: str, key: str) -> tuple[int, str] | None:
    rows = _BY_KEY.rows(conn, {"platform": platform, "chat_id": chat_id, "key": key})
    return (int(rows[0][0]), str(rows[0][1])) if rows else None


# Statements of every message, built once and run on the driver's cursor
# (chatfn/storage/prepared.py).
_INSERT = Prepared(outbox_table.insert().returning(outbox_table.c.id))
_BY_KEY = Prepared(
    select(outbox_table.c.id, outbox_table.c.state).where(
        outbox_table.c.platform == bindparam("platform"),
        outbox_table.c.chat_id == bindparam("chat_id"),
        outbox_table.c.key == bindparam("key"),
    )
)
_INSERT_MESSAGE = Prepared(messages_table.insert())
# One row per execution, many in one executemany (an IN list would be a new statement for
# every number of ids).
_DELIVERED = Prepared(
    update(outbox_table)
    .where(outbox_table.c.id == bindparam("id"))
    .values(state="delivered", attempts=outbox_table.c.attempts + 1, updated_at=bindparam("now"))
)


class OutboxStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Checked in the transaction of every row written for a chat (`Storage.set_fence`).
        self.fence: Callable[[Connection, str, str], None] | None = None

    def add(
        self,
        platform: str,
        chat_id: str,
        payload: dict[str, Any],
        history: dict[str, Any] | None = None,
    ) -> int:
        """Write an outbox row and, in the same transaction, the message's history row
        (`history`: messages_table values), so a message is either owed and remembered or
        neither."""
        return self.add_keyed(platform, chat_id, payload, history)[0]

    def add_keyed(
        self,
        platform: str,
        chat_id: str,
        payload: dict[str, Any],
        history: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> tuple[int, str]:
        """`add`, idempotent on (platform, chat_id, `key`) when a key is given: a row already
        written under that key (a turn run again after its worker died) is returned as it is,
        with its state, and neither row is written again. Returns (event id, state)."""
        try:
            with self.engine.begin() as conn:
                if self.fence is not None:
                    self.fence(conn, platform, chat_id)
                return add_in(conn, platform, chat_id, payload, history, key)
        except IntegrityError:  # the same key written at the same moment by another worker
            found = self._by_key(platform, chat_id, key) if key is not None else None
            if found is None:
                raise
            return found

    def _by_key(self, platform: str, chat_id: str, key: str) -> tuple[int, str] | None:
        with self.engine.connect() as conn:
            return _by_key_in(conn, platform, chat_id, key)

    def mark(self, event_id: int, state: str, *, text: str | None = None) -> bool:
        """Compare-and-set a pending row's state; `text` replaces the payload's text (the parts
        still owed). False when the row was not pending any more: another path (a gateway's
        relay, its drain, an SSE client, the webhook) finished it first."""
        values: dict[str, Any] = {"state": state, "updated_at": datetime.now(UTC)}
        with self.engine.begin() as conn:
            if text is not None:
                row = conn.execute(
                    select(outbox_table.c.payload).where(outbox_table.c.id == event_id)
                ).scalar_one_or_none()
                if row is not None:
                    payload = json.loads(row)
                    payload["text"] = text
                    values["payload"] = json.dumps(payload, ensure_ascii=False)
            done = conn.execute(
                update(outbox_table)
                .where(outbox_table.c.id == event_id, outbox_table.c.state == "pending")
                .values(attempts=outbox_table.c.attempts + 1, **values)
            ).rowcount
        return bool(done)

    def mark_delivered(self, event_ids: list[int]) -> None:
        """Mark many rows delivered in one transaction: after the database was locked, the
        marks queued meanwhile land in one write instead of hundreds, so a crash soon after
        finds fewer rows it would send again."""
        with self.engine.begin() as conn:
            mark_delivered_in(conn, event_ids)

    def pending(self, limit: int = 500, platform: str | None = None) -> list[OutboxEntry]:
        q = select(*_COLUMNS).where(outbox_table.c.state == "pending")
        if platform is not None:
            q = q.where(outbox_table.c.platform == platform)
        with self.engine.connect() as conn:
            return [_entry(r) for r in conn.execute(q.order_by(outbox_table.c.id).limit(limit))]

    def since(self, after_id: int, limit: int = 1000) -> list[OutboxEntry]:
        """Every event after `after_id`, in order, whatever its state (an SSE replay)."""
        q = (
            select(*_COLUMNS)
            .where(outbox_table.c.id > after_id)
            .order_by(outbox_table.c.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [_entry(r) for r in conn.execute(q)]

    def last_id(self) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.execute(select(outbox_table.c.id).order_by(outbox_table.c.id.desc())).scalar()
                or 0
            )

    def expire(self, max_wait: float) -> list[OutboxEntry]:
        """Mark pending rows older than `max_wait` seconds expired; return them (to log)."""
        cutoff = datetime.now(UTC) - timedelta(seconds=max_wait)
        with self.engine.begin() as conn:
            rows = [
                _entry(r)
                for r in conn.execute(
                    select(*_COLUMNS).where(
                        outbox_table.c.state == "pending", outbox_table.c.created_at < cutoff
                    )
                )
            ]
            if rows:
                conn.execute(
                    update(outbox_table)
                    .where(outbox_table.c.id.in_([r.id for r in rows]))
                    .values(state="expired", updated_at=datetime.now(UTC))
                )
        return rows

    def prune(self, retention: float) -> int:
        """Delete finished rows older than `retention` seconds (pending rows are never
        deleted: they expire first)."""
        cutoff = datetime.now(UTC) - timedelta(seconds=retention)
        with self.engine.begin() as conn:
            result = conn.execute(
                delete(outbox_table).where(
                    outbox_table.c.state != "pending", outbox_table.c.created_at < cutoff
                )
            )
        return int(result.rowcount or 0)

    def cursor(self, name: str) -> int | None:
        with self.engine.connect() as conn:
            return conn.execute(
                select(outbox_cursors_table.c.last_id).where(outbox_cursors_table.c.name == name)
            ).scalar_one_or_none()

    def set_cursor(self, name: str, last_id: int) -> None:
        with self.engine.begin() as conn:
            done = conn.execute(
                update(outbox_cursors_table)
                .where(outbox_cursors_table.c.name == name)
                .values(last_id=last_id)
            ).rowcount
            if not done:
                try:
                    conn.execute(outbox_cursors_table.insert().values(name=name, last_id=last_id))
                except IntegrityError:  # pragma: no cover - a concurrent first write
                    pass
