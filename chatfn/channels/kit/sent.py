"""Was it sent already? Rows the outbox owes from before a restart, looked for among the bot's
own recent messages in their chats, so a message the platform took just before the bot died
(before the outbox marked it delivered) is not sent twice: the part of `find_sent` that is the
same on every platform that can read its own messages back.

A row counts as sent when the chat holds the bot's own messages with its parts, in order, one
after another, sent since the row was written (less `leeway` seconds: the platform's clock is
not the bot's); each own message proves one part of one row only, and a row found moves the
search past it. What is the platform's own: how a chat's own messages are read, and which
parts of a row they would show (its text as sent, or only the first part).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from chatfn.common.messages import OutgoingMessage

__all__ = ["Owed", "find_sent", "match_sent", "own_since"]

T = TypeVar("T")

#: The bot's own messages in one chat: (sent at, in seconds since the epoch; text), oldest
#: first.
Own = Sequence[tuple[float, str]]


@dataclass(slots=True, frozen=True)
class Owed:
    """A row that may have been sent: its key (the outbox event id), its parts as they were
    (or would be) sent, and when it was written."""

    key: int
    parts: Sequence[str]
    created: datetime


def match_sent(owed: Sequence[Owed], own: Own, leeway: float) -> set[int]:
    """The keys of the `owed` rows (in the order they were to be sent) whose every part is
    among `own`, consecutively and since the row was written (module docstring)."""
    found: set[int] = set()
    start = 0
    for item in owed:
        if not item.parts:
            continue
        since = item.created.timestamp() - leeway
        for i in range(start, len(own) - len(item.parts) + 1):
            window = own[i : i + len(item.parts)]
            if window[0][0] >= since and [t for _, t in window] == list(item.parts):
                found.add(item.key)
                start = i + len(item.parts)
                break
    return found


async def find_sent(
    owed: list[tuple[OutgoingMessage, datetime]],
    parts: Callable[[OutgoingMessage], Sequence[str]],
    own: Callable[[str, datetime], Awaitable[Own | None]],
    leeway: float,
) -> dict[int, bool]:
    """`Channel.find_sent`: outbox event id -> True (found sent: mark it delivered) or False
    (send it). `parts(out)`: what the platform would show of a row; `own(chat_id, since)`: the
    bot's own messages in the chat since `since` ([] when there are none or the chat is not
    one the platform can read), None when they cannot be read now: that chat's rows are left
    out, asked again later. One read per chat."""
    by_chat: dict[str, list[Owed]] = {}
    for out, created in owed:
        if out.event_id is not None:
            by_chat.setdefault(out.chat_id, []).append(Owed(out.event_id, parts(out), created))
    verdicts: dict[int, bool] = {}
    for chat_id, rows in by_chat.items():
        mine = await own(chat_id, min(row.created for row in rows) - timedelta(seconds=leeway))
        if mine is not None:
            found = match_sent(rows, mine, leeway)
            verdicts |= {row.key: row.key in found for row in rows}
    return verdicts


async def own_since(
    history: AsyncIterable[T],
    own: Callable[[T], tuple[float, str] | None],
    gone: tuple[type[Exception], ...],
    later: tuple[type[Exception], ...],
) -> list[tuple[float, str]] | None:
    """`find_sent`'s `own` for a platform that reads a chat's history message by message:
    what `own(message)` gives of each message of `history` (None: not the bot's); [] when
    reading it fails with one of `gone` (the chat is not there to read, or not for the bot),
    None with one of `later` (it cannot be read now)."""
    try:
        return [mine async for item in history if (mine := own(item)) is not None]
    except gone:
        return []
    except later:
        return None
