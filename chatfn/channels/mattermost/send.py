"""The way out to Mattermost: POST /api/v4/posts, Markdown as it is (Mattermost renders it),
split within `max_message_length` (16383), images uploaded (POST /api/v4/files) and attached
to the last part.

Threads: a chat id with `:thread:<root_id>` posts into that thread; with `reply_with_quote`
a top-level message is answered in a thread under it (Mattermost's replies are threads). A
group answer mentions its user as `@username` (the name read once from GET /users/{id}).

Never twice, as far as the server helps: each post carries a `pending_post_id` made from the
outbox row, its part and its content; the server answers a post sent again with the same one
within its dedupe window (30 s) with the first post instead of a second. A post sent again
later (after a crash and a restart) appears again: at least once.
Errors: 429 waits (`X-Ratelimit-Reset`); 401 refused credentials; 5xx and the network
unreachable; 403 / 404 / 400 refusals.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit import media
from chatfn.channels.kit.keys import part_key
from chatfn.channels.kit.rest import SendErrors
from chatfn.channels.mattermost.api import ApiError, MattermostApi
from chatfn.channels.mattermost.settings import MattermostSettings
from chatfn.channels.split import split_message
from chatfn.common.messages import OutgoingMessage

__all__ = ["ChatRef", "MattermostSender", "parse_chat_id", "pending_id"]

_ID = re.compile(r"^[a-z0-9]{26}$")
MAX_IMAGE_OUT = 50 * 1024 * 1024
CREDENTIALS = "channels.mattermost.token"
ERRORS = SendErrors(ApiError, "Mattermost", CREDENTIALS)
_SHAPES = "private:<channel id>, group:<channel id>, or either with :thread:<root post id>"


class ChatRef:
    __slots__ = ("channel", "group", "thread")

    def __init__(self, channel: str, group: bool, thread: str | None) -> None:
        self.channel, self.group, self.thread = channel, group, thread

    @property
    def key(self) -> str:
        return f"{'group' if self.group else 'private'}:{self.channel}"


def parse_chat_id(chat_id: str) -> ChatRef:
    group, channel, thread = kit.chat_parts(chat_id, _ID, _ID, "Mattermost", _SHAPES)
    return ChatRef(channel, group, thread)


def pending_id(event_id: int | None, index: int, content: str) -> str:
    """The pending_post_id of one part of an outbox row (random without a row)."""
    return part_key(event_id, index, content)


class MattermostSender(kit.PlatformSender[ChatRef], platform="mattermost", label="Mattermost"):
    client: MattermostApi
    cfg: MattermostSettings

    def __init__(self, client: MattermostApi, settings: MattermostSettings, policy: Any) -> None:
        super().__init__(client, settings, policy)
        self.usernames: dict[str, str] = {}

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        return ERRORS.for_send(exc, key, self.cfg.url)

    async def _mention(self, ref: ChatRef, user_id: str) -> str:
        if user_id not in self.usernames:
            got = await self.call(ref.key, functools.partial(self.client.user, user_id))
            self.usernames[user_id] = str(got.get("username") or "")
        name = self.usernames[user_id]
        return f"@{name} " if name else ""

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        images = [kit.decode_image(i, MAX_IMAGE_OUT, "Mattermost") for i in out.images]
        links = [f"![image]({i})" for i in images if isinstance(i, str)]
        text = "\n\n".join([out.text, *links]).strip()
        owed.parts = split_message(text, self.cfg.max_message_length) if text else []
        files = []
        for data in (i for i in images if isinstance(i, bytes)):
            upload = functools.partial(
                self.client.upload,
                ref.channel,
                data,
                kit.image_name(data),
                kit.image_mime(data) or "image/jpeg",
            )
            files.append(await self.call(ref.key, upload))
        for name, mime, data in media.spoken_files(out.audio):  # the reply spoken: a file
            upload = functools.partial(self.client.upload, ref.channel, data, name, mime)
            files.append(await self.call(ref.key, upload))
        root = ref.thread or (out.reply_to if out.quote and out.reply_to else None)
        prefix = await self._mention(ref, out.at) if ref.group and out.at else ""
        parts = owed.parts or ([""] if files else [])
        for n, part in enumerate(parts):
            message = (prefix if n == 0 else "") + part
            body: dict[str, Any] = {
                "channel_id": ref.channel,
                "message": message,
                "pending_post_id": pending_id(out.event_id, n, message),
            }
            if root:
                body["root_id"] = root
            if n == len(parts) - 1 and files:
                body["file_ids"] = files
            await self.call(ref.key, functools.partial(self.client.post, body))
            owed.sent += 1 if owed.parts else 0
