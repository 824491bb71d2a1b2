"""Turns a chat's stored history into the messages a model sees.

Shared by the tool loop and the chat fallback so both present the same conversation: a system
prompt with the current time, the last N stored messages, and the current message once.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from function_calls.context import MessageContext
from providers.types import Message
from storage.db import StoredMessage


def system_prompt(ctx: MessageContext, extra: str = "") -> str:
    bot = ctx.config.bot
    # The zone users and functions think in (bot.timezone), so times the model works out
    # ("in 2 hours" -> 15:30) match what reminder_set will read; else the machine's.
    zone = ctx.config.bot.timezone
    now = datetime.now(ZoneInfo(zone)) if zone else datetime.now().astimezone()
    place = (
        f"a group chat ({ctx.message.chat_name or ctx.message.chat_id})"
        if ctx.message.is_group
        else "a private chat"
    )
    # The chat's persona or system prompt (`chats:` rules, `/persona`), else `bot:`'s.
    base = ctx.chat.system_prompt.replace("{bot_name}", bot.name)
    lines = [
        base,
        f"Current time: {now:%Y-%m-%d %H:%M} ({now:%A}), time zone {now.tzname()} (UTC{now:%z}).",
        f"You are in {place}, talking to {ctx.message.display_name}.",
    ]
    if extra:
        lines.append(extra)
    return "\n".join(lines)


def _as_message(row: StoredMessage, bot_id: str) -> Message:
    if row.role == "assistant":
        return Message(role="assistant", content=row.text)
    content = f"{row.sender_name or row.sender_id}: {row.text}" if row.is_group else row.text
    return Message(role="user", content=content, name=row.sender_name or None)


def history_messages(rows: list[StoredMessage]) -> list[Message]:
    """Stored rows to model messages, starting at a user turn: a window that opens on the bot's
    own reply would show an answer without its question. The bot's own notices (outages) are
    not the model's words and are left out."""
    rows = [r for r in rows if r.role != "notice"]
    start = 0
    while start < len(rows) and rows[start].role != "user":
        start += 1
    return [_as_message(r, "") for r in rows[start:]]


def current_message(ctx: MessageContext) -> Message:
    msg = ctx.message
    text = msg.text
    if msg.quoted_text:
        text = f"(quoting: {msg.quoted_text[:500]})\n{text}"
    if msg.is_group:
        text = f"{msg.display_name}: {text}"
    return Message(role="user", content=text, name=msg.sender_name or None)


def build_messages(
    ctx: MessageContext, *, extra_system: str = "", history_limit: int | None = None
) -> list[Message]:
    limit = ctx.chat.history_size if history_limit is None else history_limit
    rows = ctx.history(limit) if limit else []
    return [
        Message(role="system", content=system_prompt(ctx, extra_system)),
        *history_messages(rows),
        current_message(ctx),
    ]
