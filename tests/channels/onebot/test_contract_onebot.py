"""The channel contract (tests/channels/contract.py) against the OneBot v11 channel and a local
OneBot v11 implementation (tests/channels/onebot/onebot_sim.py, shapes from the OneBot v11 spec).
OneBot has no 429 (the channel paces itself: send_rate) and QQ shows no Markdown."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chatfn.channels.onebot import SPEC
from chatfn.channels.onebot.channel import OneBotChannel
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import ChannelContract, Chat, Sent
from tests.channels.onebot.onebot_sim import OneBotSim, at, text

SELF_ID = 10001000


class OneBotDriver:
    platform = "onebot"
    features = frozenset(
        {
            "groups",
            "quote",
            "images_in",
            "images_out",
            "split",
            "plain",
            "reconnect",
            "crash_redelivery",
            "message_ids",
            "member_joined",
            "roles",
        }
    )
    max_length = 200
    bot_user = str(SELF_ID)

    def __init__(self) -> None:
        self.channel: OneBotChannel | None = None
        self.sim: OneBotSim | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "host": "127.0.0.1",
            "port": 0,
            "send_rate": 0,
            "max_message_length": self.max_length,
            "reconnect_wait": 5.0,
            "action_timeout": 3.0,
        }

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        await self.channel.start()
        url = f"ws://127.0.0.1:{self.channel.bound_port}/onebot/v11/ws"
        if self.sim is None:
            self.sim = OneBotSim(url, SELF_ID)
        else:  # a restarted bot: the same account (and what it received) connects again
            self.sim.url = url
        await self.sim.connect()

    async def detach(self) -> None:
        if self.sim is not None:
            await self.sim.close()
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None

    def chat_id(self, chat: Chat) -> str:
        return f"{chat.kind}:{chat.native}"

    async def say(
        self,
        chat: Chat,
        words: str,
        *,
        sender: str = "1001",
        mention: bool = False,
        image: bytes | None = None,
        role: str | None = None,
    ) -> str:
        assert self.sim is not None
        segments = [at(SELF_ID), text(" " + words)] if mention else [text(words)]
        if image is not None:
            data = base64.b64encode(image).decode()
            segments.append({"type": "image", "data": {"file": f"base64://{data}"}})
        if chat.kind == "group":
            event = await self.sim.group_message(
                int(chat.native), int(sender), segments, role=role or "member"
            )
        else:
            event = await self.sim.private_message(int(chat.native), segments)
        return str(event["message_id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        assert self.sim is not None
        action = "send_group_msg" if chat.kind == "group" else "send_private_msg"
        key = "group_id" if chat.kind == "group" else "user_id"
        found = await self.sim.wait_actions(
            count, action, lambda a: str(a["params"][key]) == chat.native, timeout
        )
        return [self._parse(chat, a) for a in found]

    @staticmethod
    def _parse(chat: Chat, action: dict[str, Any]) -> Sent:
        out = Sent(chat, "")
        words = []
        for seg in action["params"]["message"]:
            data = seg["data"]
            if seg["type"] == "text":
                words.append(data["text"])
            elif seg["type"] == "at":
                out.mentions.append(str(data["qq"]))
            elif seg["type"] == "reply":
                out.quote = str(data["id"])
            elif seg["type"] == "image":
                ref = str(data["file"])
                out.images.append(
                    base64.b64decode(ref[len("base64://") :])
                    if ref.startswith("base64://")
                    else ref
                )
        out.text = "".join(words).strip()
        return out

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        assert self.sim is not None
        await self.sim.group_increase(int(chat.native), int(user))

    async def drop_connection(self) -> None:
        assert self.sim is not None
        await self.sim.restart()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        raise NotImplementedError("OneBot has no 429")


class TestOneBotContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[OneBotDriver]:
        driver = OneBotDriver()
        yield driver
        await driver.detach()
