"""The Satori channel and the local server (satori_fake.py) as the channel contract drives
them. The contract's chats are on the login `alpha` (bot `900`): a private chat "1001" is the
DIRECT channel `private:1001` (Chronocat's shape, a colon inside), a group "1001" the TEXT
channel `g1001`. What a user reads of a message is its element text (parsed with the standard
library's XML parser, independent of the channel's own), styles by their tags."""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from xml.etree.ElementTree import Element

from chatfn.channels.satori import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.satori.satori_fake import DIRECT, TEXT, FakeSatori, well_formed

PLATFORM = "alpha"
_STYLES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "code": "code",
    "a": "link",
}


def _text(node: Element, skip: frozenset[str] = frozenset({"at", "quote", "img"})) -> str:
    out = [node.text or ""]
    for child in node:
        if child.tag not in skip:
            out.append(_text(child, skip))
        out.append(child.tail or "")
    return "".join(out)


def read(content: str) -> dict[str, Any]:
    root = well_formed(content)
    assert root is not None, content
    images: list[bytes | str] = []
    for img in root.iter("img"):
        src = img.get("src", "")
        images.append(base64.b64decode(src.split(",", 1)[1]) if src.startswith("data:") else src)
    quotes = [q.get("id") for q in root.iter("quote")]
    return {
        "text": _text(root).strip(),
        "mentions": [a.get("id", "") for a in root.iter("at")],
        "quote": quotes[0] if quotes else None,
        "images": images,
        "styles": {_STYLES[e.tag] for e in root.iter() if e.tag in _STYLES},
    }


class SatoriDriver:
    platform = "satori"
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
            "credentials",
        }
    )
    max_length = 2000

    def __init__(self, fake: FakeSatori, **settings: Any) -> None:
        self.fake = fake
        self.bot_user = fake.self_id(PLATFORM)
        self.settings = settings
        self.channel: Any = None
        self._task: asyncio.Task[None] | None = None
        self._token = fake.token

    def platform_id(self, chat: Chat) -> str:
        return f"private:{chat.native}" if chat.kind == "private" else f"g{chat.native}"

    def channel_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "endpoint": self.fake.base,
            "token": self.fake.token,
            "send_rate": 0,
            "max_message_length": self.max_length,
        }
        return {**settings, **self.settings}

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
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

    def chat_id(self, chat: Chat) -> str:
        return f"{chat.kind}:{PLATFORM}:{self.bot_user}:{self.platform_id(chat)}"

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
        content = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if mention:
            content = f'<at id="{self.bot_user}" name="chatbot"/> {content}'
        if image is not None:
            content += f'<img src="{self.fake.file(image)}"/>'
        kind = DIRECT if chat.kind == "private" else TEXT
        return await self.fake.say(PLATFORM, self.platform_id(chat), sender, content, kind=kind)

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        got = await self.fake.wait_sent(PLATFORM, self.platform_id(chat), count, timeout)
        out = []
        for message in got:
            r = read(message["content"])
            out.append(
                Sent(
                    chat=chat,
                    text=r["text"],
                    mentions=r["mentions"],
                    quote=r["quote"],
                    images=r["images"],
                    styles=r["styles"],
                    message_id=message["id"],
                )
            )
        return out

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        self.fake.channel(PLATFORM, self.platform_id(chat), TEXT)
        await self.fake.member_added(PLATFORM, self.platform_id(chat), user, name)

    async def drop_connection(self) -> None:
        await self.fake.drop_sockets()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[self.platform_id(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            await self.fake.revoke()
        else:
            self.fake.token = self._token


__all__ = ["SatoriDriver"]
