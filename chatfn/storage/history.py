"""A chat's stored messages as an API shows them (`GET /v1/history`): newest page first,
each with its row id (for paging), role, sender, text, time and platform message id; and
where the bot's admins write to it in private (`admin_chats`, where an admin notice goes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, false, func, select

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


def admin_chats(engine: Engine, senders: list[str]) -> list[tuple[str, str]]:
    """(platform, chat_id) of the private chat each of `senders` (`bot.admins`) last wrote to
    the bot from, one per sender and platform: where a notice for the admins reaches them (a
    private chat's id is not always its member's: a Matrix room, a Discord DM channel). Read
    when an admin notice is sent (rarely: a plugin switched off), so no index is kept for it."""
    if not senders:
        return []
    m = messages_table.c
    last = func.max(m.id).label("last")
    stmt = (
        select(m.platform, m.chat_id, m.sender_id, last)
        .where(m.sender_id.in_(senders), m.role == "user", m.is_group == false())
        .group_by(m.platform, m.chat_id, m.sender_id)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    newest: dict[tuple[str, str], tuple[int, str]] = {}
    for r in rows:
        key = (r.sender_id, r.platform)
        if key not in newest or r.last > newest[key][0]:
            newest[key] = (r.last, r.chat_id)
    chats = {(platform, chat_id) for (_, platform), (_, chat_id) in newest.items()}
    return sorted(chats)
