"""The Mattermost channel and the local server (mattermost_fake.py) as the channel contract
drives them. A contract chat "1001" is the channel c000...1001 (a direct message for a
private chat, an open channel for a group); a sender "1002" the user u000...1002 (username
user1002). What a user reads of a post is its Markdown rendered (`to_plain`, its styles
named); a mention of a user is `@username`."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from chatfn.channels.markdown import to_plain
from chatfn.channels.mattermost import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.mattermost.mattermost_fake import FakeMattermost, mm_id

_STYLES = (
    ("bold", re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")),
    ("italic", re.compile(r"(?<![*\w])\*[^*\n]+\*(?!\*)|(?<![_\w])_[^_\n]+_(?![_\w])")),
    ("code", re.compile(r"`[^`\n]+`|```")),
    ("link", re.compile(r"\[[^\]]+\]\([^)]+\)|https?://")),
)


class MattermostDriver:
    platform = "mattermost"
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
    )
    max_length = 2000  # Mattermost's 16383 is more than the contract's essay

    def __init__(self, fake: FakeMattermost, **settings: Any) -> None:
        self.fake = fake
        self.bot_user = fake.bot_id
        self.settings = settings
        self.channel: Any = None
        self._task: asyncio.Task[None] | None = None
        self._token = fake.token

    def platform_id(self, chat: Chat) -> str:
        return mm_id("c", chat.native)

    def channel_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "url": self.fake.base,
            "token": self.fake.token,
            "team": self.fake.team["name"],
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
        return f"{chat.kind}:{self.platform_id(chat)}"

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
        channel = fake.channel(chat.native, chat.kind)
        user = fake.user(sender)
        if role in ("admin", "owner"):
            fake.admins.add((channel, user))
        elif role is not None:
            fake.admins.discard((channel, user))
        files = [fake.upload_as_user(channel, image)] if image is not None else None
        return await fake.say(channel, user, text, mention=mention, file_ids=files)

    def as_sent(self, chat: Chat, posts: list[dict[str, Any]]) -> list[Sent]:
        out = []
        for post in posts:
            raw = post["message"]
            mentions = []
            for name in re.findall(r"(?<![\w.-])@([a-z0-9._-]+)", raw):
                for user in self.fake.users.values():
                    if user["username"] == name:
                        mentions.append(user["id"][1:].lstrip("0"))
                raw = raw.replace(f"@{name}", "", 1)
            styles = {style for style, pattern in _STYLES if pattern.search(raw)}
            images: list[bytes | str] = [self.fake.files[f][0] for f in post["file_ids"]]
            root = post["root_id"] or None
            out.append(
                Sent(
                    chat=chat,
                    text=to_plain(raw).strip(),
                    mentions=mentions,
                    quote=root,
                    images=images,
                    styles=styles,
                    message_id=post["id"],
                )
            )
        return out

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        channel = self.platform_id(chat)
        posts = await self.fake.wait_sent(channel, count, timeout)
        return self.as_sent(chat, posts)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        channel = self.fake.channel(chat.native, chat.kind)
        ident = self.fake.user(user)
        self.fake.users[ident]["nickname"] = name
        await self.fake.add_member(channel, ident)

    async def drop_connection(self) -> None:
        await self.fake.drop_sockets()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[self.platform_id(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            await self.fake.revoke()
        else:
            self.fake.token = self._token


__all__ = ["MattermostDriver"]
