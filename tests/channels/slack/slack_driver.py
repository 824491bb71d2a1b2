"""The Slack channel and the local Slack (slack_fake.py) as the channel contract kit drives
them (the `Driver` of tests/channels/contract.py: test_contract_slack.py), plus a bot harness
for the Slack-only tests (test_slack.py).

Contract chats map to Slack ids: a private chat "1001" is the DM `D1001` with user `U1001`,
a group "5001" the channel `C5001`, a sender "1002" the user `U1002`. A group message that
mentions the bot arrives as Slack sends it: both an `app_mention` and a `message.channels`
event (the channel must answer it once)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.slack import SPEC
from chatfn.channels.slack.channel import SlackChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.slack.slack_fake import BOT_USER, FakeSlack, Posted, read_mrkdwn


class SlackDriver:
    platform = "slack"
    features = frozenset(
        {
            "groups",
            "quote",  # reply_with_quote: the answer goes in a thread under the message
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
    )  # no "message_ids": chat.postMessage has no idempotency key
    max_length = 4000
    bot_user = BOT_USER

    def __init__(self, fake: FakeSlack, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.channel: SlackChannel | None = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "bot_token": self.fake.bot_token,
            "app_token": self.fake.app_token,
            "api_base": self.fake.api_base,
            "send_rate": 0,
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

    @staticmethod
    def native(chat: Chat) -> str:
        return ("D" if chat.kind == "private" else "C") + chat.native

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
        user = "U" + (chat.native if chat.kind == "private" else sender)
        flags = {
            "is_admin": role in ("admin", "administrator", "owner"),
            "is_owner": role in ("owner", "creator"),
        }
        fake.user(user, f"Person {user}", **flags)
        if self.channel is not None:
            self.channel._users.pop(user, None)  # a role changed in the test: ask again
        files = [fake.add_file(image)] if image is not None else None
        if mention:
            text = f"<@{BOT_USER}> {text}"
        event = fake.message_event(self.native(chat), user, text, files=files)
        if mention:  # Slack sends both; the channel must answer once
            twin = dict(event, type="app_mention")
            twin.pop("channel_type", None)
            await fake.push(fake.callback(twin))
        await fake.push(fake.callback(event))
        return str(event["ts"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        found = await self.fake.wait_sent(self.native(chat), count, timeout)
        return [as_sent(chat, p) for p in found]

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        self.fake.user("U" + user, name)
        await self.fake.push(
            self.fake.callback(
                {
                    "type": "member_joined_channel",
                    "user": "U" + user,
                    "channel": self.native(chat),
                    "channel_type": "C",
                    "team": "T0TEAM",
                    "inviter": "U1001",
                    "event_ts": self.fake.next_ts(),
                }
            )
        )

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[self.native(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        from tests.channels.slack.slack_fake import APP_TOKEN, BOT_TOKEN

        revoked = ("xoxb-revoked", "xapp-revoked") if refused else (BOT_TOKEN, APP_TOKEN)
        self.fake.bot_token, self.fake.app_token = revoked
        if refused:
            await self.fake.drop()


def as_sent(chat: Chat, p: Posted) -> Sent:
    text, styles, mentions, _links = read_mrkdwn(p.text)
    return Sent(
        chat=chat,
        text=text,
        mentions=[m.removeprefix("U") for m in mentions],
        quote=p.thread_ts,
        images=list(p.files) + [b["image_url"] for b in p.blocks if b.get("type") == "image"],
        styles=styles,
        message_id=p.ts,
    )


@asynccontextmanager
async def running(
    driver: SlackDriver,
    tmp_path: Path,
    *,
    registry: Registry | None = None,
    model: Any = None,
    **config: Any,
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'slack.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "slackbot", "admins": ["U9999"], **config.pop("bot", {})},
        **config,
        "channels": {"slack": driver.channel_settings(), **config.get("channels", {})},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=model or ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        await driver.attach(bot.channel_host, settings.channels.slack)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["SlackDriver", "as_sent", "running"]
