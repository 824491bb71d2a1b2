"""The way out to Feishu: one ordered queue per chat, Markdown as an interactive card, long
replies split within `max_message_length`, images uploaded, rate limits waited out in place,
and every message sent with a `uuid` fixed by its outbox row so it is never sent twice.

- Never twice: im/v1/messages takes a `uuid` (at most 50 characters) and sends at most one
  message per uuid within an hour, answering a repeat with the message it made the first
  time (https://open.feishu.cn/document/server-docs/im-v1/message/create). Each part's uuid
  is made from the outbox row's event id, the part's index and a digest of its content, so
  a part sent just before a crash, before the row was marked delivered, is not posted again
  when the outbox sends the row after the restart (nor when a retry follows a timeout whose
  answer was lost).
- Order, pace, rate limits: the kit's (chatfn/channels/kit/sender.py). A 429 / 99991400
  (`x-ogw-ratelimit-reset`) or 230020 is waited out up to `max_retry_after` (the delivery
  policy); longer, the message stays in the outbox with the parts sent left out.
- Format: render.py's card markdown; the mention of the user answered (`reply_with_mention`)
  is `<at id=ou_...></at>`; `reply_with_quote` sends the first part with the reply API
  (im/v1/messages/{message_id}/reply), which quotes the message answered. In a thread
  (`...:thread:<om_root>`) every part is a reply with `reply_in_thread`, so it stays there.
- Images: a data URI is uploaded (im/v1/images) and shown in the card of the reply's last
  part (an `img` element under its text); an https URL is shown as a link in the text (the
  platform shows only uploaded images, and the bot does not fetch URLs a model wrote). An
  upload is not idempotent: after a crash an image may be uploaded again, but the message
  showing it is still sent once.
- Buttons (OutgoingMessage.buttons: an approval request's Approve / Deny): `button`
  elements in the card of the last part (render.py), each with a callback value naming the
  text a press sends and the chat; a click comes back as `card.action.trigger` (channel.py).
- Voice: a spoken reply (voice.tts) goes after the text as an `audio` message: converted to
  OGG/Opus (the only audio Feishu plays), uploaded to im/v1/files (`file_type` opus, with its
  length); one that cannot be converted or is refused is logged, the text being the answer.
- Errors: network trouble, 5xx and a refused app secret raise NotDelivered (the outbox
  retries); the platform's other refusals (bot not in the chat, no permission, a bad chat id)
  raise DeliveryRefused.
"""

from __future__ import annotations

import functools
import json
import re

from loguru import logger

from chatfn.channels import kit
from chatfn.channels.feishu.api import (
    ERRORS,
    FeishuApi,
    RateLimited,
    Sent,
)
from chatfn.channels.feishu.parse import ChatRef, parse_chat_id
from chatfn.channels.feishu.render import card, mention, press_value, to_feishu_markdown
from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.kit import media
from chatfn.channels.kit.keys import part_key
from chatfn.channels.kit.voice import unsent
from chatfn.channels.split import split_message
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["FeishuSender", "uuid_of"]

_MESSAGE_ID = re.compile(r"^om_[A-Za-z0-9_\-]{1,64}$")
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # im/v1/images takes at most 10 MB


def uuid_of(event_id: int | None, index: str, content: str) -> str:
    """The idempotency key of one part of an outbox row: im/v1/messages takes at most 50
    characters (module docstring)."""
    return part_key(event_id, index, content, 50)


class FeishuSender(kit.PlatformSender[ChatRef], platform="feishu", label="Feishu"):
    """Sends OutgoingMessages through FeishuApi (module docstring)."""

    client: FeishuApi
    cfg: FeishuSettings

    @property
    def api(self) -> FeishuApi:
        return self.client

    def split(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(text, limit or self.cfg.max_message_length, render=to_feishu_markdown)

    def parse_chat(self, chat_id: str) -> ChatRef:
        return parse_chat_id(chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, RateLimited):
            why = f"Feishu asks to wait {exc.wait:.0f} s before sending to {key} ({exc.code})"
            return kit.RateLimited(why, exc.wait)
        return ERRORS.for_send(exc, key)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> list[Sent]:
        at = mention(out.at) if out.at and ref.is_group else ""
        quote = (
            out.reply_to if out.quote and out.reply_to and _MESSAGE_ID.match(out.reply_to) else None
        )
        shown = "[image]({})"  # the platform shows only uploaded images: a URL is a link
        text, uploads = kit.images_out(out.images, out.text, MAX_IMAGE_BYTES, "Feishu", shown)
        parts = self.split(text, self.cfg.max_message_length - len(at)) if text.strip() else []
        owed.parts = parts
        # Uploaded first: the reply's last part shows them under its text, one message.
        keys = [
            await self.call(out.chat_id, functools.partial(self.api.upload_image, data))
            for data in uploads
        ]
        if (keys or out.buttons) and not parts:
            parts = [""]
        sent: list[Sent] = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            markdown = (at if index == 0 else "") + to_feishu_markdown(part)
            buttons = None
            if last and out.buttons:
                shown = markdown.strip()
                buttons = [(b[0], press_value(b[1], out.chat_id, shown)) for b in out.buttons]
            content = card(markdown.strip(), keys if last else None, buttons)
            key = uuid_of(out.event_id, str(index), content)
            reply_to = quote if index == 0 else None
            sent.append(
                await self._send(
                    out.chat_id, ref, "interactive", content, key, reply_to or ref.thread
                )
            )
            owed.sent += 1
        for number, voice_ref in enumerate(out.audio):  # the reply spoken (voice.tts)
            voice = await self._send_voice(out, ref, number, voice_ref)
            if voice is not None:
                sent.append(voice)
        return sent

    async def _send_voice(
        self, out: OutgoingMessage, ref: ChatRef, number: int, voice_ref: str
    ) -> Sent | None:
        """A spoken reply as an audio message after its text: converted to OGG/Opus (what
        Feishu plays), uploaded (im/v1/files, with its length) and sent with its file_key.
        One that cannot be converted or is refused is logged; the text is the answer."""
        with unsent(self.log, "Feishu", out.chat_id):
            opus = await media.opus_voice(voice_ref, "Feishu plays only uploaded files")
            _wav, seconds = await audio.to_wav(opus, max_seconds=3600)
            key = await self.call(
                out.chat_id, functools.partial(self.api.upload_audio, opus, int(seconds * 1000))
            )
            content = json.dumps({"file_key": key})
            uuid = uuid_of(out.event_id, f"audio{number}", content)
            return await self._send(out.chat_id, ref, "audio", content, uuid, ref.thread)
        return None

    async def _send(
        self,
        key: str,
        ref: ChatRef,
        msg_type: str,
        content: str,
        uuid: str,
        reply_to: str | None,
    ) -> Sent:
        """A reply to `reply_to` when given (in the thread when the chat is one), else a new
        message in the chat."""
        if reply_to is not None:
            in_thread = ref.thread is not None
            try:
                return await self.call(
                    key, lambda: self.api.reply(reply_to, msg_type, content, uuid, in_thread)
                )
            except kit.DeliveryRefused as exc:
                # The message answered was withdrawn or is out of reach: answer in the chat.
                logger.info("Feishu reply to {} refused ({}): sent to the chat", reply_to, exc)
        return await self.call(key, lambda: self.api.send(ref.target, msg_type, content, uuid))
