"""Tables: chat history, the tool-call audit log, per-chat overrides, model usage and limit
counters. (Reminders keep their own table, owned by the reminder service, on the same
database.)"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, Index, Integer, String, Text, UniqueConstraint
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
    # A user message: whether it addressed the bot (a turn resumed after a crash is routed as
    # it was). NULL: a bot row, or a row stored before migration 0005 (never resumed).
    is_at_bot: Mapped[bool | None] = mapped_column(nullable=True, default=None)

    __table_args__ = (
        Index("ix_messages_chat", "platform", "chat_id", "id"),
        Index("ix_messages_message_id", "platform", "chat_id", "message_id"),
    )


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


class ChatOverrideRow(Base):
    """A setting an admin changed from a chat (`/model`, `/persona`, `/reset`): it applies to
    that chat alone, over the config's rules, until cleared."""

    __tablename__ = "chat_overrides"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    key: Mapped[str] = mapped_column(String(32))  # "model" | "persona" | "reset"
    value: Mapped[str] = mapped_column(Text)
    set_by: Mapped[str] = mapped_column(String(128))
    set_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (UniqueConstraint("platform", "chat_id", "key", name="uq_chat_override"),)


class UsageRow(Base):
    """One model request: who caused it, which model, the tokens the provider reported, how
    long it took and how it ended. Limits and `/stats` read these."""

    __tablename__ = "model_usage"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    sender_id: Mapped[str] = mapped_column(String(128))
    message_id: Mapped[str] = mapped_column(String(128), default="")
    model_name: Mapped[str] = mapped_column(String(64))  # the key under `models:`
    model_id: Mapped[str] = mapped_column(String(128), default="")  # the provider's id
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0)
    reasoning_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    streamed: Mapped[bool] = mapped_column(default=False)
    outcome: Mapped[str] = mapped_column(String(32))  # "ok" | the ProviderError class name
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_usage_chat", "platform", "chat_id", "created_at"),
        Index("ix_usage_user", "platform", "sender_id", "created_at"),
    )


class LimitCounterRow(Base):
    """A count in one fixed window (a minute, a day) for one user or chat: messages, model
    calls, tokens, and whether the over-limit notice was already sent in this window."""

    __tablename__ = "limit_counters"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(8))  # "user" | "chat"
    platform: Mapped[str] = mapped_column(String(32))
    key: Mapped[str] = mapped_column(String(128))
    metric: Mapped[str] = mapped_column(String(48))
    window: Mapped[str] = mapped_column(String(32))  # "2030-01-01T08:00" | "2030-01-01"
    value: Mapped[int] = mapped_column(Integer, default=0)

    __table_args__ = (
        UniqueConstraint("scope", "platform", "key", "metric", "window", name="uq_limit_counter"),
    )


class HandledMessageRow(Base):
    """A turn that finished, by platform message id: a message the broker delivers again (its
    worker died after answering, before acknowledging) is acknowledged without a second answer.
    """

    __tablename__ = "handled_messages"

    platform: Mapped[str] = mapped_column(String(32), primary_key=True)
    chat_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    worker: Mapped[str] = mapped_column(String(64))
    replies: Mapped[int] = mapped_column(Integer)
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WorkerRow(Base):
    """A live worker process (seen_at refreshed every few seconds): the workers agree from this
    table which of them should consume which partition."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(128))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


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
    # A worker's reply: `<incoming message id>#<position>`, unique per chat, so a turn run
    # again writes its row once (None for every other message).
    key: Mapped[str | None] = mapped_column(String(160), nullable=True, default=None)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_outbox_state", "state", "id"),
        Index("ix_outbox_chat", "platform", "chat_id", "id"),
        Index("ux_outbox_key", "platform", "chat_id", "key", unique=True),
    )


class OutboxCursorRow(Base):
    """How far a reader that sees every event (the webhook) got, so it resumes after a
    restart instead of starting over or skipping what it missed."""

    __tablename__ = "outbox_cursors"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_id: Mapped[int] = mapped_column(Integer, default=0)
