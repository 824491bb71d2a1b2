"""What the stores' INSERTs share: the dialect's `insert` for INSERT .. ON CONFLICT, and the id
an INSERT made."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import CursorResult, Table

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql.dml import Insert as PostgresInsert
    from sqlalchemy.dialects.sqlite.dml import Insert as SQLiteInsert

# Both dialects' Insert have `on_conflict_do_nothing` and `on_conflict_do_update`.
ConflictInsert = Callable[[Table], "SQLiteInsert | PostgresInsert"]


def conflict_insert(dialect: str) -> ConflictInsert | None:
    """The `insert` of `dialect` (an engine's `dialect.name`) that has ON CONFLICT (SQLite and
    PostgreSQL), or None: another database's callers take a slower path. Imported by the
    dialect's name: the PostgreSQL dialect package is ~2 MB a bot on SQLite does not need (and
    the engine has already imported its own dialect)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    return None


def inserted_id(result: CursorResult[Any]) -> int:
    """The primary key the single-row INSERT that gave `result` made."""
    key = result.inserted_primary_key
    if key is None:  # SQLAlchemy has it for every INSERT; None is for other statements
        raise TypeError("inserted_id: the result of an INSERT, not of another statement")
    return int(key[0])
