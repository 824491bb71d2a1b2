"""The way out to DingTalk: one ordered queue per chat, Markdown as DingTalk's robot Markdown,
long replies split within `max_message_length`, images uploaded, rate limits waited out.

- Length: at most `max_message_length` characters and 12,000 bytes of Markdown a message
  (msgParam's 15,000-byte limit, with room for the title and JSON's escapes).
- Where a message goes: while the chat's session webhook (the `sessionWebhook` of the last
  message from it, valid until its `sessionWebhookExpiredTime`, kept in memory) is valid,
  through it (`msgtype: markdown`, and `at.atUserIds` with `@<staffId>` in the text for
  `reply_with_mention` in a group); otherwise (expired, refused, after a restart, a reminder
  later) through the robot send APIs with the app's access token: a group's
  groupMessages/send, a user's oToMessages/batchSend, `msgKey: sampleMarkdown`. Those APIs
  take no mention, so a reply sent through them mentions nobody.
- Images: a data URI is uploaded (OAPI media/upload) and sent as `sampleImageMsg` with the
  media_id as its `photoURL`, after the text; an http(s) URL is shown in the Markdown as
  `![image](url)` (DingTalk fetches it).
- Voice: a spoken reply (voice.tts) goes after the text and images through the robot send
  APIs (a session webhook takes no audio) as `sampleAudio` {"mediaId", "duration" in ms as a
  string}: converted to AMR (chatfn.common.audio.to_amr) and uploaded (media/upload
  type=voice, which takes at most 60 s), a longer reply as clips of `VOICE_CLIP` seconds in a
  row. One that cannot be converted or is refused is logged; the text is the answer.
- Rate limits: DingTalk names no wait (HTTP 429 / a QpsLimit code on the OpenAPI, errcode
  130101 "send too fast" on a session webhook, a user in `flowControlledStaffIdList`): the
  wait is 1 s, doubling while the chat stays throttled, at most 60 s, and waited out in place
  within `max_retry_after` (the delivery policy); longer, the message stays in the outbox with
  the parts sent left out.
- At least once: neither way takes an idempotency key, and DingTalk gives no history a robot
  could read back, so a part sent just before a crash (before the outbox row was marked) is
  sent again after the restart.
- Errors: network trouble, 5xx and a refused secret or token leave the message in the outbox;
  DingTalk's other refusals (the robot not in the group, a user not in the org, a message
  over DingTalk's length) refuse it for good.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from chatfn.channels import kit
from chatfn.channels.dingtalk.api import ERRORS, DingTalkApi, Throttled
from chatfn.channels.dingtalk.parse import ChatRef, parse_chat_id
from chatfn.channels.dingtalk.render import title_of, to_dingtalk_markdown
from chatfn.channels.dingtalk.settings import DingTalkSettings
from chatfn.channels.kit.sender import SharedStateSender
from chatfn.channels.kit.voice import unsent
from chatfn.channels.split import split_message
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["DingTalkSender", "Sessions"]

MAX_IMAGE_BYTES = 20 * 1024 * 1024  # media/upload takes images up to 20 MB
# Bytes of Markdown per message: msgParam holds at most 15,000 (the title and JSON's escapes
# take the rest), whatever the characters (CJK takes 3 bytes, an emoji 4).
MAX_TEXT_BYTES = 12000
#: Seconds of one voice message: media/upload takes at most 60 s of voice (a margin for the
#: encoder's last frame).
VOICE_CLIP = 59.0
SESSION_MARGIN = 60.0  # seconds before its expiry a session webhook is no longer used


class Sessions:
    """Each chat's latest session webhook and when it expires (seconds since the epoch)."""

    def __init__(self, limit: int = 10000) -> None:
        self._hooks: dict[str, tuple[str, float]] = {}
        self._limit = limit

    def remember(self, key: str, url: str, expires_ms: int) -> None:
        if len(self._hooks) >= self._limit:
            self._hooks.clear()
        self._hooks[key] = (url, expires_ms / 1000.0)

    def valid(self, key: str) -> str | None:
        found = self._hooks.get(key)
        if found is None or found[1] - SESSION_MARGIN <= time.time():
            return None
        return found[0]

    def forget(self, key: str) -> None:
        self._hooks.pop(key, None)


