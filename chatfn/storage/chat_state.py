"""Per-chat state beside the history: admins' overrides, one usage row per model request, and
the counters limits are checked against.

Every method is one short synchronous transaction. Limits stay exact when fifty messages arrive
at once, in one process or across several workers on one PostgreSQL database, because a count
is never read and then written back: `take` adds its amounts with an atomic upsert
(`INSERT ... ON CONFLICT DO UPDATE SET value = value + n RETURNING value`), which also locks the
counter row until the transaction ends, checks the values it got back, and rolls back when one
is over its limit. A concurrent `take` of the same counter waits for that lock and then sees the
committed value, so two workers can never both take the last slot. Rows are locked in one
fixed order (sorted by counter), so two transactions taking overlapping counters cannot
deadlock. SQLite (3.35+ for RETURNING) has one writer at a time, which serialises the same
statements.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, bindparam, delete, desc, func, insert, select, update
from sqlalchemy.engine import Connection, Engine, Row

from chatfn.storage.fit import fit
from chatfn.storage.inserts import ConflictInsert, conflict_insert
from chatfn.storage.models import (
    chat_overrides_table,
    chat_summaries_table,
    limit_counters_table,
    messages_table,
    usage_table,
)
from chatfn.storage.pipeline import Later
from chatfn.storage.prepared import Prepared


@dataclass(frozen=True, slots=True)
class Override:
    value: str
    set_by: str
    set_at: datetime


@dataclass(frozen=True, slots=True)
class Summary:
    """A chat's compacted history: what was said up to message row `upto_id`, summarised."""

    text: str
    upto_id: int
    messages: int
    tokens: int
    model_name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Counter:
    """One count: `scope` "user" or "chat", `key` the user or chat id, `window` the minute or
    day it belongs to (a new window starts from zero, so nothing needs resetting)."""

    scope: str
    platform: str
    key: str
    metric: str
    window: str


@dataclass(frozen=True, slots=True)
class Check:
    """`counter` plus `amount` must stay within `limit`; amount 0 checks without counting
    (tokens: the cost of the next call is unknown until it is made)."""

    counter: Counter
    limit: int
    amount: int = 1

    def exceeded(self, value: int) -> bool:
        return value + self.amount > self.limit if self.amount else value >= self.limit


