"""The WeChat channel and the local iLink (weixin_fake.py) as the channel contract drives them
(the `Driver` of tests/channels/contract.py), plus a bot harness for the WeChat-only tests.

Private chats are users (`<native>@im.wechat`), groups iLink groups (`<native>@chatroom`,
delivered with `group_id`; the bot is mentioned by `@<bot.name>` in the text). An image a
reply carries goes out as its own message after the text: `sent` reads it as the image of
the text before it for the same outbox row (their client ids name the row).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.weixin import SPEC
from chatfn.channels.weixin.channel import WeixinChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.weixin.weixin_fake import BOT_ID, FakeIlink, Posted
from tests.kit import until


def user(native: str) -> str:
    return native if "@" in native else f"{native}@im.wechat"


def group(native: str) -> str:
    return f"{native}@chatroom"


def _row(body: dict[str, Any]) -> str:
    client = str(body.get("client_id") or "")
    return client.split("-")[1] if client.startswith("chatfn-") else client


def as_sent(chat: Chat, posts: list[Posted]) -> list[Sent]:
    out: list[Sent] = []
    rows: list[str] = []
    for p in posts:
        row = _row(p.body)
        if p.image is not None:
            if out and rows[-1] == row:
                out[-1].images.append(p.image)
                continue
            out.append(Sent(chat=chat, text="", images=[p.image], message_id=p.message_id))
        else:
            out.append(Sent(chat=chat, text=p.text, message_id=p.message_id))
        rows.append(row)
    return out


class WeixinDriver:
    platform = "weixin"
    max_length = 2000
    bot_user = BOT_ID
    bot_name = "contractbot"

    def __init__(self, fake: FakeIlink, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.features = frozenset(
            {
                "groups",
                "no_group_mentions",
                "images_in",
                "images_out",
                "plain",
                "split",
                "rate_limit",
                "reconnect",
                "crash_redelivery",
                "credentials",
            }
        )
        self.channel: WeixinChannel | None = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "token": self.fake.token,
            "base_url": self.fake.api_base,
            "cdn_base_url": self.fake.cdn_base,
            "send_rate": 0,
            "max_message_length": self.max_length,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any, *, ready: bool = True) -> None:
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        if ready:
            async with asyncio.timeout(15):
                await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def chat_id(self, chat: Chat) -> str:
        native = group(chat.native) if chat.kind == "group" else user(chat.native)
        return f"{chat.kind}:{native}"

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
        if mention:
            text = f"@{self.bot_name} {text}"
        if chat.kind == "group":
            return await self.fake.say(user(sender), text, group=group(chat.native), image=image)
        return await self.fake.say(user(chat.native), text, image=image)

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        key = self.chat_id(chat)

        def enough() -> list[Sent] | None:
            found = as_sent(chat, self.fake.sent_to(key))
            return found if len(found) >= count else None

        await self.fake.wait_for(enough, timeout)
        sender = self.channel.sender if self.channel is not None else None
        if sender is not None:
            await until(lambda: key not in sender.runner._tails, timeout, "sends to finish")
        return as_sent(chat, self.fake.sent_to(key))

    async def member_joins(self, chat: Chat, user_id: str, name: str) -> None:
        raise NotImplementedError("iLink delivers no member-joined event")

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited.add(self.chat_id(chat))

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self.fake.revoked.add(self.fake.token)
            await self.fake.drop()  # the long poll held is cut, as iLink ends the session
        else:
            self.fake.revoked.discard(self.fake.token)


@asynccontextmanager
async def running(
    driver: WeixinDriver,
    tmp_path: Path,
    *,
    registry: Registry | None = None,
    model: Any = None,
    ready: bool = True,
    **config: Any,
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    channel = {**driver.channel_settings(), **config.pop("weixin", {})}
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'weixin.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": driver.bot_name, "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"weixin": channel},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=model or ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        section = getattr(settings.channels, "weixin")  # noqa: B009 - found at run time
        await driver.attach(bot.channel_host, section, ready=ready)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["WeixinDriver", "as_sent", "group", "running", "user"]
