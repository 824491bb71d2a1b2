"""The way out to WhatsApp: POST /{phone-number-id}/messages, within the 24-hour window.

WhatsApp takes free-form messages (text, images) to a user only within 24 hours of the user's
last message, the customer-service window (https://developers.facebook.com/docs/whatsapp/
cloud-api/guides/send-messages#customer-service-windows); after it only an approved template.
The channel knows when each chat last wrote (`Windows`, kept while it runs): an answer to a
chat whose window is known to be closed, or one WhatsApp refuses with 131047 (the window
closed while the bot was down, or before it started), is replaced by the template named in
`channels.whatsapp.template` (one warning line), or, with none named, refused with one error
line: never a silent drop.

Text: the model's Markdown as WhatsApp's formatting (format.py), split within
`max_message_length` (4096). An answer quotes the message it answers when `reply_with_quote`
is on (`context.message_id`). Pictures go first: bytes uploaded (POST /media), an https URL
by `link`. Rate limits (130429, 131056, 80007, 4, 80008) wait in the chat's order; 190 or
HTTP 401 are refused credentials; 5xx and the network unreachable; other errors refusals.
The Cloud API has no idempotency key and no history to read back: after a crash between a
send and its mark the message is sent again (at least once).
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from typing import Any

from chatfn.channels import kit
from chatfn.channels.kit.rest import SendErrors
from chatfn.channels.kit.sender import SharedStateSender, chat_kind
from chatfn.channels.split import split_message
from chatfn.channels.whatsapp.api import (
    RATE_CODES,
    WINDOW_CODE,
    GraphApi,
    GraphError,
)
from chatfn.channels.whatsapp.format import to_whatsapp
from chatfn.channels.whatsapp.settings import WhatsAppSettings
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["WINDOW", "ChatRef", "Windows", "WhatsAppSender", "parse_chat_id"]

#: The customer-service window, in seconds.
WINDOW = 24 * 3600.0
MAX_IMAGE_OUT = 5 * 1024 * 1024  # WhatsApp's image limit: 5 MB
CREDENTIALS = "channels.whatsapp.access_token"
ERRORS = SendErrors(GraphError, "WhatsApp", CREDENTIALS)
_WA_ID = re.compile(r"^\d{1,20}$")
_GROUP = re.compile(r"^[A-Za-z0-9_=.\-]{1,128}$")


class OutsideWindow(Exception):
    """The chat's 24-hour window is closed."""


class Windows:
    """When each chat last wrote (wall clock), as far as this process saw."""

    def __init__(self, clock: Any = time.time, remember: int = 100_000) -> None:
        self.clock = clock
        self.remember = remember
        self._last: dict[str, float] = {}

    def saw(self, chat_id: str, at: float | None = None) -> None:
        when = self.clock() if at is None else at
        self._last[chat_id] = max(when, self._last.get(chat_id, 0.0))
        if len(self._last) > self.remember:
            self._last.pop(next(iter(self._last)))

    def closed(self, chat_id: str) -> bool:
        """Known to be closed (None known: WhatsApp will say)."""
        last = self._last.get(chat_id)
        return last is not None and self.clock() - last > WINDOW


@dataclass(frozen=True, slots=True)
class ChatRef:
    to: str
    group: bool

    @property
    def key(self) -> str:
        return f"{'group' if self.group else 'private'}:{self.to}"

    def recipient(self) -> dict[str, str]:
        return {"recipient_type": "group" if self.group else "individual", "to": self.to}


def parse_chat_id(chat_id: str) -> ChatRef:
    shapes = "private:<phone number, digits> or group:<group id>"
    group, to = chat_kind(chat_id, "a WhatsApp chat id", shapes, private=_WA_ID, group=_GROUP)
    return ChatRef(to, group)


