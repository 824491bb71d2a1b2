"""The console's own rows: logins (`admin_sessions`), its audit log (`admin_audit`) and the
workers' metric snapshots (`worker_metrics`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine

from chatfn.storage.console.scope import Scope
from chatfn.storage.fit import fit
from chatfn.storage.inserts import inserted_id
from chatfn.storage.models import (
    admin_audit_table,
    admin_sessions_table,
    worker_metrics_table,
    workers_table,
)


def utc(dt: datetime) -> datetime:
    """SQLite keeps no offset: every stored time is UTC."""
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SessionRow:
    user: str
    csrf: str
    expires_at: datetime


def create_session(
    engine: Engine, token_hash: str, user: str, csrf: str, address: str, expires_at: datetime
) -> None:
    """Store a login; logins that ended are deleted in the same transaction (no sweeper)."""
    t = admin_sessions_table
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(delete(t).where(t.c.expires_at < now))
        conn.execute(
            insert(t),
            fit(
                t,
                {
                    "token_hash": token_hash,
                    "user": user,
                    "csrf": csrf,
                    "address": address,
                    "created_at": now,
                    "expires_at": expires_at,
                },
            ),
        )


def session(engine: Engine, token_hash: str) -> SessionRow | None:
    """The login with this token hash, unless it ended."""
    t = admin_sessions_table
    with engine.connect() as conn:
        row = conn.execute(
            select(t.c.user, t.c.csrf, t.c.expires_at).where(t.c.token_hash == token_hash)
        ).first()
    if row is None or utc(row.expires_at) <= datetime.now(UTC):
        return None
    return SessionRow(row.user, row.csrf, utc(row.expires_at))


def end_session(engine: Engine, token_hash: str) -> None:
    t = admin_sessions_table
    with engine.begin() as conn:
        conn.execute(delete(t).where(t.c.token_hash == token_hash))


def add_audit(
    engine: Engine,
    user: str,
    address: str,
    action: str,
    platform: str = "",
    chat_id: str = "",
    detail: dict[str, Any] | None = None,
) -> int:
    t = admin_audit_table
    values = {
        "created_at": datetime.now(UTC),
        "user": user,
        "address": address,
        "action": action,
        "platform": platform,
        "chat_id": chat_id,
        "detail": json.dumps(detail or {}, ensure_ascii=False, default=str),
    }
    with engine.begin() as conn:
        return inserted_id(conn.execute(insert(t), fit(t, values)))


def audit_page(
    engine: Engine,
    scope: Scope,
    limit: int,
    before: int | None = None,
    chat: tuple[str, str] | None = None,
    user: str | None = None,
) -> tuple[list[dict[str, Any]], int | None]:
    """The newest audit entries (before row id `before`), newest first, and the `before` of the
    next page (None: no older). A scoped user sees only entries of their chats."""
    t = admin_audit_table
    q = select(t).order_by(t.c.id.desc())
    if before is not None:
        q = q.where(t.c.id < before)
    if chat is not None:
        q = q.where(t.c.platform == chat[0], t.c.chat_id == chat[1])
    if user is not None:
        q = q.where(t.c.user == user)
    if scope.limited:
        q = q.where(t.c.chat_id != "", scope.clause(t.c.platform, t.c.chat_id))
    entries: list[dict[str, Any]] = []
    last: int | None = None
    more = False
    with engine.connect() as conn:
        for row in conn.execute(q):
            if len(entries) == limit:
                more = True
                break
            last = row.id
            if not scope.allows(row.platform, row.chat_id) and scope.limited:
                continue
            entries.append(
                {
                    "id": row.id,
                    "time": iso(row.created_at),
                    "user": row.user,
                    "address": row.address,
                    "action": row.action,
                    "platform": row.platform,
                    "chat_id": row.chat_id,
                    "detail": json.loads(row.detail or "{}"),
                }
            )
    return entries, (last if more else None)


def iso(dt: datetime | None) -> str | None:
    """A stored time as the API writes it: ISO 8601, UTC, with `Z`."""
    if dt is None:
        return None
    return utc(dt).astimezone(UTC).isoformat().replace("+00:00", "Z")


# -- the workers' metric snapshots ---------------------------------------------------------------
def put_snapshot(engine: Engine, worker: str, host: str, data: dict[str, Any]) -> None:
    """Replace the worker's snapshot (one row per worker)."""
    t = worker_metrics_table
    values = {
        "worker": worker,
        "host": host,
        "taken_at": datetime.now(UTC),
        "data": json.dumps(data, default=str),
    }
    with engine.begin() as conn:
        conn.execute(delete(t).where(t.c.worker == worker))
        conn.execute(insert(t), fit(t, values))


def snapshots(engine: Engine) -> list[tuple[str, str, datetime, dict[str, Any]]]:
    """(worker, host, taken at, data) of every worker that wrote one, newest first."""
    t = worker_metrics_table
    with engine.connect() as conn:
        rows = conn.execute(select(t).order_by(t.c.taken_at.desc())).all()
    return [(r.worker, r.host, utc(r.taken_at), json.loads(r.data)) for r in rows]


def drop_snapshots_before(engine: Engine, cutoff: datetime) -> None:
    t = worker_metrics_table
    with engine.begin() as conn:
        conn.execute(delete(t).where(t.c.taken_at < cutoff))


def live_workers(engine: Engine, within: float) -> dict[str, datetime]:
    """Workers that beat within the last `within` seconds, with their last beat (read only:
    the workers' own beat deletes the stale rows)."""
    cutoff = datetime.now(UTC) - timedelta(seconds=within)
    t = workers_table
    with engine.connect() as conn:
        rows = conn.execute(select(t.c.id, t.c.seen_at).where(t.c.seen_at >= cutoff)).all()
    return {r.id: utc(r.seen_at) for r in rows}
