"""the outbox row of a worker's reply is keyed `<message id>#<position>` (unique per chat), so
a turn run again (its worker died mid-turn) writes each reply's row once and keeps its event id.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("key", sa.String(length=160), nullable=True))
    # NULL keys (reminders, welcomes, single-process replies) never collide.
    op.create_index("ux_outbox_key", "outbox", ["platform", "chat_id", "key"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_outbox_key", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("key")
