"""One SQLAlchemy Connection per storage thread, kept open from one transaction to the next
(SQLite files; `Storage._begin`).

Why: `engine.begin()` checks a connection out of SQLAlchemy's pool and back in (with the pool's
reset, a ROLLBACK) for every transaction, and with several storage threads each transaction
could land on another connection whose page cache the previous one's writes had made stale.
One thread holding one connection took the pipeline benchmark from 1.07-1.12x the raw SDK
loop's CPU to 1.05-1.06x (bench/README.md, "Follow-up ... one storage thread on SQLite").

Only the storage threads hold one (`adopt` is the pool's initializer): a caller on any other
thread (`Storage.blocking` before a loop runs) gets a pooled transaction as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy.engine import Connection, Engine

from chatfn.storage.driver_errors import as_sqlalchemy


class HeldConnections:
    """This thread's open Connection, made on first use and replaced once it was closed or
    invalidated (a driver error that lost it); all of them closed by `close()`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._local = threading.local()
        self._all: list[Connection] = []
        self._lock = threading.Lock()

    def adopt(self) -> None:
        """Mark the calling thread as one that may hold a connection (a storage thread)."""
        self._local.adopted = True

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        """A transaction on this thread's held connection: committed when the block ends,
        rolled back when it raises (as `engine.begin()`). The driver's own transaction (the
        sqlite3 module begins one before the first write) is committed on the driver
        connection, not through a SQLAlchemy Transaction: the turn's statements are `Prepared`
        ones on the cursor, and SQLAlchemy's begin/commit path was another 0.06 CPU ms a
        message; a Core statement in the block starts SQLAlchemy's transaction, which is then
        committed as usual. Listeners of SQLAlchemy's `commit` and `rollback` events are called
        either way (tests count a turn's commits with them)."""
        grouped: Connection | None = getattr(self._local, "group", None)
        if grouped is not None:
            yield grouped  # inside `group`: committed (or rolled back) with the whole group
            return
        if not getattr(self._local, "adopted", False):
            with self.engine.begin() as pooled:
                yield pooled
            return
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._open(conn)
        dbapi = conn.connection.dbapi_connection
        try:
            yield conn
            if conn.in_transaction():  # a Core statement began SQLAlchemy's transaction
                conn.commit()
            else:
                # SQLAlchemy's `commit` event, fired as its own commit fires it.
                if conn._has_events or conn.engine._has_events:
                    conn.dispatch.commit(conn)
                _driver(conn, dbapi.commit, "COMMIT")  # type: ignore[union-attr]
        except BaseException:
            _roll_back(conn, dbapi)
            raise

    @contextlib.contextmanager
    def group(self) -> Iterator[Connection]:
        """One transaction for several (group commit, `Storage._run_group`): each `begin` in
        the block is part of it, committed once when the block ends, and all of it rolled back
        when the block raises."""
        with self.begin() as conn:
            self._local.group = conn
            try:
                yield conn
            finally:
                self._local.group = None

    def _open(self, old: Connection | None) -> Connection:
        conn = self.engine.connect()
        with self._lock:
            if old is not None:
                old.close()
                self._all.remove(old)
            self._all.append(conn)
        self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close every held connection (after the storage threads stopped: none is in use)."""
        with self._lock:
            held, self._all = self._all, []
        for conn in held:
            conn.close()


def _driver(conn: Connection, call: Callable[[], None], what: str) -> None:
    """A driver call, its error raised as SQLAlchemy's (chatfn/storage/driver_errors.py)."""
    try:
        call()
    except conn.dialect.loaded_dbapi.Error as exc:
        raise as_sqlalchemy(conn, exc, what) from exc


def _roll_back(conn: Connection, dbapi: Any) -> None:
    """End a failed transaction; a connection that cannot even roll back is invalidated (and
    replaced by the next transaction on this thread)."""
    if conn.invalidated:
        return
    try:
        if conn.in_transaction():
            conn.rollback()
        else:
            if conn._has_events or conn.engine._has_events:
                conn.dispatch.rollback(conn)
            _driver(conn, dbapi.rollback, "ROLLBACK")
    except Exception as exc:  # noqa: BLE001 - the transaction's own error is what is raised
        conn.invalidate(exc)
