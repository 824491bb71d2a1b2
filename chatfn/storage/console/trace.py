"""One incoming message's turn, from what the bot recorded for it: the history row, its model
requests (model_usage by message id, with round and finish reason), its tool calls (the audit
by message id) and the outbox rows that answered it (`reply_to`), plus the limit counters it
was counted against (the caller names them: they come from the config)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from chatfn.storage.chat_state import Counter, _value
from chatfn.storage.console.chats import tool_call_json
from chatfn.storage.console.sessions import iso, utc
from chatfn.storage.models import messages_table, outbox_table, tool_calls_table, usage_table

M, U, T, OB = messages_table, usage_table, tool_calls_table, outbox_table


def incoming(engine: Engine, platform: str, chat_id: str, message_id: str) -> Any:
    """The stored incoming message with this platform id (None: no such message)."""
    with engine.connect() as conn:
        return conn.execute(
            select(M).where(
                M.c.platform == platform,
                M.c.chat_id == chat_id,
                M.c.message_id == message_id,
                M.c.role == "user",
            )
        ).first()


def turn(
    engine: Engine, platform: str, chat_id: str, row: Any, counters: list[Counter]
) -> dict[str, Any]:
    """The recorded parts of the turn of `row` (an `incoming` row) and the values of
    `counters` now."""
    mid = row.message_id
    received = utc(row.created_at)
    with engine.connect() as conn:
        usage = conn.execute(
            select(U)
            .where(U.c.platform == platform, U.c.chat_id == chat_id, U.c.message_id == mid)
            .order_by(U.c.id)
        ).all()
        calls = conn.execute(
            select(T)
            .where(T.c.platform == platform, T.c.chat_id == chat_id, T.c.message_id == mid)
            .order_by(T.c.id)
        ).all()
        outbox = conn.execute(
            select(OB)
            .where(
                OB.c.platform == platform,
                OB.c.chat_id == chat_id,
                OB.c.created_at >= received - timedelta(minutes=1),
            )
            .order_by(OB.c.id)
            .limit(5000)
        ).all()
        values = [_value(conn, c) for c in counters]
    kept = []
    for r in outbox:
        payload = json.loads(r.payload)
        if payload.get("reply_to") == mid or (r.key or "").startswith(f"{mid}#"):
            kept.append((r, payload))
    deliveries = [
        {
            "event_id": r.id,
            "state": r.state,
            "attempts": r.attempts,
            "text": payload.get("text", ""),
            "notice": bool(payload.get("notice")),
            "images": payload.get("images") or [],
            "created_at": iso(r.created_at),
            "updated_at": iso(r.updated_at),
        }
        for r, payload in kept
    ]
    requests = [
        {
            "round": r.round,
            "model": r.model_name,
            "model_id": r.model_id,
            "time": iso(r.created_at),
            "latency_ms": round(r.latency_ms, 1),
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "cached_tokens": r.cached_tokens,
            "reasoning_tokens": r.reasoning_tokens,
            "finish_reason": r.finish_reason,
            "outcome": r.outcome,
            "cost": r.cost,
            "streamed": bool(r.streamed),
            "estimated": bool(r.estimated),
        }
        for r in usage
    ]
    times = [utc(r.created_at) for r in (*usage, *calls, *(r for r, _ in kept))]
    finished = max(times) if times else None
    return {
        "message": {
            "id": row.id,
            "role": row.role,
            "text": row.text,
            "sender_id": row.sender_id,
            "sender_name": row.sender_name,
            "time": iso(received),
        },
        "received_at": iso(received),
        "finished_at": iso(finished),
        "duration_ms": round((finished - received).total_seconds() * 1000, 1) if finished else None,
        "model_requests": requests,
        "tool_calls": [tool_call_json(r) for r in calls],
        "deliveries": deliveries,
        "counter_values": values,
    }
