"""`mode: aibot`: WeCom's intelligent robot (智能机器人), answered with its streaming reply.

The robot's callback (https://developer.work.weixin.qq.com/document/path/100719 接收消息,
101031 被动回复消息) is the app's scheme in JSON: WeCom POSTs `{"encrypt": ...}` signed with
`msg_signature` and encrypted with the EncodingAESKey for the receive id "" (wxcrypt.py), and
takes the answer as `{"encrypt", "msgsignature", "timestamp", "nonce"}`. A user's message
(`msgtype` text, `chattype` single or group: in a group only a message that @-mentions the
robot is delivered) is answered with a stream, `{"msgtype": "stream", "stream": {"id",
"finish": false, "content"}}`; WeCom then calls back again and again with `msgtype` stream
and the stream's id (流式消息刷新), each answered with the stream's content so far, until an
answer says `finish: true` (WeCom stops asking after six minutes).

Here a stream is opened for each message taken; its first answer waits for the message to
be stored (confirm once stored: at most `ACK_WAIT`; a message not stored by then is answered
503 and WeCom's next delivery takes it; a msgid is handled once). The model's text grows in
the stream as it is written (`Stream.grow`, the bot's stream observer), shown at each
refresh; the answer itself (the outbox's delivery with `reply_to` the msgid) replaces it, as
Markdown (the robot renders it), and finishes the stream. What does not fit the stream
(a second message answering the same one, a part past `MAX_STREAM` bytes) and a message the
bot starts in a chat (a reminder) go to the `response_url` of the chat's newest message
(valid an hour, once: WeCom's active reply); with none left, it is refused with a log line.
A stream nobody answers finishes empty after `STREAM_LIFE` seconds.

Chats: `private:<userid>` (chattype single) and `group:<chatid>`; the robot's own mention
(`@name` first in a group message's text) is removed. Images (an image message, or the
images of a mixed one) are fetched from the URL the callback names, through
chatfn.common.fetch, and decrypted with the EncodingAESKey (WeCom stores them encrypted).
"""

from __future__ import annotations

import functools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from chatfn.channels import kit
from chatfn.channels.kit.sender import SharedStateSender
from chatfn.channels.kit.webhook import Refused, json_request
from chatfn.channels.split import split_message
from chatfn.channels.wecom.api import WecomApi
from chatfn.channels.wecom.channel import ACK_WAIT, WecomChannel, read_body
from chatfn.channels.wecom.send import ChatRef, parse_chat_id, utf8_len
from chatfn.channels.wecom.settings import WecomSettings
from chatfn.channels.wxapi import NETWORK_ERRORS
from chatfn.channels.wxapi import WxError as WecomError
from chatfn.channels.wxcrypt import BLOCK, CryptError
from chatfn.common.messages import IncomingMessage, OutgoingMessage, StreamEvent

__all__ = ["MAX_STREAM", "STREAM_LIFE", "AibotChannel", "AibotSender", "Stream"]

#: Bytes of a stream's content (WeCom: at most 20480, UTF-8).
MAX_STREAM = 20480
#: Seconds after which a stream no answer came for finishes empty (WeCom asks for 6 minutes).
STREAM_LIFE = 330.0
#: Seconds a chat's response_url may be used (WeCom: one hour), less a margin.
RESPONSE_URL_LIFE = 3500.0
_LEADING_MENTION = re.compile(r"^\s*@\S+\s*")


@dataclass(eq=False)
class Stream:
    """One message's streaming answer."""

    id: str
    msgid: str
    chat: str
    content: str = ""
    finished: bool = False
    born: float = field(default_factory=time.monotonic)

    async def grow(self, event: StreamEvent[Any]) -> None:
        """The answer's text as the model writes it (shown at WeCom's next refresh), until
        the answer itself (the outbox's delivery) replaces it and finishes the stream."""
        if event.type != "text" or not event.text or self.finished:
            return
        if utf8_len(self.content) + utf8_len(event.text) <= MAX_STREAM:
            self.content += event.text

    def frame(self) -> dict[str, Any]:
        if not self.finished and time.monotonic() - self.born > STREAM_LIFE:
            self.finished = True  # nobody answered: WeCom stops asking anyway
        return {
            "msgtype": "stream",
            "stream": {"id": self.id, "finish": self.finished, "content": self.content},
        }


