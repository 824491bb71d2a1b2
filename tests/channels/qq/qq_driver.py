"""The QQ channel and the local QQ (qq_fake.py) as the channel contract kit drives them (the
`Driver` of tests/channels/contract.py: test_contract_qq.py), plus a bot harness for the
QQ-only tests (test_qq.py).

QQ has two kinds of places, so the contract runs twice:
- scene "qq": contract groups are QQ groups (`group:<group_openid>`, GROUP_AT_MESSAGE_CREATE:
  QQ delivers only messages that @-mention the bot) and private chats are C2C chats
  (`c2c:<user_openid>`); passive replies with msg_seq make redelivery exactly-once.
- scene "guild": contract groups are guild text channels (`channel:<channel_id>`,
  AT_MESSAGE_CREATE when mentioned, MESSAGE_CREATE otherwise: a private-domain bot), private
  chats are guild DMs (`dm:<guild_id>`); members' roles, quotes and member-joined events
  exist there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from chatfn.channels.qq import SPEC
from chatfn.channels.qq.channel import QQChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.qq.qq_fake import BOT_ID, FakeQQ, Posted

_ROLES = {"owner": ["4"], "creator": ["4"], "admin": ["2"], "administrator": ["2"]}


class QQDriver:
    platform = "qq"
    max_length = 2000
    bot_user = BOT_ID

    def __init__(self, fake: FakeQQ, scene: Literal["qq", "guild"] = "qq", **settings: Any):
        self.fake = fake
        self.scene = scene
        self.settings = settings
        common = {"groups", "images_in", "images_out", "plain", "split", "rate_limit"}
        common |= {"reconnect", "crash_redelivery", "credentials"}
        if scene == "qq":
            # no quote (QQ: "not yet supported"), no roles, no member-joined event in groups;
            # no mention in a group reply (QQ renders one only in Markdown, bot-docs#272)
            self.features = frozenset(common | {"message_ids", "mention_only", "no_group_mentions"})
        else:
            # no message_ids: guild messages have no msg_seq to refuse a repeat with
            self.features = frozenset(common | {"quote", "member_joined", "roles"})
        self.channel: QQChannel | None = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "app_id": self.fake.app_id,
            "secret": self.fake.secret,
            "api_base": self.fake.base,
            "token_url": self.fake.token_url,
            "send_rate": 0,
            "mode": "websocket",  # the gateway (the default is the webhook)
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        async with asyncio.timeout(15):
            await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def where(self, chat: Chat) -> tuple[str, str]:
        """(scene, target) of a contract chat on the fake."""
        if self.scene == "qq":
            return ("c2c" if chat.kind == "private" else "group"), chat.native
        return ("dm" if chat.kind == "private" else "channel"), chat.native

    def chat_id(self, chat: Chat) -> str:
        scene, target = self.where(chat)
        return f"{scene}:{target}"

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
        fake = self.fake
        scene, target = self.where(chat)
        attachments = [fake.attachment(image)] if image is not None else None
        if scene == "group":
            if not mention:
                return ""  # QQ sends a bot only the group messages that @-mention it
            kind, content = "GROUP_AT_MESSAGE_CREATE", " " + text  # QQ removes the @ itself
        elif scene == "c2c":
            kind, content, sender = "C2C_MESSAGE_CREATE", text, target
        elif scene == "dm":
            kind, content = "DIRECT_MESSAGE_CREATE", text
        else:
            kind = "AT_MESSAGE_CREATE" if mention else "MESSAGE_CREATE"
            content = f"<@!{BOT_ID}> {text}" if mention else text
        d = fake.message_event(
            kind,
            target=target,
            sender=sender,
            content=content,
            attachments=attachments,
            roles=_ROLES.get(role or "", ["1"]),
        )
        await fake.push(kind, d)
        if kind == "AT_MESSAGE_CREATE":  # a private-domain bot gets it as both: answer once
            await fake.push("MESSAGE_CREATE", d)
        return str(d["id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        scene, target = self.where(chat)
        found = await self.fake.wait_sent(scene, target, count, timeout)
        return [as_sent(chat, p) for p in found]

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        scene, channel = self.where(chat)
        assert scene == "channel"
        guild = self.fake.channels.setdefault(channel, "G" + channel)
        await self.fake.push(
            "GUILD_MEMBER_ADD",
            {
                "guild_id": guild,
                "joined_at": "2024-01-01T00:00:00+08:00",
                "nick": name,
                "op_user_id": "",
                "roles": ["1"],
                "user": {"avatar": "", "bot": False, "id": user, "username": name},
            },
        )

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        _scene, target = self.where(chat)
        self.fake.rate_limited[target] = time.monotonic() + retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self._secret, self.fake.secret = self.fake.secret, "revoked-secret"
        else:
            self.fake.secret = self._secret
        if refused:
            self.fake.revoke_tokens()
            await self.fake.drop()


def as_sent(chat: Chat, p: Posted) -> Sent:
    import re

    content = p.content
    mentions = re.findall(r"<@!?([A-Za-z0-9_\-]+)>", content)
    text = re.sub(r"<@!?[A-Za-z0-9_\-]+>\s?", "", content).strip()
    reference = p.body.get("message_reference")
    if isinstance(reference, str):
        import json

        reference = json.loads(reference)
    return Sent(
        chat=chat,
        text=text,
        mentions=mentions,
        quote=(reference or {}).get("message_id") if reference else None,
        images=list(p.images),
        message_id=p.id,
    )


@asynccontextmanager
async def running(
    driver: QQDriver, tmp_path: Path, *, registry: Registry | None = None, **config: Any
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'qq.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "qqbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"qq": driver.channel_settings(), **config.get("channels", {})},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.qq)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["QQDriver", "as_sent", "running"]
