"""One bot process per database: a second `chatfn run` on the same database refuses to start.

Two single processes on one database both ran, with no warning: each took part of the events
(each its own channels' messages, both resuming the same cut turns, both draining one outbox).
A single process (no `broker.url`: a cluster's gateways and workers share their database by
design) now holds a lock for as long as it runs, and a second one exits with one line naming
the first: its pid, host and start time.

- SQLite: an exclusive `flock` on `<database file>.lock`, beside the database. The kernel
  releases it when the process ends, however it ends (a SIGKILL, a crash), so a stale lock
  cannot exist: the file that stays behind is not the lock and may be deleted at any time. The
  file holds the holder's pid, host and start time, for the message. An `flock` does not hold
  across machines on a network file system; neither does SQLite's own locking.
- PostgreSQL: a session advisory lock (`pg_try_advisory_lock`) on a connection of its own,
  which the server releases when the connection ends (the process gone, its TCP connection
  closed). The holder is named from `pg_stat_activity`: its `application_name` carries the pid
  and host, `backend_start` the time.

`chatfn check` and `chatfn migrate` are not bot processes and take no lock; the TestBot harness
(chatfn.testing) builds a Bot without `chatfn run` and takes none either.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from loguru import logger
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from chatfn.storage.db import StorageError

# The advisory lock's key: "chatfn" in ASCII. Advisory locks are scoped to their database.
PG_LOCK_KEY = 0x63686174666E
APP_PREFIX = "chatfn bot "
# Who holds the key in this database: its session's name (pid@host) and start.
HOLDER = """
SELECT a.application_name, a.backend_start, a.client_addr
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND (l.classid::bigint << 32 | l.objid::bigint) = :k
"""


class DatabaseInUse(StorageError):
    """Another bot process holds the database (the message names it)."""


class ProcessLock(Protocol):
    def release(self) -> None: ...


class _NoLock:
    def release(self) -> None:
        return None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _refusal(where: str, pid: Any, host: Any, since: Any) -> DatabaseInUse:
    who = f"pid {pid or '?'} on host {host or '?'}, since {since or '?'}"
    return DatabaseInUse(
        f"the database {where} is in use by another bot process ({who}); one bot process per "
        "database: stop that one first (several processes need a cluster: --role and "
        "broker.url)"
    )


class FileLock:
    """An exclusive flock on `path`, held until `release` or the end of the process."""

    def __init__(self, path: Path, database: str) -> None:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder()
            self.release()
            raise _refusal(database, *holder) from None
        except BaseException:
            self.release()
            raise
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(info).encode(), 0)

    def _holder(self) -> tuple[Any, Any, Any]:
        """(pid, host, since) as the holder wrote them; unknown while it is still writing."""
        assert self._fd is not None
        try:
            data = json.loads(os.pread(self._fd, 4096, 0) or b"{}")
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        return data.get("pid"), data.get("host"), data.get("since")

    def release(self) -> None:
        """Closing the descriptor releases the lock (the file stays: it is not the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class AdvisoryLock:
    """A PostgreSQL session advisory lock on a connection of its own."""

    def __init__(self, url: str, safe_url: str) -> None:
        from sqlalchemy import create_engine, text
        from sqlalchemy.pool import NullPool

        name = f"{APP_PREFIX}{os.getpid()}@{socket.gethostname()}"[:63]
        # Raises ImportError without the driver (the `postgres` extra).
        self._engine = create_engine(
            url, poolclass=NullPool, connect_args={"application_name": name}
        )
        self._conn: Any = None
        try:
            conn = self._engine.connect()
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_LOCK_KEY})
            if got.scalar():
                conn.commit()  # the session lock outlives the transaction; none stays open
                self._conn = conn
                return
            holder = conn.execute(text(HOLDER), {"k": PG_LOCK_KEY}).first()
            conn.close()
        except Exception as exc:
            self.release()
            raise StorageError(
                f"storage.url {safe_url}: cannot take the bot's lock: {exc}"
            ) from exc
        self.release()
        pid = host = since = None
        if holder is not None:
            app, started, addr = holder
            if str(app).startswith(APP_PREFIX):
                pid, _, host = str(app)[len(APP_PREFIX) :].partition("@")
            host = host or addr
            since = started.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if started else None
        raise _refusal(safe_url, pid, host, since)

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception as exc:  # the server ends the session, and the lock, anyway
                logger.debug("closing the bot's lock connection: {}", exc)
            self._conn = None
        self._engine.dispose()


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite URL (resolved, so two spellings of one file agree); None
    for an in-memory database or a URI filename."""
    parsed = make_url(url)
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser().resolve()


def take(url: str) -> ProcessLock:
    """The lock of a single bot process on the database at `url`; raises DatabaseInUse,
    naming the holder, when another process has it. A URL the lock cannot use (malformed, a
    driver not installed) takes none: the storage says what is wrong with it next."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return _NoLock()
    dialect = parsed.get_backend_name()
    if dialect == "sqlite":
        path = sqlite_file(url)
        if path is None:
            return _NoLock()  # in memory: no other process can open it
        try:
            return FileLock(path.with_name(path.name + ".lock"), str(path))
        except ImportError:  # no fcntl (Windows): not checked there
            logger.debug("no fcntl here: a second bot on {} is not refused", path)
            return _NoLock()
        except OSError as exc:  # a folder the bot cannot write to: SQLite will say so itself
            logger.warning("the lock beside {} could not be taken ({}): not checked", path, exc)
            return _NoLock()
    if dialect == "postgresql":
        try:
            return AdvisoryLock(url, parsed.render_as_string(hide_password=True))
        except ImportError:  # the postgres extra is missing: the storage names it
            return _NoLock()
    return _NoLock()
