"""The way out to KOOK: KMarkdown messages (`type: 9`) to a channel (`POST
/v3/message/create`) or a user (`POST /v3/direct-message/create`), split within
`max_message_length` characters; images uploaded (`POST /v3/asset/create`, multipart
`file`) and sent as image messages (`type: 2`, the asset's URL as `content`); a spoken
reply (voice.tts) uploaded the same way and sent as an audio message (`type: 8`)
(developer.kookapp.cn/doc/http/message, /doc/http/direct-message, /doc/http/asset).

- A mention is `(met)<user id>(met)` before the first part (groups, `reply_with_mention`);
  `reply_with_quote` sends the message answered as `quote` with the first part.
- Every part carries a `nonce` made of the outbox row, the part's index and a hash of its
  content (KOOK hands it back in the message's event), and the channel's `find_sent` reads a
  chat's history after a crash so that what KOOK took is not sent twice.
- Errors: a refused token (401) is CredentialsRefused; a rate limit (429, or a bucket left
  empty: api.py) RateLimited with KOOK's `X-Rate-Limit-Reset`; network and 5xx Unreachable;
  any other refusal (no permission in the channel, a user who blocks DMs, an over-long
  message) DeliveryRefused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import aiohttp

from chatfn.channels import kit
from chatfn.channels.kit.image_urls import fetch_image_url
from chatfn.channels.kook.api import ERRORS, KookApi
from chatfn.channels.kook.parse import ChatRef, parse_chat_id
from chatfn.channels.kook.settings import KookSettings
from chatfn.channels.markdown import to_kmarkdown
from chatfn.channels.split import split_message
from chatfn.common import audio
from chatfn.common.fetch import FetchAllow
from chatfn.common.messages import OutgoingMessage

__all__ = ["MAX_IMAGE_OUT", "KookSender", "Part", "parts_of"]

#: The largest image uploaded (KOOK documents no limit for bots; its clients take 20 MB).
MAX_IMAGE_OUT = 20 * 1024 * 1024
TEXT, IMAGE, AUDIO, KMARKDOWN = 1, 2, 8, 9


@dataclass(frozen=True, slots=True)
class Part:
    """One KMarkdown message of a reply, as sent."""

    content: str
    nonce: str
    quote: str | None


def _mention(ref: ChatRef, out: OutgoingMessage) -> str:
    return f"(met){out.at}(met) " if out.at and ref.is_group and out.at.isalnum() else ""


def parts_of(out: OutgoingMessage, ref: ChatRef, limit: int) -> list[Part]:
    """The KMarkdown messages `out`'s text is sent as (the mention and the quote on the
    first); the same every time, so a part sent before a crash is known again."""
    mention = _mention(ref, out)
    texts = (
        split_message(out.text, limit - len(mention), render=to_kmarkdown)
        if out.text.strip()
        else []
    )
    quote = out.reply_to if out.quote and out.reply_to else None
    parts: list[Part] = []
    for index, text in enumerate(texts):
        content = (mention if index == 0 else "") + to_kmarkdown(text)
        digest = hashlib.sha256(content.encode()).hexdigest()[:12]
        nonce = f"chatfn-{out.event_id or 0}-{index}-{digest}"
        parts.append(Part(content, nonce, quote if index == 0 else None))
    return parts


class KookSender(kit.PlatformSender[ChatRef], platform="kook", label="KOOK"):
    """Sends OutgoingMessages through `client`, the channel's KookApi."""

    client: KookApi
    cfg: KookSettings
    fetch_allow: FetchAllow | None = None

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        return ERRORS.for_send(exc, key)

    def path(self, ref: ChatRef) -> str:
        return "/v3/message/create" if ref.is_group else "/v3/direct-message/create"

    async def post(
        self, ref: ChatRef, kind: int, content: str, nonce: str, quote: str | None
    ) -> Any:
        body: dict[str, Any] = {"type": kind, "target_id": ref.target, "content": content}
        body["nonce"] = nonce
        if quote:
            body["quote"] = quote
        path = self.path(ref)
        return await self.call(ref.key, lambda: self.client.call("POST", path, json=body))

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> list[str]:
        parts = parts_of(out, ref, self.cfg.max_message_length)
        images = [kit.decode_image(i, MAX_IMAGE_OUT, "KOOK") for i in out.images]
        owed.parts = [p.content for p in parts]
        ids: list[str] = []
        for part in parts:
            sent = await self.post(ref, KMARKDOWN, part.content, part.nonce, part.quote)
            ids.append(str((sent or {}).get("msg_id") or ""))
            owed.sent += 1
        for index, image in enumerate(images):
            url = await self.upload(ref, image)
            nonce = f"chatfn-{out.event_id or 0}-image{index}"
            quote = out.reply_to if out.quote and out.reply_to and not parts and not index else None
            sent = await self.post(ref, IMAGE, url, nonce, quote)
            ids.append(str((sent or {}).get("msg_id") or ""))
        for index, voice in enumerate(out.audio):  # the reply spoken (voice.tts): type 8
            spoken = audio.decode_audio_uri(voice)
            if spoken is None:
                continue  # a URL: the text is the answer
            mime, data = spoken
            url = await self._asset(ref, data, f"reply.{mime.split('/', 1)[1]}", mime)
            sent = await self.post(
                ref, AUDIO, url, f"chatfn-{out.event_id or 0}-voice{index}", None
            )
            ids.append(str((sent or {}).get("msg_id") or ""))
        return ids

    async def upload(self, ref: ChatRef, image: bytes | str) -> str:
        """The image as a KOOK asset URL (a URL a function gave is fetched first, through the
        one fetch door: it may point anywhere)."""
        if isinstance(image, str):
            fetched = await fetch_image_url(image, max_bytes=MAX_IMAGE_OUT, allow=self.fetch_allow)
            image = fetched.data
        mime = kit.image_mime(image) or "image/jpeg"
        return await self._asset(ref, image, kit.image_name(image), mime)

    async def _asset(self, ref: ChatRef, data: bytes, name: str, mime: str) -> str:
        """`data` uploaded as a KOOK asset (`POST /v3/asset/create`): its URL."""

        async def call() -> Any:
            form = aiohttp.FormData()
            form.add_field("file", data, filename=name, content_type=mime)
            return await self.client.call("POST", "/v3/asset/create", form=form, timeout=60)

        found = await self.call(ref.key, call)
        url = str((found or {}).get("url") or "") if isinstance(found, dict) else ""
        if not url:
            raise kit.DeliveryRefused("KOOK's asset/create gave no url")
        return url
