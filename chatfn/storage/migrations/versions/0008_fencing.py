"""fencing (issue 26): an incoming message is stored once per chat and platform message id
(a unique index over user rows with an id), and each broker partition has a lease row whose
epoch every write of a turn checks (`partition_leases`, chatfn/storage/fencing.py).

Rows stored twice before this (a worker that resumed after its chats moved on wrote the
message again) keep their text: the later copies get `<id>#dup<row id>` as their message id,
so the index can be built and nothing a user said is deleted.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

INCOMING_WHERE = "role = 'user' AND message_id <> ''"


def upgrade() -> None:
    op.create_table(
        "partition_leases",
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("partition"),
    )
    conn = op.get_bind()
    duplicates = conn.execute(
        sa.text(
            "SELECT m.id, m.message_id FROM messages m WHERE m.role = 'user'"
            " AND m.message_id <> '' AND EXISTS (SELECT 1 FROM messages f"
            " WHERE f.platform = m.platform AND f.chat_id = m.chat_id"
            " AND f.message_id = m.message_id AND f.role = 'user' AND f.id < m.id)"
        )
    ).all()
    for row_id, message_id in duplicates:
        conn.execute(
            sa.text("UPDATE messages SET message_id = :renamed WHERE id = :id"),
            {"renamed": f"{message_id[:100]}#dup{row_id}", "id": row_id},
        )
    op.create_index(
        "ux_messages_incoming",
        "messages",
        ["platform", "chat_id", "message_id"],
        unique=True,
        sqlite_where=sa.text(INCOMING_WHERE),
        postgresql_where=sa.text(INCOMING_WHERE),
    )


def downgrade() -> None:
    op.drop_index("ux_messages_incoming", table_name="messages")
    op.drop_table("partition_leases")
