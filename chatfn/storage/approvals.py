"""Calls held for approval (`approvals`, issue 40): written when a call is held, answered once.

An answer is one conditional UPDATE (`state = 'pending' AND expires_at > now`), so of two
answers racing, or an answer racing the expiry, exactly one wins, on SQLite and PostgreSQL
alike; the loser is told what the row says now (already answered, expired). Run through
`Storage.run` (off the event loop), each in a transaction of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, and_, select, update
from sqlalchemy.engine import Engine

from chatfn.storage.models import approvals_table as a

__all__ = ["answer", "expire_due", "get", "insert", "pending"]

REASON_MAX = 500


def _utc(row: Row[Any] | None) -> dict[str, Any] | None:
    """A row as a dict with aware UTC times (SQLite gives them back naive)."""
    if row is None:
        return None
    values = dict(row._mapping)
    for key in ("created_at", "expires_at", "answered_at"):
        when = values.get(key)
        if isinstance(when, datetime) and when.tzinfo is None:
            values[key] = when.replace(tzinfo=UTC)
    return values


def insert(engine: Engine, values: dict[str, Any]) -> None:
    with engine.begin() as conn:
        conn.execute(a.insert().values(**values))


def get(engine: Engine, approval_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        return _utc(conn.execute(select(a).where(a.c.id == approval_id)).first())


def answer(
    engine: Engine, approval_id: str, state: str, by: str, reason: str, now: datetime
) -> bool:
    """Mark a pending, unexpired request `state` (approved, denied); False when another answer
    or the expiry came first."""
    with engine.begin() as conn:
        done = conn.execute(
            update(a)
            .where(and_(a.c.id == approval_id, a.c.state == "pending", a.c.expires_at > now))
            .values(state=state, answered_by=by, reason=reason[:REASON_MAX], answered_at=now)
        )
        return done.rowcount == 1


def expire_due(engine: Engine, now: datetime) -> list[dict[str, Any]]:
    """Mark every pending request whose time is up as expired; returns those rows (each
    exactly once, whoever else sweeps: the UPDATE is conditional per row)."""
    found: list[dict[str, Any]] = []
    with engine.begin() as conn:
        due = conn.execute(
            select(a.c.id).where(and_(a.c.state == "pending", a.c.expires_at <= now))
        ).all()
        for (approval_id,) in due:
            done = conn.execute(
                update(a)
                .where(and_(a.c.id == approval_id, a.c.state == "pending"))
                .values(state="expired", answered_at=now)
            )
            if done.rowcount == 1:
                row = _utc(conn.execute(select(a).where(a.c.id == approval_id)).first())
                if row is not None:
                    found.append(row)
    return found


def pending(engine: Engine, limit: int = 200) -> list[dict[str, Any]]:
    """The requests still waiting for an answer, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(a).where(a.c.state == "pending").order_by(a.c.created_at).limit(limit)
        ).all()
    return [r for r in (_utc(row) for row in rows) if r is not None]


def next_expiry(engine: Engine) -> datetime | None:
    """When the first pending request expires (the sweeper sleeps until then)."""
    with engine.connect() as conn:
        row = conn.execute(
            select(a.c.expires_at).where(a.c.state == "pending").order_by(a.c.expires_at).limit(1)
        ).first()
    if row is None:
        return None
    when: datetime = row[0]
    return when if when.tzinfo else when.replace(tzinfo=UTC)
