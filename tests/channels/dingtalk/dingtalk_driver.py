"""The DingTalk channel and the local DingTalk (dingtalk_fake.py) as the channel contract
drives them (the `Driver` of tests/channels/contract.py: test_contract_dingtalk.py).

Contract chats map to DingTalk ids: a private chat "1001" is the one-to-one chat with the
staff id `1001` (who is its sender), a group "5001" the conversation `cidg5001==`, a sender
"1002" the staff id `1002`; a group role "admin" / "owner" is DingTalk's `isAdmin`. Messages
come over the Stream connection (the real dingtalk-stream SDK's frames and acks). An image the bot
sends is a message of its own (`sampleImageMsg`), after the reply's text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.dingtalk import SPEC
from chatfn.channels.dingtalk.channel import DingTalkChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.dingtalk.dingtalk_fake import BOT_USER, FakeDingTalk, Posted, read_markdown


class DingTalkDriver:
    platform = "dingtalk"
    features = frozenset(
        {
            "groups",
            "images_in",
            "images_out",
            "markdown",
            "split",
            "rate_limit",
            "reconnect",
            "crash_redelivery",  # at least once: DingTalk's sends take no idempotency key
            "roles",
            "mention_only",  # a group sends the robot only messages that @-mention it
            "credentials",
        }
    )
    max_length = 4000
    bot_user = BOT_USER

    def __init__(self, fake: FakeDingTalk, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.channel: DingTalkChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self._secret = fake.app_secret

    def channel_settings(self) -> dict[str, Any]:
        return {
            "client_id": self.fake.app_key,
            "client_secret": self.fake.app_secret,
            "api_base": self.fake.base,
            "mode": "stream",
            "send_rate": 0,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        async with asyncio.timeout(30):  # generous: a loaded CI machine, not a slow channel
            await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @staticmethod
    def native(chat: Chat) -> str:
        return chat.native if chat.kind == "private" else f"cidg{chat.native}=="

    def chat_id(self, chat: Chat) -> str:
        return f"{chat.kind}:{self.native(chat)}"

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
        if group and text.startswith("/"):
            mention = True  # a command reaches a DingTalk robot only as "@robot /command"
        data = self.fake.robot_message(
            group=self.native(chat) if group else None,
            sender=sender if group else chat.native,
            text=text,
            mention=mention,
            image=image,
            admin=role in ("admin", "administrator", "owner", "creator"),
        )
        if self.fake.delivers(data):
            await self.fake.push(data)
        return str(data["msgId"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        target = self.native(chat)
        async with asyncio.timeout(timeout):
            while len(units := as_sent(chat, self.fake.sent_to(target))) < count:
                await self.fake.changed.wait()
        return units

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        raise NotImplementedError("DingTalk sends robots no member-joined event")

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limit(self.native(chat), retry_after)

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self.fake.app_secret = "rotated"
            self.fake.revoke_tokens()
            await self.fake.drop()
        else:
            self.fake.app_secret = self._secret


def as_sent(chat: Chat, posted: list[Posted]) -> list[Sent]:
    """What a user sees: each message (an image is one of its own)."""
    units: list[Sent] = []
    for p in posted:
        if p.image is not None:
            units.append(Sent(chat=chat, text="", images=[p.image]))
            continue
        text, styles, mentions = read_markdown(p.text, p.at)
        units.append(Sent(chat=chat, text=text, mentions=mentions, styles=styles))
    return units


@asynccontextmanager
async def running(
    driver: DingTalkDriver, tmp_path: Path, *, model: Any = None, **config: Any
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'dingtalk.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "dingbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"dingtalk": driver.channel_settings()},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=contract_registry(),
        model=model or ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.dingtalk)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["DingTalkDriver", "as_sent", "running"]
