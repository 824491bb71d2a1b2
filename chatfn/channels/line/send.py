"""The way out to LINE: the reply token while it is good, else the push API.

Every message event carries a reply token (https://developers.line.biz/en/reference/
messaging-api/#send-reply-message): single use, good for about a minute, free of the monthly
message quota. An answer to a message (`reply_to`) uses it when it came less than
`reply_token_ttl` seconds ago and has not been used; otherwise, and for what does not fit its
one request (5 messages), the push API (https://developers.line.biz/en/reference/
messaging-api/#send-push-message), which counts against the quota. A reply token LINE refuses
(400 "Invalid reply token": used, or too old) sends the same messages by push.

Never twice on push: each push request carries `X-Line-Retry-Key`, a UUID made from the outbox
row's event id, the request's place in the message and its content, so the same request sent
again (the outbox after a crash, a retry after a dropped answer) is answered 409 by LINE and
not delivered again (https://developers.line.biz/en/docs/messaging-api/retrying-api-request/).
A reply by token has no such key: a crash between a reply and its mark sends it again by push.

Text is plain (LINE renders no Markdown): the model's Markdown made readable, split within
`max_message_length` (5000, UTF-16 units). A group answer that mentions its user is a text
message (v2) with a `{user}` mention substitution (only when the text holds no braces, which
v2 reads as placeholders); a quote uses the message's `quoteToken`. Pictures go as image
messages before the text: an https URL as it is, a picture the model made through the bot's
own URL (`public_url`, media.py); without `public_url` such a picture is not sent (a warning).
Rate limits: 429 waits (Retry-After when LINE names one); 429 "monthly limit" and other 4xx
are refusals; 401 refused credentials; 5xx and the network: unreachable.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from linebot.v3.messaging import (
    AudioMessage,
    ImageMessage,
    MentionSubstitutionObject,
    TextMessage,
    TextMessageV2,
    UserMentionTarget,
)

from chatfn.channels import kit
from chatfn.channels.kit.rest import SendErrors
from chatfn.channels.kit.sender import chat_kind
from chatfn.channels.line.api import LineApi, LineError
from chatfn.channels.line.media import MediaShelf
from chatfn.channels.line.settings import LineSettings
from chatfn.channels.markdown import to_plain
from chatfn.channels.split import split_message, utf16_len
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["ChatRef", "LineSender", "Replies", "parse_chat_id", "retry_key"]

#: Messages per reply or push request (LINE's limit).
PER_REQUEST = 5
MAX_IMAGE_OUT = 10 * 1024 * 1024  # LINE's image message: at most 10 MB
CREDENTIALS = "channels.line.channel_access_token"
ERRORS = SendErrors(LineError, "LINE", CREDENTIALS)
_USER = re.compile(r"^U[0-9a-f]{32}$")
_GROUP = re.compile(r"^[CR][0-9a-f]{32}$")
_KEYS = uuid.UUID("6c1e3d0a-9d43-4f55-8a38-7e0f3c2b5a11")  # the namespace of retry keys


@dataclass(slots=True)
class _Reply:
    token: str
    quote: str | None
    at: float
    used: bool = False


class Replies:
    """The reply token and quote token of each recent message, by message id."""

    def __init__(self, ttl: float, remember: int = 2000) -> None:
        self.ttl = ttl
        self.remember = remember
        self._by_id: OrderedDict[str, _Reply] = OrderedDict()

    def add(self, message_id: str, token: str | None, quote: str | None) -> None:
        if message_id in self._by_id or not (token or quote):
            return
        self._by_id[message_id] = _Reply(token or "", quote, time.monotonic())
        while len(self._by_id) > self.remember:
            self._by_id.popitem(last=False)

    def take(self, message_id: str | None) -> str | None:
        """The message's reply token when it is fresh and unused (then used), else None."""
        reply = self._by_id.get(message_id or "")
        if reply is None or reply.used or not reply.token:
            return None
        if time.monotonic() - reply.at > self.ttl:
            return None
        reply.used = True
        return reply.token

    def quote(self, message_id: str | None) -> str | None:
        reply = self._by_id.get(message_id or "")
        return None if reply is None else reply.quote


@dataclass(frozen=True, slots=True)
class ChatRef:
    to: str  # a user, group (C...) or room (R...) id
    group: bool

    @property
    def key(self) -> str:
        return f"{'group' if self.group else 'private'}:{self.to}"


def parse_chat_id(chat_id: str) -> ChatRef:
    shapes = "private:U<32 hex>, group:C<32 hex> or group:R<32 hex>"
    group, to = chat_kind(chat_id, "a LINE chat id", shapes, private=_USER, group=_GROUP)
    return ChatRef(to, group)


