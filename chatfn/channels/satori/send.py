"""The way out to a Satori server: `message.create` as the login the chat belongs to (its
platform and the bot's user id in `Satori-Platform` / `Satori-User-ID`), the model's Markdown
as Satori's formatting elements (elements.py), split within `max_message_length` (counted on
the content as sent), `<at id/>` for reply_with_mention in groups, `<quote id/>` for
reply_with_quote, images as `<img src/>` (a data URI or the URL as given) in the last part.

Satori gives no idempotency key: a message sent again after a crash appears again (at least
once). Errors: 429 waits (`Retry-After`); 401 refused credentials; 5xx and the network
unreachable; 400 / 403 / 404 refusals.
"""

from __future__ import annotations

import functools
import re

from chatfn.channels import kit
from chatfn.channels.kit.rest import SendErrors
from chatfn.channels.markdown import to_plain
from chatfn.channels.satori import elements
from chatfn.channels.satori.api import ApiError, SatoriApi
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.channels.split import split_message
from chatfn.common.messages import OutgoingMessage

__all__ = ["ChatRef", "SatoriSender", "chat_id", "parse_chat_id", "render_parts"]

MAX_IMAGE_OUT = 20 * 1024 * 1024
CREDENTIALS = "channels.satori.token"
ERRORS = SendErrors(ApiError, "the Satori server", CREDENTIALS)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_SHAPES = (
    "private:<platform>:<bot user id>:<channel id> or group:<platform>:<bot user id>:<channel id>"
)


class ChatRef:
    __slots__ = ("channel", "group", "platform", "self_id")

    def __init__(self, group: bool, platform: str, self_id: str, channel: str) -> None:
        self.group, self.platform, self.self_id, self.channel = group, platform, self_id, channel

    @property
    def key(self) -> str:
        return chat_id(self.group, self.platform, self.self_id, self.channel)


def chat_id(group: bool, platform: str, self_id: str, channel: str) -> str:
    """`private:` / `group:` + the login (platform, the bot's user id) + the channel's id (which
    may hold colons itself: Chronocat's direct channels are `private:<uin>`)."""
    return f"{'group' if group else 'private'}:{platform}:{self_id}:{channel}"


def parse_chat_id(chat_id: str) -> ChatRef:
    parts = chat_id.split(":", 3)
    if (
        len(parts) != 4
        or parts[0] not in ("private", "group")
        or not _NAME.match(parts[1])
        or not parts[2]
        or ":" in parts[2]
        or not parts[3]
    ):
        raise ValueError(f"not a Satori chat id: {chat_id!r} (expected {_SHAPES})")
    return ChatRef(parts[0] == "group", parts[1], parts[2], parts[3])


def render_parts(text: str, limit: int) -> list[tuple[str, str]]:
    """The Markdown `text` in parts, each with its Satori content of at most `limit`
    characters as sent (escaping and tags counted): split as Markdown, rendered, and split
    smaller where the rendering grew past the limit."""
    out: list[tuple[str, str]] = []
    for part in split_message(text, limit):
        rendered = elements.to_satori(part)
        if len(rendered) <= limit:
            out.append((part, rendered))
            continue
        smaller = max(20, min(limit // 2, limit * limit // len(rendered) - 10))
        for piece in split_message(part, smaller):
            rendered = elements.to_satori(piece)
            out.append((piece, rendered if len(rendered) <= limit else _plain(piece, limit)))
    return [(md, sent) for md, sent in out if sent.strip()]


def _plain(text: str, limit: int) -> str:
    return elements.escape(to_plain(text))[:limit]


class SatoriSender(kit.PlatformSender[ChatRef], platform="satori", label="Satori"):
    client: SatoriApi
    cfg: SatoriSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        return ERRORS.for_send(exc, key, self.cfg.endpoint)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        images = []
        for ref_image in out.images:
            got = kit.decode_image(ref_image, MAX_IMAGE_OUT, "Satori")
            images.append(elements.img(kit.data_uri(got) if isinstance(got, bytes) else got))
        prefix = ""
        if out.quote and out.reply_to:
            prefix += elements.quote(out.reply_to)
        if ref.group and out.at:
            prefix += elements.at(out.at) + " "
        limit = self.cfg.max_message_length - len(prefix)
        rendered = render_parts(out.text, limit) if out.text.strip() else []
        owed.parts = [md for md, _ in rendered]  # what is still owed, as Markdown
        parts = [sent for _, sent in rendered] or ([""] if images else [])
        for n, part in enumerate(parts):
            content = (prefix if n == 0 else "") + part
            if n == len(parts) - 1:
                content += "".join(images)
            create = functools.partial(
                self.client.create, ref.platform, ref.self_id, ref.channel, content
            )
            await self.call(ref.key, create)
            owed.sent += 1 if owed.parts else 0
        for voice in out.audio:  # the reply spoken (voice.tts): an <audio> message of its own
            create = functools.partial(
                self.client.create, ref.platform, ref.self_id, ref.channel, elements.audio(voice)
            )
            await self.call(ref.key, create)
