"""A turn's transactions on PostgreSQL in pipeline mode (chatfn/storage/pipeline.py), against the
real
server: the round trips a turn costs, counted from libpq's own protocol trace (each burst of
messages the client sends before it reads is one round trip), and what must not change with
it: a failed statement rolls back everything the transaction sent and comes back as
SQLAlchemy's error, the connection goes back to the pool usable, a redelivered message keeps
its one row, a refused limit takes its counts back."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text
from sqlalchemy.exc import IntegrityError

from chatfn.common.messages import IncomingMessage, OutgoingMessage
from chatfn.runtime.bot import Bot
from chatfn.runtime.settings import parse_settings
from chatfn.storage.chat_state import Check, Counter
from chatfn.storage.db import Storage, StorageError
from chatfn.storage.models import limit_counters_table, messages_table
from chatfn.storage.pipeline import piped_begin
from providers.factory import build_model
from tests.cluster.conftest import pg_url  # noqa: F401  (fixture)
from tests.fakes.protocols import Turn, model_config, replies
from tests.fakes.raw_replay import RawReplayServer
from tests.runtime.functions import make_registry

pytestmark = pytest.mark.services

LIMITS = {
    "per_user": {"messages_per_minute": 100, "model_calls_per_day": 100, "tokens_per_day": 10**6},
    "per_chat": {"messages_per_minute": 100},
}


class RoundTrips:
    """Counts round trips on every connection of an engine from libpq's trace: a burst of
    messages from the client ("F" lines) ends when it reads an answer ("B" lines); the
    next burst is the next round trip."""

    def __init__(self, engine: Any) -> None:
        self._files: list[Any] = []
        self._seen = 0
        event.listen(engine, "connect", self._trace)
        engine.dispose()  # connections made before are replaced by traced ones

    def _trace(self, dbapi_conn: Any, _record: Any) -> None:
        import psycopg

        f = tempfile.TemporaryFile()
        self._files.append(f)
        dbapi_conn.pgconn.trace(f.fileno())
        dbapi_conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

    def total(self) -> int:
        n = 0
        for f in self._files:
            f.seek(0)
            last = "B"
            for line in f.read().decode(errors="replace").splitlines():
                side = line[:1]
                if side == "F" and last == "B":
                    n += 1
                if side in ("F", "B"):
                    last = side
        return n

    def take(self) -> int:
        """Round trips since the last `take`."""
        total = self.total()
        n, self._seen = total - self._seen, total
        return n


def _message(message_id: str, chat: str = "c1", text_: str | None = "hello") -> dict[str, Any]:
    return {
        "platform": "http",
        "chat_id": chat,
        "is_group": False,
        "role": "user",
        "sender_id": "u",
        "sender_name": "",
        "text": text_,
        "message_id": message_id,
        "created_at": datetime.now(UTC),
    }


def _rows(storage: Storage, table: Any) -> int:
    with storage.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)


@pytest.fixture
def storage(pg_url: str) -> Any:  # noqa: F811
    s = Storage(pg_url)
    s.create_tables()
    yield s
    s.engine.dispose()


async def _take(_out: OutgoingMessage) -> None:
    return None


async def test_a_tool_turn_is_five_round_trips(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    """Without the pipeline the same turn took 23 (a BEGIN, each statement and a COMMIT of
    its three transactions): begin_turn is three (what it sends before reading the overrides;
    the limit counts with the history window; COMMIT), each write_turn one."""
    async with RawReplayServer() as server:
        turns = [Turn(calls=[("weather", {"city": "Oslo"})]), Turn(text="Sunny.")] * 2
        server.queue = list(replies("openai", turns, stream=False))
        data = {"storage": {"url": pg_url}, "plugins": {"paths": []}, "limits": LIMITS}
        settings = parse_settings(data, base_dir=tmp_path)
        model = build_model("main", model_config("openai", server.url, stream=False))
        bot = Bot(
            settings,
            model=model,
            registry=make_registry([]),
            builtins=False,
            load_plugins=False,
        )
        trips = RoundTrips(bot.storage.engine)
        try:
            for i, chat in enumerate(["c1", "c2"]):
                message = IncomingMessage(
                    platform="test", chat_id=chat, sender_id="u", text="hi", message_id=f"m{i}"
                )
                sent = await bot.handle(message, _take)
                assert [o.text for o in sent] == ["Sunny."]
                assert trips.take() == 5
        finally:
            await bot.aclose()


def test_a_failed_statement_rolls_back_the_whole_transaction(storage: Storage) -> None:
    storage.begin_turn(_message("m1"), platform="http", chat_id="c1")
    before = _rows(storage, messages_table)
    counter = Counter("user", "http", "u", "messages", "2026-11-24")
    with pytest.raises(IntegrityError):
        # The insert fails (text is NOT NULL) after the counter's upsert was sent: neither stays.
        storage.begin_turn(
            _message("m2", text_=None),
            platform="http",
            chat_id="c1",
            checks=[Check(counter, limit=10)],
        )
    assert _rows(storage, messages_table) == before
    assert _rows(storage, limit_counters_table) == 0
    # The connection went back to the pool usable, in its ordinary mode.
    start = storage.begin_turn(_message("m3"), platform="http", chat_id="c1", history_limit=5)
    assert [m.id for m in start.history or []] == [1]
    with storage.engine.connect() as conn:
        assert conn.connection.dbapi_connection.autocommit is False  # type: ignore[union-attr]


async def test_storage_run_reports_a_failed_pipelined_write(storage: Storage) -> None:
    with pytest.raises(StorageError, match="NotNullViolation|not-null"):
        await storage.run(
            storage.begin_turn, _message("m1", text_=None), platform="http", chat_id="c"
        )


def test_an_exception_in_the_block_rolls_back_what_was_sent(storage: Storage) -> None:
    from chatfn.storage.db import add_message_later

    with pytest.raises(ValueError), piped_begin(storage.engine) as conn:
        add_message_later(conn, _message("m1"))
        raise ValueError("the caller changed its mind")
    assert _rows(storage, messages_table) == 0


def test_a_core_statement_inside_the_pipeline_is_refused(storage: Storage) -> None:
    with pytest.raises(RuntimeError, match="Core statement"), piped_begin(storage.engine) as conn:
        conn.execute(text("SELECT 1"))


def test_a_redelivered_message_keeps_its_one_row(storage: Storage) -> None:
    first = storage.begin_turn(_message("m1"), platform="http", chat_id="c1")
    again = storage.begin_turn(_message("m1"), platform="http", chat_id="c1")
    assert again.stored_id == first.stored_id
    assert _rows(storage, messages_table) == 1


def test_a_refused_check_takes_its_counts_back(storage: Storage) -> None:
    user = Counter("user", "http", "u", "messages", "w")
    chat = Counter("chat", "http", "c1", "messages", "w")
    checks = [Check(user, limit=1), Check(chat, limit=5)]
    notice = Counter("user", "http", "u", "told", "w")
    first = storage.begin_turn(
        _message("m1"), platform="http", chat_id="c1", checks=checks, notice=lambda _c: notice
    )
    assert first.refused is None
    second = storage.begin_turn(
        _message("m2"), platform="http", chat_id="c1", checks=checks, notice=lambda _c: notice
    )
    assert second.refused == checks[0] and second.told
    assert storage.chat_state.count(user) == 1
    assert storage.chat_state.count(chat) == 1
    third = storage.begin_turn(
        _message("m3"), platform="http", chat_id="c1", checks=checks, notice=lambda _c: notice
    )
    assert third.refused == checks[0] and not third.told  # told once per window


def test_the_history_window_and_its_count_in_one_round_trip(storage: Storage) -> None:
    for i in range(6):
        storage.begin_turn(_message(f"m{i}"), platform="http", chat_id="c1")
    start = storage.begin_turn(_message("m6"), platform="http", chat_id="c1", history_limit=4)
    assert [m.text for m in start.history or []] == ["hello"] * 4
    assert [m.id for m in start.history or []] == [3, 4, 5, 6]
    assert start.count == 6  # the window is full: the chat's count was read with it


def test_a_transaction_waiting_between_reads_is_idle_in_transaction(storage: Storage) -> None:
    """Reads wait with a Sync, not a Flush: the server then counts the session idle in a
    transaction, so a cluster worker's `idle_in_transaction_session_timeout` still ends the
    transaction of a process stopped between two reads (and frees the lease row's lock)."""
    from chatfn.storage.db import add_message_later

    with piped_begin(storage.engine) as conn:
        add_message_later(conn, _message("m1")).value()
        pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
        with storage.engine.connect() as other:
            state = other.execute(
                text("SELECT state FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
            ).scalar()
        assert state == "idle in transaction"
    assert _rows(storage, messages_table) == 1


def test_a_connection_the_server_dropped_is_not_handed_out_again(storage: Storage) -> None:
    """A server restart (here: its backends terminated) fails the transaction that finds its
    connection dead, as without the pipeline; the pool then makes a new one."""
    from sqlalchemy.exc import OperationalError

    storage.begin_turn(_message("m1"), platform="http", chat_id="c1")
    database = storage.engine.url.database
    admin = Storage(storage.url.replace(f"/{database}", "/postgres"))
    try:
        with admin.engine.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": database},
            )
    finally:
        admin.engine.dispose()
    with pytest.raises(OperationalError):
        storage.begin_turn(_message("m2"), platform="http", chat_id="c1")
    start = storage.begin_turn(_message("m3"), platform="http", chat_id="c1", history_limit=5)
    assert [m.id for m in start.history or []] == [1]
