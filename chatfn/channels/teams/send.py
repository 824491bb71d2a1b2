"""The way out to Teams: a `message` activity to the conversation at its service URL
(api.py), `textFormat: markdown` (Teams renders Markdown), split within
`max_message_length`; reply_with_quote replies to the activity answered (in its thread);
reply_with_mention in a group starts with `<at>name</at>` and carries the mention entity
Teams needs to make it one; images as attachments (a data URI's bytes inline, a URL as it
is) on the last part.

The service URL comes with each activity (it differs by region); one not seen since the
start (an outbox row after a restart) is the last one seen, else Teams' global
`https://smba.trafficmanager.net/teams/`. The Bot Connector has no idempotency key: after a
crash a message is sent again (at least once). Errors: 429 waits (`Retry-After`); 401
refused credentials; 5xx and the network unreachable; 400 / 403 / 404 / 413 refusals.
"""

from __future__ import annotations

import functools
import html
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit.rest import SendErrors
from chatfn.channels.split import split_message
from chatfn.channels.teams.api import ApiError, TeamsApi
from chatfn.channels.teams.auth import TokenError
from chatfn.channels.teams.settings import TeamsSettings
from chatfn.common.messages import OutgoingMessage

__all__ = ["ChatRef", "TeamsSender", "parse_chat_id"]

MAX_IMAGE_OUT = 4 * 1024 * 1024
CREDENTIALS = "channels.teams.app_id / channels.teams.app_password"
#: A 401 from the Bot Connector: the token made from the credentials was refused.
ERRORS = SendErrors(ApiError, "Teams", f"the token of {CREDENTIALS}")
GLOBAL_SERVICE = "https://smba.trafficmanager.net/teams/"


class ChatRef:
    __slots__ = ("conversation", "group")

    def __init__(self, group: bool, conversation: str) -> None:
        self.group, self.conversation = group, conversation

    @property
    def key(self) -> str:
        return f"{'group' if self.group else 'private'}:{self.conversation}"


def parse_chat_id(chat_id: str) -> ChatRef:
    kind, _, conversation = chat_id.partition(":")
    if kind not in ("private", "group") or not conversation:
        raise ValueError(
            f"not a Teams chat id: {chat_id!r} (expected private:<conversation id> or "
            "group:<conversation id>)"
        )
    return ChatRef(kind == "group", conversation)


class TeamsSender(kit.PlatformSender[ChatRef], platform="teams", label="Teams"):
    client: TeamsApi
    cfg: TeamsSettings

    def __init__(self, client: TeamsApi, settings: TeamsSettings, policy: Any) -> None:
        super().__init__(client, settings, policy)
        self.service_urls: dict[str, str] = {}  # conversation id -> its service URL
        self.names: dict[str, str] = {}  # user id -> the name Teams gave it
        self.last_service = GLOBAL_SERVICE

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, TokenError):
            if exc.status == 429 or exc.status >= 500:
                return kit.Unreachable(f"the Microsoft login endpoint answered {exc}")
            return kit.CredentialsRefused(f"Microsoft refused {CREDENTIALS} ({exc.error})")
        return ERRORS.for_send(exc, key)

    def _mention(self, user: str) -> tuple[str, dict[str, Any]]:
        name = self.names.get(user) or user
        tag = f"<at>{html.escape(name, quote=False)}</at>"
        return tag + " ", {"type": "mention", "mentioned": {"id": user, "name": name}, "text": tag}

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        attachments = []
        for image in out.images:
            got = kit.decode_image(image, MAX_IMAGE_OUT, "Teams")
            url = kit.data_uri(got) if isinstance(got, bytes) else got
            mime = kit.image_mime(got) if isinstance(got, bytes) else None
            attachments.append(
                {"contentType": mime or "image/png", "contentUrl": url, "name": "image"}
            )
        service = self.service_urls.get(ref.conversation, self.last_service)
        reply_to = out.reply_to if out.quote and out.reply_to else None
        prefix, entities = ("", [])
        if ref.group and out.at:
            prefix, entity = self._mention(out.at)
            entities = [entity]
        owed.parts = (
            split_message(out.text, self.cfg.max_message_length - len(prefix))
            if out.text.strip()
            else []
        )
        parts = owed.parts or ([""] if attachments else [])
        for n, part in enumerate(parts):
            activity: dict[str, Any] = {
                "type": "message",
                "text": (prefix if n == 0 else "") + part,
                "textFormat": "markdown",
            }
            if n == 0 and entities:
                activity["entities"] = entities
            if n == len(parts) - 1 and attachments:
                activity["attachments"] = attachments
            send = functools.partial(
                self.client.send, service, ref.conversation, activity, reply_to
            )
            await self.call(ref.key, send)
            owed.sent += 1 if owed.parts else 0
