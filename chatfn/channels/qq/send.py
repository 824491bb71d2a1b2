"""The way out to QQ: passive replies with `msg_id` + `msg_seq`, plain text, long replies split,
images, QQ's rate rules.

Rules (https://bot.q.qq.com/wiki/develop/api-v2/server-inter/message/send-receive/send.html):
- Passive replies. A message answering a user's message carries that message's id (`msg_id`)
  and may be sent within 5 minutes (groups, guild channels and DMs) or 60 minutes (C2C), at
  most 5 times per message. Active messages (no `msg_id`) to groups and C2C chats are no
  longer allowed since 2025-04-21; guild channels still take a few a day.
  A message without `reply_to` (a reminder, a welcome) answers the chat's newest message or
  event (GUILD_MEMBER_ADD, GROUP_ADD_ROBOT: `event_id`) still inside its window. When the
  window has passed, the message goes out as an active one and the log says so (QQ refuses
  it in groups and C2C chats: the log says that too, and the message is given up).
- `msg_seq`, never twice. QQ refuses a second message with the same `msg_id` + `msg_seq`
  (code 40054005). Each part of an outbox row gets a `msg_seq` made from the row's id and the
  part's index, so the same row sent again after a crash between QQ taking it and the row's
  delivery mark gets the same `msg_seq`es: QQ refuses them as duplicates, and that refusal
  is taken as "delivered". (Guild channels and DMs have no `msg_seq`: there a crash in that
  gap may send a message twice.)
- At most 5 replies to one message, counted across every outgoing message that answers it
  (`Passive.replies`: the `msg_seq`es sent with each `msg_id`; a row sent again counts once).
  A reply (with its images) needing more than what is left keeps the first ones, and the last
  kept part says the rest was cut; a reply with no room left would be an active message,
  which QQ refuses in groups and C2C chats: it is given up at once with a log line and the
  `chatfn_messages_dropped` metric (reason `reply_limit`), not tried again.
- Rate: the kit's order and pace (chatfn/channels/kit/sender.py; a guild channel takes 5
  messages a second). A 429 or a rate code (22009 "msg limit exceed", 20028) names no wait:
  the delivery policy's backoff (doubling from 1 s) up to `max_retry_after`; longer, the
  message waits in the outbox.

Text: QQ's own Markdown (msg_type 2) needs a template approved for the bot in groups and C2C
chats, so messages are plain text (msg_type 0) with the model's Markdown made readable by
chatfn/channels/markdown.py's `to_plain`: emphasis markers dropped, links as `label (url)`, headings
and list bullets as lines, code as it is. A URL not registered for the bot at q.qq.com is
refused (304003): the part is sent again with its links replaced by "[link]".
Mentions: `<@user_id>` before the first part in guild channels. None in groups: QQ renders
`<@member_openid>` only in Markdown messages (tencent-connect/bot-docs#272; in plain text it is
deprecated and shows as the raw token), and the bot sends plain text, so a group reply carries
no mention rather than a raw token.
Quotes: guild channels take `message_reference`; groups and C2C have none (QQ: "not yet
supported"). Images: groups and C2C upload to `/v2/{groups|users}/{id}/files` (`file_type` 1,
a `url`: the image's own, or the bot's when `channels.qq.public_url` is set (media.py); else
`file_data` base64, which QQ marks "not yet supported") and send the `file_info` as a msg_type
7 media message after the text, as a message of its own (QQ may not show a media message's
content); guild channels take `image` (a URL) or a `file_image` multipart upload with the last
text part as its caption. A spoken reply (voice.tts) goes to groups and C2C the same way as
voice: converted to SILK (what QQ plays), uploaded with `file_type` 3, sent after the text within
the 5 replies a message takes; guild channels get the text alone (no voice messages there).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.keys import part_seq
from chatfn.channels.kit.replies import (
    Answer,
    AnswerSender,
    LinkRefused,
    ReplyWindow,
    WindowPassed,
    unlinked,
)
from chatfn.channels.kit.voice import spoken_audio
from chatfn.channels.markdown import to_plain
from chatfn.channels.qq.api import ACTIVE_REFUSED_CODES, ERRORS, QQApi, QQApiError
from chatfn.channels.qq.media import MediaShelf
from chatfn.channels.qq.parse import _ID, ChatRef, parse_chat_id
from chatfn.channels.qq.settings import QQSettings
from chatfn.channels.split import split_message
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.channel_host import DeliveryPolicy

__all__ = ["MAX_REPLIES", "Passive", "QQSender", "msg_seq"]

MAX_REPLIES = 5  # passive replies QQ takes per message answered
CUT_NOTE = "\n[the rest was cut: QQ takes 5 replies to one message]"
msg_seq = part_seq  # QQ's `msg_seq`: the kit's per-part number of an outbox row


class Passive(ReplyWindow):
    """What QQ's passive replies need (kit/replies.py): 5 to one message."""

    def __init__(self) -> None:
        super().__init__(MAX_REPLIES)


