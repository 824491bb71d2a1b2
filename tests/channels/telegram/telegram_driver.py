"""The Telegram channel and the local Bot API server (telegram_fake.py) as the channel contract
kit drives them (the `Driver` of tests/channels/contract.py: test_contract_telegram.py), plus a
small bot harness for the Telegram-only tests (test_telegram.py)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from chatfn.channels.telegram import SPEC
from chatfn.channels.telegram.channel import TelegramChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls import FunctionResult, MessageContext, tool_function
from function_calls.registry import Registry
from providers.types import LLMResponse, Message, Usage
from tests.channels.contract import Chat, Sent
from tests.channels.telegram.telegram_fake import BOT_ID, BOT_USERNAME, FakeTelegram
from tests.channels.telegram.telegram_fake import Sent as FakeSent


def group_native(native: str) -> int:
    """Contract chats are small numbers; a Telegram group id is negative."""
    n = int(native)
    return n if n < 0 else -(10**12) - n


class TelegramDriver:
    platform = "telegram"
    features = frozenset(
        {
            "groups",
            "quote",
            "images_in",
            "images_out",
            "markdown",
            "split",
            "rate_limit",
            "reconnect",
            "crash_redelivery",
            "member_joined",
            "roles",
            "credentials",
        }
    )  # no "message_ids": the Bot API cannot read a chat's history to see what went out
    max_length = 4096
    bot_user = BOT_USERNAME

    def __init__(self, fake: FakeTelegram, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.channel: TelegramChannel | None = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "token": self.fake.token,
            "base_url": self.fake.base_url,
            "poll_timeout": 5,
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

    def native(self, chat: Chat) -> int:
        return int(chat.native) if chat.kind == "private" else group_native(chat.native)

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
        if chat.kind == "private":
            where, who = fake.private(int(chat.native)), fake.user(int(chat.native))
        else:
            where, who = fake.group(self.native(chat)), fake.user(int(sender))
            if role in ("admin", "administrator", "owner", "creator"):
                status = "creator" if role in ("owner", "creator") else "administrator"
                fake.members[(self.native(chat), int(sender))] = status
            else:
                fake.members.pop((self.native(chat), int(sender)), None)
        entities = None
        if mention:
            text = f"@{BOT_USERNAME} {text}"
            entities = [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]
        message = await fake.message(where, text, sender=who, entities=entities, photo=image)
        return str(message["message_id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        found = await self.fake.wait_sent(self.native(chat), count, timeout)
        return [self.as_sent(chat, s) for s in found]

    @staticmethod
    def as_sent(chat: Chat, s: FakeSent) -> Sent:
        mentions = s.mentions
        text = s.text
        if mentions and s.raw.startswith("["):  # the mention is the first word: not the reply's
            text = text.split(" ", 1)[1] if " " in text else ""
        styles = {
            k for k in s.kinds if k != "link" or any(not u.startswith("tg:") for u in s.links)
        }
        return Sent(
            chat=chat,
            text=text,
            mentions=mentions,
            quote=str(s.reply_to) if s.reply_to is not None else None,
            images=[s.photo] if s.photo is not None else [],
            styles={"code" if k == "pre" else k for k in styles},
            message_id=str(s.message_id),
        )

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        await self.fake.members_join(
            self.fake.group(self.native(chat)), self.fake.user(int(user), name)
        )

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limit_next(self.native(chat), int(retry_after))

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self._token, self.fake.token = self.fake.token, "0:revoked"
            await self.fake.drop()  # the long poll in flight ends; the next one is refused
        else:
            self.fake.token = self._token


# -- a bot for the Telegram-only tests (the contract kit has its own) ----------------------------
# Emoji are two UTF-16 code units each: Telegram's 4096 counts those, not characters.
ESSAY = "\n\n".join(
    [f"Paragraph {n}: " + " ".join(f"w{n}x{i}\U0001f600" for i in range(150)) for n in range(1, 9)]
    + ["```python\n" + "\n".join(f"line_{i} = {i}" for i in range(200)) + "\n```", "The end."]
)
STYLED = "Some **bold**, some _italics_, `code_here` and [a link](https://example.com/x_(y))."
HOSTILE = "Odd: _*[]()~>#+-=|{}.!` \\ 1.5 (see below) a_b *c [d](e f) ~~ > # + - = | { } . !"


class EchoArgs(BaseModel):
    text: str = Field(description="What to say.")


def registry() -> Registry:
    reg = Registry()
    with reg.collecting():

        @tool_function(name="echo", description="Say the text back.")
        async def echo(ctx: MessageContext, args: EchoArgs) -> FunctionResult:
            return FunctionResult(messages=[args.text])

        @tool_function(name="essay", description="A reply longer than Telegram's limit.")
        async def essay(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[ESSAY])

        @tool_function(name="styled", description="A reply with formatting.")
        async def styled(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[STYLED])

        @tool_function(name="hostile", description="Every MarkdownV2 reserved character.")
        async def hostile(ctx: MessageContext) -> FunctionResult:
            return FunctionResult(messages=[HOSTILE])

    return reg


def echo_model(messages: list[Message], _tools: Any) -> LLMResponse:
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    text = (last.content or "") if last else ""
    text = re.sub(r"^<context>.*?</context>\n", "", text, flags=re.S)  # the bot's note
    text = re.sub(r"^<background>.*?</background>\n", "", text, flags=re.S)  # group chatter
    if last is not None and last.name and text.startswith(f"{last.name}: "):
        text = text[len(last.name) + 2 :]
    return LLMResponse(content=f"echo: {text.strip()}", finish_reason="stop", usage=Usage(5, 5))


@asynccontextmanager
async def running(
    driver: TelegramDriver, tmp_path: Path, *, model: Any = None, **config: Any
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'tg.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "tgbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"telegram": driver.channel_settings(), **config.get("channels", {})},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry(),
        model=model or ScriptedModel([echo_model], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.telegram)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["BOT_ID", "Chat", "Sent", "TelegramDriver", "running"]
