"""The KOOK channel and the local KOOK (kook_fake.py) as the channel contract drives them
(the `Driver` of tests/channels/contract.py: test_contract_kook.py), plus a bot harness for
the KOOK-only tests (test_kook.py).

Contract groups are guild text channels (`group:<channel id>`), private chats direct
messages (`private:<user id>`). An image a reply carries goes out as its own image message
(KOOK's `type: 2`) after the text: `sent` reads it as the image of the text sent before it
for the same outbox row (their nonces name the row).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from chatfn.channels.kook import SPEC
from chatfn.channels.kook.channel import KookChannel
from chatfn.runtime.bot import Bot
from chatfn.runtime.channel_host import ChannelHost
from chatfn.runtime.settings import parse_settings
from chatfn.testing import ScriptedModel
from function_calls.registry import Registry
from tests.channels.contract import Chat, Sent, _echo, contract_registry
from tests.channels.kook.kook_fake import ADMIN_ROLE, BOT_ID, MEMBER_ROLE, FakeKook, Posted
from tests.kit import until

_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*$")
_MET = re.compile(r"\(met\)([^()\s]+)\(met\)\s?")


def visible(content: str) -> tuple[str, set[str]]:
    """What a KOOK user reads of a KMarkdown `content`, and the styles shown."""
    styles: set[str] = set()
    if re.search(r"(?<![\\*])\*\*(?!\s)[^*]+\*\*", content):
        styles.add("bold")
    if re.search(r"(?<![\\*])\*(?![\s*])[^*]+(?<![\\\s])\*(?!\*)", content):
        styles.add("italic")
    if re.search(r"(?<!\\)`[^`\n]+`", content):
        styles.add("code")
    if re.search(r"\[[^\]]+\]\(https?://[^)\s]+\)", content):
        styles.add("link")
    lines: list[str] = []
    in_code = False
    for line in content.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            lines.append(line)
            continue
        line = _MET.sub("", line)
        line = re.sub(r"\[([^\]]+)\]\((https?://[^)\s]+)\)", r"\1", line)
        line = re.sub(r"(?<!\\)(\*\*|\*|~~|`)", "", line)
        lines.append(re.sub(r"\\(.)", r"\1", line))
    return "\n".join(lines).strip(), styles


def _row(nonce: str) -> str:
    return nonce.split("-")[1] if nonce.startswith("chatfn-") else nonce


def as_sent(chat: Chat, posts: list[Posted]) -> list[Sent]:
    """The fake's posts as the contract's Sent: an image message joins the text before it
    when both are of one outbox row."""
    out: list[Sent] = []
    rows: list[str] = []
    for p in posts:
        row = _row(str(p.body.get("nonce") or ""))
        if p.type == 2:
            if out and rows[-1] == row and p.image is not None:
                out[-1].images.append(p.image)
                continue
            out.append(Sent(chat=chat, text="", images=[p.image or p.content], message_id=p.id))
            rows.append(row)
            continue
        text, styles = visible(p.content)
        out.append(
            Sent(
                chat=chat,
                text=text,
                mentions=_MET.findall(p.content),
                quote=p.body.get("quote") or None,
                styles=styles,
                message_id=p.id,
            )
        )
        rows.append(row)
    return out


class KookDriver:
    platform = "kook"
    max_length = 2000
    bot_user = BOT_ID

    def __init__(self, fake: FakeKook, **settings: Any) -> None:
        self.fake = fake
        self.settings = settings
        self.features = frozenset(
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
        self.channel: KookChannel | None = None
        self._task: asyncio.Task[None] | None = None

    def channel_settings(self) -> dict[str, Any]:
        return {
            "token": self.fake.token,
            "api_base": self.fake.api_base,
            "send_rate": 0,
            "max_message_length": self.max_length,
            **self.settings,
        }

    async def attach(self, host: ChannelHost, settings: Any, *, ready: bool = True) -> None:
        """`ready` False: return without waiting for the channel to be up."""
        self.channel = SPEC.build(host, settings)
        self._task = asyncio.create_task(self.channel.run())
        if ready:
            async with asyncio.timeout(15):
                await self.channel.wait_ready()

    async def detach(self) -> None:
        if self.channel is not None:
            await self.channel.stop()
            self.channel = None
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

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
        fake = self.fake
        target = chat.native if chat.kind == "group" else sender
        if chat.kind == "private":
            target = chat.native
            sender = chat.native
        roles = [ADMIN_ROLE] if role in ("admin", "administrator") else [MEMBER_ROLE]
        if role in ("owner", "creator"):
            fake.guild_owner[fake.guild_of(chat.native)] = sender
        if image is not None:
            url = fake.asset(image)
            return await fake.say(chat.kind, target, sender, url, msg_type=2, roles=roles)
        return await fake.say(chat.kind, target, sender, text, mention=mention, roles=roles)

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        fake = self.fake

        def enough() -> list[Sent] | None:
            found = as_sent(chat, fake.sent_to(chat.kind, chat.native))
            return found if len(found) >= count else None

        await fake.wait_for(enough, timeout)
        # What one delivery sends after its text (its images) is part of the same Sent:
        # wait until the chat's queue is idle, then read again.
        sender = self.channel.sender if self.channel is not None else None
        if sender is not None:
            key = self.chat_id(chat)
            await until(lambda: key not in sender.runner._tails, timeout, "sends to finish")
        return as_sent(chat, fake.sent_to(chat.kind, chat.native))

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        self.fake.user_names[user] = name
        await self.fake.joined(self.fake.guild_of(chat.native), user)

    async def drop_connection(self) -> None:
        await self.fake.drop()

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[chat.native] = time.monotonic() + retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self._token, self.fake.token = self.fake.token, "revoked-token"
            await self.fake.drop()
        else:
            self.fake.token = self._token


@asynccontextmanager
async def running(
    driver: KookDriver,
    tmp_path: Path,
    *,
    registry: Registry | None = None,
    model: Any = None,
    ready: bool = True,
    **config: Any,
) -> AsyncIterator[Bot]:
    """A real bot (SQLite file under tmp_path) with the driver's channel attached."""
    data: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{tmp_path / 'kook.db'}"},
        "plugins": {"paths": []},
        "bot": {"name": "kookbot", "admins": ["9999"], **config.pop("bot", {})},
        **config,
        "channels": {"kook": driver.channel_settings(), **config.get("channels", {})},
    }
    settings = parse_settings(data, base_dir=tmp_path)
    bot = Bot(
        settings,
        registry=registry or contract_registry(),
        model=model or ScriptedModel([_echo], repeat_last=True),
        load_plugins=False,
    )
    try:
        section = getattr(settings.channels, "kook")  # noqa: B009 - a section found at run time
        await driver.attach(bot.channel_host, section, ready=ready)
        await bot.start()
        yield bot
    finally:
        await driver.detach()
        await bot.aclose()


__all__ = ["KookDriver", "as_sent", "running", "visible"]
