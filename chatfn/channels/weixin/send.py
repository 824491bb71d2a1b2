"""The way out to WeChat: `ilink/bot/sendmessage`, one item a message (openclaw-weixin
src/messaging/send.ts: a text item, or an image item after its caption as a message of its
own), each carrying the chat's newest `context_token` (a reply without one, or with one
iLink no longer takes, is refused: the user has to write to the bot first).

- Text: WeChat shows no Markdown, so the model's Markdown goes out as plain text
  (`to_plain`), split within `max_message_length` characters.
- `client_id` names the outbox row, the part and a hash of the text (the same on every try).
- Images: uploaded to the CDN encrypted (media.py), sent after the text.
- Voice: a spoken reply (voice.tts) goes last, as voice items: converted to SILK (what
  WeChat plays), uploaded to the CDN as media_type 4 with its length (openclaw-weixin
  src/messaging/send-media.ts and send.ts `sendVoiceMessageWeixin`); WeChat's voice messages
  last at most 60 s, so a longer reply goes as clips of `VOICE_CLIP` seconds. One that cannot
  be converted or that iLink refuses is logged and left out: the text is the answer.
- Errors: -14 (session timed out) or a 401/403 is CredentialsRefused (log in again); -2
  (frequency limit) or a 429 RateLimited; network and 5xx Unreachable; any other refusal
  DeliveryRefused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.image_urls import fetch_image_url
from chatfn.channels.kit.sender import SharedStateSender
from chatfn.channels.kit.voice import unsent
from chatfn.channels.markdown import to_plain
from chatfn.channels.split import split_message
from chatfn.channels.weixin.api import IlinkApi, IlinkError
from chatfn.channels.weixin.media import VOICE, upload_image, upload_media
from chatfn.channels.weixin.parse import ChatRef, parse_chat_id
from chatfn.channels.weixin.settings import WeixinSettings
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["MAX_IMAGE_OUT", "WeixinSender", "parts_of"]

#: The largest image sent (WeChat's clients take 20 MB images).
MAX_IMAGE_OUT = 20 * 1024 * 1024
BOT_MESSAGE, FINISHED = 2, 2
#: Seconds waited after iLink's frequency limit (-2), which names no wait (Hermes Agent waits
#: 1 s between its tries).
RATE_LIMIT_WAIT = 1.0
#: Seconds of one voice message (WeChat's voice messages last at most 60 s).
VOICE_CLIP = 59.0

ContextToken = Callable[[ChatRef], Awaitable[str | None]]


def parts_of(text: str, limit: int) -> list[str]:
    """The plain-text messages `text` (Markdown) goes out as."""
    if not text.strip():
        return []
    return [to_plain(p) for p in split_message(text, limit, render=to_plain)]


def expired(exc: Exception) -> kit.CredentialsRefused:
    return kit.CredentialsRefused(
        f"WeChat (iLink) refused channels.weixin.token: the login has expired ({exc}); "
        "run `chatfn login weixin` again"
    )


class WeixinSender(SharedStateSender[ChatRef, ContextToken], platform="weixin", label="WeChat"):
    """Sends through `client`, the channel's IlinkApi (and its session); `shared(ref)` is the
    chat's context token, which the way in keeps."""

    client: IlinkApi
    cfg: WeixinSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, IlinkError):
            if exc.expired:
                return expired(exc)
            if exc.rate_limited:
                wait = exc.retry_after if exc.retry_after is not None else RATE_LIMIT_WAIT
                return kit.RateLimited(f"WeChat asks to wait before sending to {key} ({exc})", wait)
            if exc.status >= 500:
                return kit.Unreachable(f"WeChat (iLink) failed ({exc})")
            return kit.DeliveryRefused(f"WeChat refused the message to {key}: {exc}")
        if isinstance(exc, aiohttp.ClientResponseError) and exc.status < 500:
            return kit.DeliveryRefused(f"WeChat's CDN refused an image for {key}: {exc}")
        if isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError):
            return kit.Unreachable(f"WeChat (iLink) not reachable ({exc})")
        if isinstance(exc, ValueError):
            return kit.DeliveryRefused(f"WeChat: {exc}")
        return None

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> list[str]:
        token = await self.shared(ref)
        if not token:
            raise kit.DeliveryRefused(
                f"WeChat: no context_token for {ref.key} (iLink takes a message only in a "
                "conversation the user started: they have to write to the bot first)"
            )
        parts = parts_of(out.text, self.cfg.max_message_length)
        images = [kit.decode_image(i, MAX_IMAGE_OUT, "WeChat") for i in out.images]
        owed.parts = parts
        ids: list[str] = []
        for index, text in enumerate(parts):
            item = {"type": 1, "text_item": {"text": text}}
            ids.append(await self.post(ref, token, item, self.client_id(out, index, text)))
            owed.sent += 1
        for index, image in enumerate(images):
            data = (
                image
                if isinstance(image, bytes)
                else (await fetch_image_url(image, max_bytes=MAX_IMAGE_OUT)).data
            )
            uploaded = await self.call(
                ref.key,
                lambda data=data: upload_image(  # type: ignore[misc]
                    self.client, self.client.session, self.cfg.cdn_base_url, ref.target, data
                ),
            )
            name = f"image{index}-{hashlib.sha256(data).hexdigest()[:12]}"
            ids.append(await self.post(ref, token, uploaded.item(), self.client_id(out, 0, name)))
        for number, voice_ref in enumerate(out.audio):  # the reply spoken (voice.tts)
            ids += await self._send_voice(ref, token, out, number, voice_ref)
        return ids

    async def _send_voice(
        self, ref: ChatRef, token: str, out: OutgoingMessage, number: int, voice_ref: str
    ) -> list[str]:
        """A spoken reply as WeChat voices after its text: SILK on the CDN, with their
        lengths, in clips of VOICE_CLIP seconds; what went (one log line when it cannot be
        converted or WeChat refuses it)."""
        ids: list[str] = []
        with unsent(logger, "WeChat", ref.key):
            clips = await kit.voice_clips(
                voice_ref, VOICE_CLIP, "WeChat plays only SILK on its CDN"
            )
            for clip, (wav, seconds) in enumerate(clips):
                silk = await audio.to_silk(wav)
                uploaded = await self.call(
                    ref.key,
                    lambda silk=silk: upload_media(  # type: ignore[misc]
                        self.client,
                        self.client.session,
                        self.cfg.cdn_base_url,
                        ref.target,
                        silk,
                        VOICE,
                    ),
                )
                item = uploaded.voice_item(max(1, round(seconds * 1000)))
                name = f"voice{number}.{clip}-{hashlib.sha256(silk).hexdigest()[:12]}"
                ids.append(await self.post(ref, token, item, self.client_id(out, 0, name)))
        return ids

    @staticmethod
    def client_id(out: OutgoingMessage, index: int, content: str) -> str:
        digest = hashlib.sha256(content.encode()).hexdigest()[:12]
        return f"chatfn-{out.event_id or 0}-{index}-{digest}"

    async def post(self, ref: ChatRef, token: str, item: dict[str, Any], client_id: str) -> str:
        msg: dict[str, Any] = {
            "from_user_id": "",
            "to_user_id": ref.target,
            "client_id": client_id,
            "message_type": BOT_MESSAGE,
            "message_state": FINISHED,
            "context_token": token,
            "item_list": [item],
        }
        if ref.is_group:
            msg["group_id"] = ref.target
        answer = await self.call(ref.key, lambda: self.client.post("sendmessage", {"msg": msg}))
        return str((answer or {}).get("message_id") or client_id)
