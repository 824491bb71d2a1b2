"""The way out to an Official Account's followers: the passive reply first, then the
customer-service message API.

WeChat takes an answer to a user's message in the callback's own reply (被动回复), one
message, within 5 seconds (https://developers.weixin.qq.com/doc/offiaccount/Message_Management/
Passive_user_reply_message.html). So a reply to a message whose callback is still waiting
(`Passive`, kept by the channel per MsgId) gives its first text part to that callback; the
rest, images, a reply too late for the callback, and messages the bot starts itself (a
reminder) go through message/custom/send (客服消息, https://developers.weixin.qq.com/doc/
offiaccount/Message_Management/Service_Center_messages.html), which verified subscription
and service accounts may use within 48 hours of the user's last message. An account without
it (`customer_service: false`) answers only what fits the passive reply; the rest is
refused for good with one log line saying why.

Text is plain (WeChat renders no Markdown): the model's Markdown made readable, split within
`max_message_length` bytes of UTF-8. Images are uploaded (media/upload) and sent as image
messages before the text. A spoken reply (voice.tts) follows the text as customer-service
`voice` messages: converted to MP3 (media/upload type=voice takes AMR or MP3, at most 2 MB
and 60 s; a longer reply goes as clips of `wxapi.VOICE_CLIP` seconds); the passive reply holds the
text, so an account without the customer-service API (`customer_service: false`) sends the
text alone, and a voice that cannot be converted or is refused is logged. Rate limits
(45009) wait in the chat's order; 45015 (the user spoke more than 48 hours ago), 45047 (the
quota of messages to the user is used up) and 48001 (the account lacks the API) are
refusals. message/custom/send has no idempotency key and the account cannot read a chat's
history: after a crash between a send and its mark the message is sent again (at least
once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from chatfn.channels import kit, wxapi
from chatfn.channels.kit.sender import SharedStateSender, chat_kind
from chatfn.channels.kit.voice import unsent
from chatfn.channels.markdown import to_plain
from chatfn.channels.split import split_message
from chatfn.channels.wechat_mp.api import MpApi
from chatfn.channels.wechat_mp.settings import WechatMpSettings
from chatfn.channels.wxapi import NotPermitted
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["ChatRef", "MpSender", "Passive", "parse_chat_id"]

MAX_IMAGE_OUT = 10 * 1024 * 1024  # media/upload type=image
#: Seconds of one voice message: media/upload type=voice takes at most 60 s (a margin for
#: the MP3 encoder's padding).
_OPENID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
CREDENTIALS = "channels.wechat_mp.app_id / app_secret"
#: Seconds the sender waits for a passive reply to be written before sending the rest.
ANSWER_WAIT = 2.0


def utf8_len(text: str) -> int:
    return len(text.encode())


@dataclass(eq=False)
class Passive:
    """A callback waiting for the answer to its message (one per MsgId, across WeChat's
    retries of it)."""

    user: str  # the follower's openid
    account: str  # the account's original id (gh_...), the reply's sender
    reply: asyncio.Future[str] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False  # answered "success": the answer goes by the API
    attempts: int = 0

    def offer(self, text: str) -> bool:
        """Give `text` to the waiting callback; False when it answered already."""
        if self.closed or self.reply.done():
            return False
        self.reply.set_result(text)
        return True

    def close(self) -> bool:
        """The callback gives up waiting; False when an answer came first (send it)."""
        if self.reply.done():
            return False
        self.closed = True
        return True


#: Where a message goes: a follower's openid (private chats only).
ChatRef = kit.ChatTarget


def parse_chat_id(chat_id: str) -> ChatRef:
    what = "a WeChat Official Account chat id"
    return ChatRef(*chat_kind(chat_id, what, "private:<openid>", private=_OPENID))


class MpSender(
    SharedStateSender[ChatRef, dict[str, Passive]],
    platform="wechat_mp",
    label="WeChat Official Account",
):
    """`shared`: the callbacks waiting for an answer, by MsgId, which the way in opens."""

    client: MpApi
    cfg: WechatMpSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, NotPermitted):
            return kit.DeliveryRefused(
                f"WeChat refused the customer-service message to {key} ({exc}): the account "
                "may not use it (unverified); set channels.wechat_mp.customer_service: false"
            )
        return wxapi.classify(exc, key, "WeChat", CREDENTIALS, self.cfg.api_base)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        images = [kit.decode_image(i, MAX_IMAGE_OUT, "WeChat") for i in out.images]
        text = "\n\n".join([out.text, *(i for i in images if isinstance(i, str))]).strip()
        limit = self.cfg.max_message_length
        owed.parts = split_message(text, limit, render=to_plain, measure=utf8_len) if text else []
        slot = self.shared.get(out.reply_to or "")
        uploads = [i for i in images if isinstance(i, bytes)]
        if uploads and not self.cfg.customer_service:
            self.log.warning(
                "WeChat: {} image(s) to {} not sent: the passive reply holds one text "
                "(customer_service: false)",
                len(uploads),
                ref.key,
            )
            uploads = []
        for data in uploads:
            await self._image(ref, data)
        if owed.parts and slot is not None and slot.user == ref.target:
            if slot.offer(to_plain(owed.parts[0])):
                owed.sent += 1
                with contextlib.suppress(TimeoutError):  # written before the next goes
                    async with asyncio.timeout(ANSWER_WAIT):
                        await slot.answered.wait()
        rest = owed.parts[owed.sent :]
        if rest and not self.cfg.customer_service:
            raise kit.DeliveryRefused(
                f"WeChat: {len(rest)} part(s) of the answer to {ref.key} not sent: the passive "
                "reply window passed and the account may not send customer-service messages "
                "(customer_service: false)"
            )
        for part in rest:
            body = {"text": {"content": to_plain(part)}}
            await self.call(ref.key, functools.partial(self._custom, ref, "text", body))
            owed.sent += 1
        if out.audio and not self.cfg.customer_service:
            self.log.warning(
                "WeChat: the spoken reply to {} not sent: the passive reply holds the text "
                "(customer_service: false)",
                ref.key,
            )
        elif out.audio:  # the reply spoken (voice.tts), after its text
            for voice_ref in out.audio:
                await self._voice(ref, voice_ref)

    async def _voice(self, ref: ChatRef, voice_ref: str) -> None:
        """A spoken reply as customer-service `voice` messages (module docstring); one that
        cannot be converted or is refused is logged, the text being the answer."""
        with unsent(self.log, "WeChat", ref.key):
            plays = "WeChat plays only uploaded voice"
            async for media_id in wxapi.voice_uploads(
                self, ref.key, voice_ref, audio.to_mp3, plays
            ):
                body = {"voice": {"media_id": media_id}}
                await self.call(ref.key, functools.partial(self._custom, ref, "voice", body))

    async def _image(self, ref: ChatRef, data: bytes) -> None:
        mime = kit.image_mime(data) or "image/jpeg"
        upload = functools.partial(self.client.upload_image, data, kit.image_name(data), mime)
        media_id = await self.call(ref.key, upload)
        body = {"image": {"media_id": media_id}}
        await self.call(ref.key, functools.partial(self._custom, ref, "image", body))

    async def _custom(self, ref: ChatRef, msgtype: str, body: dict[str, Any]) -> None:
        await self.client.custom_send({"touser": ref.target, "msgtype": msgtype, **body})
