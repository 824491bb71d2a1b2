"""The WeChat Official Account channel and the local platform (wechat_mp_fake.py) as the
channel contract drives them. The callback is served by the bot's one web server (its main
listener on port 0), as `--channel http` serves it. A private chat "1001" is the follower
with openid "1001"; the bot's answers are what the follower sees: passive replies and
customer-service messages, in the order they arrived."""

from __future__ import annotations

import asyncio
from typing import Any

from chatfn.channels.wechat_mp import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.wechat_mp.wechat_mp_fake import FakeWechatMp, Posted
from tests.channels.wecom.wecom_driver import serve_webhooks


def as_sent(chat: Chat, posted: list[Posted]) -> list[Sent]:
    """Images shown with the text after them (the channel sends a reply's images first)."""
    out: list[Sent] = []
    images: list[bytes | str] = []
    for p in posted:
        if p.image is not None:
            images.append(p.image)
            continue
        out.append(Sent(chat=chat, text=p.content, images=images))
        images = []
    if images:
        out.append(Sent(chat=chat, text="", images=images))
    return out


class WechatMpDriver:
    platform = "wechat_mp"
    features = frozenset(
        {"images_in", "images_out", "plain", "split", "crash_redelivery", "credentials"}
    )
    max_length = 2048
    bot_user = "gh_0fakeaccount"

    def __init__(self, fake: FakeWechatMp, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.channel: Any = None
        self.listener: Any = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "app_id": self.fake.app_id,
            "app_secret": self.fake.app_secret,
            "token": self.fake.token,
            "api_base": self.fake.base,
            "send_rate": 0,
        }
        if self.fake.aes_key:
            settings["encoding_aes_key"] = self.fake.aes_key
        return {**settings, **self.settings}

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
        plain = self.fake.message_xml(chat.native, msg_id, text, media)
        await self.fake.deliver(chat.native, plain)
        return msg_id

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        async with asyncio.timeout(timeout):
            while True:
                got = as_sent(chat, await self.fake.wait_sent(chat.native, 1, timeout))
                if len(got) >= count and got[-1].text:
                    return got
                await self.fake.wait_sent(chat.native, len(self.fake.sent[chat.native]) + 1)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        raise NotImplementedError("Official Accounts have no groups")

    async def drop_connection(self) -> None:
        raise NotImplementedError("a callback has no connection to drop")

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[chat.native] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:  # the AppSecret reset in the admin: tokens made with it end too
            self._secret, self.fake.app_secret = self.fake.app_secret, "rotated"
            self.fake.revoke_tokens()
        else:
            self.fake.app_secret = self._secret


__all__ = ["WechatMpDriver", "as_sent"]
