"""What became of each incoming message (`message_fates`, issue 40): one row per stored user
message, written when its turn ends (`record`), read by `/why` and `GET /v1/messages/{id}/fate`
(`read`, `find`). A stored message without a row has no fate decided yet: function_calls/fates.py
names it held or expired."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, and_, bindparam, delete, or_, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql import Select

from chatfn.storage.inserts import conflict_insert
from chatfn.storage.models import message_fates_table as f
from chatfn.storage.models import messages_table as m
from chatfn.storage.prepared import Prepared

__all__ = ["FateRow", "find", "read", "record", "record_in"]

DETAIL_MAX = 200

# Prepared: `record_in` runs inside a turn's end write, which is pipelined on PostgreSQL
# (chatfn/storage/pipeline.py refuses plain Core statements there).
_DELETE = Prepared(delete(f).where(f.c.message == bindparam("message")))
_INSERT = Prepared(f.insert())


@functools.cache
def _upsert(dialect: str) -> Prepared | None:
    """The row inserted or, when the message has one (a resumed turn decides again), replaced
    whole, in one statement (INSERT .. ON CONFLICT): one statement a message fewer than
    DELETE + INSERT (issue 41). None for a database without ON CONFLICT."""
    insert = conflict_insert(dialect)
    if insert is None:
        return None
    stmt = insert(f)
    replaced = {c.name: stmt.excluded[c.name] for c in f.columns if c.name != "message"}
    return Prepared(stmt.on_conflict_do_update(index_elements=[f.c.message], set_=replaced))


@dataclass(frozen=True, slots=True)
class FateRow:
    """A stored user message and its recorded fate (`fate` None: none recorded yet)."""

    message: int
    platform: str
    chat_id: str
    sender_id: str
    text: str
    created_at: datetime
    fate: str | None
    detail: str
    told: bool
    decided_at: datetime | None


def record(
    engine: Engine,
    message: int,
    platform: str,
    chat_id: str,
    sender_id: str,
    fate: str,
    detail: str,
    told: bool,
) -> None:
    """Record (or replace: a resumed turn decides again) the fate of the history row
    `message`, in a transaction of its own."""
    values = {
        "message": message,
        "platform": platform,
        "chat_id": chat_id,
        "sender_id": sender_id,
        "fate": fate,
        "detail": detail,
        "told": told,
    }
    with engine.begin() as conn:
        record_in(conn, values)


def record_in(conn: Connection, values: dict[str, Any]) -> None:
    """`record` in the caller's transaction (`Storage.write_turn`: with the turn's end)."""
    row = dict(values, detail=str(values.get("detail", ""))[:DETAIL_MAX])
    row.setdefault("decided_at", datetime.now(UTC))
    upsert = _upsert(conn.dialect.name)
    if upsert is not None:
        upsert.execute(conn, row)
        return
    _DELETE.execute(conn, {"message": row["message"]})
    _INSERT.execute(conn, row)


def _select() -> Select[tuple[object, ...]]:
    return select(
        m.c.id,
        m.c.platform,
        m.c.chat_id,
        m.c.sender_id,
        m.c.text,
        m.c.created_at,
        f.c.fate,
        f.c.detail,
        f.c.told,
        f.c.decided_at,
    ).select_from(m.outerjoin(f, f.c.message == m.c.id))


def _row(row: Row[tuple[object, ...]] | None) -> FateRow | None:
    if row is None:
        return None
    created = row.created_at
    decided = row.decided_at
    return FateRow(
        message=row.id,
        platform=row.platform,
        chat_id=row.chat_id,
        sender_id=row.sender_id,
        text=row.text,
        created_at=created if created.tzinfo else created.replace(tzinfo=UTC),
        fate=row.fate,
        detail=row.detail or "",
        told=bool(row.told),
        decided_at=(decided if decided is None or decided.tzinfo else decided.replace(tzinfo=UTC)),
    )


def read(engine: Engine, message: int, platform: str | None = None) -> FateRow | None:
    """The user message of history row `message` (on `platform` when given) and its fate."""
    q = _select().where(m.c.id == message, m.c.role == "user")
    if platform is not None:
        q = q.where(m.c.platform == platform)
    with engine.connect() as conn:
        return _row(conn.execute(q).first())


def find(
    engine: Engine,
    platform: str,
    chat_id: str,
    *,
    before: int | None,
    sender_id: str | None = None,
    quoted: str | None = None,
) -> FateRow | None:
    """The latest user message of a chat before history row `before`: the sender's (when
    `sender_id` is given), or the one whose text is (or starts with) `quoted`."""
    q = _select().where(m.c.platform == platform, m.c.chat_id == chat_id, m.c.role == "user")
    if before is not None:
        q = q.where(m.c.id < before)
    if sender_id is not None:
        q = q.where(m.c.sender_id == sender_id)
    if quoted:
        q = q.where(or_(m.c.text == quoted, and_(m.c.text.startswith(quoted, autoescape=True))))
    with engine.connect() as conn:
        return _row(conn.execute(q.order_by(m.c.id.desc()).limit(1)).first())
