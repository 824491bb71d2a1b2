"""A chat's stored messages as an API shows them (`GET /v1/history`): newest page first,
each with its row id (for paging), role, sender, text, time and platform message id."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, select

from chatfn.storage.models import messages_table


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    id: int  # the row id: `before=<id>` asks for the page before it
    role: str  # "user" | "assistant" | "notice"
    sender_id: str
    sender_name: str
    text: str
    time: datetime  # UTC
    message_id: str  # the platform's id ("" for a bot message that has none)


def chat_page(
    engine: Engine, platform: str, chat_id: str, limit: int, before: int | None = None
) -> list[HistoryEntry]:
    """The last `limit` messages of a chat (before row id `before`), oldest first."""
    m = messages_table.c
    stmt = select(m.id, m.role, m.sender_id, m.sender_name, m.text, m.created_at, m.message_id)
    stmt = stmt.where(m.platform == platform, m.chat_id == chat_id)
    if before is not None:
        stmt = stmt.where(m.id < before)
    stmt = stmt.order_by(m.id.desc()).limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    return [
        HistoryEntry(
            r.id,
            r.role,
            r.sender_id,
            r.sender_name,
            r.text,
            r.created_at.replace(tzinfo=UTC) if r.created_at.tzinfo is None else r.created_at,
            r.message_id or "",
        )
        for r in reversed(rows)
    ]
