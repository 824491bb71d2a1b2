"""A turn's transaction in as few network round trips as its reads allow (PostgreSQL).

With the database 2 ms away, every statement of a turn waited for its own round trip: about 23
per tool turn (a BEGIN and a COMMIT per transaction, and each statement between), all of it
holding a storage thread and waking it once per answer (bench/README.md, "Capacity").
PostgreSQL's pipeline mode (libpq 14+, psycopg 3.1+) sends statements without waiting for the
answer to the one before; the server runs them in order. `piped_begin` is `engine.begin()` in
that mode: BEGIN, the statements and COMMIT go out together and the thread waits once at the
end, or also where the transaction reads a result before it can go on (`Later.value`, which
waits only for what was sent before it).

psycopg starts a transaction of its own with a BEGIN whose answer it waits for; the
connection is switched to autocommit for the block and the BEGIN sent as a statement instead
(the transaction is as explicit as before: BEGIN ... COMMIT on the server). A statement that
fails makes the server skip everything after it up to the end of the pipeline, COMMIT
included: the block then rolls back and raises the error as SQLAlchemy's exception (a lock
conflict is an `OperationalError`, which `Storage.run` retries, as outside the pipeline).

Only `Prepared` statements may run inside (chatfn/storage/prepared.py): Core's execution reads a
result the moment it has sent the statement, before the pipeline has it. A Core statement
inside raises at once (`_no_core`) instead of failing later with a misleading error.
Elsewhere (SQLite: a local file has no round trip to save; other drivers) the storage uses
`engine.begin()`, and a `Later` holds its value at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from chatfn.storage.driver_errors import as_sqlalchemy

# `Connection.info` keys: the psycopg Pipeline a block is sending into, and the results sent
# in it that are still to be read.
PIPE = "chatfn_pipeline"
LATER = "chatfn_later"


def can_pipe(engine: Engine) -> bool:
    """PostgreSQL through psycopg with a libpq that has pipeline mode."""
    if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg":
        return False
    import psycopg

    return bool(psycopg.Pipeline.is_supported())


def install(engine: Engine) -> None:
    """Refuse Core statements inside a pipelined block of this engine (see the module
    docstring)."""
    event.listen(engine, "before_cursor_execute", _no_core)


def _no_core(conn: Connection, *_args: Any) -> None:
    if conn.info.get(PIPE) is not None:
        raise RuntimeError(
            "a Core statement inside a pipelined transaction (chatfn/storage/pipeline.py): "
            "run it through storage.prepared.Prepared"
        )


def pipeline_of(conn: Connection) -> Any:
    """The pipeline `conn` is sending into, or None."""
    return conn.info.get(PIPE)


class Pipe:
    """A psycopg Pipeline (None once the block has left it), and whether statements were sent
    since its last Sync (`Prepared` sets `sent`)."""

    __slots__ = ("pipeline", "sent")

    def __init__(self, pipeline: Any) -> None:
        self.pipeline: Any = pipeline
        self.sent = True  # the BEGIN

    def sync(self) -> None:
        """Wait for the answers to everything sent (before reading one). A Sync, not psycopg's
        Flush: the server then reports the session idle in a transaction, so
        `idle_in_transaction_session_timeout` (a cluster worker's, chatfn/runtime/cluster.py) still
        ends the transaction of a process stopped while it waits, and frees its locks (the
        lease row's among them). After the block every answer is in: nothing to wait for."""
        if self.sent and self.pipeline is not None:
            self.pipeline.sync()
            self.sent = False


@contextlib.contextmanager
def piped_begin(engine: Engine) -> Iterator[Connection]:
    """`engine.begin()` in pipeline mode, for an engine that has it (`can_pipe`); see the
    module docstring. Rolls back when the block or a statement raises."""
    with engine.connect() as conn:
        dbapi_conn: Any = conn.connection.dbapi_connection
        try:
            dbapi_conn.autocommit = True  # no BEGIN of psycopg's own, which waits for its answer
            with dbapi_conn.pipeline() as pipeline:
                control = dbapi_conn.cursor()
                control.execute("BEGIN")
                conn.info[PIPE] = pipe = Pipe(pipeline)
                unread: list[Later] = []
                conn.info[LATER] = unread
                try:
                    yield conn
                finally:
                    pipe.pipeline = None
                    conn.info.pop(PIPE, None)
                    conn.info.pop(LATER, None)
                control.execute("COMMIT")
            # Leaving the pipeline waited for every answer, COMMIT's too. What the block sent
            # and did not read is read now, while the connection is still this thread's:
            # a value read after the block comes from here.
            for later in unread:
                later.value()
        except conn.dialect.loaded_dbapi.Error as exc:
            _roll_back(dbapi_conn)
            raise as_sqlalchemy(conn, exc, "(pipelined transaction)") from exc
        except BaseException:
            _roll_back(dbapi_conn)
            raise
        finally:
            if not dbapi_conn.closed:
                dbapi_conn.autocommit = False


def later(conn: Connection, read: Any) -> Later:
    """A result sent into `conn`'s pipeline, read by `read()` when wanted (and at the latest
    when the block ends)."""
    pending = Later(read=read)
    conn.info[LATER].append(pending)
    return pending


def _roll_back(dbapi_conn: Any) -> None:
    """End the server's transaction when what was sent did not commit (a failed statement,
    or the block raised after sending): a connection goes back to the pool idle."""
    with contextlib.suppress(Exception):
        dbapi_conn.rollback()


class Later:
    """A statement's result, read when it is wanted: on a pipelined connection `value()` waits
    for the answers sent before it (all of them in one round trip); elsewhere the value is
    there already."""

    __slots__ = ("_read", "_value", "_done")

    def __init__(self, value: Any = None, read: Any = None) -> None:
        self._value = value
        self._read = read
        self._done = read is None

    def value(self) -> Any:
        if not self._done:
            self._value = self._read()
            self._read = None
            self._done = True
        return self._value