def retry_key(event_id: int | None, index: int, messages: list[Any]) -> str:
    """The X-Line-Retry-Key of one push request of an outbox row: the same row, place and
    content give the same UUID; without a row (a direct send), a random one."""
    if event_id is None:
        return str(uuid.uuid4())
    body = json.dumps([m.to_dict() for m in messages], sort_keys=True, ensure_ascii=False)
    digest = hashlib.blake2s(body.encode(), digest_size=8).hexdigest()
    return str(uuid.uuid5(_KEYS, f"{event_id}:{index}:{digest}"))


class LineSender(kit.PlatformSender[ChatRef], platform="line", label="LINE"):
    client: LineApi
    cfg: LineSettings

    def __init__(
        self,
        client: LineApi,
        settings: LineSettings,
        policy: Any,
        replies: Replies,
        media: MediaShelf | None,
    ) -> None:
        super().__init__(client, settings, policy)
        self.replies = replies
        self.media = media

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if (
            isinstance(exc, LineError)
            and exc.status == 429
            and "monthly limit" in exc.message.lower()
        ):
            return kit.DeliveryRefused(
                f"LINE: the account's monthly message quota is used up ({exc.message}); "
                f"the message to {key} is not sent"
            )
        return ERRORS.for_send(exc, key, self.cfg.api_base)

    def _pictures(self, out: OutgoingMessage) -> tuple[list[str], list[str]]:
        """(https URLs to send as image messages, URLs to add to the text)."""
        urls: list[str] = []
        links: list[str] = []
        for ref in out.images:
            image = kit.decode_image(ref, MAX_IMAGE_OUT, "LINE")
            if isinstance(image, str):
                (urls if image.startswith("https://") else links).append(image)
            elif self.media is not None:
                urls.append(self.media.put(image))
            else:
                self.log.warning(
                    "LINE: a picture to {} not sent: channels.line.public_url is not set (LINE "
                    "takes pictures only by URL)",
                    out.chat_id,
                )
        return urls, links

    def _text(self, part: str, ref: ChatRef, out: OutgoingMessage, first: bool) -> Any:
        text = to_plain(part)
        quote = self.replies.quote(out.reply_to) if first and out.quote else None
        if first and ref.group and out.at and "{" not in text and "}" not in text:
            mention = MentionSubstitutionObject(mentionee=UserMentionTarget(user_id=out.at))
            return TextMessageV2(
                text="{user} " + text, substitution={"user": mention}, quote_token=quote
            )
        return TextMessage(text=text, quote_token=quote)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        urls, links = self._pictures(out)
        text = "\n\n".join([out.text, *links]).strip()
        limit = self.cfg.max_message_length
        owed.parts = split_message(text, limit, render=to_plain, measure=utf16_len) if text else []
        messages: list[tuple[Any, bool]] = [
            (ImageMessage(original_content_url=u, preview_image_url=u), False) for u in urls
        ]
        messages += [(self._text(p, ref, out, i == 0), True) for i, p in enumerate(owed.parts)]
        messages += [(m, False) for m in await self._voices(out)]
        token = self.replies.take(out.reply_to)
        for n in range(0, len(messages), PER_REQUEST):
            batch = messages[n : n + PER_REQUEST]
            payload = [m for m, _ in batch]
            key = retry_key(out.event_id, n // PER_REQUEST, payload)
            send = functools.partial(self._send, ref, payload, key, token if n == 0 else None)
            await self.call(ref.key, send)
            token = None
            owed.sent += sum(1 for _, is_text in batch if is_text)

    async def _voices(self, out: OutgoingMessage) -> list[Any]:
        """The reply spoken (voice.tts) as audio messages after the text: MP3 on the bot's own
        URL (`public_url`, as pictures; LINE takes audio only by URL, with its length). Without
        `public_url`, or when it cannot be converted, the text goes alone (a warning)."""
        found = []
        for voice in out.audio:
            spoken = audio.decode_audio_uri(voice)
            if spoken is None:
                continue
            if self.media is None:
                self.log.warning(
                    "LINE: a spoken reply not sent: channels.line.public_url is not set"
                )
                break
            data = spoken[1]
            try:
                mp3 = await audio.to_mp3(data)
                _wav, seconds = await audio.to_wav(data, max_seconds=3600)
            except audio.AudioError as exc:
                self.log.warning("LINE: a spoken reply not converted: {}", exc)
                continue
            url = self.media.put(mp3, "audio/mpeg")
            found.append(AudioMessage(original_content_url=url, duration=int(seconds * 1000)))
        return found

    async def _send(self, ref: ChatRef, payload: list[Any], key: str, token: str | None) -> None:
        if token:
            try:
                await self.client.reply(token, payload)
                return
            except LineError as exc:
                if exc.status != 400 or "reply token" not in exc.message.lower():
                    raise
                self.log.debug("LINE reply token refused ({}): pushed instead", exc.message)
        await self.client.push(ref.to, payload, key)
