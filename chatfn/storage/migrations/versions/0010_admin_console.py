"""the admin console (issue 23): its sessions and audit log, the workers' metric snapshots a
gateway reads, and each usage row's tool-loop round and finish reason (the turn trace).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_usage") as batch:
        batch.add_column(sa.Column("round", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("finish_reason", sa.String(length=32), nullable=True))
    op.create_table(
        "admin_sessions",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    op.create_table(
        "admin_audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("chat_id", sa.String(length=128), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_admin_audit_chat", "admin_audit", ["platform", "chat_id", "id"])
    op.create_table(
        "worker_metrics",
        sa.Column("worker", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("worker"),
    )


def downgrade() -> None:
    op.drop_table("worker_metrics")
    op.drop_index("ix_admin_audit_chat", table_name="admin_audit")
    op.drop_table("admin_audit")
    op.drop_table("admin_sessions")
    with op.batch_alter_table("model_usage") as batch:
        batch.drop_column("finish_reason")
        batch.drop_column("round")
