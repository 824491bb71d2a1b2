"""The contract kit's driver for the Discord channel: discord.py (the real SDK) against
FakeDiscord (discord_fake.py here), and a reader of Discord Markdown that says what a
user sees (text, bold/italic/code/link) in what the bot sent."""

from __future__ import annotations

import re
from typing import Any

from chatfn.channels.discord import SPEC
from chatfn.channels.discord.channel import DiscordChannel
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.discord.discord_fake import BOT_ID, FakeDiscord, user
from tests.channels.discord.discord_fake import Sent as Posted


def visible(markdown: str) -> tuple[str, set[str]]:
    """Discord Markdown as a reader sees it: the text, and the styles shown."""
    styles: set[str] = set()
    out: list[str] = []
    i, n = 0, len(markdown)
    line_start = True
    while i < n:
        c = markdown[i]
        if line_start:
            m = re.match(r"(#{1,3} |> )", markdown[i:])
            if m:
                i += len(m.group(1))
                line_start = False
                continue
        line_start = c == "\n"
        if c == "\\" and i + 1 < n:
            out.append(markdown[i + 1])
            i += 2
        elif markdown.startswith("```", i):
            end = markdown.find("```", i + 3)
            body = markdown[i + 3 : end if end >= 0 else n]
            body = body.split("\n", 1)[1] if "\n" in body else body  # the language line
            out.append(body.rstrip("\n"))
            styles.add("code")
            i = end + 3 if end >= 0 else n
        elif c == "`":
            fence = "``" if markdown.startswith("``", i) else "`"
            end = markdown.find(fence, i + len(fence))
            out.append(markdown[i + len(fence) : end].strip(" "))
            styles.add("code")
            i = end + len(fence)
        elif markdown.startswith("**", i):
            styles.add("bold")
            i += 2
        elif markdown.startswith("~~", i):
            i += 2
        elif c in "*_":
            styles.add("italic")
            i += 1
        elif c == "[":
            m = re.match(r"\[((?:\\.|[^\]\\])*)\]\(<?([^)>]*)>?\)", markdown[i:])
            if m:
                label, _ = visible(m.group(1))
                out.append(label)
                styles.add("link")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        elif c == "<":
            m = re.match(r"<(https?://[^>]+)>", markdown[i:])
            if m:
                out.append(m.group(1))
                styles.add("link")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out), styles


def as_sent(chat: Chat, posted: Posted) -> Sent:
    content = str(posted.payload.get("content") or "")
    mentions = re.findall(r"<@!?(\d+)>", content)
    text, styles = visible(re.sub(r"<@!?\d+>", "", content))
    ref = posted.payload.get("message_reference") or {}
    images: list[bytes | str] = [data for _name, data in posted.files]
    images += [e["image"]["url"] for e in posted.payload.get("embeds") or [] if e.get("image")]
    return Sent(
        chat,
        text.strip(),
        mentions=mentions,
        quote=str(ref["message_id"]) if ref.get("message_id") else None,
        images=images,
        styles=styles,
        message_id=posted.message["id"],
    )


class DiscordDriver:
    platform = "discord"
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
            "message_ids",
            "member_joined",
            "roles",
            "credentials",
        }
    )
    max_length = 2000
    bot_user = str(BOT_ID)

    def __init__(self, server: FakeDiscord) -> None:
        self.server = server
        self.channel: DiscordChannel | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {"token": self.server.token, "guild_ready_timeout": 0.05, **self.server.urls}

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        await self.channel.start()
        await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None

    def chat_id(self, chat: Chat) -> str:
        if chat.kind == "private":
            return f"dm:{chat.native}"
        guild = self.server.guild_of(int(chat.native))
        return f"guild:{guild.id}/channel:{chat.native}"

    def channel_of(self, chat: Chat) -> int:
        if chat.kind == "private":
            return self.server.dm_channel(int(chat.native))
        return int(chat.native)

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
        if chat.kind == "private":
            data = await self.server.say(None, text, author=int(chat.native), dm=True, image=image)
            return str(data["id"])
        guild = self.server.guild_of(int(chat.native))
        roles = {"admin": [guild.admin_role], "manager": [guild.manager_role]}.get(role or "", [])
        content = f"<@{BOT_ID}> {text}" if mention else text
        data = await self.server.say(
            int(chat.native),
            content,
            author=int(sender),
            roles=roles,
            image=image,
            mentions=[user(BOT_ID, "chatfn-bot", bot=True)] if mention else [],
        )
        return str(data["id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        posted = await self.server.wait_sent(self.channel_of(chat), count, timeout)
        return [as_sent(chat, p) for p in posted]

    async def member_joins(self, chat: Chat, user_id: str, name: str) -> None:
        guild = self.server.guild_of(int(chat.native))
        self.server.member_joins(guild.id, int(user_id), name)

    async def drop_connection(self) -> None:
        await self.server.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.server.rate_limited[self.channel_of(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self._token, self.server.token = self.server.token, "revoked"
            await self.server.drop()
        else:
            self.server.token = self._token
