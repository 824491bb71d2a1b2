"""The channel contract (tests/channels/contract.py) against the HTTP channel, where it applies:
a program bridging a platform posts messages and reads the replies. It has groups (`is_group`,
`at_bot`, the reply's `at`), images both ways and the bridged platform's roles
(`sender_roles`); no quotes, no 429, no connection of its own to drop, no member events."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from chatfn.channels.http import SPEC
from chatfn.channels.http.channel import HttpChannel
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import ChannelContract, Chat, Sent


class HttpDriver:
    platform = "http"
    features = frozenset({"groups", "images_in", "images_out", "roles"})
    max_length = 1_000_000
    bot_user = "bot"

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.channel: HttpChannel | None = None
        self.replies: dict[Chat, list[Sent]] = {}

    def channel_settings(self) -> dict[str, Any]:
        return {"host": "127.0.0.1", "port": 0}

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        await self.channel.start()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None

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
        assert self.channel is not None
        body: dict[str, Any] = {
            "chat_id": self.chat_id(chat),
            "sender_id": sender,
            "text": text,
            "is_group": chat.kind == "group",
            "at_bot": mention,
        }
        if image is not None:
            body["images"] = ["data:image/png;base64," + base64.b64encode(image).decode()]
        if role is not None:
            body["sender_roles"] = [role]
        url = f"http://127.0.0.1:{self.channel.bound_port}/v1/messages"
        async with self.session.post(url, json=body) as resp:
            assert resp.status == 200, await resp.text()
            data = await resp.json()
        for reply in data["replies"]:
            images: list[bytes | str] = [
                base64.b64decode(i.partition(",")[2]) if i.startswith("data:") else i
                for i in reply.get("images", [])
            ]
            mentions = [reply["at"]] if reply.get("at") else []
            sent = Sent(chat, reply["text"], mentions=mentions, images=images)
            self.replies.setdefault(chat, []).append(sent)
        return ""  # the channel names the message itself and does not say which id

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        got = self.replies.get(chat, [])  # a request returns with its replies: nothing to wait
        assert len(got) >= count, f"{len(got)} replies in {chat}, wanted {count}: {got}"
        return got

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        raise NotImplementedError

    async def drop_connection(self) -> None:
        raise NotImplementedError

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        raise NotImplementedError


class TestHttpContract(ChannelContract):
    @pytest.fixture
    async def driver(self) -> AsyncIterator[HttpDriver]:
        async with aiohttp.ClientSession() as session:
            driver = HttpDriver(session)
            yield driver
            await driver.detach()
