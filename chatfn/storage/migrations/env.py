"""Alembic environment: always driven from code (chatfn/storage/schema.py), with the connection and
the target metadata passed in `config.attributes`; there is no alembic.ini."""

from __future__ import annotations

from alembic import context

config = context.config
connection = config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=config.attributes.get("target_metadata"),
    # SQLite cannot ALTER most things: Alembic copies the table ("batch mode") there.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
