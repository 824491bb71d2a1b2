"""message_fates: what became of each incoming message (issue 40: answered, by a function,
declined, not addressed, ignored, failed; held and expired are read from its absence).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "message_fates",
        sa.Column("message", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("chat_id", sa.String(length=128), nullable=False),
        sa.Column("sender_id", sa.String(length=128), nullable=False),
        sa.Column("fate", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.String(length=200), nullable=False),
        sa.Column("told", sa.Boolean(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("message"),
    )


def downgrade() -> None:
    op.drop_table("message_fates")
