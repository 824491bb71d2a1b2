"""The outbox as the console shows it: rows not delivered (pending, expired, failed) per chat,
the oldest pending message, and "retry now" (an expired or failed row back to pending)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine, Row

from chatfn.storage.console.scope import Scope
from chatfn.storage.console.sessions import iso, utc
from chatfn.storage.models import outbox_table

OB = outbox_table
UNDELIVERED = ("pending", "expired", "failed")


def backlog(engine: Engine) -> dict[str, Any]:
    """Rows per undelivered state and the oldest pending one (the health panel)."""
    with engine.connect() as conn:
        counts: dict[str, int] = dict(
            conn.execute(
                select(OB.c.state, func.count())
                .where(OB.c.state.in_(UNDELIVERED))
                .group_by(OB.c.state)
            ).all()
        )
        oldest = conn.execute(
            select(func.min(OB.c.created_at)).where(OB.c.state == "pending")
        ).scalar()
    out: dict[str, Any] = {s: int(counts.get(s, 0)) for s in UNDELIVERED}
    out["oldest_pending_at"] = iso(oldest)
    out["oldest_pending_seconds"] = (
        round((datetime.now(UTC) - utc(oldest)).total_seconds(), 1) if oldest else None
    )
    return out


def page(
    engine: Engine,
    scope: Scope,
    states: tuple[str, ...],
    platform: str | None,
    chat_id: str | None,
    limit: int,
    before: int | None,
) -> dict[str, Any]:
    now = datetime.now(UTC)
    where = [OB.c.state.in_(states), scope.clause(OB.c.platform, OB.c.chat_id)]
    if platform:
        where.append(OB.c.platform == platform)
    if chat_id:
        where.append(OB.c.chat_id == chat_id)
    with engine.connect() as conn:
        summary_rows = conn.execute(
            select(OB.c.platform, OB.c.chat_id, OB.c.state, func.count(), func.min(OB.c.created_at))
            .where(*where)
            .group_by(OB.c.platform, OB.c.chat_id, OB.c.state)
        ).all()
        q = select(OB).where(*where).order_by(OB.c.id.desc())
        if before is not None:
            q = q.where(OB.c.id < before)
        rows: list[Row[Any]] = []
        more = False
        last = None
        for r in conn.execute(q):
            if len(rows) == limit:
                more = True
                break
            last = r.id
            if scope.allows(r.platform, r.chat_id):
                rows.append(r)
    summary: dict[tuple[str, str], dict[str, Any]] = {}
    for platform_, chat, state, n, oldest in summary_rows:
        if not scope.allows(platform_, chat):
            continue
        entry = summary.setdefault(
            (platform_, chat),
            {
                "platform": platform_,
                "chat_id": chat,
                "pending": 0,
                "expired": 0,
                "failed": 0,
                "oldest_pending_at": None,
            },
        )
        entry[state] = n
        if state == "pending":
            entry["oldest_pending_at"] = iso(oldest)
    out_rows = []
    for r in rows:
        payload = json.loads(r.payload)
        out_rows.append(
            {
                "event_id": r.id,
                "platform": r.platform,
                "chat_id": r.chat_id,
                "state": r.state,
                "attempts": r.attempts,
                "text": payload.get("text", ""),
                "reply_to": payload.get("reply_to"),
                "notice": bool(payload.get("notice")),
                "created_at": iso(r.created_at),
                "updated_at": iso(r.updated_at),
                "age_seconds": round((now - utc(r.created_at)).total_seconds(), 1),
            }
        )
    return {
        "summary": sorted(summary.values(), key=lambda e: (e["platform"], e["chat_id"])),
        "rows": out_rows,
        "next_before": last if more else None,
    }


def row(engine: Engine, event_id: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            select(OB.c.id, OB.c.platform, OB.c.chat_id, OB.c.state).where(OB.c.id == event_id)
        ).first()


def requeue(engine: Engine, event_id: int) -> bool:
    """An expired or failed row back to pending (its clock restarted, so the next expiry
    sweep gives it `storage.outbox.max_wait` again); False when it is not one."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        result = conn.execute(
            update(OB)
            .where(OB.c.id == event_id, OB.c.state.in_(("expired", "failed")))
            .values(state="pending", created_at=now, updated_at=now)
        )
    return bool(result.rowcount)
