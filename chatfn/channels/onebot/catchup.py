"""Messages posted while the bot was away, read back when an account (re)connects.

OneBot v11 has no ack, and the implementations do not keep events for a bot that is not
connected: what a group said while the bot restarted (or in the instant of a SIGKILL, or during
a dropped socket) never arrives as an event. When an account connects, the chats that were
active lately (a user message stored within `bot.resume_window`) get one history action each
(`get_group_msg_history` / `get_friend_msg_history`, see history.py); the messages in it
that are newer than the chat's last stored one, not the account's own, and not stored or seen
already (by platform message id) are handled like new events, in order. A message arriving live
at the same moment is the same message id: whichever comes first is handled, the other skipped
(`OneBotChannel._first_sight`).

Chats the bot stored nothing for lately (a group whose first message was lost at the kill) are
found with NapCat's `get_recent_contact` (once per connect, the RECENT_CONTACTS most recent
chats, each with its latest message and `msgTime`): a group or friend chat whose latest message
is within the window and not the account's own gets the same history catch-up. An
implementation without that action (1404, or any failed status) keeps the stored-chats-only
behaviour, logged once per account.

Not covered: a chat active while the bot was away but not among the RECENT_CONTACTS most recent
ones (or with no `get_recent_contact`: one with no user message stored within the window), and
anything beyond the last HISTORY_COUNT messages of a chat.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loguru import logger

from chatfn.channels.kit.catchup import missed_window, unstored
from chatfn.channels.onebot.history import HistoryReader, is_own
from chatfn.channels.onebot.link import ActionError, ActionTimeout, NotConnected, _Connection, _int

if TYPE_CHECKING:
    from chatfn.channels.onebot.link import OneBotLink

# How many recent chats get_recent_contact is asked for at a connect: each one newer than the
# window costs one history action, so this bounds the work a reconnect does.
RECENT_CONTACTS = 50
# NTQQ's chatType in get_recent_contact: 1 a friend (C2C), 2 a group.
_CHAT_KINDS = {1: "private", 2: "group"}


class CatchUp:
    def __init__(
        self, link: OneBotLink, on_missed: Callable[[_Connection, dict[str, Any]], bool]
    ) -> None:
        """`on_missed(conn, event)` hands a missed message on like a live event; False when
        that message id was seen already (it arrived live meanwhile)."""
        self.link = link
        self._on_missed = on_missed
        self.history = HistoryReader(link.call_action)
        self._unsupported = self.history.unsupported  # get_recent_contact's, too
        self.calls = 0
        self.found = 0

    async def run(self, conn: _Connection) -> int:
        """Catch up the recently active chats for the account of `conn`; returns how many
        missed messages were handed on."""
        connected = datetime.now(UTC)
        window = await missed_window(self.link.host, self.link.platform, connected)
        if window is None:
            return 0
        found = 0
        try:
            recent = await self._recent(conn, window.since, connected)
            window.add(recent := [c for c in recent if c not in window.known])
            if window.chats:
                logger.info(
                    "OneBot account {}: catching up {} chat(s) ({} from get_recent_contact)",
                    conn.self_id,
                    len(window.chats),
                    len(recent),
                )
            for chat_id, after in window.chats.items():
                found += await self._chat(conn, chat_id, after)
        except NotConnected:
            pass
        if found:
            logger.warning(
                "OneBot account {}: {} message(s) posted while the bot was away caught up "
                "from the chat history",
                conn.self_id,
                found,
            )
        self.found += found
        return found

    async def _recent(self, conn: _Connection, since: datetime, connected: datetime) -> list[str]:
        """The chats (`group:<id>` / `private:<id>`) whose latest message, by NapCat's
        get_recent_contact, is not older than `since` and older than the second of this
        connect (newer ones arrived live); [] when the action is missing."""
        action = "get_recent_contact"
        if (conn.self_id, action) in self._unsupported:
            return []
        self.calls += 1
        try:
            data = await self.link.call_action_raw(
                conn.self_id, action, {"count": RECENT_CONTACTS}, wait=0
            )
        except NotConnected:
            raise
        except ActionTimeout as exc:  # slow, not missing: asked again at the next connect
            logger.debug("{} of account {}: {}", action, conn.self_id, exc)
            return []
        except ActionError as exc:
            self._unsupported.add((conn.self_id, action))
            logger.warning(
                "OneBot account {} has no usable {} ({}): only chats with a message stored "
                "lately are caught up after a reconnect",
                conn.self_id,
                action,
                exc,
            )
            return []
        chats: list[str] = []
        floor = since.timestamp() - 1  # msgTime is whole seconds, like the stored times
        live = int(connected.timestamp())
        for item in data if isinstance(data, list) else []:
            if not isinstance(item, dict):
                continue
            kind, when = None, 0.0
            with contextlib.suppress(KeyError, TypeError, ValueError):
                kind = _CHAT_KINDS.get(int(item["chatType"]))
                when = float(item.get("msgTime") or 0)
            peer = str(item.get("peerUin") or "")
            if kind and peer.isdigit() and peer != "0" and floor <= when < live:
                if not is_own(item.get("lastestMsg"), conn.self_id):
                    chats.append(f"{kind}:{peer}")
        return chats

    async def _chat(self, conn: _Connection, chat_id: str, after: datetime) -> int:
        try:
            messages = await self.history.messages(conn.self_id, chat_id)
        except NotConnected:
            raise
        except ActionError as exc:
            if exc.retcode == 1404:
                logger.warning(
                    "OneBot account {} has no {}: messages posted while the bot was away are "
                    "not caught up",
                    conn.self_id,
                    exc.action,
                )
            else:
                logger.debug("catch-up of {} failed: {}", chat_id, exc)
            return 0
        # Stored times are whole seconds (the event's `time`): the same second counts as
        # newer, and `unstored` drops what was stored already.
        floor = after.timestamp() - 1
        theirs = [m for m in messages or () if _theirs(m, conn.self_id, floor)]
        kind, _, target = chat_id.partition(":")
        found = 0
        host, platform = self.link.host, self.link.platform
        async for item in unstored(host, platform, chat_id, theirs, _message_id):
            event = {**item, "post_type": "message", "message_type": kind}
            event["self_id"] = conn.self_id
            if kind == "group":
                event["group_id"] = item.get("group_id", _int(target))
            found += self._on_missed(conn, event)
        return found


def _theirs(item: Any, self_id: str, floor: float) -> bool:
    """A message of a history answer to catch up: a user's (not the account's own), with an
    id, not older than `floor`."""
    if is_own(item, self_id) or not item.get("message_id"):
        return False
    when = 0.0
    with contextlib.suppress(TypeError, ValueError):
        when = float(item.get("time") or 0)
    return when >= floor


def _message_id(item: dict[str, Any]) -> str:
    return str(item["message_id"])