class Streams:
    """The open streams by id and by msgid, and each chat's newest response_url."""

    def __init__(self) -> None:
        self.by_id: dict[str, Stream] = {}
        self.by_msgid: dict[str, Stream] = {}
        self.response_urls: dict[str, tuple[str, float]] = {}

    def open(self, msgid: str, chat: str) -> Stream:
        stream = self.by_msgid.get(msgid)
        if stream is None:
            stream = Stream(uuid.uuid4().hex, msgid, chat)
            self.by_id[stream.id] = stream
            self.by_msgid[msgid] = stream
            self._forget_old()
        return stream

    def _forget_old(self) -> None:
        now = time.monotonic()
        for sid, stream in list(self.by_id.items()):
            if now - stream.born > 2 * STREAM_LIFE:
                self.by_id.pop(sid, None)
                self.by_msgid.pop(stream.msgid, None)

    def note_url(self, chat: str, url: str) -> None:
        if url:
            self.response_urls[chat] = (url, time.monotonic())

    def take_url(self, chat: str) -> str | None:
        """The chat's response_url, once (WeCom takes one active reply per URL)."""
        found = self.response_urls.pop(chat, None)
        if found is None or time.monotonic() - found[1] > RESPONSE_URL_LIFE:
            return None
        return found[0]


class AibotSender(SharedStateSender[ChatRef, Streams], platform="wecom", label="WeCom"):
    """Answers into a message's stream, else through a response_url (module docstring)."""

    client: WecomApi
    cfg: WecomSettings

    parse_chat = staticmethod(parse_chat_id)

    def classify(self, exc: Exception, key: str) -> Exception | None:
        if isinstance(exc, WecomError):
            return kit.DeliveryRefused(f"WeCom refused the robot's message to {key}: {exc}")
        if isinstance(exc, NETWORK_ERRORS):
            return kit.Unreachable(f"WeCom not reachable ({exc})")
        return None

    async def send_parts(self, ref: ChatRef, out: OutgoingMessage, owed: kit.Owed) -> None:
        text = "\n\n".join(
            [out.text, *(f"![image]({i})" for i in out.images if i.startswith("https://"))]
        )
        owed.parts = (
            split_message(text.strip(), MAX_STREAM, measure=utf8_len) if text.strip() else []
        )
        stream = self.shared.by_msgid.get(out.reply_to or "")
        if owed.parts and stream is not None and not stream.finished and stream.chat == ref.key:
            stream.content, stream.finished = owed.parts[0], True
            owed.sent += 1
        for part in owed.parts[owed.sent :]:
            url = self.shared.take_url(ref.key)
            if url is None:
                raise kit.DeliveryRefused(
                    f"WeCom robot: no message of {ref.key} left to answer (the robot answers "
                    "a message, once, within an hour): not sent"
                )
            payload = {"msgtype": "markdown", "markdown": {"content": part}}
            await self.call(ref.key, functools.partial(self.client.post_response, url, payload))
            owed.sent += 1


