"""A driver's error as SQLAlchemy's, for the statements that run on the driver itself
(chatfn/storage/prepared.py's cursor, chatfn/storage/pipeline.py's pipelined transaction,
chatfn/storage/held.py's
commit): callers and `Storage.run` see the exception Core would have raised (an
`OperationalError` for a lock conflict, which `Storage.run` retries; `IntegrityError`; ...),
and a connection the error shows to be gone is invalidated so the pool does not hand it out
again."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError


def as_sqlalchemy(
    conn: Connection, exc: Exception, statement: str, params: Any = None, cursor: Any = None
) -> DBAPIError:
    dialect = conn.dialect
    if dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor):
        conn.invalidate(exc)
    return DBAPIError.instance(  # type: ignore[no-any-return]
        statement,
        params,
        exc,
        dialect.loaded_dbapi.Error,  # type: ignore[attr-defined]
        dialect=dialect,
        connection_invalidated=conn.invalidated,
    )
