"""The bot's database: SQLAlchemy 2.0, a SQLite file by default, any SQLAlchemy URL otherwise.

The methods are synchronous, and none of them may run on the event loop: `run()` is the one
asynchronous interface every caller goes through (`await storage.run(storage.add_message,
...)`; `run_aside()`, the same beside the turns, for the admin console's long reads). It
executes the function on a storage thread (chatfn/storage/threads.py), one hop per call, and retries
a busy or locked database within a bounded time: a PostgreSQL across a network, or
another process holding the SQLite write lock for seconds, must neither freeze the event loop
(other chats, /healthz) nor lose the message. Tests enforce it: the pytest plugin fails a test
in which a statement runs on a running event loop's thread (chatfn/storage/loop_guard.py).

Why a thread pool and not SQLAlchemy's asyncio extension: measured by
bench/bench_storage_hops.py (bench/README.md, "Storage off the event loop"), a transaction
through the pool costs the process about 1.6x the CPU of the same transaction on the loop,
through the asyncio extension (aiosqlite, psycopg async) 2.5-4x, and it needs no second driver.
What keeps the hops few is that a turn's writes are batched: `begin_turn` (the incoming
message, its limit counts and the reads the turn needs) and `write_turn` (replies, tool-call
rows, usage rows, counters, delivery marks, the handled mark) are one transaction each.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import bindparam, create_engine, event, func, select, text
from sqlalchemy.engine import Connection, Engine, Row, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import StaticPool

from chatfn.common.config import ConfigError
from chatfn.common.extras import POSTGRES, import_extra
from chatfn.storage import fates, pipeline, schema, schema_child
from chatfn.storage.chat_state import (
    ChatState,
    Check,
    Override,
    Summary,
    add_counts_in,
    add_many_in,
    add_usage_in,
    overrides_of,
    send_take,
    summary_of,
    take_sent,
)
from chatfn.storage.cluster import ClusterStore
from chatfn.storage.fencing import Fenced, LeaseStore
from chatfn.storage.fit import fit
from chatfn.storage.held import HeldConnections
from chatfn.storage.inserts import conflict_insert, inserted_id
from chatfn.storage.models import INCOMING_WHERE, messages_table, tool_calls_table
from chatfn.storage.outbox import OutboxStore, add_later, mark_delivered_in
from chatfn.storage.pipeline import Later, can_pipe, piped_begin, pipeline_of
from chatfn.storage.prepared import Prepared
from chatfn.storage.schema import SchemaState
from chatfn.storage.threads import StorageThreads

R = TypeVar("R")
P = ParamSpec("P")
# Storage threads (and pooled connections) of a process on a network database (PostgreSQL).
NETWORK_THREADS = 16
# Storage threads on SQLite: one, holding one connection (chatfn/storage/held.py). SQLite has one
# writer at a time, and a turn's statements take well under a millisecond of it: more threads
# only contended for that lock and for the GIL, and cost CPU in hops and cold page caches
# (bench/README.md, "Follow-up ... one storage thread on SQLite").
SQLITE_THREADS = 1
# Threads of `Storage.run_aside` on a SQLite file: long reads (the admin console's pages) that
# must not hold up the one storage thread.
ASIDE_THREADS = 2
# KiB of SQLite page cache per connection (`_sqlite_pragmas`; SQLite's default is 2000). Half
# the default: in the memory soak the caches filled as the file grew (bench/README.md, "Issue
# 27"), and the hot pages of a turn (the newest rows of a few tables) fit in far less.
SQLITE_CACHE_KIB = 1024


class StorageError(Exception):
    """The database cannot be opened or written; the message says which URL and why."""


@dataclass(slots=True, frozen=True)
class StoredMessage:
    id: int
    role: str
    sender_id: str
    sender_name: str
    text: str
    created_at: datetime
    is_group: bool
    # Whether a user message addressed the bot (None: stored without saying, as before
    # migration 0005): a group's unaddressed ones are its ambient context.
    is_at_bot: bool | None = None


@dataclass(slots=True)
class TurnStart:
    """What `Storage.begin_turn` found and did in its one transaction."""

    stored_id: int | None  # the incoming message's history row
    refused: Check | None  # the first limit check that failed (then nothing was counted)
    told: bool  # `refused` is the first refusal of its window: the user is told once
    overrides: dict[str, Override]
    history: list[StoredMessage] | None  # the window before the message (None: not read)
    history_limit: int
    count: int | None  # messages before it (after the reset point), when the window is full
    checked: bool = False  # the limit checks were counted here
    # What `replan` made of the chat's overrides (the checks then counted), when it ran.
    plan: Any = None
    # The chat's compacted history (`summary=True`); `after` is the row the history window and
    # its count start after (the `/reset` point, or the summary's end when it is later).
    summary: Summary | None = None
    summary_read: bool = False
    after: int | None = None


@dataclass(slots=True)
class TurnPlan:
    """What a turn counts and reads in `begin_turn`, made again from the chat's overrides when
    one of them changes it (a chat's own limits or `respond_in_groups`, set in the console)."""

    checks: list[Check] | None
    notice: Any
    history_limit: int
    named: Any  # the caller's own description of the checks, handed back in TurnStart.plan


@dataclass(slots=True)
class TurnWrite:
    """Everything one point of a turn writes, as one transaction (`Storage.write_turn`): its
    messages out (outbox + history rows), tool-call audit rows, usage rows, limit counter
    additions, the delivery marks waiting to be written (any turn's), and the handled mark
    that ends the turn."""

    platform: str = ""
    chat_id: str = ""
    # (payload, history row values, key) of each message out, in order.
    outgoing: list[tuple[dict[str, Any], dict[str, Any], str | None]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    counts: list[tuple[Any, int]] = field(default_factory=list)  # (Counter, amount)
    delivered: list[int] = field(default_factory=list)
    # (message id, worker, replies) of the finished turn (handled_messages).
    handled: tuple[str, str, int] | None = None
    # The message's fate (a `message_fates` row's values: chatfn/storage/fates.py).
    fate: dict[str, Any] | None = None

    def __bool__(self) -> bool:
        return bool(
            self.outgoing
            or self.tool_calls
            or self.usage
            or self.counts
            or self.delivered
            or self.handled
            or self.fate
        )


# Called inside every transaction that writes for a chat (`begin_turn`, `write_turn`, and the
# single writes of a chat's rows), before its statements, with (connection, platform, chat
# id): a cluster worker's fencing check (is it still the owner of the chat's partition?
# chatfn/storage/fencing.py). Raising rolls it all back (`Storage.set_fence`).
Fence = Callable[[Connection, str, str], None]


def _require_driver(url: str) -> None:
    """PostgreSQL through psycopg is the `postgres` extra: a missing one stops the bot with the
    pip command (MissingExtra), not a traceback from deep in SQLAlchemy."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # create_engine reports the malformed URL
    if parsed.get_backend_name() != "postgresql":
        return
    if parsed.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None:
        # No driver named: SQLAlchemy would pick psycopg2, which chatfn does not install.
        raise ConfigError(
            "storage.url postgresql://... names no driver: write postgresql+psycopg://... "
            '(pip install "chatfn[postgres]")'
        )
    if parsed.get_driver_name() == "psycopg":
        import_extra(POSTGRES)


def _prepare_sqlite_path(url: str) -> None:
    """Create the directory of a relative or absolute SQLite file so `sqlite:///data/x.db` works
    on a fresh checkout."""
    prefix = "sqlite:///"
    if url.startswith(prefix):
        path = url[len(prefix) :]
        if path and path != ":memory:" and not path.startswith("file:"):
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _to_utc(dt: datetime) -> datetime:
    """Every stored time is UTC: SQLite keeps no offset, so a time in another zone would be
    read back shifted by its offset."""
    return dt.astimezone(UTC) if dt.tzinfo else dt.replace(tzinfo=UTC)


def _utc(dt: datetime) -> datetime:
    # SQLite drops tz info; every stored time is UTC.
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def is_busy(exc: BaseException) -> bool:
    """A transient "someone else holds the lock" error (SQLite busy/locked, PostgreSQL lock or
    serialization conflicts), worth retrying; anything else is a real failure."""
    text_ = str(exc).lower()
    return isinstance(exc, OperationalError) and any(
        s in text_
        for s in ("database is locked", "database is busy", "deadlock", "could not serialize")
    )


class Storage:
    def __init__(self, url: str, *, busy_retry: float = 30.0) -> None:
        self.url = url
        # Seconds `run()` keeps retrying a busy or locked database before giving up.
        self.busy_retry = busy_retry
        # An in-memory SQLite database exists once per connection: one connection, shared by
        # the threads (StaticPool), used by one thread at a time.
        memory = url.startswith("sqlite") and (":memory:" in url or url == "sqlite://")
        self._memory = memory
        extra: dict[str, Any] = {}
        if memory:
            extra = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        # SQLite has one writer at a time (SQLITE_THREADS); a network database overlaps round
        # trips: with 2 ms to PostgreSQL a turn holds a thread ~40 ms (bench/README.md,
        # "Capacity"), so 200 chats at once need more than a few. One connection per thread
        # (created on use).
        threads = SQLITE_THREADS if url.startswith("sqlite") else NETWORK_THREADS
        if not url.startswith("sqlite"):
            extra = {"pool_size": threads, "max_overflow": 4}
        self.fence: Fence | None = None
        _require_driver(url)
        try:
            _prepare_sqlite_path(url)
            self.engine: Engine = create_engine(url, **extra)
        except Exception as exc:
            raise StorageError(f"storage.url {url!r}: {exc}") from exc
        # A turn's transactions on SQLite run on the storage thread's own open connection.
        self._held: HeldConnections | None = None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
            self._held = HeldConnections(self.engine)
        # Group commit on SQLite (`_run_group`): how many transactions were committed for a
        # group of turns' writes, how many writes they held, and how many groups failed and
        # were run again one by one.
        self.group_commits = 0
        self.group_members = 0
        self.group_retries = 0
        self._grouped: tuple[Callable[..., Any], ...] = ()
        if self._held is not None:
            self._grouped = (self.begin_turn, self.write_turn)
        self._threads = StorageThreads(
            threads,
            "storage",
            initializer=self._held.adopt if self._held is not None else None,
            grouper=self._run_group if self._held is not None else None,
        )
        # `run_aside`'s threads: their own on a SQLite file (pooled connections, WAL lets them
        # read while the storage thread writes); an in-memory database has one connection.
        self._aside = self._threads
        if self._held is not None and not memory:
            self._aside = StorageThreads(ASIDE_THREADS, "storage-aside")
        self._pipelined = can_pipe(self.engine)
        if self._pipelined:
            pipeline.install(self.engine)
        # Overrides, usage rows and limit counters (chatfn/storage/chat_state.py).
        self.chat_state = ChatState(self.engine)
        self.cluster = ClusterStore(self.engine)
        self.outbox = OutboxStore(self.engine)
        self.leases = LeaseStore(self.engine)

    def set_fence(self, fence: Fence | None) -> None:
        """Check `fence(connection, platform, chat id)` inside every transaction that writes
        what a chat sees (its incoming message, the bot's messages and their history rows, the
        turn's end and audit rows), before its statements; raising rolls it back. A cluster
        worker sets `storage.fencing.check_lease` (a turn of a partition it lost writes
        nothing). Usage rows and limit counts are not fenced: they record model calls that were
        made, whoever made them. On PostgreSQL the transaction is pipelined
        (chatfn/storage/pipeline.py): the fence's statements must be `Prepared` ones, read before it
        returns."""
        self.fence = fence
        self.outbox.fence = fence
        self.cluster.fence = fence

    async def run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`fn(*args, **kwargs)` off the event loop, retried with backoff while the database
        is busy or locked, for at most `busy_retry` seconds. Raises StorageError after that
        (or at once for any other database error)."""
        grouped = fn in self._grouped
        call = functools.partial(fn, *args, **kwargs)
        return await self._run_on(self._threads, fn, call, grouped)

    async def run_aside(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`run`, for reads that may take long and that no turn's transaction needs (the admin
        console's pages: an overview of a week reads every message of it, ~2 s over 100 000
        messages; GET /v1/history pages; knowledge searches): on SQLite its own threads and
        pooled connections (`ASIDE_THREADS`), so that it neither holds up the storage thread
        the turns queue on nor waits behind them; elsewhere the same threads as `run`."""
        return await self._run_on(self._aside, fn, functools.partial(fn, *args, **kwargs))

    async def _run_on(
        self,
        threads: StorageThreads,
        fn: Callable[..., object],
        call: Callable[[], R],
        grouped: bool = False,
    ) -> R:
        deadline = time.monotonic() + self.busy_retry
        delay = 0.05
        while True:
            try:
                # With the caller's context variables: the lease a write is fenced with
                # (chatfn/storage/fencing.py) travels with the turn into the storage thread.
                return await threads.run(call, grouped)
            except Fenced:
                raise
            except Exception as exc:
                if not is_busy(exc) or time.monotonic() + delay > deadline:
                    raise StorageError(f"{getattr(fn, '__name__', 'write')}: {exc}") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _run_group(
        self, members: list[Callable[[], Any]]
    ) -> list[tuple[Any, BaseException | None]]:
        """Group commit (SQLite; chatfn/storage/threads.py): the turns' writes (`begin_turn`,
        `write_turn`, many chats') queued while the storage thread was busy, in one transaction
        and one commit. A lone one runs as it would alone. When any member raises, or the
        commit fails, the whole group is rolled back and each member is run again in a
        transaction of its own: only the one that fails alone fails, and no caller hears of a
        write before the commit that holds it."""
        if len(members) > 1 and self._held is not None:
            try:
                with self._held.group():
                    values = [member() for member in members]
            except BaseException:  # noqa: BLE001 - each member is run again and gets its own
                self.group_retries += 1
            else:
                self.group_commits += 1
                self.group_members += len(members)
                return [(value, None) for value in values]
        return [_alone(member) for member in members]

    def blocking(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`fn(*args, **kwargs)` for a synchronous caller: at once when no event loop runs on
        this thread, else on a storage thread while the caller waits. Only for start-up work
        (the schema check when a Bot is built inside a running loop, before it takes any
        message): the loop is blocked as long as the call takes, but no statement runs on it."""
        if asyncio._get_running_loop() is None:
            return fn(*args, **kwargs)
        return self._threads.call(functools.partial(fn, *args, **kwargs))

    def create_tables(self) -> None:
        """A bot's start: bring the schema to the newest revision (Alembic;
        chatfn/storage/schema.py): every table, on SQLite or PostgreSQL, whether the database
        is empty, current, or made by a version from before migrations. What is pending runs in
        a child process (chatfn/storage/schema_child.py), so the bot's own never imports
        Alembic; an in-memory database, or a process that asked for it, migrates in process."""
        if self._memory or schema_child.in_process():
            self.migrate()
            return
        try:
            if not schema.at_head(self.engine):
                schema_child.upgrade(self.url)
        except Exception as exc:
            raise self._migration_error(exc) from exc

    def migrate(self) -> SchemaState:
        """Run pending migrations in this process; returns the state found before."""
        try:
            return schema.upgrade(self.engine)
        except Exception as exc:
            raise self._migration_error(exc) from exc

    def _migration_error(self, exc: Exception) -> StorageError:
        return StorageError(f"cannot migrate the database at {self.safe_url}: {exc}")

    def schema_state(self) -> SchemaState:
        return schema.state(self.engine)

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden, for logs and the health check."""
        return self.engine.url.render_as_string(hide_password=True)

    def check_writable(self) -> None:
        """Write and roll back a row: proves the database accepts writes."""
        with self.engine.connect() as conn:
            trans = conn.begin()
            conn.execute(
                messages_table.insert().values(
                    platform="check",
                    chat_id="check",
                    is_group=False,
                    role="user",
                    sender_id="check",
                    sender_name="",
                    text="",
                    message_id="",
                    created_at=datetime.now(UTC),
                )
            )
            trans.rollback()
            conn.execute(text("SELECT 1"))

    # -- a turn's two transactions ------------------------------------------------------
    def begin_turn(
        self,
        message: dict[str, Any] | None,
        *,
        platform: str,
        chat_id: str,
        stored_id: int | None = None,
        checks: list[Check] | None = None,
        notice: Any = None,
        history_limit: int = 0,
        reset_key: str = "reset",
        delivered: list[int] | None = None,
        replan: Callable[[dict[str, Override]], TurnPlan | None] | None = None,
        summary: bool = False,
    ) -> TurnStart:
        """The start of a turn, one transaction: store the incoming `message` (messages_table
        values; None when it is stored already as `stored_id`, a resumed turn), count it
        against the limit `checks` (all or nothing, `ChatState.take`), and when one fails
        count `notice(failed check)`'s counter once ("tell once per window"); read the chat's
        overrides and the `history_limit` messages before it (after the `reset_key`
        override's row id) with their count. `delivered`: delivery marks waiting to be
        written (any chat's) go in the same commit. `replan(overrides)`: called when the chat
        has overrides; a TurnPlan it returns replaces `checks`, `notice` and `history_limit`
        (still one transaction: the overrides are read first). `summary`: read the chat's
        compacted history too (function_calls/compaction.py), and start the window after its
        end (a summary that ends before the reset point is not the chat's any more: not
        returned)."""
        with self._begin() as conn:
            if self.fence is not None:
                self.fence(conn, platform, chat_id)
            # Sent before anything is read: on PostgreSQL they go out together with the BEGIN,
            # and the overrides' answer brings theirs (chatfn/storage/pipeline.py). The summary is
            # read whenever asked for, before `replan` says whether the turn wants it.
            stored = add_message_later(conn, message) if message is not None else None
            mark_delivered_in(conn, delivered or [])
            overrides_sent = self.chat_state.overrides_later(conn, platform, chat_id)
            summary_sent = (
                self.chat_state.summary_later(conn, platform, chat_id) if summary else None
            )
            overrides = overrides_of(overrides_sent.value())
            if stored is not None:
                stored_id = stored.value()
            planned = replan(overrides) if replan is not None and overrides else None
            if planned is not None:
                checks, notice = planned.checks, planned.notice
                history_limit = planned.history_limit
            reset = overrides.get(reset_key)
            after = int(reset.value) if reset is not None else None
            summary = summary and history_limit > 0  # (a replan may have changed the limit)
            found = summary_of(summary_sent.value()) if summary and summary_sent else None
            if found is not None and after is not None and found.upto_id <= after:
                found = None  # older than the reset: not shown (`compaction.current_summary`)
            if found is not None:
                after = found.upto_id
            # The second round trip: the limit counts, the history window and (pipelined, so
            # it costs no wait of its own) the chat's count.
            taking = send_take(conn, checks) if checks else None
            history_sent = count_sent = None
            if history_limit > 0:
                history_sent = _recent_later(
                    conn, platform, chat_id, history_limit, stored_id, after
                )
                if pipeline_of(conn) is not None:
                    count_sent = _count_later(conn, platform, chat_id, stored_id, after)
            refused = take_sent(conn, checks, taking) if checks and taking is not None else None
            told = False
            if refused is not None and notice is not None:
                told = add_counts_in(conn, [(notice(refused), 1)])[0] == 1
            history: list[StoredMessage] | None = None
            count: int | None = None
            if history_sent is not None:
                history = _stored_messages(history_sent.value())
                if len(history) < history_limit:
                    count = len(history)
                elif count_sent is not None:
                    count = int(count_sent.value() or 0)
                else:
                    count = _count_in(conn, platform, chat_id, stored_id, after)
        return TurnStart(
            stored_id,
            refused,
            told,
            overrides,
            history,
            history_limit,
            count,
            checks is not None,
            planned.named if planned is not None else None,
            found,
            summary,
            after,
        )

    def write_turn(self, batch: TurnWrite) -> list[tuple[int, str]]:
        """`batch` in one transaction; returns (event id, state) of each message out. A
        `handled` mark already recorded (another worker finished the turn) is left as it is,
        without rolling back the rest."""
        with self._begin() as conn:
            if self.fence is not None and batch.platform:
                self.fence(conn, batch.platform, batch.chat_id)
            sent = [
                add_later(conn, batch.platform, batch.chat_id, payload, history, key)
                for payload, history, key in batch.outgoing
            ]
            _INSERT_TOOL_CALL.executemany(conn, batch.tool_calls)
            add_usage_in(conn, batch.usage)
            if batch.counts:
                add_many_in(conn, batch.counts)
            mark_delivered_in(conn, batch.delivered)
            if batch.fate is not None:
                fates.record_in(conn, batch.fate)
            recorded = True
            if batch.handled is not None:
                message_id, worker, replies = batch.handled
                args = (batch.platform, batch.chat_id, message_id, worker, replies)
                recorded = self.cluster.finish_in(conn, *args)
        if not recorded and batch.handled is not None:  # no INSERT .. ON CONFLICT here
            self.cluster.finish(batch.platform, batch.chat_id, *batch.handled)
        return [later.value() for later in sent]

    def _begin(self) -> AbstractContextManager[Connection]:
        """A transaction of a turn: pipelined on PostgreSQL (chatfn/storage/pipeline.py). A fence
        (`set_fence`) must run its statements through `Prepared` (as `check_lease` does)."""
        if self._pipelined:
            return piped_begin(self.engine)
        if self._held is not None:
            return self._held.begin()
        return self.engine.begin()

    # -- history ---------------------------------------------------------------------------
    def add_message(
        self,
        *,
        platform: str,
        chat_id: str,
        role: str,
        sender_id: str,
        text: str,
        sender_name: str = "",
        is_group: bool = False,
        message_id: str = "",
        created_at: datetime | None = None,
        thinking: str | None = None,
        is_at_bot: bool | None = None,
    ) -> int:
        """Store a history row; returns its id. An incoming message (role "user" with a
        platform message id) is stored once per chat: stored again (a redelivery, a second
        worker) it returns the first row's id (unique key `ux_messages_incoming`)."""
        # A prebuilt insert: this runs twice per message (bench/README.md).
        values = {
            "platform": platform,
            "chat_id": chat_id,
            "role": role,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "text": text,
            "is_group": is_group,
            "message_id": message_id,
            "created_at": _to_utc(created_at) if created_at else datetime.now(UTC),
            "thinking": thinking,
            "is_at_bot": is_at_bot,
        }
        with self.engine.begin() as conn:
            if self.fence is not None:
                self.fence(conn, platform, chat_id)
            return self._add_message_in(conn, values)

    def set_message_text(self, platform: str, chat_id: str, row_id: int, text: str) -> None:
        """Replace a stored message's text: a voice message's note by its transcript
        (function_calls/voice.py), once it is known. The row is stored first, as every
        message is, so a failed transcription loses nothing."""
        with self.engine.begin() as conn:
            if self.fence is not None:
                self.fence(conn, platform, chat_id)
            conn.execute(
                messages_table.update().where(messages_table.c.id == row_id).values(text=text)
            )

    def _add_message_in(self, conn: Connection, values: dict[str, Any]) -> int:
        """Insert a history row (prebuilt statement; `created_at` defaults to now). An incoming
        message (role "user" with a platform message id) already stored under its id keeps its
        one row: `store_incoming_in`."""
        return int(add_message_later(conn, values).value())

    def recent_messages(
        self,
        platform: str,
        chat_id: str,
        limit: int,
        before_id: int | None = None,
        after_id: int | None = None,
    ) -> list[StoredMessage]:
        """The last `limit` messages of a chat (before `before_id`, after `after_id`: a chat's
        `/reset` point), oldest first."""
        with self.engine.connect() as conn:
            return _recent_in(conn, platform, chat_id, limit, before_id, after_id)

    def count_messages(
        self,
        platform: str,
        chat_id: str,
        before_id: int | None = None,
        after_id: int | None = None,
    ) -> int:
        """How many messages a chat has (before `before_id`, after `after_id`): the history
        window is cut at absolute positions, so it stays the same for many turns."""
        with self.engine.connect() as conn:
            return _count_in(conn, platform, chat_id, before_id, after_id)

    def thinking_of(self, row_id: int) -> str | None:
        """The stored reasoning behind the bot reply with row id `row_id` (None if none)."""
        q = select(messages_table.c.thinking).where(messages_table.c.id == row_id)
        with self.engine.connect() as conn:
            return conn.execute(q).scalar()

    def messages_since(
        self, platform: str, chat_id: str, since: datetime, limit: int = 500
    ) -> list[StoredMessage]:
        q = (
            select(*_RECENT_COLUMNS)
            .where(
                messages_table.c.platform == platform,
                messages_table.c.chat_id == chat_id,
                messages_table.c.created_at >= _to_utc(since),
            )
            .order_by(messages_table.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        return [
            StoredMessage(
                r.id,
                r.role,
                r.sender_id,
                r.sender_name,
                r.text,
                _utc(r.created_at),
                r.is_group,
                r.is_at_bot,
            )
            for r in reversed(rows)
        ]

    # -- audit -----------------------------------------------------------------------------
    def add_tool_call(
        self,
        *,
        platform: str,
        chat_id: str,
        sender_id: str,
        message_id: str,
        function: str,
        arguments: Any,
        source: str,
        outcome: str,
        detail: str = "",
        duration_ms: float = 0.0,
        usage: list[dict[str, Any]] | None = None,
    ) -> None:
        """The audit row of a function call; `usage`: usage rows of the turn's model requests
        so far, written in the same transaction (`ChatState.add_usage_rows`)."""
        values = tool_call_row(
            platform=platform,
            chat_id=chat_id,
            sender_id=sender_id,
            message_id=message_id,
            function=function,
            arguments=arguments,
            source=source,
            outcome=outcome,
            detail=detail,
            duration_ms=duration_ms,
        )
        with self.engine.begin() as conn:  # Core insert, once per call: see add_message
            if self.fence is not None:
                self.fence(conn, platform, chat_id)
            _INSERT_TOOL_CALL.executemany(conn, [values])
            if usage:
                add_usage_in(conn, usage)

    def tool_calls_between(
        self, platform: str, chat_id: str, since: datetime, until: datetime, limit: int = 200
    ) -> list[Row[Any]]:
        """A chat's audit rows made in [since, until), oldest first, at most `limit` (the
        newest): the calls and results of turns being summarised (compaction)."""
        t = tool_calls_table
        q = (
            select(t.c.function, t.c.arguments, t.c.outcome, t.c.detail, t.c.created_at)
            .where(
                t.c.platform == platform,
                t.c.chat_id == chat_id,
                t.c.created_at >= _to_utc(since),
                t.c.created_at < _to_utc(until),
            )
            .order_by(t.c.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return list(reversed(conn.execute(q).all()))

    def tool_calls(self, chat_id: str | None = None) -> list[Row[Any]]:
        """Audit rows (of one chat), oldest first: for tests and audits."""
        q = select(tool_calls_table).order_by(tool_calls_table.c.id)
        if chat_id is not None:
            q = q.where(tool_calls_table.c.chat_id == chat_id)
        with self.engine.connect() as conn:
            return list(conn.execute(q).all())

    def close(self) -> None:
        """Idempotent: the pool and the connections are released once."""
        self._threads.shutdown(wait=True)  # writes already queued finish
        self._aside.shutdown(wait=True)
        if self._held is not None:
            self._held.close()
        self.engine.dispose()


def _alone(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return call(), None
    except BaseException as exc:  # noqa: BLE001 - handed to its caller, as the thread does
        return None, exc


def store_incoming_in(conn: Connection, values: dict[str, Any]) -> int:
    """Insert an incoming message's history row unless the chat has it under the same platform
    message id already (a redelivery, another worker): the row's id either way. One statement
    where the database has INSERT .. ON CONFLICT DO NOTHING .. RETURNING (SQLite, PostgreSQL):
    two workers storing one message at the same moment get one row, never an error."""
    stmt = _incoming_insert(conn.dialect.name)
    if stmt is not None:
        row_id = stmt.scalar(conn, values)
        if row_id is not None:
            return int(row_id)
    else:
        found = _stored_incoming(conn, values)
        if found is not None:
            return found
        return inserted_id(conn.execute(messages_table.insert(), values))
    found = _stored_incoming(conn, values)
    assert found is not None, "ON CONFLICT skipped the insert, so the row exists"
    return found


def add_message_later(conn: Connection, values: dict[str, Any]) -> Later:
    """`Storage._add_message_in`, its row id read when wanted: on a pipelined connection the
    statements sent after it do not wait for it. A redelivered incoming message (the insert
    skipped) is looked up when the id is read."""
    values = {
        **values,
        "created_at": _to_utc(values["created_at"])
        if values.get("created_at") is not None
        else datetime.now(UTC),
    }
    if values.get("role") != "user" or not values.get("message_id"):
        return _INSERT_MESSAGE.later_scalar(conn, values)
    stmt = _incoming_insert(conn.dialect.name)
    if stmt is None:
        return Later(store_incoming_in(conn, values))
    inserted = stmt.later_scalar(conn, values)

    def row_id() -> int:
        found = inserted.value()
        if found is None:
            found = _stored_incoming(conn, values)
            assert found is not None, "ON CONFLICT skipped the insert, so the row exists"
        return int(found)

    return Later(read=row_id)


def _stored_incoming(conn: Connection, values: dict[str, Any]) -> int | None:
    return _INCOMING_ID.scalar(conn, values)


@functools.cache
def _incoming_insert(dialect: str) -> Prepared | None:
    """INSERT .. ON CONFLICT (the `ux_messages_incoming` key) DO NOTHING RETURNING id, built
    once per dialect (imported by name: a bot on SQLite does not load PostgreSQL's)."""
    insert = conflict_insert(dialect)
    if insert is None:
        return None
    return Prepared(
        insert(messages_table)
        .on_conflict_do_nothing(
            index_elements=["platform", "chat_id", "message_id"],
            index_where=text(INCOMING_WHERE),
        )
        .returning(messages_table.c.id)
    )


def tool_call_row(
    *,
    platform: str,
    chat_id: str,
    sender_id: str,
    message_id: str,
    function: str,
    arguments: Any,
    source: str,
    outcome: str,
    detail: str = "",
    duration_ms: float = 0.0,
) -> dict[str, Any]:
    """The audit row of a function call (tool_calls values; arguments as JSON). Whatever came
    is stored, cut with a marker: the insert never fails on a value."""
    args_text = (
        arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, ensure_ascii=False, default=str)
    )
    values = {
        "platform": platform,
        "chat_id": chat_id,
        "sender_id": sender_id,
        "message_id": message_id,
        "function": function,
        "arguments": args_text,
        "source": source,
        "outcome": outcome,
        "detail": detail,
        "duration_ms": duration_ms,
        "created_at": datetime.now(UTC),
    }
    return fit(tool_calls_table, values, AUDIT_TEXT_WIDTHS)


# Hot-path statements, built once and run on the driver's cursor (chatfn/storage/prepared.py).
_INSERT_MESSAGE = Prepared(messages_table.insert().returning(messages_table.c.id))
_INSERT_TOOL_CALL = Prepared(tool_calls_table.insert())
_INCOMING_ID = Prepared(
    select(messages_table.c.id).where(
        messages_table.c.platform == bindparam("platform"),
        messages_table.c.chat_id == bindparam("chat_id"),
        messages_table.c.message_id == bindparam("message_id"),
        messages_table.c.role == "user",
    )
)
# How much of the unbounded audit columns is kept.
AUDIT_TEXT_WIDTHS = {"arguments": 8000, "detail": 2000}
_RECENT_COLUMNS = (
    messages_table.c.id,
    messages_table.c.role,
    messages_table.c.sender_id,
    messages_table.c.sender_name,
    messages_table.c.text,
    messages_table.c.created_at,
    messages_table.c.is_group,
    messages_table.c.is_at_bot,
)
_RECENT = (
    select(*_RECENT_COLUMNS)
    .where(
        messages_table.c.platform == bindparam("platform"),
        messages_table.c.chat_id == bindparam("chat_id"),
    )
    .order_by(messages_table.c.id.desc())
    .limit(bindparam("limit"))
)
_RECENT_BEFORE = _RECENT.where(messages_table.c.id < bindparam("before_id"))
_RECENT_AFTER = _RECENT.where(messages_table.c.id > bindparam("after_id"))
_RECENT_BETWEEN = _RECENT_BEFORE.where(messages_table.c.id > bindparam("after_id"))
_RECENTS = {
    (False, False): Prepared(_RECENT),
    (True, False): Prepared(_RECENT_BEFORE),
    (False, True): Prepared(_RECENT_AFTER),
    (True, True): Prepared(_RECENT_BETWEEN),
}
_COUNT = (
    select(func.count())
    .select_from(messages_table)
    .where(
        messages_table.c.platform == bindparam("platform"),
        messages_table.c.chat_id == bindparam("chat_id"),
    )
)
_COUNTS = {
    (False, False): Prepared(_COUNT),
    (True, False): Prepared(_COUNT.where(messages_table.c.id < bindparam("before_id"))),
    (False, True): Prepared(_COUNT.where(messages_table.c.id > bindparam("after_id"))),
    (True, True): Prepared(
        _COUNT.where(
            messages_table.c.id < bindparam("before_id"),
            messages_table.c.id > bindparam("after_id"),
        )
    ),
}


def _recent_in(
    conn: Connection,
    platform: str,
    chat_id: str,
    limit: int,
    before_id: int | None,
    after_id: int | None,
) -> list[StoredMessage]:
    """`Storage.recent_messages` on a connection the caller holds (prebuilt statements: this
    runs once per message, and building the query costs several times running it)."""
    if limit <= 0:
        return []
    return _stored_messages(
        _recent_later(conn, platform, chat_id, limit, before_id, after_id).value()
    )


def _recent_later(
    conn: Connection,
    platform: str,
    chat_id: str,
    limit: int,
    before_id: int | None,
    after_id: int | None,
) -> Later:
    """`_recent_in`'s rows, sent now (read them with `_stored_messages`)."""
    params: dict[str, Any] = {"platform": platform, "chat_id": chat_id, "limit": limit}
    if before_id is not None:
        params["before_id"] = before_id
    if after_id is not None:
        params["after_id"] = after_id
    return _RECENTS[(before_id is not None, after_id is not None)].later_rows(conn, params)


def _stored_messages(rows: list[tuple[Any, ...]]) -> list[StoredMessage]:
    """The rows of `_RECENTS` (newest first) as StoredMessages, oldest first."""
    return [
        StoredMessage(row_id, role, sender, name, text_, _utc(created), is_group, at_bot)
        for row_id, role, sender, name, text_, created, is_group, at_bot in reversed(rows)
    ]


def _count_in(
    conn: Connection, platform: str, chat_id: str, before_id: int | None, after_id: int | None
) -> int:
    return int(_count_later(conn, platform, chat_id, before_id, after_id).value() or 0)


def _count_later(
    conn: Connection, platform: str, chat_id: str, before_id: int | None, after_id: int | None
) -> Later:
    params: dict[str, Any] = {"platform": platform, "chat_id": chat_id}
    if before_id is not None:
        params["before_id"] = before_id
    if after_id is not None:
        params["after_id"] = after_id
    return _COUNTS[(before_id is not None, after_id is not None)].later_scalar(conn, params)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    # The page cache of each connection, named here because it is memory the process keeps:
    # at most SQLITE_CACHE_KIB per connection: the storage thread's, and the pooled ones that
    # reads outside a turn use.
    cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
    # Short: a locked database is retried by `Storage.run` with backoff, which bounds the
    # total wait; a long busy timeout would only hold a pool thread.
    cur.execute("PRAGMA busy_timeout=2000")
    cur.close()
