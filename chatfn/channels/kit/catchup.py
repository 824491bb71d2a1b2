"""Messages said while a channel was away, read back when it (re)connects: the part of a
catch-up that is the same on every platform.

A platform that does not keep events for a bot that is not connected (a new gateway session,
a bridge that keeps no backlog, a restart) loses what its chats said meanwhile. What a catch-up does
about it is the same everywhere: the chats with a user message stored within
`bot.resume_window` (`missed_window`) are read back from the platform's history, each from its
newest stored message, and what is in that history and not stored yet (`unstored`) is handled
like a live message, in order. A message that also arrives live is the same message id: the
channel's `inbound.first_sight` lets whichever comes first through.

What is the platform's own: how a chat's history is read (an action, a REST call, the SDK's
iterator), whose messages are the bot's, and which other chats it can learn were active.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from chatfn.runtime.channel_host import ChannelHost

__all__ = ["MissedWindow", "missed_window", "read_back", "unstored"]

T = TypeVar("T")


@dataclass(slots=True)
class MissedWindow:
    """Where to look for what was missed: the window's start (`since`), and the chats to read
    back, each with the time to read its history from (`chats`, oldest first as stored);
    `known`: every chat with a message stored in the window, read back or not."""

    since: datetime
    chats: dict[str, datetime] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)

    def add(self, chat_ids: Iterable[str]) -> None:
        """Chats the platform says were active (a recent-contacts list), read from `since`."""
        for chat_id in chat_ids:
            self.chats.setdefault(chat_id, self.since)


async def missed_window(host: ChannelHost, platform: str, now: datetime) -> MissedWindow | None:
    """The chats of `platform` to catch up at a connect at `now` (aware UTC); None when
    `bot.resume_window` is 0 (no catch-up). A chat whose newest stored message came in the
    second of `now` or later arrived live on this connection: what it missed is older than
    that message, and a history read from it would find nothing, so it is left out."""
    window = host.settings.bot.resume_window
    if window <= 0:
        return None
    found = MissedWindow(now - timedelta(seconds=window))
    live = int(now.timestamp())  # stored times are the event's whole seconds
    for chat_id, newest in await host.recent_chats(platform, found.since):
        found.known.add(chat_id)
        newest = newest if newest.tzinfo else newest.replace(tzinfo=UTC)
        if newest.timestamp() < live:
            found.chats[chat_id] = max(newest, found.since)
    return found


async def unstored(
    host: ChannelHost,
    platform: str,
    chat_id: str,
    history: AsyncIterable[T] | Iterable[T],
    ident: Callable[[T], str],
) -> AsyncIterator[T]:
    """The messages of a chat's `history` (oldest first) that are not stored yet, by their
    platform id (`ident`), in order: each one to be handled like a live message."""
    if isinstance(history, AsyncIterable):
        async for item in history:
            if not await host.was_stored(platform, chat_id, ident(item)):
                yield item
    else:
        for item in history:
            if not await host.was_stored(platform, chat_id, ident(item)):
                yield item


async def read_back(
    host: ChannelHost,
    platform: str,
    window: MissedWindow | None,
    history: Callable[[str, datetime], AsyncIterable[T]],
    ident: Callable[[T], str],
    handle: Callable[[T, str], Awaitable[object]],
    errors: tuple[type[Exception], ...],
    skipped: Callable[[str, Exception], None],
) -> int:
    """Each chat of `window` (none when it is None) read back: its `history(chat_id, after)`
    (oldest first, without the bot's own messages) from the time the window gives it, each
    message that is not stored yet handed to `handle(message, chat_id)` in order; returns
    how many. A read (or handling) failing with one of `errors` leaves the rest of that chat
    for now: `skipped(chat_id, error)` logs it, and the next chat is read."""
    found = 0
    for chat_id, after in window.chats.items() if window is not None else ():
        try:
            async for item in unstored(host, platform, chat_id, history(chat_id, after), ident):
                found += 1
                await handle(item, chat_id)
        except errors as exc:
            skipped(chat_id, exc)
    return found
