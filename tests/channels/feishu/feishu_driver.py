"""The Feishu channel and the local open platform (feishu_fake.py) as the channel contract kit
drives them (the `Driver` of tests/channels/contract.py: test_contract_feishu.py), plus a bot
harness for the Feishu-only tests (test_feishu.py).

Contract chats map to Feishu ids: a private chat "1001" is the p2p chat `oc_p1001` with the
user `ou_1001`, a group "5001" the chat `oc_g5001`, a sender "1002" the user `ou_1002`; a
group role is what im/v1/chats reports (owner_id, user_manager_id_list). Events come over the
long connection (lark-oapi's ws client) unless the driver is given a webhook URL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.feishu import SPEC
from chatfn.channels.feishu.channel import FeishuChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.feishu.feishu_fake import (
    BOT_NAME,
    BOT_OPEN_ID,
    FakeFeishu,
    Posted,
    card_images,
    card_markdown,
    read_markdown,
)


class FeishuDriver:
    platform = "feishu"
    features = frozenset(
        {
            "groups",
            "quote",  # reply_with_quote: the reply API, which quotes the message answered
            "images_in",
            "images_out",
            "markdown",
            "split",
            "rate_limit",
            "reconnect",
            "crash_redelivery",
            "message_ids",  # every send carries a uuid: the platform sends it at most once
            "member_joined",
            "roles",
            "credentials",
        }
    )
    max_length = 4000
    bot_user = BOT_OPEN_ID

    def __init__(self, fake: FakeFeishu, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.channel: FeishuChannel | None = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "app_id": self.fake.app_id,
            "app_secret": self.fake.app_secret,
            "domain": self.fake.domain,
            "mode": "websocket",
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
        return ("oc_p" if chat.kind == "private" else "oc_g") + chat.native

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
        fake = self.fake
        native = self.native(chat)
        group = chat.kind == "group"
        user = "ou_" + (chat.native if not group else sender)
        info = fake.chat(native, group=group)
        if role is not None:
            info["managers"] = [m for m in info["managers"] if m != user]
            if role in ("admin", "administrator"):
                info["managers"].append(user)
            if role in ("owner", "creator"):
                info["owner_id"] = user
            elif info["owner_id"] == user:
                info["owner_id"] = "ou_owner"
            if self.channel is not None:
                self.channel._chats.pop(native, None)  # the roles changed: ask again
        mentions = []
        if mention:
            text = f"@_user_1 {text}"
            mentions.append(
                {
                    "key": "@_user_1",
                    "id": {"union_id": "on_bot", "user_id": "", "open_id": BOT_OPEN_ID},
                    "name": BOT_NAME,
                    "tenant_key": "2ca1d211f64f6438",
                }
            )
        payload = fake.message_event(
            native,
            user,
            group=group,
            text=text,
            mentions=mentions,
            images=[image] if image is not None else None,
        )
        await fake.push(payload)
        return str(payload["event"]["message"]["message_id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        found = await self.fake.wait_sent(self.native(chat), count, timeout)
        return [as_sent(chat, p, self.fake.images) for p in found]

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        await self.fake.push(
            self.fake.member_added_event(self.native(chat), [("ou_" + user, name)])
        )

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[self.native(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self._secret, self.fake.app_secret = self.fake.app_secret, "rotated"
            self.fake.revoke_tokens()
            await self.fake.drop()
        else:
            self.fake.app_secret = self._secret


def as_sent(chat: Chat, p: Posted, uploaded: dict[str, bytes] | None = None) -> Sent:
    images: list[bytes | str] = [p.image] if p.image is not None else []
    if p.msg_type == "interactive":
        images += [(uploaded or {}).get(k, k) for k in card_images(p)]
        text, styles, mentions = read_markdown(card_markdown(p))
    elif p.msg_type == "text":
        text, styles, mentions = str(p.content.get("text") or ""), set(), []
    else:
        text, styles, mentions = "", set(), []
    return Sent(
        chat=chat,
        text=text,
        mentions=[m.removeprefix("ou_") for m in mentions],
        quote=p.parent_id or None,
        images=images,
        styles=styles,
        message_id=p.message_id,
    )


@asynccontextmanager
async def running(
    driver: FeishuDriver,
    tmp_path: Path,
    *,
    registry: Registry | None = None,
    attach: bool = True,
    model: Any = None,
    **config: Any,
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached (or, with
    `attach=False`, for the test to attach: started, the channel not yet built)."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'feishu.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "feishubot", "admins": ["ou_9999"], **config.pop("bot", {})},
        **config,
        "channels": {"feishu": driver.channel_settings(), **config.get("channels", {})},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=model or ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        if attach:
            await driver.attach(bot.channel_host, settings.channels.feishu)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["FeishuDriver", "as_sent", "running"]