class DingTalkSender(SharedStateSender[ChatRef, Sessions], platform="dingtalk", label="DingTalk"):
    """Sends OutgoingMessages through DingTalkApi (module docstring); `shared`: the sessions'
    webhooks the way in saw."""

    client: DingTalkApi
    cfg: DingTalkSettings

    @functools.cached_property
    def _throttled(self) -> Counter[str]:
        """Each chat's throttles in a row (the wait doubles with each)."""
        return Counter()

    @property
    def api(self) -> DingTalkApi:
        return self.client

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, Throttled):
            times = self._throttled[key]
            self._throttled[key] += 1
            wait = min(2.0**times, 60.0)
            return kit.RateLimited(f"DingTalk throttles sends to {key} ({exc})", wait)
        return ERRORS.for_send(exc, key)

    def split(self, text: str, limit: int) -> list[str]:
        """Parts of at most `limit` characters and `MAX_TEXT_BYTES` bytes of Markdown (a
        part's size is the larger of its characters and its bytes scaled to `limit`)."""

        def size(markdown: str) -> int:
            scaled = -(-len(markdown.encode()) * limit // MAX_TEXT_BYTES)
            return max(len(markdown), scaled)

        return split_message(text, limit, render=to_dingtalk_markdown, measure=size)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> int:
        at = out.at if out.at and ref.is_group else None
        text, uploads = kit.images_out(
            out.images, out.text, MAX_IMAGE_BYTES, "DingTalk", "![image]({})"
        )
        room = self.cfg.max_message_length - (len(at) + 2 if at else 0)
        parts = self.split(text, room) if text.strip() else []
        owed.parts = parts
        for index, part in enumerate(parts):
            markdown = to_dingtalk_markdown(part)
            await self._markdown(ref, out.chat_id, markdown, at if index == 0 else None)
            owed.sent += 1
        # Then the images, each a message of its own (DingTalk's Markdown shows only images
        # it can fetch by URL).
        for data in uploads:
            mime = kit.image_mime(data) or "image/jpeg"
            upload = functools.partial(self.api.upload_image, data, kit.image_name(data), mime)
            media = await self._call(out.chat_id, upload)
            await self._api_send(ref, out.chat_id, "sampleImageMsg", {"photoURL": media})
        for voice_ref in out.audio:  # the reply spoken (voice.tts)
            await self._send_voice(ref, out.chat_id, voice_ref)
        return owed.sent

    async def _send_voice(self, ref: ChatRef, key: str, voice_ref: str) -> None:
        """A spoken reply as `sampleAudio` messages (module docstring); one that cannot be
        converted or is refused is logged, the text being the answer."""
        with unsent(self.log, "DingTalk", key):
            plays = "DingTalk plays only uploaded voice"
            for wav, seconds in await kit.voice_clips(voice_ref, VOICE_CLIP, plays):
                amr = await audio.to_amr(wav)
                media = await self._call(key, functools.partial(self.api.upload_voice, amr))
                param = {"mediaId": media, "duration": str(max(round(seconds * 1000), 1))}
                await self._api_send(ref, key, "sampleAudio", param)

    async def _call(self, key: str, call: Callable[[], Any]) -> Any:
        result = await self.call(key, call)
        self._throttled.pop(key, None)
        return result

    async def _markdown(self, ref: ChatRef, key: str, markdown: str, at: str | None) -> None:
        """One Markdown message: through the chat's session webhook while it is valid (with
        the mention), else through the robot send API."""
        title = title_of(markdown)
        hook = self.shared.valid(ref.key)
        if hook is not None:
            text = f"@{at} {markdown}" if at else markdown
            payload: dict[str, Any] = {
                "msgtype": "markdown",
                "markdown": {"title": title, "text": text},
            }
            if at:
                payload["at"] = {"atUserIds": [at], "isAtAll": False}
            try:
                await self._call(key, functools.partial(self.api.session_send, hook, payload))
                return
            except kit.DeliveryRefused as exc:  # expired early, or refused: the API instead
                self.log.info(
                    "DingTalk session webhook of {} refused ({}): the API instead", key, exc
                )
                self.shared.forget(ref.key)
        await self._api_send(ref, key, "sampleMarkdown", {"title": title, "text": markdown})

    async def _api_send(self, ref: ChatRef, key: str, msg_key: str, param: dict[str, Any]) -> None:
        send = self.api.send_group if ref.is_group else self.api.send_private
        await self._call(key, functools.partial(send, ref.target, msg_key, param))
