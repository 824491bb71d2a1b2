"""Messages posted while the bot was not connected, read back at READY.

A RESUME replays what the session missed (discord.py does it), but a new session (a restart,
an invalid session, a resume refused) starts with nothing: what a chat said meanwhile never
arrives as an event. At each READY the chats with a user message stored within
`bot.resume_window` get one history read each (`GET /channels/{id}/messages?after=`, up to
HISTORY messages after the chat's newest stored one); messages in it that are not the bot's
and not stored yet are handled like live ones, in order (the kit's catch-up,
chatfn/channels/kit/catchup.py). A message that also arrives live is handled once (the
channel's `inbound.first_sight`, by message id).

Not covered: a chat with no user message stored within the window (the bot cannot know it
was spoken in), and more than HISTORY messages of one chat.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import discord
from loguru import logger

from chatfn.channels.discord.message import Target, target_of
from chatfn.channels.kit.catchup import missed_window, unstored
from chatfn.runtime.channel_host import ChannelHost

HISTORY = 50


class Reader(Protocol):
    """What catch-up needs of the channel (channel.py's DiscordChannel)."""

    platform: str
    host: ChannelHost
    client: Any

    async def messageable(self, target: Target) -> discord.abc.Messageable: ...


async def catch_up(
    channel: Reader, hand_on: Callable[[discord.Message, str], Awaitable[None]]
) -> int:
    """Hand on what recently active chats said since their newest stored message; returns how
    many messages were caught up."""
    host, client = channel.host, channel.client
    if client is None or client.user is None:
        return 0
    window = await missed_window(host, channel.platform, datetime.now(UTC))
    found = 0
    for chat_id, after in window.chats.items() if window is not None else ():
        target = target_of(chat_id)
        if target is None:
            continue
        try:
            where = await channel.messageable(target)
            read = where.history(limit=HISTORY, after=after, oldest_first=True)
            theirs = (seen async for seen in read if seen.author.id != client.user.id)
            async for seen in unstored(
                host, channel.platform, chat_id, theirs, lambda m: str(m.id)
            ):
                found += 1
                await hand_on(seen, chat_id)
        except discord.HTTPException as exc:
            logger.debug("Discord catch-up of {} skipped: {}", chat_id, exc)
        except OSError as exc:
            logger.debug("Discord catch-up of {} skipped: {!r}", chat_id, exc)
    if found:
        logger.info("Discord: {} message(s) said while the bot was away handled now", found)
    return found
