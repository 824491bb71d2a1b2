"""The WhatsApp channel and the local Cloud API (whatsapp_fake.py) as the channel contract
drives them. The webhook is served by the bot's one web server (its main listener on port
0), as `--channel http` serves it. A private chat "1001" is the user with wa_id 1001; a group
"5001" the group with that group_id. What a user reads is WhatsApp's formatting rendered:
`read_formatting` takes the markers out and names the styles they made."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from chatfn.channels.whatsapp import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.wecom.wecom_driver import serve_webhooks
from tests.channels.whatsapp.whatsapp_fake import FakeWhatsApp, Posted

_SPANS = (
    ("code", re.compile(r"`([^`\n]+)`")),
    ("bold", re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")),
    ("italic", re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")),
    ("strike", re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])")),
)
_URL = re.compile(r"https?://\S+")


def read_formatting(text: str) -> tuple[str, set[str]]:
    """WhatsApp's formatting as a user sees it: (the text without markers, the styles)."""
    styles: set[str] = set()
    out = []
    for n, piece in enumerate(text.split("```")):
        if n % 2:  # a monospace block: shown as it is
            styles.add("code")
            out.append(piece)
            continue
        for style, pattern in _SPANS:
            piece, found = pattern.subn(r"\1", piece)
            if found:
                styles.add(style)
        if _URL.search(piece):
            styles.add("link")  # WhatsApp makes a URL a link
        out.append(piece)
    return "".join(out), styles


def as_sent(chat: Chat, posted: list[Posted]) -> list[Sent]:
    out: list[Sent] = []
    images: list[bytes | str] = []
    for p in posted:
        if p.image is not None:
            images.append(p.image)
            continue
        text, styles = read_formatting(p.text or f"[template {p.template}]")
        out.append(
            Sent(
                chat=chat,
                text=text,
                quote=p.quote,
                images=images,
                styles=styles,
                message_id=p.wamid,
            )
        )
        images = []
    if images:
        out.append(Sent(chat=chat, text="", images=images))
    return out


class WhatsAppDriver:
    platform = "whatsapp"
    features = frozenset(
        {
            "groups",
            "quote",
            "images_in",
            "images_out",
            "markdown",
            "split",
            "rate_limit",
            "crash_redelivery",
            "credentials",
            "no_group_mentions",
        }
    )
    max_length = 4096

    def __init__(self, fake: FakeWhatsApp, **settings: Any) -> None:
        self.fake = fake
        self.bot_user = "".join(c for c in fake.display_number if c.isdigit())
        self.settings = settings
        self.channel: Any = None
        self.listener: Any = None
        self._task: asyncio.Task[None] | None = None
        self._token = fake.token

    def channel_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "phone_number_id": self.fake.phone_number_id,
            "access_token": self.fake.token,
            "app_secret": self.fake.app_secret,
            "verify_token": self.fake.verify_token,
            "api_base": self.fake.base,
            "send_rate": 0,
        }
        return {**settings, **self.settings}

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self.listener = await serve_webhooks(host)
        self.fake.callback_url = (
            f"http://127.0.0.1:{self.listener.bound_port}{settings.webhook_path}"
        )
        self.channel.keepalive = 0.1  # the token check while serving, every 300 s
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
        if self.listener is not None:
            await self.listener.stop()
            self.listener = None

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
        if chat.kind == "private":
            sender = chat.native
        if mention:
            text = f"@{self.bot_user} {text}"
        if image is not None:
            message = fake.image(sender, image, caption=text)
        else:
            message = fake.text(sender, text)
        if chat.kind == "group":
            message["group_id"] = chat.native
        status = await fake.deliver(message)
        assert status == 200, (status, fake.webhook_answers)
        return str(message["id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        async with asyncio.timeout(timeout):
            while True:
                got = as_sent(chat, await self.fake.wait_sent(chat.native, 1, timeout))
                if len(got) >= count and got[-1].text:
                    return got
                await self.fake.wait_sent(chat.native, len(self.fake.sent[chat.native]) + 1)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        raise NotImplementedError("the Cloud API's webhook has no member-joined message")

    async def drop_connection(self) -> None:
        raise NotImplementedError("a webhook has no connection to drop")

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[chat.native] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        self.fake.token = "revoked" if refused else self._token


__all__ = ["WhatsAppDriver", "as_sent", "read_formatting"]
