"""the durable outbox: every message the bot sends, pending until a channel took it (the row id
is the event id of SSE and webhooks), and the positions of readers that see every event.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("chat_id", sa.String(length=128), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_outbox_state", "outbox", ["state", "id"])
    op.create_index("ix_outbox_chat", "outbox", ["platform", "chat_id", "id"])
    op.create_table(
        "outbox_cursors",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("last_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("outbox_cursors")
    op.drop_index("ix_outbox_chat", table_name="outbox")
    op.drop_index("ix_outbox_state", table_name="outbox")
    op.drop_table("outbox")
