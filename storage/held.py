"""One SQLAlchemy Connection per storage thread, kept open from one transaction to the next
(SQLite files; `Storage._begin`).

Why: `engine.begin()` checks a connection out of SQLAlchemy's pool and back in (with the pool's
reset, a ROLLBACK) for every transaction, and with several storage threads each transaction
could land on another connection whose page cache the previous one's writes had made stale.
On the pipeline benchmark that was about a third of the storage thread's CPU; one thread with
one held connection took a message from 3.38-3.48 to 3.07-3.12 CPU ms (bench/README.md,
"Follow-up ... one storage thread on SQLite").

Only the storage threads hold one (`adopt` is the pool's initializer): a caller on any other
thread (`Storage.blocking` before a loop runs) gets a pooled transaction as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from sqlalchemy.engine import Connection, Engine


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
        rolled back when it raises (as `engine.begin()`)."""
        if not getattr(self._local, "adopted", False):
            with self.engine.begin() as conn:
                yield conn
            return
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._open(conn)
        with conn.begin():
            yield conn

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
