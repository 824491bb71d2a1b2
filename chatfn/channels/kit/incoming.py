"""A user's message as the bot takes it, built the same way on every platform.

`incoming` cleans what a platform's parse found (control characters out, the text capped at
MAX_TEXT_CHARS with a note, names cut to 128 characters) and gives None for a message that
says nothing (no text, no image, no quote): the one place those rules live. `sent_at` reads
a platform's timestamp (seconds, milliseconds or ISO 8601) as an aware UTC time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from chatfn.common.messages import IncomingMessage, capped_text, clean_text

__all__ = ["chat_parts", "incoming", "sent_at"]

_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)


def sent_at(value: Any, *, ms: bool = False) -> datetime:
    """When a message was sent: `value` in seconds (milliseconds with `ms`) since the epoch,
    or an ISO 8601 string; now when it is missing, unreadable or before 2000."""
    try:
        if isinstance(value, str) and not value.replace(".", "", 1).isdigit():
            when = datetime.fromisoformat(value).astimezone(UTC)
        else:
            when = datetime.fromtimestamp(float(value) / (1000 if ms else 1), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC)
    return when if when >= _EARLIEST else datetime.now(UTC)


def chat_parts(
    chat_id: str,
    ident: re.Pattern[str],
    thread: re.Pattern[str],
    platform: str,
    shapes: str,
    *,
    private_threads: bool = True,
) -> tuple[bool, str, str | None]:
    """`private:<id>`, `group:<id>` or `<kind>:<id>:thread:<t>` (the chat ids of a platform
    whose chats have threads) as (is_group, id, thread), when `id` and `t` are of the
    platform's shape (`ident`, `thread`); else ValueError naming the `shapes` expected."""
    found = _chat_parts(chat_id, ident, thread, private_threads)
    if found is None:
        raise ValueError(f"not a {platform} chat id: {chat_id!r} (expected {shapes})")
    return found


def _chat_parts(
    chat_id: str, ident: re.Pattern[str], thread: re.Pattern[str], private_threads: bool
) -> tuple[bool, str, str | None] | None:
    parts = chat_id.split(":")
    if len(parts) not in (2, 4) or parts[0] not in ("private", "group"):
        return None
    group = parts[0] == "group"
    if not ident.match(parts[1]):
        return None
    if len(parts) == 2:
        return group, parts[1], None
    if parts[2] != "thread" or not thread.match(parts[3]) or not (group or private_threads):
        return None
    return group, parts[1], parts[3]


def incoming(
    platform: str,
    label: str,
    chat_id: str,
    sender_id: str,
    text: str,
    *,
    sender_name: str = "",
    chat_name: str = "",
    quoted: str | None = None,
    images: list[str] | None = None,
    **fields: Any,
) -> IncomingMessage | None:
    """The IncomingMessage of a user's message (module docstring); `label` names the platform
    in the note of a capped text; `fields` are IncomingMessage's (is_group, is_at_bot, ...)."""
    text = capped_text(clean_text(text), label, sender_id)
    said = fields.get("audio") or fields.get("transcript")  # a voice (platform-transcribed)
    if not text and not images and not quoted and not said:
        return None
    return IncomingMessage(
        platform=platform,
        chat_id=chat_id,
        sender_id=sender_id,
        text=text,
        sender_name=clean_text(sender_name)[:128],
        chat_name=clean_text(chat_name)[:128],
        quoted_text=clean_text(quoted) if quoted else None,
        images=images or [],
        **fields,
    )
