"""several processes: turns finished per platform message id (a redelivered message is not
answered twice), the live workers (partition balance), and an index to find a stored message
by its platform id.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "handled_messages",
        sa.Column("platform", sa.String(32), primary_key=True),
        sa.Column("chat_id", sa.String(128), primary_key=True),
        sa.Column("message_id", sa.String(128), primary_key=True),
        sa.Column("worker", sa.String(64), nullable=False),
        sa.Column("replies", sa.Integer(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_messages_message_id", "messages", ["platform", "chat_id", "message_id"])


def downgrade() -> None:
    op.drop_index("ix_messages_message_id", table_name="messages")
    op.drop_table("workers")
    op.drop_table("handled_messages")