class QQSender(AnswerSender[ChatRef], platform="qq", label="QQ"):
    """Sends OutgoingMessages through the OpenAPI (api.py)."""

    link_fix = (
        "304003: the URL's domain is not registered for the bot at q.qq.com -> Development -> "
        "Message URL settings"
    )
    active_note = (
        " (QQ refuses active messages to groups and C2C chats since 2025-04-21: it will likely "
        "be refused and given up)"
    )
    cut_note, seq_name = CUT_NOTE, "msg_seq"

    def __init__(
        self,
        api: QQApi,
        settings: QQSettings,
        passive: Passive,
        policy: DeliveryPolicy | None = None,
        dropped: Callable[[str], None] | None = None,
        media: MediaShelf | None = None,
    ) -> None:
        super().__init__(api, settings, policy, passive)
        self.media = media  # pictures by URL (channels.qq.public_url), else file_data
        self.api, self.passive = api, passive
        self.dropped = dropped or self.dropped
        self._spare_rows = 0  # rows without an outbox id (a direct sink): their own seqs

    def window(self, ref: ChatRef) -> float:
        return self.cfg.c2c_reply_window if ref.scene == "c2c" else self.cfg.group_reply_window

    def counted(self, ref: ChatRef) -> bool:
        return ref.v2

    def duplicate(self, exc: Exception) -> bool:
        return isinstance(exc, QQApiError) and exc.is_duplicate

    def split(self, text: str, limit: int | None = None) -> list[str]:
        return split_message(text, limit or self.cfg.max_message_length, render=to_plain)

    parse_chat = staticmethod(parse_chat_id)

    async def deliver(self, out: OutgoingMessage) -> None:
        try:
            await super().deliver(out)
        except kit.DeliveryRefused as exc:
            logger.warning("{} (outbox row {}): given up", exc, out.event_id)
            raise

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, QQApiError) and not exc.is_rate_limit:
            if exc.is_expired:
                return WindowPassed()
            if exc.code == 304003:
                return LinkRefused()
            if exc.code in ACTIVE_REFUSED_CODES:
                why = f"{exc} (QQ takes no active messages here)"
                return kit.DeliveryRefused(f"QQ refused the message to {key}: {why}")
        return ERRORS.for_send(exc, key)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        answer = self.answer(ref, out.reply_to)
        # guild channels only: a group shows a plain-text mention as its raw token
        mention = f"<@{out.at}> " if out.at and ref.scene == "channel" and _ID.match(out.at) else ""
        limit = self.cfg.max_message_length - len(mention)
        parts = [to_plain(p) for p in self.split(out.text, limit)] if out.text.strip() else []
        images = [kit.decode_image(i) for i in out.images]
        # Groups and C2C: text and picture go as two messages (QQ may not show the content of
        # a media message); a guild channel shows a picture with its caption.
        caption = parts.pop() if images and parts and not ref.v2 else None
        row = out.event_id
        if row is None:
            self._spare_rows += 1
            row = 49_000_000 + self._spare_rows
        if answer.msg_id and ref.v2:
            limit = self.cfg.max_message_length
            parts, images = self.within(ref, answer.msg_id, row, parts, images, limit)
        # A passive v2 reply is sent again whole, its `msg_seq`es skipping what QQ has; else
        # what a message still owes is the parts not sent.
        whole = ref.v2 and answer.msg_id
        owed.parts = [] if whole else parts + ([caption] if caption is not None else [])
        for index, part in enumerate(parts):
            text = (mention if index == 0 else "") + part
            quote = out.reply_to if index == 0 and out.quote else None
            await self._send_text(ref, answer, msg_seq(row, index), text, quote)
            self.took(ref, answer, msg_seq(row, index))
            owed.sent += 0 if whole else 1
        for number, image in enumerate(images):
            text = caption if number == 0 and caption is not None else ""
            if not parts and number == 0:
                text = mention + text
            quote = out.reply_to if not parts and number == 0 and out.quote else None
            seq = msg_seq(row, len(parts) + number)
            await self._send_image(ref, answer, seq, image, text, quote)
            self.took(ref, answer, seq)
        if out.audio and ref.v2:  # the reply spoken (voice.tts): after its text, as QQ voice
            await self._send_voices(ref, answer, row, len(parts) + len(images), out.audio)

    async def _send_voices(
        self, ref: ChatRef, answer: Answer, row: int, first: int, refs: list[str]
    ) -> None:
        """Each spoken reply as a voice message (rich media `file_type` 3: SILK, which QQ
        plays), once its text went: one that cannot be converted, that the reply limit has no
        room for, or that QQ refuses is logged and left out (the text is the answer)."""
        for number, voice_ref in enumerate(refs):
            seq = msg_seq(row, first + number)
            if not self.has_room(ref, answer, seq, "its voice"):
                return
            try:
                plays = "QQ needs SILK it can fetch"
                silk = await audio.to_silk(spoken_audio(voice_ref, plays))
                await self._send_media(ref, answer, seq, 3, silk, "")
            except (audio.AudioError, ValueError, kit.DeliveryRefused) as exc:
                logger.warning("QQ voice reply to {} not sent: {}", ref.key, exc)
                return
            self.took(ref, answer, seq)

    # -- one message -----------------------------------------------------------------------
    def _body(self, ref: ChatRef, answer: Answer, seq: int) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if answer.msg_id:
            body["msg_id"] = answer.msg_id
            if ref.v2:
                body["msg_seq"] = seq
        elif answer.event_id:
            body["event_id"] = answer.event_id
        return body

    async def _send_text(
        self, ref: ChatRef, answer: Answer, seq: int, text: str, quote: str | None
    ) -> None:
        def body(a: Answer, content: str) -> dict[str, Any]:
            b = {"content": content, **self._body(ref, a, seq)}
            if ref.v2:
                b["msg_type"] = 0
            elif quote:
                b["message_reference"] = {"message_id": quote, "ignore_get_message_error": True}
            return b

        await self.answering(
            ref,
            answer,
            lambda a: self.post(ref, lambda: self._json(ref, body(a, text))),
            lambda a: self.post(ref, lambda: self._json(ref, body(a, unlinked(text)))),
        )

    async def _send_image(
        self,
        ref: ChatRef,
        answer: Answer,
        seq: int,
        image: bytes | str,
        text: str,
        quote: str | None,
    ) -> None:
        if ref.v2:
            await self._send_media(ref, answer, seq, 1, image, text)
            return

        def guild(a: Answer) -> Awaitable[Any]:
            extra = self._body(ref, a, seq)
            if isinstance(image, str):
                body: dict[str, Any] = {"image": image, **extra}
                if text:
                    body["content"] = text
                if quote:
                    body["message_reference"] = {
                        "message_id": quote,
                        "ignore_get_message_error": True,
                    }
                return self.post(ref, lambda: self._json(ref, body))

            def form() -> Awaitable[Any]:
                data = aiohttp.FormData()
                if text:
                    data.add_field("content", text)
                for key, value in extra.items():
                    data.add_field(key, str(value))
                mime = kit.image_mime(image) or "image/jpeg"
                data.add_field(
                    "file_image", image, filename=kit.image_name(image), content_type=mime
                )
                return self.api.call("POST", ref.messages_path, form=data, timeout=60)

            return self.post(ref, form)

        await self.answering(ref, answer, guild, None)

    async def _send_media(
        self, ref: ChatRef, answer: Answer, seq: int, file_type: int, data: bytes | str, text: str
    ) -> None:
        """Groups and C2C: upload (`file_type` 1 image, 3 voice in SILK) by URL (the bot's
        public_url shelf, or the URL given) or as `file_data`, then a `msg_type` 7 message
        carrying its `file_info`."""
        upload: dict[str, Any] = {"file_type": file_type, "srv_send_msg": False}
        if isinstance(data, str):
            upload["url"] = data
        elif self.media is not None:
            upload["url"] = self.media.put(data)
        else:
            upload["file_data"] = base64.b64encode(data).decode()
        info = await self.post(
            ref, lambda: self.api.call("POST", ref.files_path, json=upload, timeout=60)
        )
        file_info = str((info or {}).get("file_info") or "")
        if not file_info:
            what = "a voice" if file_type == 3 else "an image"
            raise kit.DeliveryRefused(f"QQ gave no file_info for {what} to {ref.key}")

        def media(a: Answer) -> Awaitable[Any]:
            body = {
                "msg_type": 7,
                "content": text or " ",  # QQ asks for some content with msg_type 7
                "media": {"file_info": file_info},
                **self._body(ref, a, seq),
            }
            return self.post(ref, lambda: self._json(ref, body))

        await self.answering(ref, answer, media, None)

    def _json(self, ref: ChatRef, body: dict[str, Any]) -> Awaitable[Any]:
        return self.api.call("POST", ref.messages_path, json=body)


# parse_chat_id is re-exported for the channel's probe and tests.
__all__ += ["parse_chat_id"]
