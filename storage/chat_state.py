"""Per-chat state beside the history: admins' overrides, one usage row per model request, and
the counters limits are checked against.

Every method is one short synchronous transaction. The bot runs on one event loop and these
calls never await, so a check-and-count (`take`) cannot interleave with another one: that is
what makes limits exact when fifty messages arrive at once. (Several bot processes on one
database would need row locks; one bot per database is the supported set-up.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, delete, desc, func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from storage.models import ChatOverrideRow, LimitCounterRow, MessageRow, UsageRow


@dataclass(frozen=True, slots=True)
class Override:
    value: str
    set_by: str
    set_at: datetime


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
        t = ChatOverrideRow.__table__
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(t.c.key, t.c.value, t.c.set_by, t.c.set_at).where(
                    t.c.platform == platform, t.c.chat_id == chat_id
                )
            ).all()
        return {r.key: Override(r.value, r.set_by, _utc(r.set_at)) for r in rows}

    def set_override(self, platform: str, chat_id: str, key: str, value: str, set_by: str) -> None:
        t = ChatOverrideRow.__table__
        where = and_(t.c.platform == platform, t.c.chat_id == chat_id, t.c.key == key)
        values = {"value": value, "set_by": set_by, "set_at": datetime.now(UTC)}
        with self.engine.begin() as conn:
            if conn.execute(update(t).where(where).values(**values)).rowcount == 0:
                conn.execute(
                    insert(t).values(platform=platform, chat_id=chat_id, key=key, **values)
                )

    def clear_override(self, platform: str, chat_id: str, key: str) -> None:
        t = ChatOverrideRow.__table__
        with self.engine.begin() as conn:
            conn.execute(
                delete(t).where(t.c.platform == platform, t.c.chat_id == chat_id, t.c.key == key)
            )

    # -- usage -------------------------------------------------------------------------------
    def add_usage(self, **values: Any) -> None:
        values.setdefault("created_at", datetime.now(UTC))
        with self.engine.begin() as conn:
            conn.execute(insert(UsageRow.__table__), values)

    def usage_rows(self, chat_id: str | None = None) -> list[UsageRow]:
        """Every usage row (of one chat), oldest first: for tests and audits."""
        from sqlalchemy.orm import Session

        q = select(UsageRow).order_by(UsageRow.id)
        if chat_id is not None:
            q = q.where(UsageRow.chat_id == chat_id)
        with Session(self.engine) as s:
            return list(s.scalars(q).all())

    def stats(self, platform: str, chat_id: str, since: datetime, top: int = 5) -> ChatStats:
        """Messages from users, model calls, tokens and the top users by tokens since `since`."""
        m, u = MessageRow.__table__, UsageRow.__table__
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
            calls, prompt, completion = conn.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(u.c.prompt_tokens), 0),
                    func.coalesce(func.sum(u.c.completion_tokens), 0),
                ).where(in_chat)
            ).one()
            tokens = func.sum(u.c.prompt_tokens + u.c.completion_tokens)
            users = conn.execute(
                select(u.c.sender_id, tokens)
                .where(in_chat)
                .group_by(u.c.sender_id)
                .order_by(desc(tokens))
                .limit(top)
            ).all()
        return ChatStats(messages, calls, prompt, completion, [(s, int(n)) for s, n in users])

    def chats_with_usage(self, since: datetime) -> list[tuple[str, str]]:
        """(platform, chat id) of every chat with a message or a model call since `since`."""
        m, u = MessageRow.__table__, UsageRow.__table__
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
        """All or nothing: the first check that would be exceeded (nothing counted), or None
        after adding every check's amount."""
        with self.engine.begin() as conn:
            for check in checks:
                if check.exceeded(_value(conn, check.counter)):
                    return check
            for check in checks:
                if check.amount:
                    _add(conn, check.counter, check.amount)
        return None

    def add(self, counters: list[Counter], amount: int) -> None:
        if amount <= 0 or not counters:
            return
        with self.engine.begin() as conn:
            for counter in counters:
                _add(conn, counter, amount)

    def first_time(self, counter: Counter) -> bool:
        """True the first time it is asked for `counter` (then counted): "tell once per
        window"."""
        with self.engine.begin() as conn:
            if _value(conn, counter):
                return False
            _add(conn, counter, 1)
        return True


def _where(counter: Counter) -> Any:
    t = LimitCounterRow.__table__
    return and_(
        t.c.scope == counter.scope,
        t.c.platform == counter.platform,
        t.c.key == counter.key,
        t.c.metric == counter.metric,
        t.c.window == counter.window,
    )


def _value(conn: Connection, counter: Counter) -> int:
    t = LimitCounterRow.__table__
    return conn.execute(select(t.c.value).where(_where(counter))).scalar() or 0


def _add(conn: Connection, counter: Counter, amount: int) -> None:
    t = LimitCounterRow.__table__
    done = conn.execute(update(t).where(_where(counter)).values(value=t.c.value + amount))
    if done.rowcount == 0:
        conn.execute(
            insert(t).values(
                scope=counter.scope,
                platform=counter.platform,
                key=counter.key,
                metric=counter.metric,
                window=counter.window,
                value=amount,
            )
        )
