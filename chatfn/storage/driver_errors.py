"""A driver's error as SQLAlchemy's, for the statements that run on the driver itself
(chatfn/storage/prepared.py's cursor, chatfn/storage/pipeline.py's pipelined transaction,
chatfn/storage/held.py's
commit): callers and `Storage.run` see the exception Core would have raised (an
`OperationalError` for a lock conflict, which `Storage.run` retries; `IntegrityError`; ...),
and a connection the error shows to be gone is invalidated so the pool does not hand it out
again."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError


def as_sqlalchemy(
    conn: Connection, exc: Exception, statement: str, params: Any = None, cursor: Any = None
) -> Exception:
    """`exc`, raised by the driver, as SQLAlchemy's exception for it: a `DBAPIError` subclass
    (or a `StatementError` when `exc` is SQLAlchemy's own)."""
    dialect = conn.dialect
    # The driver's exception is its DB-API module's Error, which SQLAlchemy types nominally.
    driver_error = cast(DBAPIModule.Error, exc)
    if dialect.is_disconnect(driver_error, conn.connection.dbapi_connection, cursor):
        conn.invalidate(exc)
    wrapped = DBAPIError.instance(
        statement,
        params,
        exc,
        dialect.loaded_dbapi.Error,
        dialect=dialect,
        connection_invalidated=conn.invalidated,
    )
    # `instance` returns what it made, or `exc` itself: an Exception either way.
    return cast(Exception, wrapped)
