"""The way out to OneBot: a message's parts as `send_group_msg` / `send_private_msg` actions
on the account that serves the chat, on the kit's sender (chatfn/channels/kit/sender.py: one
queue and pace per account and chat, a failed action tried again, what is still owed). The
delivery policy, retries and the history check before a resend: channel.py's docstring.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit import sent as kit_sent
from chatfn.channels.kit.plain import plain_parts, plain_text
from chatfn.channels.kit.recent import Recent
from chatfn.channels.kit.sender import chat_kind
from chatfn.channels.kit.voice import spoken_audio, unsent
from chatfn.channels.onebot.history import (
    CLOCK_SLACK,
    HistoryReader,
    Owed,
    match_sent,
    plain_words,
)
from chatfn.channels.onebot.link import ActionError, ActionTimeout, NotConnected, OneBotLink, _int
from chatfn.channels.onebot.message import outgoing_segments
from chatfn.channels.onebot.settings import OneBotSettings
from chatfn.common import audio
from chatfn.common.messages import DeliveryRefused, NotDelivered, OutgoingMessage
from chatfn.runtime.channel_host import DeliveryPolicy

__all__ = ["DeliveryError", "OneBotSender", "Target"]

_ID = re.compile(r".+")
# Chats whose serving account is remembered (the most recently active ones; ~150 bytes each).
ROUTES_KEPT = 50_000


class DeliveryError(DeliveryRefused):
    """A message could not be delivered after its retry; raised from `OneBotChannel.send`."""


@dataclass(frozen=True, slots=True)
class Target:
    """A chat and the account that sends to it."""

    self_id: str
    is_group: bool
    target: str

    @property
    def chat_id(self) -> str:
        return f"{'group' if self.is_group else 'private'}:{self.target}"

    @property
    def key(self) -> str:  # one queue and one pace per account and chat
        return f"{self.chat_id}@{self.self_id}"

    @property
    def action(self) -> str:
        return "send_group_msg" if self.is_group else "send_private_msg"

    def params(self, message: list[dict[str, Any]]) -> dict[str, Any]:
        return {"group_id" if self.is_group else "user_id": _int(self.target), "message": message}


class OneBotSender(kit.PlatformSender[Target], platform="onebot", label="OneBot"):
    """Sends OutgoingMessages through the account `route(chat_id)` names (the one that last
    saw the chat); `sent(message_id, text)` is told of each part that went out (quotes)."""

    refused = DeliveryError

    def __init__(
        self,
        link: OneBotLink,
        settings: OneBotSettings,
        policy: DeliveryPolicy | None,
        *,
        sent: Callable[[str, str], None],
    ) -> None:
        super().__init__(link, settings, policy)
        self.link, self.sent = link, sent
        self.routes: Recent[str, str] = Recent(ROUTES_KEPT)  # chat id -> the account that saw it
        self.history = HistoryReader(link.call_action)
        # Per account: one message at a time is split and rendered, one per pass of the event
        # loop, so a thousand owed to one account do not take the loop from the others.
        self._preparing: dict[str, asyncio.Lock] = {}

    def serves(self, chat_id: str, self_id: str) -> None:
        """Note the account that serves `chat_id`, keeping the `ROUTES_KEPT` most recent chats:
        a bot in more chats than that forgets the longest idle ones (a message to one of those
        goes through the first connected account until that chat speaks again)."""
        self.routes.put(chat_id, self_id)

    def route(self, chat_id: str) -> str:
        """The account that last saw this chat; with none known, the only (or first)
        connected account (a reminder after a restart)."""
        known = self.routes.get(chat_id)
        if known is not None:
            return known
        if self.link.self_ids:
            return self.link.self_ids[0]
        raise NotDelivered(f"no OneBot account is connected; message to {chat_id} waits")

    def parse_chat(self, chat_id: str) -> Target:
        self_id = self.route(chat_id)  # NotDelivered when no account is connected
        shapes = "group:N, private:N"
        return Target(
            self_id, *chat_kind(chat_id, "a OneBot chat id", shapes, private=_ID, group=_ID)
        )

    def split(self, text: str) -> list[str]:
        """QQ shows no Markdown: the model's Markdown goes out as plain text (to_plain: emphasis
        dropped, links as `label (url)`, lists as bullets), split where a reader would (never
        inside a code block), each part converted as it is sent. The parts stay Markdown until
        then, so what is owed after a partial send is still the model's text."""
        return plain_parts(text, self.cfg.max_message_length)

    async def send_parts(self, ref: Target, out: OutgoingMessage, owed: kit.Owed) -> None:
        try:
            # In the chat's order: first the account, then the work. A message its account
            # cannot take now is refused before it is split and rendered (a millisecond for
            # 9 KB: a thousand owed to an account that stopped reading, tried at once, held
            # every other account's replies for seconds).
            await self.link._can_send(ref.self_id, ref.action)  # waits up to reconnect_wait
            async with self._preparing.setdefault(ref.self_id, asyncio.Lock()):
                self.link._writable(ref.self_id, ref.action)  # still, after waiting for the lock
                owed.parts = self.split(out.text)
                await asyncio.sleep(0)  # the account's next message: on the loop's next pass
            for index in range(len(owed.parts)):
                await self.call(ref.key, partial(self._send_part, ref, out, index, owed.parts))
                owed.sent += 1
            for voice in out.audio:  # the reply spoken (voice.tts): a record message of its own
                await self.limiter.acquire(ref.key)
                await self._send_record(ref, voice)
        except NotConnected as exc:
            raise NotDelivered(f"account {ref.self_id} is not connected ({exc})") from None

    async def _send_part(
        self, ref: Target, out: OutgoingMessage, index: int, parts: list[str]
    ) -> None:
        first = index == 0
        plain = plain_text(parts[index])
        segments = outgoing_segments(
            plain,
            at=out.at if first and ref.is_group else None,
            reply_to=out.reply_to if first and out.quote else None,
            images=out.images if index == len(parts) - 1 else (),
        )
        params = ref.params(segments)
        data = await self.retried(
            ref.chat_id,
            partial(self.link.call_action, ref.self_id, ref.action, params),
            what=ref.action,
            about=out.text,
            sent=partial(self._sent_meanwhile, ref, plain),
        )
        if data and data.get("message_id") is not None:
            self.sent(str(data["message_id"]), plain)

    def failure(self, exc: Exception) -> str | None:
        """A retcode (or no answer) is tried again; an account away is not (it waits)."""
        if isinstance(exc, ActionError) and not isinstance(exc, NotConnected):
            return f"retcode {exc.retcode}"
        return None

    def unsure(self, exc: Exception) -> bool:
        return isinstance(exc, ActionTimeout) or isinstance(exc, NotConnected) and exc.in_flight

    async def _send_record(self, ref: Target, ref_audio: str) -> None:
        """A spoken reply as a `record` segment in SILK (what QQ plays), sent once after its
        text: a voice that cannot be converted or sent is logged, the text having gone."""
        with unsent(self.log, self.label, ref.chat_id, also=(ActionError,)):  # NotConnected too
            silk = await audio.to_silk(spoken_audio(ref_audio, "QQ plays SILK sent as base64"))
            file = "base64://" + base64.b64encode(silk).decode()
            record = [{"type": "record", "data": {"file": file}}]
            await self.link.call_action(ref.self_id, ref.action, ref.params(record))

    async def _sent_meanwhile(self, ref: Target, text: str, started: datetime) -> bool:
        """Whether the part `text` shows in the chat's history since `started` (waiting up to
        `reconnect_wait` for the account); False when that cannot be told. An account that
        stays away raises NotConnected: the message waits in the outbox, and is not waited
        for a second time by a resend."""
        if not text.strip():  # an image alone: nothing to recognise it by; sent again
            return False
        await self.link._connection(ref.self_id, self.cfg.reconnect_wait)
        try:
            own = await self.history.own_messages(ref.self_id, ref.chat_id)
        except NotConnected:
            return False
        return own is not None and bool(match_sent([Owed(0, [text], started)], own))

    async def find_sent(self, owed: list[tuple[OutgoingMessage, datetime]]) -> dict[int, bool]:
        """The outbox asks, before sending rows owed from before a restart, which of them went
        out already (sent, but the bot died before marking them): event id -> True (found in
        the chat's history: mark delivered), False (not found, or the history cannot be read:
        send). Rows of chats whose account is not connected are left out (ask again when it
        is). One history action per chat (chatfn/channels/kit/sent.py)."""

        async def own(chat_id: str, _since: datetime) -> list[tuple[float, str]] | None:
            try:
                found = await self.history.own_messages(self.route(chat_id), chat_id)
            except (NotConnected, NotDelivered):
                return None
            return found or []

        def parts(out: OutgoingMessage) -> list[str]:  # as they go out, as QQ shows them
            return [plain_words(plain_text(part)) for part in self.split(out.text)]

        return await kit_sent.find_sent(owed, parts, own, CLOCK_SLACK)
