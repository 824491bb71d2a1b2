"""The Teams channel and the local Bot Framework (teams_fake.py) as the channel contract
drives them. The messaging endpoint is served by the bot's one web server (its main listener
on port 0), as `--channel http` serves it. A private chat "1001" is the personal
conversation `a:1001`, a group "1001" the group chat `19:1001@thread.v2`; a sender "1002" the
user `29:1002`. What a user reads is the Markdown rendered (`to_plain`, its styles named)
with the `<at>` tags of mentions out."""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any

from chatfn.channels.markdown import to_plain
from chatfn.channels.teams import SPEC
from chatfn.runtime.channel_host import ChannelHost
from tests.channels.contract import Chat, Sent
from tests.channels.teams.teams_fake import FakeTeams
from tests.channels.wecom.wecom_driver import serve_webhooks

_STYLES = (
    ("bold", re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")),
    ("italic", re.compile(r"(?<![*\w])\*[^*\n]+\*(?!\*)|(?<![_\w])_[^_\n]+_(?![_\w])")),
    ("code", re.compile(r"`[^`\n]+`|```")),
    ("link", re.compile(r"\[[^\]]+\]\([^)]+\)|https?://")),
)


def as_sent(chat: Chat, activities: list[dict[str, Any]]) -> list[Sent]:
    out = []
    for a in activities:
        raw = a.get("text") or ""
        mentions = []
        for e in a.get("entities") or []:
            if e.get("type") == "mention" and e.get("text") in raw:
                mentions.append(str(e["mentioned"]["id"]).removeprefix("29:"))
                raw = raw.replace(e["text"], "", 1)
        images: list[bytes | str] = []
        for att in a.get("attachments") or []:
            url = att["contentUrl"]
            images.append(
                base64.b64decode(url.split(",", 1)[1]) if url.startswith("data:") else url
            )
        out.append(
            Sent(
                chat=chat,
                text=to_plain(raw).strip(),
                mentions=mentions,
                quote=a.get("replyToId"),
                images=images,
                styles={s for s, p in _STYLES if p.search(raw)},
                message_id=a["id"],
            )
        )
    return out


class TeamsDriver:
    platform = "teams"
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
            "member_joined",
            "credentials",
        }
    )
    max_length = 2000  # the contract's essay is shorter than Teams' 28000

    def __init__(self, fake: FakeTeams, **settings: Any) -> None:
        self.fake = fake
        self.bot_user = f"28:{fake.app_id}"
        self.settings = settings
        self.channel: Any = None
        self.listener: Any = None
        self._task: asyncio.Task[None] | None = None
        self._password = fake.app_password

    def conversation(self, chat: Chat) -> str:
        return f"a:{chat.native}" if chat.kind == "private" else f"19:{chat.native}@thread.v2"

    def channel_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "app_id": self.fake.app_id,
            "app_password": self.fake.app_password,
            "api_base": self.fake.base,
            "openid_metadata_url": self.fake.openid_url,
            "send_rate": 0,
            "max_message_length": self.max_length,
        }
        return {**settings, **self.settings}

    async def attach(self, host: ChannelHost, settings: Any) -> None:
        self.channel = SPEC.build(host, settings)
        self.listener = await serve_webhooks(host)
        self.fake.callback_url = (
            f"http://127.0.0.1:{self.listener.bound_port}{settings.webhook_path}"
        )
        self.channel.keepalive = 0.1  # a fresh token while serving, every 300 s
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
        return f"{chat.kind}:{self.conversation(chat)}"

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
        kind = "personal" if chat.kind == "private" else "groupChat"
        fields: dict[str, Any] = {"text": text}
        if mention:
            fields["text"] = f"<at>chatbot</at> {text}"
            fields["entities"] = [
                {
                    "type": "mention",
                    "text": "<at>chatbot</at>",
                    "mentioned": {"id": self.bot_user, "name": "chatbot"},
                }
            ]
        if image is not None:
            fields["attachments"] = [
                {"contentType": "image/png", "contentUrl": self.fake.file(image)}
            ]
        activity = self.fake.activity(
            self.conversation(chat), kind, f"29:{sender}", f"User {sender}", **fields
        )
        status = await self.fake.deliver(activity)
        assert status == 200, (status, self.fake.answers)
        return str(activity["id"])

    async def sent(self, chat: Chat, count: int, timeout: float = 15.0) -> list[Sent]:
        got = await self.fake.wait_sent(self.conversation(chat), count, timeout)
        return as_sent(chat, got)

    async def member_joins(self, chat: Chat, user: str, name: str) -> None:
        conv = self.conversation(chat)
        activity = self.fake.activity(conv, "groupChat", f"29:{user}", name)
        activity.update(
            {"type": "conversationUpdate", "membersAdded": [{"id": f"29:{user}", "name": name}]}
        )
        activity.pop("text", None)
        assert await self.fake.deliver(activity) == 200

    async def drop_connection(self) -> None:  # a webhook: no connection of its own
        raise NotImplementedError

    async def rate_limit_next(self, chat: Chat, retry_after: float) -> None:
        self.fake.rate_limited[self.conversation(chat)] = retry_after

    async def refuse_credentials(self, refused: bool) -> None:
        if refused:
            self.fake.revoke()
        else:
            self.fake.app_password = self._password


__all__ = ["TeamsDriver"]
