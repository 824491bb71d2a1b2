"""The WeCom channel (app mode) and the local WeCom (wecom_fake.py) as the channel contract
drives them (tests/channels/contract.py's `Driver`). The callback is served by the bot's one
web server (its main listener, on port 0 here), as `--channel http` serves it.

Contract chats map to WeCom ids: a private chat "1001" is the member with userid "1001"."""

from __future__ import annotations

import asyncio
from typing import Any

from chatfn.channels.wecom import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.wecom.wecom_fake import FakeWecom, Posted


async def serve_webhooks(host: ChannelHost) -> Any:
    """Start the main listener of the bot behind `host` on port 0 (what `--channel http`
    does); the listener, to stop."""
    web = host._bot.web  # type: ignore[attr-defined]  # the bot's one web server
    web.main.listen("127.0.0.1", 0)
    await web.main.start()
    return web.main


def as_sent(chat: Chat, posted: list[Posted]) -> list[Sent]:
    """The bot's messages as a member reads them: the images sent before a text shown with
    it (the channel sends a reply's images first, then its text)."""
    out: list[Sent] = []
    images: list[bytes | str] = []
    for p in posted:
        if p.image is not None:
            images.append(p.image)
            continue
        out.append(Sent(chat=chat, text=p.content, images=images, message_id=p.msgid or None))
        images = []
    if images:
        out.append(Sent(chat=chat, text="", images=images))
    return out


class WecomDriver:
    platform = "wecom"
    features = frozenset(
        {
            "images_in",
            "images_out",
            "plain",
            "split",
            "rate_limit",
            "crash_redelivery",
            "credentials",  # noticed by the channel's keepalive (agent/get) while serving
        }
    )
    max_length = 2048
    bot_user = "chatfn-app"

    def __init__(self, fake: FakeWecom, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.channel: Any = None
        self.listener: Any = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "corp_id": self.fake.corp_id,
            "secret": self.fake.secret,
            "agent_id": self.fake.agent_id,
            "token": self.fake.token,
            "encoding_aes_key": self.fake.aes_key,
            "api_base": self.fake.base,
            "send_rate": 0,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self.listener = await serve_webhooks(host)
        self.fake.callback_url = (
            f"http://127.0.0.1:{self.listener.bound_port}{settings.webhook_path}"
        )
        self.channel.keepalive = 0.1  # the credential check while serving, every 300 s
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
        return f"{chat.kind}:{chat.native}"

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
        msg_id = self.fake.next_id()
        media = self.fake.add_media(image) if image is not None else ""
        status, _ = await self.fake.deliver(self.fake.message_xml(chat.native, msg_id, text, media))
        assert status in (200, 503), status
        return msg_id

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        async with asyncio.timeout(timeout):
            while True:
                got = as_sent(chat, await self.fake.wait_sent(chat.native, 1, timeout))
                if len(got) >= count and got[-1].text:
                    return got
                await self.fake.wait_sent(chat.native, len(self.fake.sent[chat.native]) + 1)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        raise NotImplementedError("WeCom apps get no member joins")

    async def drop_connection(self) -> None:
        raise NotImplementedError("a callback has no connection to drop")

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[chat.native] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:  # the secret rotated in the admin console: tokens made with it end too
            self._secret, self.fake.secret = self.fake.secret, "rotated"
            self.fake.revoke_tokens()
        else:
            self.fake.secret = self._secret


__all__ = ["WecomDriver", "as_sent", "serve_webhooks"]


class AibotDriver(WecomDriver):
    """The channel in `mode: aibot` against FakeAibot: a private chat "1001" is the user
    "1001" (chattype single), a group "5001" the group chat "5001" (WeCom delivers only the
    messages that @-mention the robot); the bot's answers are the finished streams and the
    response_url replies."""

    features = frozenset({"groups", "mention_only", "no_group_mentions", "crash_redelivery"})

    async def refuse_credentials(self, refused: bool) -> None:
        raise NotImplementedError("the robot has no credentials to refuse, only its callback's")

    max_length = 20480
    bot_user = "chatfnbot"
    fake: Any

    def channel_settings(self) -> dict[str, Any]:
        return {
            "mode": "aibot",
            "token": self.fake.token,
            "encoding_aes_key": self.fake.aes_key,
            "api_base": self.fake.base,
            "send_rate": 0,
            **self.settings,
        }

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
        group = chat.kind == "group"
        if group and not mention:
            return ""  # WeCom does not deliver it to the robot
        user = sender if group else chat.native
        message = self.fake.message(user, text, group=chat.native if group else "")
        status = await self.fake.say(message)
        assert status in (200, 503), status
        return str(message["msgid"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        posted = await self.fake.wait_sent(chat.native, count, timeout)
        return [Sent(chat=chat, text=p.content) for p in posted]


__all__ += ["AibotDriver"]
