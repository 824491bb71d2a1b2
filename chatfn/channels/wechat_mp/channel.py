"""The WeChat Official Account (微信公众号) channel: the signed callback, the passive reply within
WeChat's five seconds, and the customer-service message API for the rest (send.py).

The callback (https://developers.weixin.qq.com/doc/offiaccount/Basic_Information/
Access_Overview.html, .../Message_Management/Receiving_standard_messages.html): WeChat checks
the URL with a GET (`signature`, `timestamp`, `nonce`, `echostr`: the echostr answered when
the signature, SHA-1 of the sorted token, timestamp and nonce, is the token's). Each message
is POSTed with that signature; in safe mode (安全模式, `encrypt_type=aes`) the body's `Encrypt`
carries it encrypted with the EncodingAESKey for this AppID, signed by `msg_signature`
(chatfn/channels/wxcrypt.py), and the answer goes back encrypted. With `encoding_aes_key`
set a plain callback is refused (the account is to be in safe mode); without it an
encrypted one is.

Five seconds: WeChat waits 5 s for the answer, then drops the connection and sends the same
message again, three tries in all. The callback waits `reply_wait` seconds for the answer
(send.py's `Passive`, one per MsgId, shared by the tries): in time, it is the passive reply
(a text message); too late, the callback answers "success" (nothing shown) and the answer
goes through the customer-service API. An account that may not use that API
(`customer_service: false`) keeps the first two tries open past the 5 s (WeChat has sent the
next one by then, which waits for the same answer), so the answer has up to ~15 s. A MsgId
is handled once across the tries (and after a restart, found among the stored messages);
the answer waits for the message to be stored (confirm once stored: not stored in time, the
callback is answered 503 and WeChat's next try takes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time

from aiohttp import web

from chatfn.channels import kit, wxapi
from chatfn.channels.kit import webhook
from chatfn.channels.wechat_mp.api import CREDENTIALS_FIX as FIX
from chatfn.channels.wechat_mp.api import ERRORS, MpApi
from chatfn.channels.wechat_mp.send import MpSender, Passive
from chatfn.channels.wechat_mp.settings import WechatMpSettings
from chatfn.channels.wxcrypt import (
    MAX_BODY,
    CryptError,
    WxCrypt,
    read_xml,
    sha1_signature,
    xml_reply,
)
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["HOLD", "WechatMpChannel"]

#: Seconds a try is held past `reply_wait` when the account has no customer-service API
#: (past WeChat's 5 s: its next try waits for the same answer).
HOLD = 1.5
#: Seconds a MsgId's Passive is kept (WeChat's three tries span about 15 s).
KEEP = 30.0


class WechatMpChannel(
    kit.PlatformChannel[WechatMpSettings], platform="wechat_mp", label="WeChat Official Account"
):
    def __init__(self, host: ChannelHost, settings: WechatMpSettings) -> None:
        super().__init__(host, settings)
        key = settings.secret_text("encoding_aes_key")
        self.token = settings.secret_text("token")
        self.crypt = WxCrypt(self.token, key, settings.app_id) if key else None
        self.api = MpApi(settings)
        self.slots: dict[str, Passive] = {}
        self.sender = MpSender(self.api, settings, self.policy, self.slots)
        host.add_web_route("GET", settings.webhook_path, self._verify)
        host.add_web_route("POST", settings.webhook_path, self._callback)

    #: Seconds between the credential checks (the access token fetched again; the kit's serve).
    keepalive: float | None = 300.0

    async def connect(self) -> str:
        with ERRORS.connecting("check", self.cfg.api_base, FIX):
            await self.api.check()
        mode = "safe mode" if self.crypt is not None else "plain mode"
        return f"account {self.cfg.app_id} ({mode}), callback at {self.cfg.webhook_path}"

    async def close(self) -> None:
        for slot in self.slots.values():
            slot.close()
        await self.api.aclose()

    # -- the callback ----------------------------------------------------------------------------
    def _refused(self, exc: CryptError) -> web.Response:
        return webhook.refused(self.log, "WeChat Official Account callback", exc)

    def _signed(self, request: web.Request) -> None:
        q = request.query
        stamp, nonce, signature = q.get("timestamp", ""), q.get("nonce", ""), q.get("signature", "")
        if not stamp or not nonce or not signature:
            raise CryptError("signature, timestamp or nonce missing")
        expected = sha1_signature(self.token, stamp, nonce)
        if not hmac.compare_digest(signature.lower().encode(), expected.encode()):
            raise CryptError("bad signature")

    async def _verify(self, request: web.Request) -> web.Response:
        try:
            self._signed(request)
        except CryptError as exc:
            return self._refused(exc)
        return web.Response(text=request.query.get("echostr", ""))

    async def _opened(self, request: web.Request) -> tuple[dict[str, str], bool]:
        """The message's fields, and whether it came encrypted (the answer goes so too)."""
        self._signed(request)
        body = await kit.webhook_body(request, MAX_BODY)
        if body is None:
            raise CryptError("body too large", 413)
        outer = read_xml(body)
        q = request.query
        if q.get("encrypt_type") == "aes" or "Encrypt" in outer:
            if self.crypt is None:
                raise CryptError(
                    "encrypted callback but channels.wechat_mp.encoding_aes_key is not set", 400
                )
            inner = self.crypt.open(
                q.get("msg_signature", ""),
                q.get("timestamp", ""),
                q.get("nonce", ""),
                outer.get("Encrypt", ""),
            )
            return read_xml(inner), True
        if self.crypt is not None:
            raise CryptError("plain callback although channels.wechat_mp.encoding_aes_key is set")
        return outer, False

    async def _callback(self, request: web.Request) -> web.StreamResponse:
        try:
            fields, encrypted = await self._opened(request)
        except CryptError as exc:
            return self._refused(exc)
        if not self.logged_in or self.stopping:
            return web.Response(status=503, text="not ready")
        user, msg_id = fields.get("FromUserName", ""), fields.get("MsgId", "")
        if fields.get("MsgType") not in ("text", "image", "voice") or not user or not msg_id:
            return web.Response(text="success")  # events, video, location, links
        slot = self._slot(msg_id, user, fields.get("ToUserName", ""))
        slot.attempts += 1
        taken = self.inbound.once(msg_id, lambda previous: self._take(fields, previous))
        text = await self._answer(slot, taken)
        if text is None:
            if not slot.closed:
                return web.Response(status=503, text="not answered yet")  # WeChat tries again
            return web.Response(text="success")
        reply = xml_reply(
            {
                "ToUserName": user,
                "FromUserName": slot.account,
                "CreateTime": int(time.time()),
                "MsgType": "text",
                "Content": text,
            }
        )
        if encrypted and self.crypt is not None:
            reply = self.crypt.seal_xml(reply, request.query.get("nonce", ""))
        response = web.Response(text=reply, content_type="application/xml")
        await response.prepare(request)
        await response.write_eof()
        slot.answered.set()
        return response

    def _slot(self, msg_id: str, user: str, account: str) -> Passive:
        slot = self.slots.get(msg_id)
        if slot is None:
            slot = self.slots[msg_id] = Passive(user, account)
            asyncio.get_running_loop().call_later(KEEP, self.slots.pop, msg_id, None)
        return slot

    async def _answer(self, slot: Passive, taken: kit.Taken) -> str | None:
        """The passive reply's text, or None: answer "success" (or 503 when not stored)."""
        wait = self.cfg.reply_wait
        if not self.cfg.customer_service and slot.attempts < 3:
            wait += HOLD  # WeChat's next try (at 5 s) waits for the same answer
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                return await asyncio.shield(slot.reply)
        if not taken.confirmed or (not self.cfg.customer_service and slot.attempts < 3):
            return None  # 503: WeChat's next try takes it, or waits for the same answer
        if slot.close():
            return None  # "success": the answer goes by the customer-service API
        return slot.reply.result()  # it came just now

    def _take(self, fields: dict[str, str], previous: kit.Taken | None) -> kit.Taken:
        user, msg_id = fields["FromUserName"], fields["MsgId"]
        chat = f"private:{user}"
        taken = kit.Taken(previous)
        self.inbound.message(chat, msg_id, lambda: self._incoming(chat, fields), taken)
        return taken

    async def _incoming(self, chat: str, fields: dict[str, str]) -> IncomingMessage | None:
        images = []
        if fields.get("MsgType") == "image" and (media := fields.get("MediaId")):
            data = await self.api.received(media, "image", self.log)
            if data is not None and (mime := kit.image_mime(data)) is not None:
                images.append(kit.data_uri(data, mime))
        audio_in, transcript = await self._voice(fields)
        said = wxapi.said(fields)
        return self.incoming(chat, **said, images=images, audio=audio_in, transcript=transcript)

    async def _voice(self, fields: dict[str, str]) -> tuple[list[str], str | None]:
        """A voice message: WeChat's own speech recognition (`Recognition`, where the account
        has it on) is the transcript, no STT call; else its AMR or Speex file (media/get by
        `MediaId`) as audio for voice.stt."""
        if fields.get("MsgType") != "voice":
            return [], None
        said = fields.get("Recognition", "").strip()
        if said:
            return [], said
        media = fields.get("MediaId")
        if not media:
            return [], None
        if (data := await self.api.received(media, "voice", self.log)) is None:
            return [], None
        return [kit.data_uri(data, audio.audio_mime(data))], None