@dataclass(slots=True)
class ChatStats:
    messages: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    top_users: list[tuple[str, int]] | None = None  # (sender id, tokens), most first
    # (model name, requests, tokens, cost or None), most requests first: the model that
    # answered each request (a fallback's own rows name it).
    models: list[tuple[str, int, int, float | None]] | None = None
    cost: float | None = None  # None: no request had a price

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _utc(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class ChatState:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- overrides ---------------------------------------------------------------------------
    def overrides(self, platform: str, chat_id: str) -> dict[str, Override]:
        with self.engine.connect() as conn:
            return self.overrides_in(conn, platform, chat_id)

    @staticmethod
    def overrides_in(conn: Connection, platform: str, chat_id: str) -> dict[str, Override]:
        return overrides_of(_OVERRIDES.rows(conn, {"platform": platform, "chat_id": chat_id}))

    @staticmethod
    def overrides_later(conn: Connection, platform: str, chat_id: str) -> Later:
        """`overrides_in` sent now, read with `overrides_of(later.value())` (a pipelined
        `Storage.begin_turn` reads it with the other answers of its first round trip)."""
        return _OVERRIDES.later_rows(conn, {"platform": platform, "chat_id": chat_id})

    def set_override(self, platform: str, chat_id: str, key: str, value: str, set_by: str) -> None:
        """One upsert: two workers setting the same key at once leave the later value, never a
        unique-constraint error."""
        t = chat_overrides_table
        values = {"value": value, "set_by": set_by, "set_at": datetime.now(UTC)}
        upsert = _insert(self.engine)
        with self.engine.begin() as conn:
            if upsert is None:  # another database: replace
                where = and_(t.c.platform == platform, t.c.chat_id == chat_id, t.c.key == key)
                conn.execute(delete(t).where(where))
                conn.execute(
                    insert(t).values(platform=platform, chat_id=chat_id, key=key, **values)
                )
                return
            stmt = upsert(t).values(platform=platform, chat_id=chat_id, key=key, **values)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["platform", "chat_id", "key"], set_=values
                )
            )

    def clear_override(self, platform: str, chat_id: str, key: str) -> None:
        t = chat_overrides_table
        with self.engine.begin() as conn:
            conn.execute(
                delete(t).where(t.c.platform == platform, t.c.chat_id == chat_id, t.c.key == key)
            )

    # -- compacted history -------------------------------------------------------------------
    def summary(self, platform: str, chat_id: str) -> Summary | None:
        with self.engine.connect() as conn:
            return self.summary_in(conn, platform, chat_id)

    @staticmethod
    def summary_in(conn: Connection, platform: str, chat_id: str) -> Summary | None:
        """`summary` on a connection the caller holds."""
        return summary_of(_SUMMARY.rows(conn, {"platform": platform, "chat_id": chat_id}))

    @staticmethod
    def summary_later(conn: Connection, platform: str, chat_id: str) -> Later:
        """`summary_in` sent now, read with `summary_of(later.value())` (`Storage.begin_turn`:
        every turn of a bot with compaction on reads it)."""
        return _SUMMARY.later_rows(conn, {"platform": platform, "chat_id": chat_id})

    def set_summary(self, platform: str, chat_id: str, summary: Summary) -> None:
        """Store the chat's summary, replacing the one before (which it folds in)."""
        t = chat_summaries_table
        values = {
            "text": summary.text,
            "upto_id": summary.upto_id,
            "messages": summary.messages,
            "tokens": summary.tokens,
            "model_name": summary.model_name,
            "created_at": summary.created_at,
        }
        where = and_(t.c.platform == platform, t.c.chat_id == chat_id)
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(where))
            conn.execute(insert(t).values(platform=platform, chat_id=chat_id, **values))

    def clear_summary(self, platform: str, chat_id: str) -> None:
        t = chat_summaries_table
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.platform == platform, t.c.chat_id == chat_id))

    # -- usage -------------------------------------------------------------------------------
    def add_usage(self, **values: Any) -> None:
        values.setdefault("created_at", datetime.now(UTC))
        with self.engine.begin() as conn:
            conn.execute(insert(usage_table), fit(usage_table, values))

    def add_usage_rows(self, rows: list[dict[str, Any]]) -> None:
        """Several usage rows (a turn's requests) in one transaction."""
        with self.engine.begin() as conn:
            add_usage_in(conn, rows)

    def usage_rows(self, chat_id: str | None = None) -> list[Row[Any]]:
        """Every usage row (of one chat), oldest first: for tests and audits."""
        q = select(usage_table).order_by(usage_table.c.id)
        if chat_id is not None:
            q = q.where(usage_table.c.chat_id == chat_id)
        with self.engine.connect() as conn:
            return list(conn.execute(q).all())

    def stats(self, platform: str, chat_id: str, since: datetime, top: int = 5) -> ChatStats:
        """Messages from users, model calls, tokens and the top users by tokens since `since`."""
        m, u = messages_table, usage_table
        since = since.astimezone(UTC)
        in_chat = and_(u.c.platform == platform, u.c.chat_id == chat_id, u.c.created_at >= since)
        with self.engine.connect() as conn:
            messages = conn.execute(
                select(func.count()).where(
                    m.c.platform == platform,
                    m.c.chat_id == chat_id,
                    m.c.role == "user",
                    m.c.created_at >= since,
                )
            ).scalar_one()
            calls, prompt, completion, cost = conn.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(u.c.prompt_tokens), 0),
                    func.coalesce(func.sum(u.c.completion_tokens), 0),
                    func.sum(u.c.cost),
                ).where(in_chat)
            ).one()
            model_tokens = func.sum(u.c.prompt_tokens + u.c.completion_tokens)
            per_model = conn.execute(
                select(u.c.model_name, func.count(), model_tokens, func.sum(u.c.cost))
                .where(in_chat)
                .group_by(u.c.model_name)
                .order_by(desc(func.count()), u.c.model_name)
            ).all()
            tokens = func.sum(u.c.prompt_tokens + u.c.completion_tokens)
            users = conn.execute(
                select(u.c.sender_id, tokens)
                .where(in_chat)
                .group_by(u.c.sender_id)
                .order_by(desc(tokens))
                .limit(top)
            ).all()
        return ChatStats(
            messages,
            calls,
            prompt,
            completion,
            [(s, int(n)) for s, n in users],
            [(m, int(n), int(t or 0), c) for m, n, t, c in per_model],
            cost,
        )

    def chats_with_usage(self, since: datetime) -> list[tuple[str, str]]:
        """(platform, chat id) of every chat with a message or a model call since `since`."""
        m, u = messages_table, usage_table
        since = since.astimezone(UTC)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(m.c.platform, m.c.chat_id)
                .where(m.c.created_at >= since, m.c.role == "user")
                .union(select(u.c.platform, u.c.chat_id).where(u.c.created_at >= since))
            ).all()
        return sorted((r[0], r[1]) for r in rows)

    # -- limit counters ----------------------------------------------------------------------
    def count(self, counter: Counter) -> int:
        with self.engine.connect() as conn:
            return _value(conn, counter)

    def take(self, checks: list[Check]) -> Check | None:
        """All or nothing: the first check (in the given order) that would be exceeded, with
        nothing counted, or None after adding every check's amount. Exact across processes:
        see the module docstring."""
        with self.engine.begin() as conn:
            return take_in(conn, checks)

    def add(self, counters: list[Counter], amount: int) -> None:
        if amount <= 0 or not counters:
            return
        with self.engine.begin() as conn:
            for counter in sorted(counters, key=_order):
                _add(conn, counter, amount)

    def first_time(self, counter: Counter) -> bool:
        """True the first time it is asked for `counter` (then counted): "tell once per
        window". The count is an atomic upsert, so of two workers asking at once exactly one
        gets True."""
        with self.engine.begin() as conn:
            return _add(conn, counter, 1) == 1


