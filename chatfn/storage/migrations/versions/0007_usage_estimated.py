"""a usage row says whether its token counts are the server's or our estimate: servers that
report no usage (llama-cpp-python streaming) are counted locally, so token limits still trip.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_usage") as batch:
        batch.add_column(
            sa.Column("estimated", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("model_usage") as batch:
        batch.drop_column("estimated")
