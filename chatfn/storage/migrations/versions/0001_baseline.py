"""baseline: the tables as version 0.1.0 created them with create_all (messages, tool_calls,
reminders, apscheduler_jobs; chatfn/storage/migrations/baseline_tables.py). A database made before
migrations existed gets what it lacks of these and is stamped with this revision
(chatfn/storage/schema.py).

Revision ID: 0001
Revises:
Create Date: 2026-11-01
"""

from __future__ import annotations

from alembic import op

from chatfn.storage.migrations.baseline_tables import create_missing, metadata

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_missing(op.get_bind())


def downgrade() -> None:
    metadata.drop_all(op.get_bind())