def overrides_of(rows: list[tuple[Any, ...]]) -> dict[str, Override]:
    return {key: Override(value, by, _utc(at)) for key, value, by, at in rows}


def summary_of(rows: list[tuple[Any, ...]]) -> Summary | None:
    if not rows:
        return None
    text, upto_id, messages, tokens, model_name, created_at = rows[0]
    return Summary(text, upto_id, messages, tokens, model_name, _utc(created_at))


def take_in(conn: Connection, checks: list[Check]) -> Check | None:
    """`ChatState.take` inside a transaction the caller holds (`Storage.begin_turn`: the
    incoming message and its counts are one commit). A check that fails takes back what was
    added (in the same transaction, the rows still locked), instead of rolling back the
    caller's other writes; a counter created here is left at 0."""
    return take_sent(conn, checks, send_take(conn, checks))


def send_take(conn: Connection, checks: list[Check]) -> dict[Counter, Later]:
    """The first half of `take_in`: every upsert (in lock order) and every read of a check
    without an amount, sent; on a pipelined connection nothing is waited for yet."""
    sent: dict[Counter, Later] = {}
    for check in sorted(checks, key=lambda c: _order(c.counter)):
        if check.amount:  # the new value; the row stays locked until commit
            sent[check.counter] = _add_later(conn, check.counter, check.amount)
    for check in checks:
        if not check.amount and check.counter not in sent:  # the committed value
            sent[check.counter] = _VALUE.later_scalar(conn, _params(check.counter))
    return sent


def take_sent(conn: Connection, checks: list[Check], sent: dict[Counter, Later]) -> Check | None:
    """The second half of `take_in`: the values read back and checked."""
    ordered = sorted(checks, key=lambda c: _order(c.counter))
    for check in checks:
        value = int(sent[check.counter].value() or 0)
        over = value > check.limit if check.amount else value >= check.limit
        if over:
            for taken in ordered:
                if taken.amount:
                    _add(conn, taken.counter, -taken.amount)
            return check
    return None


def add_counts_in(conn: Connection, counts: list[tuple[Counter, int]]) -> list[int]:
    """Add each (counter, amount) inside a transaction the caller holds, in lock order;
    returns the new values in the given order."""
    order = sorted(range(len(counts)), key=lambda i: _order(counts[i][0]))
    values = [0] * len(counts)
    for i in order:
        values[i] = _add(conn, counts[i][0], counts[i][1])
    return values


def add_many_in(conn: Connection, counts: list[tuple[Counter, int]]) -> None:
    """`add_counts_in` without reading the values back: one executemany of the upsert (a
    turn's token and call counts, `Storage.write_turn`)."""
    stmt = _upsert_add(conn.dialect.name, returning=False)
    if stmt is None:
        add_counts_in(conn, counts)
        return
    ordered = sorted(counts, key=lambda c: _order(c[0]))
    stmt.executemany(conn, [_row(c, n) for c, n in ordered])


def _row(counter: Counter, value: int) -> dict[str, Any]:
    """A new counter row: the counter's key columns and its first value."""
    return {
        "scope": counter.scope,
        "platform": counter.platform,
        "key": counter.key,
        "metric": counter.metric,
        "window": counter.window,
        "value": value,
    }


