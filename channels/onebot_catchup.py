"""Messages posted while the bot was away, read back when an account (re)connects.

OneBot v11 has no ack, and the implementations do not keep events for a bot that is not
connected: what a group said while the bot restarted (or in the instant of a SIGKILL, or during
a dropped socket) never arrives as an event. When an account connects, the chats that were
active lately (a user message stored within `bot.resume_window`) get one history action each
(`get_group_msg_history` / `get_friend_msg_history`, see onebot_history.py); the messages in it
that are newer than the chat's last stored one, not the account's own, and not stored or seen
already (by platform message id) are handled like new events, in order. A message arriving live
at the same moment is the same message id: whichever comes first is handled, the other skipped
(`OneBotChannel._first_sight`).

Not covered: a chat with no user message stored within the window (the bot cannot know it was
active without asking every group the account is in), and anything beyond the last
HISTORY_COUNT messages of a chat.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from loguru import logger

from channels.onebot_history import HISTORY_COUNT
from channels.onebot_link import ActionError, NotConnected, _Connection, _int

if TYPE_CHECKING:
    from channels.onebot_link import OneBotLink


class CatchUp:
    def __init__(
        self, link: OneBotLink, on_missed: Callable[[_Connection, dict[str, Any]], bool]
    ) -> None:
        """`on_missed(conn, event)` hands a missed message on like a live event; False when
        that message id was seen already (it arrived live meanwhile)."""
        self.link = link
        self._on_missed = on_missed
        self._unsupported: set[tuple[str, str]] = set()
        self.calls = 0
        self.found = 0

    async def run(self, conn: _Connection) -> int:
        """Catch up the recently active chats for the account of `conn`; returns how many
        missed messages were handed on."""
        window = self.link.bot.settings.bot.resume_window
        if not window:
            return 0
        storage = self.link.bot.storage
        connected = datetime.now(UTC)
        since = connected - timedelta(seconds=window)
        chats = await storage.run(storage.cluster.recent_chats, self.link.platform, since)
        found = 0
        for chat_id, last in chats:
            if last.timestamp() >= int(connected.timestamp()):
                # Its newest message arrived live on this connection (stored times are the
                # event's whole seconds): what it missed is older, so nothing newer is missing.
                continue
            try:
                found += await self._chat(conn, chat_id, max(last, since))
            except NotConnected:
                break
        if found:
            logger.warning(
                "OneBot account {}: {} message(s) posted while the bot was away caught up "
                "from the chat history",
                conn.self_id,
                found,
            )
        self.found += found
        return found

    async def _chat(self, conn: _Connection, chat_id: str, after: datetime) -> int:
        kind, _, target = chat_id.partition(":")
        if kind == "group":
            action, params = "get_group_msg_history", {"group_id": _int(target)}
        elif kind == "private":
            action, params = "get_friend_msg_history", {"user_id": _int(target)}
        else:
            return 0
        if (conn.self_id, action) in self._unsupported:
            return 0
        self.calls += 1
        try:
            data = await self.link.call_action(
                conn.self_id, action, {**params, "count": HISTORY_COUNT}, wait=0
            )
        except NotConnected:
            raise
        except ActionError as exc:
            if exc.retcode == 1404:
                self._unsupported.add((conn.self_id, action))
                logger.warning(
                    "OneBot account {} has no {}: messages posted while the bot was away are "
                    "not caught up",
                    conn.self_id,
                    action,
                )
            else:
                logger.debug("catch-up of {} failed: {}", chat_id, exc)
            return 0
        storage = self.link.bot.storage
        messages = data.get("messages")
        found = 0
        # Stored times are whole seconds (the event's `time`): the same second counts as
        # newer, and the stored check below drops what was stored already.
        floor = after.timestamp() - 1
        for item in messages if isinstance(messages, list) else []:
            if not isinstance(item, dict) or item.get("post_type") == "message_sent":
                continue
            if str(item.get("user_id", "")) == conn.self_id or not item.get("message_id"):
                continue
            when = 0.0
            with contextlib.suppress(TypeError, ValueError):
                when = float(item.get("time") or 0)
            if when < floor:
                continue
            message_id = str(item["message_id"])
            stored = await storage.run(
                storage.cluster.stored_message, self.link.platform, chat_id, "user", message_id
            )
            if stored is not None:
                continue
            event = {
                **item,
                "post_type": "message",
                "message_type": kind,
                "self_id": conn.self_id,
            }
            if kind == "group":
                event["group_id"] = item.get("group_id", params["group_id"])
            found += self._on_missed(conn, event)
        return found
