"""The chat list, one chat's facts and its history page with the tool calls of each turn."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, false, func, select
from sqlalchemy.engine import Engine

from chatfn.storage.console.scope import Scope
from chatfn.storage.console.sessions import iso, utc
from chatfn.storage.models import (
    chat_overrides_table,
    message_fates_table,
    messages_table,
    outbox_table,
    tool_calls_table,
    usage_table,
)

M, U, T, OB, CO = messages_table, usage_table, tool_calls_table, outbox_table, chat_overrides_table
F = message_fates_table
IMAGE = re.compile(r"^\[image: (.+)\]$", re.M)
#: The names the plugins know for chats (`@plugin.chat_names`, gathered by the runtime:
#: chatfn/runtime/console/views.py): this module reads no plugin's table.
ChatNames = dict[tuple[str, str], str]


def chat_list(engine: Engine, scope: Scope, names: ChatNames | None = None) -> list[dict[str, Any]]:
    """Every chat with stored messages (in scope), most recently active first; its name the
    one a plugin knows (`names`), else a private chat's sender's."""
    names = names or {}
    week = datetime.now(UTC) - timedelta(days=7)
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                M.c.platform,
                M.c.chat_id,
                func.count(),
                func.max(M.c.created_at),
                func.max(case((M.c.is_group, 1), else_=0)),
            )
            .where(scope.clause(M.c.platform, M.c.chat_id))
            .group_by(M.c.platform, M.c.chat_id)
        ).all()
        usage = {
            (r[0], r[1]): r[2:]
            for r in conn.execute(
                select(
                    U.c.platform,
                    U.c.chat_id,
                    func.count(),
                    func.sum(U.c.prompt_tokens + U.c.completion_tokens),
                    func.sum(U.c.cost),
                )
                .where(U.c.created_at >= week, scope.clause(U.c.platform, U.c.chat_id))
                .group_by(U.c.platform, U.c.chat_id)
            )
        }
        overrides: dict[tuple[str, str], dict[str, str]] = {}
        for r in conn.execute(
            select(CO.c.platform, CO.c.chat_id, CO.c.key, CO.c.value).order_by(CO.c.key)
        ):
            overrides.setdefault((r.platform, r.chat_id), {})[r.key] = r.value
        pending = {
            (r[0], r[1]): r[2]
            for r in conn.execute(
                select(OB.c.platform, OB.c.chat_id, func.count())
                .where(OB.c.state == "pending")
                .group_by(OB.c.platform, OB.c.chat_id)
            )
        }
        private = {
            (r.platform, r.chat_id): r.sender_name
            for r in conn.execute(
                select(M.c.platform, M.c.chat_id, func.max(M.c.sender_name).label("sender_name"))
                .where(M.c.role == "user", M.c.is_group.is_(False))
                .group_by(M.c.platform, M.c.chat_id)
            )
        }
    out = []
    for platform, chat_id, count, last, group in rows:
        if not scope.allows(platform, chat_id):
            continue
        key = (platform, chat_id)
        calls, tokens, cost = usage.get(key, (0, 0, None))
        out.append(
            {
                "platform": platform,
                "chat_id": chat_id,
                "name": names.get(key) or ("" if group else private.get(key, "")),
                "kind": "group" if group else "private",
                "last_active": iso(utc(last)),
                "messages": count,
                "model_calls_7d": calls or 0,
                "tokens_7d": int(tokens or 0),
                "cost_7d": round(cost, 6) if cost is not None else None,
                "overrides": [k for k in overrides.get(key, {}) if k != "reset"],
                "model_override": overrides.get(key, {}).get("model"),
                "pending": pending.get(key, 0),
            }
        )
    out.sort(key=lambda c: (c["last_active"] or "", c["platform"], c["chat_id"]), reverse=True)
    return out


def chat_facts(
    engine: Engine, platform: str, chat_id: str, names: ChatNames | None = None
) -> dict[str, Any] | None:
    """One chat's kind, name (as `chat_list` says it), message count and last activity; None
    when nothing is stored."""
    with engine.connect() as conn:
        count, last, group, last_id = conn.execute(
            select(
                func.count(),
                func.max(M.c.created_at),
                func.max(case((M.c.is_group, 1), else_=0)),
                func.max(M.c.id),
            ).where(M.c.platform == platform, M.c.chat_id == chat_id)
        ).one()
        if not count:
            return None
        name = (names or {}).get((platform, chat_id), "")
        if not name and not group:
            name = (
                conn.execute(
                    select(M.c.sender_name)
                    .where(M.c.platform == platform, M.c.chat_id == chat_id, M.c.role == "user")
                    .order_by(M.c.id.desc())
                    .limit(1)
                ).scalar()
                or ""
            )
    return {
        "platform": platform,
        "chat_id": chat_id,
        "name": name,
        "kind": "group" if group else "private",
        "last_active": iso(utc(last)),
        "messages": count,
        "last_id": last_id,
    }


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def tool_call_json(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "function": r.function,
        "arguments": _arguments(r.arguments),
        "outcome": r.outcome,
        "detail": r.detail,
        "duration_ms": round(r.duration_ms, 1),
        "source": r.source,
        "time": iso(r.created_at),
    }


def _fate_is(fate: str, held_since: datetime | None) -> Any:
    """The WHERE of one fate: recorded, or (held, expired) none recorded yet."""
    if fate not in ("held", "expired"):
        return F.c.fate == fate
    if held_since is None:
        return F.c.fate.is_(None) if fate == "held" else false()
    recent = M.c.created_at >= held_since
    return and_(F.c.fate.is_(None), recent if fate == "held" else ~recent)


def _fate_json(r: Any, held_since: datetime | None) -> dict[str, Any]:
    if r.fate is not None:
        return {"fate": r.fate, "detail": r.detail or "", "told": bool(r.told)}
    created = r.created_at if r.created_at.tzinfo else r.created_at.replace(tzinfo=UTC)
    held = held_since is None or created >= held_since
    return {"fate": "held" if held else "expired", "detail": "", "told": False}


def history_page(
    engine: Engine,
    platform: str,
    chat_id: str,
    limit: int,
    before: int | None,
    fate: str | None = None,
    held_since: datetime | None = None,
    since: datetime | None = None,
) -> dict[str, Any]:
    """A page of the chat's history, oldest first, each incoming message with the tool calls
    of its turn, whether a trace exists (a model request or a tool call for it) and its fate
    (issue 40: `{"fate", "detail", "told"}`; none recorded: held when it came in after
    `held_since`, else expired). `fate`: only the incoming messages with that fate; `since`:
    only messages from then on ("every declined message this week")."""
    q = (
        select(
            M.c.id,
            M.c.role,
            M.c.text,
            M.c.sender_id,
            M.c.sender_name,
            M.c.created_at,
            M.c.message_id,
            F.c.fate,
            F.c.detail,
            F.c.told,
        )
        .select_from(M.outerjoin(F, F.c.message == M.c.id))
        .where(M.c.platform == platform, M.c.chat_id == chat_id)
    )
    if before is not None:
        q = q.where(M.c.id < before)
    if since is not None:
        q = q.where(M.c.created_at >= since)
    if fate is not None:
        q = q.where(M.c.role == "user", _fate_is(fate, held_since))
    with engine.connect() as conn:
        rows = list(reversed(conn.execute(q.order_by(M.c.id.desc()).limit(limit + 1)).all()))
        more = len(rows) > limit
        rows = rows[-limit:] if more else rows
        ids = [r.message_id for r in rows if r.role == "user" and r.message_id]
        calls: dict[str, list[dict[str, Any]]] = {}
        traced: set[str] = set()
        if ids:
            for r in conn.execute(
                select(T)
                .where(T.c.platform == platform, T.c.chat_id == chat_id, T.c.message_id.in_(ids))
                .order_by(T.c.id)
            ):
                calls.setdefault(r.message_id, []).append(tool_call_json(r))
            traced.update(
                conn.execute(
                    select(U.c.message_id)
                    .where(
                        U.c.platform == platform, U.c.chat_id == chat_id, U.c.message_id.in_(ids)
                    )
                    .distinct()
                ).scalars()
            )
    messages = []
    for r in rows:
        mid = r.message_id or ""
        messages.append(
            {
                "id": r.id,
                "role": r.role,
                "text": r.text,
                "sender_id": r.sender_id,
                "sender_name": r.sender_name,
                "time": iso(r.created_at),
                "message_id": mid or None,
                "images": IMAGE.findall(r.text or ""),
                "tool_calls": calls.get(mid, []) if r.role == "user" else [],
                "trace": r.role == "user" and bool(mid) and (mid in traced or mid in calls),
                "fate": _fate_json(r, held_since) if r.role == "user" else None,
            }
        )
    return {
        "platform": platform,
        "chat_id": chat_id,
        "messages": messages,
        "next_before": rows[0].id if more and rows else None,
    }