def _where(counter: Counter) -> Any:
    t = limit_counters_table
    return and_(
        t.c.scope == counter.scope,
        t.c.platform == counter.platform,
        t.c.key == counter.key,
        t.c.metric == counter.metric,
        t.c.window == counter.window,
    )


def _value(conn: Connection, counter: Counter) -> int:
    return _VALUE.scalar(conn, _params(counter)) or 0


def _params(counter: Counter) -> dict[str, str]:
    return {
        "scope": counter.scope,
        "platform": counter.platform,
        "key": counter.key,
        "metric": counter.metric,
        "window": counter.window,
    }


def _order(counter: Counter) -> tuple[str, ...]:
    """The order rows are locked in: the same in every process, so no deadlock."""
    return (counter.scope, counter.platform, counter.key, counter.metric, counter.window)


# Statements of every message: built once, run on the driver's cursor (chatfn/storage/prepared.py).
_c = limit_counters_table
_VALUE = Prepared(
    select(_c.c.value).where(
        _c.c.scope == bindparam("scope"),
        _c.c.platform == bindparam("platform"),
        _c.c.key == bindparam("key"),
        _c.c.metric == bindparam("metric"),
        _c.c.window == bindparam("window"),
    )
)
_t = chat_overrides_table
_OVERRIDES = Prepared(
    select(_t.c.key, _t.c.value, _t.c.set_by, _t.c.set_at).where(
        _t.c.platform == bindparam("platform"), _t.c.chat_id == bindparam("chat_id")
    )
)
_s = chat_summaries_table
_SUMMARY = Prepared(
    select(
        _s.c.text, _s.c.upto_id, _s.c.messages, _s.c.tokens, _s.c.model_name, _s.c.created_at
    ).where(_s.c.platform == bindparam("platform"), _s.c.chat_id == bindparam("chat_id"))
)
_INSERT_USAGE = Prepared(insert(usage_table))


def add_usage_in(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Usage rows (with their `created_at`) inside a transaction the caller holds."""
    if rows:  # cut to the columns' widths: a provider's long model id must not lose the row
        # (a column a row leaves out takes its default: a function's own model request has no
        # cached tokens)
        _INSERT_USAGE.executemany(conn, [fit(usage_table, r) for r in rows])


def _insert(bind: Engine | Connection) -> ConflictInsert | None:
    """The dialect's INSERT with `on_conflict_do_update` (PostgreSQL, SQLite), or None."""
    return conflict_insert(bind.dialect.name)


def _add(conn: Connection, counter: Counter, amount: int) -> int:
    """Add `amount` to the counter (created at `amount`) in one statement; returns the new
    value. On PostgreSQL the row is locked until the transaction ends."""
    return int(_add_later(conn, counter, amount).value())


def _add_later(conn: Connection, counter: Counter, amount: int) -> Later:
    """`_add`, its new value read when wanted."""
    stmt = _upsert_add(conn.dialect.name)
    if stmt is None:  # another database: lock the row (if any) first
        return Later(_add_locked(conn, counter, amount))
    return stmt.later_scalar(conn, _row(counter, amount))


@functools.cache
def _upsert_add(dialect: str, returning: bool = True) -> Prepared | None:
    """The counter upsert of `_add`, built once per dialect (it runs several times per
    message; building a statement costs about what running it does)."""
    t = limit_counters_table
    upsert = conflict_insert(dialect)
    if upsert is None:
        return None
    stmt = (
        upsert(t)
        .values(
            scope=bindparam("scope"),
            platform=bindparam("platform"),
            key=bindparam("key"),
            metric=bindparam("metric"),
            window=bindparam("window"),
            value=bindparam("value"),
        )
        .on_conflict_do_update(
            index_elements=["scope", "platform", "key", "metric", "window"],
            set_={"value": t.c.value + bindparam("value")},
        )
    )
    return Prepared(stmt.returning(t.c.value) if returning else stmt)


def _add_locked(conn: Connection, counter: Counter, amount: int) -> int:
    """`_add` for a database without ON CONFLICT: SELECT ... FOR UPDATE, then UPDATE or INSERT
    (a concurrent first INSERT of the same counter fails on the unique constraint)."""
    t = limit_counters_table
    value = conn.execute(select(t.c.value).where(_where(counter)).with_for_update()).scalar()
    if value is None:
        conn.execute(insert(t).values(**_row(counter, amount)))
        return amount
    conn.execute(update(t).where(_where(counter)).values(value=t.c.value + amount))
    return int(value) + amount
