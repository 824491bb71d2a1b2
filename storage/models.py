"""Tables: chat history and the tool-call audit log. (Reminders keep their own table, owned by
the reminder service, on the same database.)"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class MessageRow(Base):
    """One chat message, incoming or sent by the bot, in arrival order per chat."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    is_group: Mapped[bool] = mapped_column(default=False)
    role: Mapped[str] = mapped_column(String(16))  # "user" | "assistant"
    sender_id: Mapped[str] = mapped_column(String(128))
    sender_name: Mapped[str] = mapped_column(String(128), default="")
    text: Mapped[str] = mapped_column(Text)
    message_id: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The model's reasoning behind a bot reply (every round of the turn, joined). Kept for
    # debugging and audits, never shown in chat nor sent back to a model. Deferred: history
    # reads on the hot path do not load it.
    thinking: Mapped[str | None] = mapped_column(Text, nullable=True, default=None, deferred=True)

    __table_args__ = (Index("ix_messages_chat", "platform", "chat_id", "id"),)


class ToolCallRow(Base):
    """An audit row per function call: who asked, where, what, and how it ended."""

    __tablename__ = "tool_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    sender_id: Mapped[str] = mapped_column(String(128))
    message_id: Mapped[str] = mapped_column(String(128), default="")
    function: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16))  # "llm" | "command" | "scheduler"
    # ok | invalid | refused | unknown | timeout | error
    outcome: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text, default="")
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_tool_calls_chat", "platform", "chat_id", "id"),)


class OutboxRow(Base):
    """Every message the bot sends, written before any channel sees it. The id is the event id
    (SSE `id:`, `X-Chatfn-Event-Id`): monotonic, so a reader (an SSE client, the webhook, a
    gateway process) drains the table by id. `state`: pending until a channel took it, then
    delivered; expired when it waited longer than `storage.outbox.max_wait`; failed when the
    platform refused it for good."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    # OutgoingMessage fields as JSON (text, at, reply_to, is_group, notice).
    payload: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_outbox_state", "state", "id"),
        Index("ix_outbox_chat", "platform", "chat_id", "id"),
    )


class OutboxCursorRow(Base):
    """How far a reader that sees every event (the webhook) got, so it resumes after a
    restart instead of starting over or skipping what it missed."""

    __tablename__ = "outbox_cursors"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_id: Mapped[int] = mapped_column(Integer, default=0)
