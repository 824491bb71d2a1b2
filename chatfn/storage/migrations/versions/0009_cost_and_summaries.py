"""money and memory (issue 22): each usage row carries its cost (`models.<name>.price`); limit
counters are 64-bit (cost counters count millionths of a currency unit); a chat's compacted
history lives in chat_summaries, one row per chat.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_usage") as batch:
        batch.add_column(sa.Column("cost", sa.Float(), nullable=True))
    with op.batch_alter_table("limit_counters") as batch:
        batch.alter_column(
            "value", existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=False
        )
    op.create_table(
        "chat_summaries",
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("chat_id", sa.String(length=128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("upto_id", sa.Integer(), nullable=False),
        sa.Column("messages", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("model_name", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("platform", "chat_id"),
    )


def downgrade() -> None:
    op.drop_table("chat_summaries")
    with op.batch_alter_table("limit_counters") as batch:
        batch.alter_column(
            "value", existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=False
        )
    with op.batch_alter_table("model_usage") as batch:
        batch.drop_column("cost")
