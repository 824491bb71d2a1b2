"""The LINE channel and the local Messaging API (line_fake.py) as the channel contract drives
them. The webhook is served by the bot's one web server (its main listener on port 0), as
`--channel http` serves it; pictures the bot makes are served there too (`public_url`, plain
http on 127.0.0.1, which the fake is told to allow). A contract chat's native id "1001" is the
LINE user U000...1001, group "5001" the group C000...5001."""

from __future__ import annotations

import asyncio
from typing import Any

from chatfn.channels.line import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.line.line_fake import FakeLine, Posted
from tests.channels.wecom.wecom_driver import serve_webhooks


def user_id(native: str) -> str:
    return "U" + native.rjust(32, "0")


def chat_native(chat: Chat) -> str:
    return ("C" if chat.kind == "group" else "U") + chat.native.rjust(32, "0")


def native_of(line_id: str) -> str:
    return line_id[1:].lstrip("0")


def as_sent(chat: Chat, posted: list[Posted]) -> list[Sent]:
    """Images shown with the text after them (the channel sends a reply's images first)."""
    out: list[Sent] = []
    images: list[bytes | str] = []
    for p in posted:
        if p.image is not None:
            images.append(p.image)
            continue
        mentions = [native_of(m) for m in p.mentions]
        out.append(Sent(chat=chat, text=p.text, mentions=mentions, quote=p.quote, images=images))
        images = []
    if images:
        out.append(Sent(chat=chat, text="", images=images))
    return out


class LineDriver:
    platform = "line"
    features = frozenset(
        {
            "groups",
            "quote",
            "images_in",
            "images_out",
            "plain",
            "split",
            "rate_limit",
            "crash_redelivery",
            "member_joined",
            "credentials",
        }
    )
    # LINE's limit is 5000; the contract's essay (4851 characters) must be split, so less.
    max_length = 2000

    def __init__(self, fake: FakeLine, **settings: Any) -> None:
        self.fake = fake
        self.bot_user = fake.bot_id
        self.settings = settings
        self.channel: Any = None
        self.listener: Any = None
        self._task: asyncio.Task[None] | None = None
        self._token = fake.token

    def platform_id(self, chat: Chat) -> str:
        return chat_native(chat)

    def channel_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "channel_secret": self.fake.secret,
            "channel_access_token": self.fake.token,
            "api_base": self.fake.base,
            "public_url": "http://127.0.0.1:1",  # the listener's port, set in attach
            "send_rate": 0,
            "max_message_length": self.max_length,
        }
        return {**settings, **self.settings}

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self.listener = await serve_webhooks(host)
        base = f"http://127.0.0.1:{self.listener.bound_port}"
        self.fake.callback_url = base + settings.webhook_path
        if self.channel.media is not None:
            self.channel.media.public_url = base
        self.fake.allow_http = True
        self.channel.keepalive = 0.1  # the token check while serving, every 300 s
        self._task = asyncio.create_task(self.channel.run())
        async with asyncio.timeout(30):
            await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.listener is not None:
            await self.listener.stop()
            self.listener = None

    def chat_id(self, chat: Chat) -> str:
        return f"{chat.kind}:{chat_native(chat)}"

    def source(self, chat: Chat, sender: str) -> dict[str, Any]:
        if chat.kind == "group":
            return {"type": "group", "groupId": chat_native(chat), "userId": user_id(sender)}
        return {"type": "user", "userId": chat_native(chat)}

    async def say(
        self,
        chat: Chat,
        text: str,
        *,
        sender: str = "1001",
        mention: bool = False,
        image: bytes | None = None,
        role: str | None = None,
    ) -> str:
        """LINE has no caption: a text with an image is two messages (the text first); the
        image's id is returned."""
        fake = self.fake
        source = self.source(chat, sender)
        events, message = [], None
        if text or image is None:
            message = fake.text_message(text, mention_self=mention)
            events.append(fake.message_event(source, message))
        if image is not None:
            message = fake.image_message(image)
            events.append(fake.message_event(source, message))
        status = await fake.deliver(*events)
        assert status == 200, (status, fake.webhook_answers)
        return str(message["id"]) if message else ""

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        to = chat_native(chat)
        async with asyncio.timeout(timeout):
            while True:
                got = as_sent(chat, await self.fake.wait_sent(to, 1, timeout))
                if len(got) >= count and got[-1].text:
                    return got
                await self.fake.wait_sent(to, len(self.fake.sent[to]) + 1, timeout)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        self.fake.names[user_id(user)] = name
        event = {
            "type": "memberJoined",
            "mode": "active",
            "timestamp": 1700000000000,
            "source": {"type": "group", "groupId": chat_native(chat)},
            "webhookEventId": "01JOIN" + chat.native + user,
            "deliveryContext": {"isRedelivery": False},
            "replyToken": "0f3779fba3b349968c5d07db31eabf65",
            "joined": {"members": [{"type": "user", "userId": user_id(user)}]},
        }
        assert await self.fake.deliver(event) == 200

    async def drop_connection(self) -> None:
        raise NotImplementedError("a webhook has no connection to drop")

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[chat_native(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        self.fake.token = "revoked" if refused else self._token


__all__ = ["LineDriver", "as_sent", "chat_native", "user_id"]
