"""Turns a chat's stored history into the messages a model sees.

Shared by the tool loop and the chat fallback so both present the same conversation: a system
prompt with the current time, the last N stored messages, and the current message once.
"""

from __future__ import annotations

from dataclasses import replace
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


def _image_notes(ctx: MessageContext) -> list[str]:
    """Per image: what `bot.vision_model` saw in it, else the short "[image]" note."""
    described = ctx.image_descriptions
    return [
        ctx.t("image.described", description=described[i])
        if i < len(described) and described[i]
        else ctx.t("image.note")
        for i in range(len(ctx.message.images))
    ]


def current_message(ctx: MessageContext) -> Message:
    msg = ctx.message
    text = msg.text
    if msg.quoted_text:
        text = f"(quoting: {msg.quoted_text[:500]})\n{text}"
    if msg.images and not ctx.images:  # a model without vision: it learns an image was there
        notes = " ".join(_image_notes(ctx))
        text = f"{text}\n{notes}" if text else notes
    if msg.is_group:
        text = f"{msg.display_name}: {text}"
    return Message(role="user", content=text, name=msg.sender_name or None, images=ctx.images)


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


# ---------------------------------------------------------------------- fitting a context window

# Per message: role and framing tokens every chat template adds; per image: a rough share.
_MESSAGE_OVERHEAD = 4
_IMAGE_TOKENS = 800
_NOTE_TOKENS = 30  # the "[truncated: ...]" note itself


def estimate_tokens(messages: list[Message]) -> int:
    """A deliberately high token count without a tokenizer: one token per 3 UTF-8 bytes (English
    runs ~4 characters a token, Chinese ~1 token a 3-byte character), so a cut to this estimate
    fits the real window."""
    total = 0
    for m in messages:
        size = len((m.content or "").encode())
        size += sum(len(c.name) + len(c.arguments or "") for c in m.tool_calls)
        total += size // 3 + _MESSAGE_OVERHEAD + _IMAGE_TOKENS * len(m.images)
    return total


def _truncate(message: Message, tokens: int) -> Message:
    text = message.content or ""
    keep = max(0, tokens - _NOTE_TOKENS) * 3
    data = text.encode()
    if len(data) <= keep:
        return message
    kept = data[:keep].decode(errors="ignore")
    note = (
        f"\n[truncated: {len(text) - len(kept)} more characters did not fit the model's "
        "context window]"
    )
    return replace(message, content=kept + note)


def fit_messages(messages: list[Message], budget: int) -> list[Message]:
    """`messages` cut to about `budget` tokens for a retry after a context-length error: the
    oldest history goes first, a whole user turn at a time (a reply never loses its question);
    then the largest remaining messages are truncated with a note. The system prompt and the
    current turn (the last user message and the tool rounds after it) stay."""
    if estimate_tokens(messages) <= budget:
        return list(messages)
    head = messages[:1] if messages and messages[0].role == "system" else []
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=len(head))
    middle, tail = list(messages[len(head) : last_user]), list(messages[last_user:])
    while middle and estimate_tokens(head + middle + tail) > budget:
        # Drop the oldest turn: its user message and everything up to the next one.
        cut = next((i for i, m in enumerate(middle) if i and m.role == "user"), len(middle))
        middle = middle[cut:]
    out = head + middle + tail
    over = estimate_tokens(out) - budget
    # Largest first: one oversized message (the usual cause) takes the whole cut.
    for index in sorted(range(len(out)), key=lambda i: -len(out[i].content or "")):
        if over <= 0:
            break
        message = out[index]
        size = estimate_tokens([message])
        # Keep at least a little of every message, so the model still sees what it was.
        room = max(size - over, min(size, 200))
        out[index] = _truncate(message, room - _MESSAGE_OVERHEAD)
        over -= size - estimate_tokens([out[index]])
    return out
