"""messages.is_at_bot: whether a user message addressed the bot, so a turn a crash interrupted
can be run again at the next start (chatfn/runtime/bot.py `resume`). NULL on rows stored before this
revision: those are never resumed.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("is_at_bot", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("is_at_bot")