class WhatsAppSender(SharedStateSender[ChatRef, Windows], platform="whatsapp", label="WhatsApp"):
    """`shared`: when each chat last wrote, which the way in notes (the 24-hour window)."""

    client: GraphApi
    cfg: WhatsAppSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, GraphError):
            if exc.code in RATE_CODES or exc.status == 429:
                return kit.RateLimited(
                    f"WhatsApp rate limit sending to {key} ({exc.code})", exc.retry_after
                )
            if exc.is_auth:
                return kit.CredentialsRefused(f"WhatsApp refused {CREDENTIALS} ({exc.message})")
            if exc.code == WINDOW_CODE:
                return OutsideWindow(str(exc))
        return ERRORS.for_send(exc, key, self.cfg.api_base)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        images = [kit.decode_image(i, MAX_IMAGE_OUT, "WhatsApp") for i in out.images]
        links = [i for i in images if isinstance(i, str) and not i.startswith("https://")]
        text = "\n\n".join([out.text, *links]).strip()
        limit = self.cfg.max_message_length
        owed.parts = split_message(text, limit, render=to_whatsapp) if text else []
        if self.shared.closed(ref.key):
            return await self._outside(ref, out, owed)
        try:
            for image in images:
                if isinstance(image, bytes) or image.startswith("https://"):
                    await self._image(ref, image)
            for n, part in enumerate(owed.parts):
                body = {"type": "text", "text": {"body": to_whatsapp(part), "preview_url": False}}
                if n == 0 and out.quote and out.reply_to:
                    body["context"] = {"message_id": out.reply_to}
                await self._send(ref, body)
                owed.sent += 1
            for voice in out.audio:  # the reply spoken (voice.tts): an audio message after it
                await self._voice(ref, voice)
        except OutsideWindow:
            if owed.sent:
                raise kit.DeliveryRefused(
                    f"WhatsApp: the 24-hour window of {ref.key} closed while an answer was "
                    "being sent; the rest is not sent"
                ) from None
            return await self._outside(ref, out, owed)
        return None

    async def _outside(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        """The window is closed: the template instead, or a refusal said in one line."""
        name = self.cfg.template
        if not name:
            why = (
                f"WhatsApp: not sent to {ref.key}: the user last wrote more than 24 hours ago "
                "(the customer-service window is closed) and channels.whatsapp.template is not "
                "set"
            )
            self.log.error("{}", why)
            raise kit.DeliveryRefused(why)
        body = {
            "type": "template",
            "template": {"name": name, "language": {"code": self.cfg.template_language}},
        }
        try:
            await self._send(ref, body)
        except OutsideWindow as exc:  # a template is never outside it: WhatsApp says otherwise
            why = f"WhatsApp refused the template to {ref.key}: {exc}"
            raise kit.DeliveryRefused(why) from None
        owed.sent = len(owed.parts)
        self.log.warning(
            "WhatsApp: {} is outside the 24-hour window: template {!r} sent instead of the answer "
            "({} characters)",
            ref.key,
            name,
            len(out.text),
        )

    async def _image(self, ref: ChatRef, image: bytes | str) -> None:
        if isinstance(image, bytes):
            mime = kit.image_mime(image) or "image/jpeg"
            upload = functools.partial(self.client.upload, image, mime, kit.image_name(image))
            media: dict[str, str] = {"id": await self.call(ref.key, upload)}
        else:
            media = {"link": image}
        await self._send(ref, {"type": "image", "image": media})

    async def _voice(self, ref: ChatRef, voice: str) -> None:
        """A spoken reply, uploaded (POST /media, OGG/Opus as WhatsApp plays voice) and sent as
        an `audio` message; one WhatsApp refuses is logged (the text is the answer)."""
        spoken = audio.decode_audio_uri(voice)
        if spoken is None:
            return
        mime, data = spoken
        upload = functools.partial(self.client.upload, data, mime, f"reply.{mime.split('/')[1]}")
        try:
            media = await self.call(ref.key, upload)
            await self._send(ref, {"type": "audio", "audio": {"id": media}})
        except kit.DeliveryRefused as exc:
            self.log.warning("WhatsApp voice reply to {} not sent: {}", ref.key, exc)

    async def _send(self, ref: ChatRef, body: dict[str, Any]) -> str:
        payload = {**ref.recipient(), **body}
        return await self.call(ref.key, functools.partial(self.client.send, payload))
