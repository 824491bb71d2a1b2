"""Create a metadata's missing tables and indexes so that processes starting together on one new
database do not trip over each other.

`MetaData.create_all` looks first ("is the table there?") and creates after. On SQLite each
CREATE commits on its own, so two workers creating at once find the other's table made between
their look and their create, table after table ("table kb_chunks already exists", seen in CI).
`CREATE ... IF NOT EXISTS` leaves that decision to the database, where it is atomic. Both SQLite
and PostgreSQL have it; any other database falls back to create_all.
"""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, CreateTable

IF_NOT_EXISTS_DIALECTS = frozenset({"sqlite", "postgresql"})


def create_missing(bind: Connection | Engine, metadata: MetaData) -> None:
    """Create `metadata`'s tables and indexes that are not there yet, in one transaction when
    given an engine (a connection's caller owns its transaction)."""
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            create_missing(conn, metadata)
        return
    if bind.dialect.name not in IF_NOT_EXISTS_DIALECTS:
        metadata.create_all(bind, checkfirst=True)
        return
    for table in metadata.sorted_tables:
        bind.execute(CreateTable(table, if_not_exists=True))
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            bind.execute(CreateIndex(index, if_not_exists=True))
