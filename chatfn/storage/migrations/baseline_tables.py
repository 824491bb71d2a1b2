"""The baseline schema (revision 0001): the tables version 0.1.0 made with `create_all`. Frozen:
later changes are new revisions, never edits here. Both the baseline migration and the in-place
upgrade of a pre-migration database (which may lack the tables made lazily, such as reminders)
create from it what is missing."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

metadata = sa.MetaData()

sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(128), nullable=False),
    sa.Column("is_group", sa.Boolean(), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("sender_id", sa.String(128), nullable=False),
    sa.Column("sender_name", sa.String(128), nullable=False),
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("message_id", sa.String(128), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("thinking", sa.Text(), nullable=True),
    sa.Index("ix_messages_chat", "platform", "chat_id", "id"),
)
sa.Table(
    "tool_calls",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(128), nullable=False),
    sa.Column("sender_id", sa.String(128), nullable=False),
    sa.Column("message_id", sa.String(128), nullable=False),
    sa.Column("function", sa.String(64), nullable=False),
    sa.Column("arguments", sa.Text(), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("detail", sa.Text(), nullable=False),
    sa.Column("duration_ms", sa.Float(), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_tool_calls_chat", "platform", "chat_id", "id"),
)
sa.Table(
    "reminders",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(128), nullable=False, index=True),
    sa.Column("chat_name", sa.String(128), nullable=False),
    sa.Column("is_group", sa.Boolean(), nullable=False),
    sa.Column("creator_id", sa.String(128), nullable=False, index=True),
    sa.Column("creator_name", sa.String(128), nullable=False),
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("spec", sa.String(128), nullable=False),
    sa.Column("at", sa.String(64), nullable=True),
    sa.Column("weekday", sa.String(64), nullable=True),
    sa.Column("cron", sa.String(128), nullable=True),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("next_run", sa.DateTime(), nullable=True),
    sa.Column("created_at", sa.DateTime(), nullable=False),
    sa.Column("fired_count", sa.Integer(), nullable=False),
    sa.Column("last_fired_at", sa.DateTime(), nullable=True),
    sa.Column("note", sa.Text(), nullable=False),
)
# APScheduler 3's SQLAlchemyJobStore table, exactly as it declares it.
sa.Table(
    "apscheduler_jobs",
    metadata,
    sa.Column("id", sa.Unicode(191), primary_key=True),
    sa.Column("next_run_time", sa.Float(25), nullable=True, index=True),
    sa.Column("job_state", sa.LargeBinary(), nullable=False),
)


def create_missing(conn: Connection) -> None:
    """Create the baseline tables (with their indexes) that `conn`'s database lacks."""
    metadata.create_all(conn, checkfirst=True)
