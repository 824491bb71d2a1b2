"""The trace of one incoming message: what chatfn/storage/console/trace.py finds recorded for it,
and
the limits it was counted against (the checks `limits.plan` makes for it, with the chat's
overrides, in the windows of the message's time) with their counters' values now."""

from __future__ import annotations

from typing import Any

from chatfn.common.messages import IncomingMessage
from chatfn.runtime.console.errors import ConsoleError
from chatfn.storage.console import trace as store
from chatfn.storage.console.scope import Scope
from chatfn.storage.console.sessions import utc
from function_calls import limits
from function_calls.chat_settings import resolve


async def turn(
    console: Any, scope: Scope, platform: str, chat_id: str, message_id: str
) -> dict[str, Any]:
    bot = console._bot
    storage = bot.storage
    missing = ConsoleError(404, f"no incoming message {message_id} in {platform}:{chat_id}")
    if not scope.allows(platform, chat_id):
        raise missing
    row = await storage.run_aside(store.incoming, storage.engine, platform, chat_id, message_id)
    if row is None:
        raise missing
    msg = IncomingMessage(
        platform=platform,
        chat_id=chat_id,
        sender_id=row.sender_id,
        sender_name=row.sender_name,
        text=row.text,
        is_group=bool(row.is_group),
        message_id=message_id,
    )
    overrides = await storage.run_aside(storage.chat_state.overrides, platform, chat_id)
    default = bot.model.name if bot.model is not None else None
    chat = resolve(bot.settings, msg, overrides, default_model=default)
    named = limits.plan(
        bot.settings, msg, bot.is_admin(msg), now=utc(row.created_at), limits=chat.limits
    )
    counters = [c.counter for _, _, c in named]
    found = await storage.run_aside(store.turn, storage.engine, platform, chat_id, row, counters)
    values = found.pop("counter_values")
    answered = bool(found["model_requests"])
    models = {r["model"] for r in found["model_requests"]}
    checks = []
    for (scope_name, metric, check), value in zip(named, values, strict=True):
        over = value >= check.limit
        outcome = "ok"
        if over and not answered:
            outcome = "refused"
        elif metric in limits.BUDGETS and chat.downgrade_to in models and over:
            outcome = "downgraded"
        shown = value / limits.MICROS if metric == "cost_per_day" else value
        limit = check.limit / limits.MICROS if metric == "cost_per_day" else check.limit
        checks.append(
            {
                "scope": "user" if scope_name == "per_user" else "chat",
                "metric": metric,
                "window": check.counter.window,
                "limit": limit,
                "value": shown,
                "outcome": outcome,
            }
        )
    replies = [
        {
            "event_id": d["event_id"],
            "text": d["text"],
            "notice": d["notice"],
            "time": d["created_at"],
        }
        for d in found["deliveries"]
    ]
    return {
        "platform": platform,
        "chat_id": chat_id,
        "message_id": message_id,
        **found,
        "limits": checks,
        "replies": replies,
    }