class AibotChannel(WecomChannel):
    """`mode: aibot` (module docstring): the app channel's URL check, JSON callbacks."""

    def _sender(self) -> kit.PlatformSender[Any]:
        self.open_streams = Streams()
        return AibotSender(self.api, self.cfg, self.policy, self.open_streams)

    async def connect(self) -> str:
        # The robot has no API to log in to: its callback is checked by the token and key.
        return f"intelligent robot, callback at {self.cfg.webhook_path}"

    async def serve(self) -> None:
        await kit.PlatformChannel.serve(self)  # nothing to keep alive

    async def opened(self, request: web.Request) -> str:
        q = request.query
        try:
            outer = json.loads(await read_body(request))
        except ValueError:
            raise CryptError("body is not JSON", 400) from None
        if not isinstance(outer, dict) or not isinstance(outer.get("encrypt"), str):
            raise CryptError("body has no encrypt", 400)
        return self.crypt.open(
            q.get("msg_signature", ""), q.get("timestamp", ""), q.get("nonce", ""), outer["encrypt"]
        )

    def sealed(self, payload: dict[str, Any], nonce: str) -> web.Response:
        stamp = str(int(time.time()))
        encrypt = self.crypt.encrypt(json.dumps(payload, ensure_ascii=False))
        body = {
            "encrypt": encrypt,
            "msgsignature": self.crypt.sign(stamp, nonce, encrypt),
            "timestamp": int(stamp),
            "nonce": nonce,
        }
        return web.json_response(body)

    async def _callback(self, request: web.Request) -> web.StreamResponse:
        try:
            message = json_request(await self.opened(request), "message")
        except Refused as exc:  # a CryptError, or not JSON
            return self.refused(exc)
        if self.stopping:
            return web.Response(status=503, text="stopping")
        nonce = request.query.get("nonce", "")
        kind = message.get("msgtype")
        if kind == "stream":
            sid = str((message.get("stream") or {}).get("id") or "")
            stream = self.open_streams.by_id.get(sid)
            if stream is None:
                return web.Response(text="")  # not ours (any more): nothing to say
            return self.sealed(stream.frame(), nonce)
        if kind not in ("text", "image", "mixed"):
            return web.Response(text="")  # events, voice, files: not answered
        return await self._message(message, nonce)

    async def _message(self, message: dict[str, Any], nonce: str) -> web.Response:
        msgid = str(message.get("msgid") or "")
        user = str((message.get("from") or {}).get("userid") or "")
        group = message.get("chattype") == "group"
        chat_native = str(message.get("chatid") or "") if group else user
        if not msgid or not user or not chat_native:
            return web.Response(text="")
        chat = f"{'group' if group else 'private'}:{chat_native}"

        def take(previous: kit.Taken | None) -> kit.Taken:
            taken = kit.Taken(previous)
            stream = self.open_streams.open(msgid, chat)
            self.inbound.message(
                chat, msgid, lambda: self._incoming(chat, message), taken, stream=stream.grow
            )
            return taken

        taken = self.inbound.once(msgid, take)
        if not await taken.wait(ACK_WAIT, self._stopping):
            return web.Response(status=503, text="not stored yet")  # WeCom sends it again
        self.open_streams.note_url(chat, str(message.get("response_url") or ""))
        return self.sealed(self.open_streams.open(msgid, chat).frame(), nonce)

    async def _incoming(self, chat: str, message: dict[str, Any]) -> IncomingMessage | None:
        group = chat.startswith("group:")
        texts, urls = _items(message)
        text = "\n".join(texts)
        if group:
            text = _LEADING_MENTION.sub("", text, count=1)
        images = [i for u in urls[:4] if (i := await self._image(u)) is not None]
        user = str(message["from"]["userid"])
        return self.incoming(
            chat,
            user,
            text,
            sender_name=user,  # the callback names no one: the userid is what there is
            is_group=group,
            is_at_bot=group,
            message_id=str(message["msgid"]),
            images=images,
        )

    async def _image(self, url: str) -> str | None:
        """An image sent to the robot: fetched from the URL the callback names (through
        chatfn.common.fetch, `bot.fetch`'s bounds) and decrypted with the EncodingAESKey."""
        from chatfn.common.fetch import FetchError, fetch

        allow = getattr(getattr(self.host.settings, "bot", None), "fetch", None)
        try:
            got = await fetch(url, allow=allow, max_bytes=kit.MAX_IMAGE_IN + BLOCK, timeout=15)
            data = self.crypt.decrypt_file(got.data)
        except (FetchError, CryptError) as exc:
            self.log.warning("WeCom robot image not read: {}", exc)
            return None
        mime = kit.image_mime(data)
        return None if mime is None else kit.data_uri(data, mime)


def _items(message: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The texts and image URLs of a text, image or mixed message."""
    kind = message.get("msgtype")
    items = [message]
    if kind == "mixed":
        items = [
            i for i in (message.get("mixed") or {}).get("msg_item") or [] if isinstance(i, dict)
        ]
    texts, urls = [], []
    for item in items:
        if item.get("msgtype") == "text":
            texts.append(str((item.get("text") or {}).get("content") or ""))
        elif item.get("msgtype") == "image":
            url = str((item.get("image") or {}).get("url") or "")
            if url.startswith(("https://", "http://")):
                urls.append(url)
    return texts, urls
