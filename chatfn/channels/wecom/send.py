"""The way out to WeCom (app mode): one ordered queue per chat (the kit's), the model's
Markdown as plain text (the `text` message shows in WeCom and in WeChat alike; WeCom's own
`markdown` message is not shown to members who use WeChat), long replies split within
`max_message_length` bytes of UTF-8 (message/send takes at most 2048), images uploaded
(media/upload, at most 2 MB) and sent as image messages before the text. A spoken reply
(voice.tts) follows the text as `voice` messages: converted to AMR (the only voice format
media/upload takes; chatfn.common.audio.to_amr), uploaded with type=voice (at most 2 MB and
60 s: a longer reply goes as clips of `wxapi.VOICE_CLIP` seconds); one that cannot be converted or
is refused is logged, the text being the answer.

- `private:<userid>`: message/send to the member, as the app (`agentid`).
- `group:<chatid>`: appchat/send, to a group chat the app made (appchat/create). WeCom does
  not deliver the messages of such a chat to the app, so these are chats the bot writes to
  (a reminder, a notice), not chats it answers.
- Errors: rate-limit codes wait `RATE_WAIT` (the kit's RateLimited); refused credentials
  wait in the outbox; network errors and 5xx are retried by the outbox; other refusals (a
  member outside the app's visible range, a chat that does not exist) are logged and dropped.
- message/send has no idempotency key the bot could use for a message it may have sent (its
  `enable_duplicate_check` drops any equal text within the interval, a second equal answer
  too), and the app cannot read a chat's history: a reply sent just before a crash, before
  its outbox row was marked, is sent again after the restart (at least once).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from chatfn.channels import kit, wxapi
from chatfn.channels.kit.sender import chat_kind
from chatfn.channels.kit.voice import unsent
from chatfn.channels.markdown import to_plain
from chatfn.channels.split import split_message
from chatfn.channels.wecom.api import WecomApi
from chatfn.channels.wecom.settings import WecomSettings
from chatfn.common import audio
from chatfn.common.messages import OutgoingMessage

__all__ = ["MAX_IMAGE_OUT", "ChatRef", "WecomSender", "parse_chat_id", "utf8_len"]

MAX_IMAGE_OUT = 2 * 1024 * 1024  # media/upload type=image: at most 2 MB
#: Seconds of one voice message: media/upload type=voice takes at most 60 s (a margin for the
#: encoder's last frame).
_USER = re.compile(r"^[A-Za-z0-9_\-@.]{1,64}$")
_CHAT = re.compile(r"^[A-Za-z0-9_\-@.]{1,64}$")
SHAPES = "private:<userid> or group:<chatid>"
CREDENTIALS = "channels.wecom.corp_id / secret / agent_id"


def utf8_len(text: str) -> int:
    return len(text.encode())


#: A member (private, message/send) or a group chat the app made (appchat/send).
ChatRef = kit.ChatTarget


def parse_chat_id(chat_id: str) -> ChatRef:
    return ChatRef(*chat_kind(chat_id, "a WeCom chat id", SHAPES, private=_USER, group=_CHAT))


class WecomSender(kit.PlatformSender[ChatRef], platform="wecom", label="WeCom"):
    """Sends OutgoingMessages through WecomApi (module docstring)."""

    client: WecomApi
    cfg: WecomSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        return wxapi.classify(exc, key, "WeCom", CREDENTIALS, self.cfg.api_base)

    def split(self, text: str) -> list[str]:
        limit = self.cfg.max_message_length
        return split_message(text, limit, render=to_plain, measure=utf8_len)

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> list[str]:
        # WeCom shows only uploaded images; a URL a model wrote is not fetched: it is text.
        text, uploads = kit.images_out(out.images, out.text, MAX_IMAGE_OUT, "WeCom")
        owed.parts = self.split(text) if text.strip() else []
        ids: list[str] = []
        # The images first, then the text: a member reads the text under what it describes.
        for data in uploads:
            mime = kit.image_mime(data) or "image/jpeg"
            upload = functools.partial(self.client.upload_image, data, kit.image_name(data), mime)
            media_id = await self.call(ref.key, upload)
            body = {"image": {"media_id": media_id}}
            ids.append(await self.call(ref.key, functools.partial(self._post, ref, "image", body)))
        for part in owed.parts:
            body = {"text": {"content": to_plain(part)}}
            ids.append(await self.call(ref.key, functools.partial(self._post, ref, "text", body)))
            owed.sent += 1
        for voice_ref in out.audio:  # the reply spoken (voice.tts), after its text
            ids += await self._send_voice(ref, voice_ref)
        return ids

    async def _send_voice(self, ref: ChatRef, voice_ref: str) -> list[str]:
        """A spoken reply as `voice` messages (module docstring); one that cannot be converted
        or is refused is logged, the text being the answer."""
        ids: list[str] = []
        with unsent(self.log, "WeCom", ref.key):
            plays = "WeCom plays only uploaded voice"
            async for media_id in wxapi.voice_uploads(
                self, ref.key, voice_ref, audio.to_amr, plays
            ):
                body = {"voice": {"media_id": media_id}}
                post = functools.partial(self._post, ref, "voice", body)
                ids.append(await self.call(ref.key, post))
        return ids

    async def _post(self, ref: ChatRef, msgtype: str, body: dict[str, Any]) -> str:
        if ref.is_group:
            await self.client.appchat_send({"chatid": ref.target, "msgtype": msgtype, **body})
            return ""
        payload = {
            "touser": ref.target,
            "msgtype": msgtype,
            "agentid": self.cfg.agent_id,
            "safe": 0,
            **body,
        }
        return await self.client.send(payload)
