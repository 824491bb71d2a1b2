"""Tables: chat history, the tool-call audit log, per-chat overrides, model usage and limit
counters, the cluster's tables and the outbox. (Reminders keep their own table, owned by the
reminder service, on the same database.)

Declared with SQLAlchemy Core (`Table`), not the ORM: every statement of the bot is a Core
statement already (the hot path measured several times cheaper than an ORM unit of work), and
`sqlalchemy.orm` alone is ~5 MB of a bot's memory (bench/README.md, "Memory and start-up").
Rows come back as SQLAlchemy `Row`s, read by column name (`row.chat_id`).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)

metadata = MetaData()
# The rows of `ux_messages_incoming` (and the conflict target of the insert that uses it).
INCOMING_WHERE = "role = 'user' AND message_id <> ''"


def _id() -> Column[int]:
    return Column("id", Integer, primary_key=True, autoincrement=True)


def _when(name: str) -> Column[object]:
    return Column(name, DateTime(timezone=True), nullable=False)


# One chat message, incoming or sent by the bot, in arrival order per chat.
messages_table = Table(
    "messages",
    metadata,
    _id(),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("is_group", Boolean, nullable=False, default=False),
    Column("role", String(16), nullable=False),  # "user" | "assistant" | "notice"
    Column("sender_id", String(128), nullable=False),
    Column("sender_name", String(128), nullable=False, default=""),
    Column("text", Text, nullable=False),
    Column("message_id", String(128), nullable=False, default=""),
    _when("created_at"),
    # The model's reasoning behind a bot reply (every round of the turn, joined). Kept for
    # debugging and audits, never shown in chat nor sent back to a model; history reads on the
    # hot path select their columns and leave it out.
    Column("thinking", Text, nullable=True, default=None),
    # A user message: whether it addressed the bot (a turn resumed after a crash is routed as
    # it was). NULL: a bot row, or a row stored before migration 0005 (never resumed).
    Column("is_at_bot", Boolean, nullable=True, default=None),
    Index("ix_messages_chat", "platform", "chat_id", "id"),
    Index("ix_messages_message_id", "platform", "chat_id", "message_id"),
    # An incoming message is stored once, whoever stores it (two workers, a redelivery): the
    # platform's message id is unique per chat. Bot rows (replies keyed `<id>#<position>`)
    # and rows without an id are not in it. Migration 0008 builds it with the same WHERE on
    # PostgreSQL; declaring `postgresql_where` here would load SQLAlchemy's PostgreSQL dialect
    # into every bot (tests/runtime/test_lazy_imports.py), for a clause only migrations use.
    Index(
        "ux_messages_incoming",
        "platform",
        "chat_id",
        "message_id",
        unique=True,
        sqlite_where=text(INCOMING_WHERE),
    ),
)

# An audit row per function call: who asked, where, what, and how it ended.
tool_calls_table = Table(
    "tool_calls",
    metadata,
    _id(),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("sender_id", String(128), nullable=False),
    Column("message_id", String(128), nullable=False, default=""),
    Column("function", String(64), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("source", String(16), nullable=False),  # "llm" | "command" | "scheduler"
    # ok | invalid | refused | unknown | timeout | error
    Column("outcome", String(16), nullable=False),
    Column("detail", Text, nullable=False, default=""),
    Column("duration_ms", Float, nullable=False, default=0.0),
    _when("created_at"),
    Index("ix_tool_calls_chat", "platform", "chat_id", "id"),
)

# A setting an admin changed from a chat (`/model`, `/persona`, `/reset`): it applies to that
# chat alone, over the config's rules, until cleared.
chat_overrides_table = Table(
    "chat_overrides",
    metadata,
    _id(),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("key", String(32), nullable=False),  # "model" | "persona" | "reset"
    Column("value", Text, nullable=False),
    Column("set_by", String(128), nullable=False),
    _when("set_at"),
    UniqueConstraint("platform", "chat_id", "key", name="uq_chat_override"),
)

# One model request: who caused it, which model, the tokens the provider reported, how long it
# took and how it ended. Limits and `/stats` read these.
usage_table = Table(
    "model_usage",
    metadata,
    _id(),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("sender_id", String(128), nullable=False),
    Column("message_id", String(128), nullable=False, default=""),
    Column("model_name", String(64), nullable=False),  # the key under `models:`
    Column("model_id", String(128), nullable=False, default=""),  # the provider's id
    Column("prompt_tokens", Integer, nullable=False, default=0),
    Column("completion_tokens", Integer, nullable=False, default=0),
    Column("cached_tokens", Integer, nullable=False, default=0),
    Column("cache_write_tokens", Integer, nullable=False, default=0),
    Column("reasoning_tokens", Integer, nullable=False, default=0),
    Column("latency_ms", Float, nullable=False, default=0.0),
    Column("streamed", Boolean, nullable=False, default=False),
    # The token counts are our estimate: the server reported none (README, "Local servers").
    Column("estimated", Boolean, nullable=False, default=False, server_default=false()),
    Column("outcome", String(32), nullable=False),  # "ok" | the ProviderError class name
    _when("created_at"),
    # Currency units, from `models.<name>.price`; NULL: the model has no price configured.
    Column("cost", Float, nullable=True, default=None),
    # The tool-loop round of the request (1: the first) and the provider's finish reason, for
    # the console's turn trace; NULL on rows from before migration 0010 or a failed request.
    Column("round", Integer, nullable=True, default=None),
    Column("finish_reason", String(32), nullable=True, default=None),
    Index("ix_usage_chat", "platform", "chat_id", "created_at"),
    Index("ix_usage_user", "platform", "sender_id", "created_at"),
)

# A count in one fixed window (a minute, a day) for one user or chat: messages, model calls,
# tokens, and whether the over-limit notice was already sent in this window.
limit_counters_table = Table(
    "limit_counters",
    metadata,
    _id(),
    Column("scope", String(8), nullable=False),  # "user" | "chat"
    Column("platform", String(32), nullable=False),
    Column("key", String(128), nullable=False),
    Column("metric", String(48), nullable=False),
    Column("window", String(32), nullable=False),  # "2030-01-01T08:00" | "2030-01-01"
    # 64-bit: cost counters count millionths of a currency unit.
    Column("value", BigInteger, nullable=False, default=0),
    UniqueConstraint("scope", "platform", "key", "metric", "window", name="uq_limit_counter"),
)

# A chat's compacted history: the summary of every message up to `upto_id` (a messages.id),
# made when the history no longer fit the model's context; the model sees it before the turns
# kept. One per chat, replaced at each compaction (which folds the previous one in).
chat_summaries_table = Table(
    "chat_summaries",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("chat_id", String(128), primary_key=True),
    Column("text", Text, nullable=False),
    Column("upto_id", Integer, nullable=False),
    Column("messages", Integer, nullable=False),  # how many messages it covers, in all
    Column("tokens", Integer, nullable=False),  # its size, estimated as the history's
    Column("model_name", String(64), nullable=False),  # the model that wrote it
    _when("created_at"),
)

# A turn that finished, by platform message id: a message the broker delivers again (its worker
# died after answering, before acknowledging) is acknowledged without a second answer.
handled_messages_table = Table(
    "handled_messages",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("chat_id", String(128), primary_key=True),
    Column("message_id", String(128), primary_key=True),
    Column("worker", String(64), nullable=False),
    Column("replies", Integer, nullable=False),
    _when("finished_at"),
)

# A live worker process (seen_at refreshed every few seconds): the workers agree from this table
# which of them should consume which partition.
workers_table = Table(
    "workers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("host", String(128), nullable=False),
    _when("started_at"),
    _when("seen_at"),
)

# Who consumes each broker partition, and since which claim (chatfn/storage/fencing.py). A worker
# claims a partition when the broker starts delivering it to him (`epoch` + 1); every write of
# a turn checks, in its own transaction, that the epoch is still the one it claimed, so a
# worker that lost the partition (stopped, cut off) and comes back commits nothing for it.
partition_leases_table = Table(
    "partition_leases",
    metadata,
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("epoch", Integer, nullable=False),
    Column("holder", String(64), nullable=False),
    _when("claimed_at"),
)

# Every message the bot sends, written before any channel sees it. The id is the event id (SSE
# `id:`, `X-Chatfn-Event-Id`): monotonic, so a reader (an SSE client, the webhook, a gateway
# process) drains the table by id. `state`: pending until a channel took it, then delivered;
# expired when it waited longer than `storage.outbox.max_wait`; failed when the platform refused
# it for good.
outbox_table = Table(
    "outbox",
    metadata,
    _id(),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    # OutgoingMessage fields as JSON (text, at, reply_to, is_group, notice).
    Column("payload", Text, nullable=False),
    # A worker's reply: `<incoming message id>#<position>`, unique per chat, so a turn run
    # again writes its row once (None for every other message).
    Column("key", String(160), nullable=True, default=None),
    Column("state", String(16), nullable=False, default="pending"),
    Column("attempts", Integer, nullable=False, default=0),
    _when("created_at"),
    _when("updated_at"),
    Index("ix_outbox_state", "state", "id"),
    Index("ix_outbox_chat", "platform", "chat_id", "id"),
    Index("ux_outbox_key", "platform", "chat_id", "key", unique=True),
)

# How far a reader that sees every event (the webhook) got, so it resumes after a restart
# instead of starting over or skipping what it missed.
outbox_cursors_table = Table(
    "outbox_cursors",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("last_id", Integer, nullable=False, default=0),
)

# A login to the web admin console: the SHA-256 of the cookie's token (the token itself is
# never stored), its CSRF token, and when it ends. In the database so every gateway of a
# cluster accepts it and a restart does not log everyone out.
admin_sessions_table = Table(
    "admin_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("user", String(64), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("address", String(64), nullable=False, default=""),
    _when("created_at"),
    _when("expires_at"),
)

# Who changed what in the admin console, and when: a setting, a reset, a reminder cancelled,
# a delivery retried, a login (and a failed one).
admin_audit_table = Table(
    "admin_audit",
    metadata,
    _id(),
    _when("created_at"),
    Column("user", String(64), nullable=False),
    Column("address", String(64), nullable=False, default=""),
    Column("action", String(32), nullable=False),
    Column("platform", String(32), nullable=False, default=""),
    Column("chat_id", String(128), nullable=False, default=""),
    Column("detail", Text, nullable=False, default="{}"),  # JSON
    Index("ix_admin_audit_chat", "platform", "chat_id", "id"),
)

# Each worker's latest metrics (model requests, tokens, tool calls, its event loop), written
# every few seconds by the worker, so a gateway's console shows what the workers did: a
# worker's /metrics is not reachable (it serves no port).
worker_metrics_table = Table(
    "worker_metrics",
    metadata,
    Column("worker", String(64), primary_key=True),
    Column("host", String(128), nullable=False),
    _when("taken_at"),
    Column("data", Text, nullable=False),  # JSON
)

# What a channel keeps between runs (`ChannelHost.load_state` / `save_state`): a login made by
# scanning a QR code (`chatfn login weixin`), a long poll's cursor, a conversation's token. One
# text value per (platform, key); the channel owns its meaning.
channel_state_table = Table(
    "channel_state",
    metadata,
    Column("platform", String(32), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),
    _when("updated_at"),
)

# What became of each incoming message (issue 40): one row per stored user message (`message`
# is its `messages.id`), written when its turn ends. A stored message without a row is held
# (its turn has not ended) or, past `bot.resume_window`, expired (function_calls/fates.py).
message_fates_table = Table(
    "message_fates",
    metadata,
    Column("message", Integer, primary_key=True, autoincrement=False),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("sender_id", String(128), nullable=False),
    # answered | function | declined | not_addressed | ignored | failed
    Column("fate", String(16), nullable=False),
    # Which: the model that answered, the function, the limit or rule, the error's class.
    Column("detail", String(200), nullable=False, default=""),
    # The sender was told (a decline's notice, a failure's apology).
    Column("told", Boolean, nullable=False, default=False),
    _when("decided_at"),
)

# A call held for approval (issue 40: `@tool_function(approval=...)`): the call's arguments as
# they were when it was asked for (they cannot change), who asked where, and how it ended.
approvals_table = Table(
    "approvals",
    metadata,
    Column("id", String(16), primary_key=True, autoincrement=False),
    Column("platform", String(32), nullable=False),
    Column("chat_id", String(128), nullable=False),
    Column("is_group", Boolean, nullable=False, default=False),
    Column("sender_id", String(128), nullable=False),
    Column("sender_name", String(128), nullable=False, default=""),
    Column("message_id", String(128), nullable=False, default=""),
    # The history row of the message whose turn asked (None: an MCP caller's).
    Column("stored_id", Integer, nullable=True),
    Column("text", Text, nullable=False, default=""),
    Column("function", String(64), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("source", String(16), nullable=False),  # llm | command | mcp
    Column("level", String(16), nullable=False),  # chat_admin | admin
    # The model's call id and the turn's messages after the history (JSON), to resume its loop.
    Column("call_id", String(128), nullable=False, default=""),
    Column("turn", Text, nullable=True),
    # pending | approved | denied | expired
    Column("state", String(16), nullable=False),
    Column("answered_by", String(128), nullable=False, default=""),
    Column("reason", String(500), nullable=False, default=""),
    _when("created_at"),
    _when("expires_at"),
    Column("answered_at", DateTime(timezone=True), nullable=True),
    Index("ix_approvals_state", "state", "expires_at"),
)
