"""A local iLink (Tencent's WeChat bot API) for the WeChat channel's tests, on the shared
fake-platform base (tests/channels/fake_platform.py).

It speaks the protocol as the peers' code and Tencent's own plugin document it; nothing of
the channel's code is imported here (its encryption included):

- Tencent/openclaw-weixin (the `@tencent-weixin/openclaw-weixin` npm package's source):
  docs/protocol.md (endpoints, headers, base_info, the QR statuses, the message model, the
  CDN flow), src/api/api.ts and types.ts (headers, `X-WECHAT-UIN`, getupdates' cursor,
  `ret`/`errcode`, -14 "session timeout" in session-guard.ts), src/auth/login-qr.ts (the QR
  long poll), src/cdn/upload.ts and pic-decrypt.ts (AES-128-ECB, PKCS#7, key encodings),
  src/messaging/send.ts (one item a message, `message_type` 2, `message_state` 2);
- AstrBotDevs/AstrBot astrbot/core/platform/sources/weixin_oc/ (weixin_oc_client.py,
  weixin_oc_adapter.py: the same calls, `context_token` echoed, -14 ends the session);
- NousResearch/hermes-agent gateway/platforms/weixin.py (-2 the frequency limit, ~2000
  characters a message);
- langbot-app/LangBot src/langbot/pkg/platform/sources/openclaw_weixin.py (the same config
  keys `base_url` and `token`, private chats, the QR login's token kept in the database).

What it refuses, as iLink does or as those clients expect it to: a request without
`AuthorizationType: ilink_bot_token` or with an `X-WECHAT-UIN` that is not base64 of a
decimal uint32 (ret -1); a bot call with a token it did not issue or revoked (ret/errcode
-14, "session timeout"); a sendmessage without the conversation's `context_token`, with one
never issued for that chat or made stale (ret -1), with an item other than one text, image or
voice, or a text over `max_text` characters (ret -1); a voice item whose file was not uploaded
as a voice (media_type 4), that is not SILK (Tencent's form, `encode_type` 6, as
src/api/types.ts `VoiceItem` names the encodings) or whose `playtime` (ms) is not a positive
number (ret -1); a CDN upload whose size or MD5 does not match
what getuploadurl announced, or that does not decrypt with the announced key (HTTP 400).
`rate_limit(chat)` answers the chat's next send with -2. The QR login: `scan(code)` and
`confirm(code)` are the phone.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import itertools
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.channels.fake_platform import FakePlatform

BOT_ID = "b0t1d0000@im.bot"
SCANNER = "owner0001@im.wechat"
#: openclaw-weixin's textChunkLimit: what one text message may hold here.
MAX_TEXT = 4000


def _aes(key: bytes) -> Cipher[modes.ECB]:
    return Cipher(algorithms.AES(key), modes.ECB())  # noqa: S305 - iLink's CDN


def encrypt(data: bytes, key: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    enc = _aes(key).encryptor()
    return enc.update(padder.update(data) + padder.finalize()) + enc.finalize()


def decrypt(data: bytes, key: bytes) -> bytes:
    dec = _aes(key).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(dec.update(data) + dec.finalize()) + unpadder.finalize()


def key_of(aes_key: str) -> bytes:
    """CDNMedia.aes_key: base64 of 16 raw bytes or of their 32 hex digits."""
    raw = base64.b64decode(aes_key)
    return raw if len(raw) == 16 else bytes.fromhex(raw.decode("ascii"))


@dataclass
class Posted:
    """One sendmessage the fake took."""

    chat: str  # "private:<user>" or "group:<group>"
    body: dict[str, Any]
    text: str = ""
    image: bytes | None = None
    voice: bytes | None = None  # a voice item's file, decrypted
    message_id: str = ""


@dataclass
class QrCode:
    code: str
    status: str = "wait"
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class FakeIlink(FakePlatform):
    def __init__(self, *, hold: float = 1.0, max_text: int = MAX_TEXT) -> None:
        super().__init__()
        self.token = "tok-" + secrets.token_hex(8)
        self.revoked: set[str] = set()
        self.hold = hold  # seconds a getupdates is held without news (iLink: ~35)
        self.max_text = max_text
        self.messages: list[dict[str, Any]] = []  # every inbound message, in order
        self.contexts: dict[str, set[str]] = {}  # chat -> context tokens it takes
        self.posted: list[Posted] = []
        self.rate_limited: set[str] = set()  # chats whose next send answers -2
        self.uploads: dict[str, dict[str, Any]] = {}  # filekey -> getuploadurl's body
        self.cdn: dict[str, bytes] = {}  # download param -> ciphertext
        self.media_types: dict[str, int] = {}  # download param -> getuploadurl's media_type
        self.codes: dict[str, QrCode] = {}
        self.qr_requests = 0
        self.answered: list[str] = []  # the QR statuses answered, in order
        self.notified: list[str] = []  # notifystart / notifystop
        self.typing: list[dict[str, Any]] = []
        self.bad_requests: list[str] = []
        self._ids = itertools.count(7_000_000_000_001)
        self._news = asyncio.Event()

    @property
    def api_base(self) -> str:
        return self.base

    @property
    def cdn_base(self) -> str:
        return f"{self.base}/c2c"

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/ilink/bot/get_bot_qrcode", self.get_bot_qrcode)
        router.add_get("/ilink/bot/get_bot_qrcode", self.get_bot_qrcode)
        router.add_get("/ilink/bot/get_qrcode_status", self.get_qrcode_status)
        router.add_post("/ilink/bot/getupdates", self.getupdates)
        router.add_post("/ilink/bot/sendmessage", self.sendmessage)
        router.add_post("/ilink/bot/getuploadurl", self.getuploadurl)
        router.add_post("/ilink/bot/getconfig", self.getconfig)
        router.add_post("/ilink/bot/sendtyping", self.sendtyping)
        router.add_post("/ilink/bot/msg/notifystart", self.notify_start)
        router.add_post("/ilink/bot/msg/notifystop", self.notify_stop)
        router.add_post("/c2c/upload", self.cdn_upload)
        router.add_get("/c2c/download", self.cdn_download)

    # -- what every bot call passes --------------------------------------------------------
    async def check(self, request: web.Request) -> web.StreamResponse | None:
        path = request.path
        if not path.startswith("/ilink/bot/") or "qrcode" in path:
            return None
        if request.headers.get("AuthorizationType") != "ilink_bot_token":
            return self._bad(request, "AuthorizationType is not ilink_bot_token")
        if not _uin_ok(request.headers.get("X-WECHAT-UIN", "")):
            return self._bad(request, "X-WECHAT-UIN is not base64 of a decimal uint32")
        try:
            body = await request.json()
        except ValueError:
            return self._bad(request, "body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("base_info"), dict):
            return self._bad(request, "no base_info")
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ")
        if not auth.startswith("Bearer ") or token != self.token or token in self.revoked:
            return web.json_response({"ret": -14, "errcode": -14, "errmsg": "session timeout"})
        return None

    def _bad(self, request: web.Request, why: str) -> web.Response:
        self.bad_requests.append(f"{request.path}: {why}")
        return web.json_response({"ret": -1, "errmsg": why})

    # -- the QR login (unauthenticated) ----------------------------------------------------
    async def get_bot_qrcode(self, request: web.Request) -> web.Response:
        if request.query.get("bot_type") != "3":
            return web.json_response({"ret": -1, "errmsg": "bot_type"})
        self.qr_requests += 1
        code = QrCode(secrets.token_hex(16))
        self.codes[code.code] = code
        await self.notify()
        content = f"https://liteapp.weixin.qq.com/q/{code.code}?qrcode={code.code}&bot_type=3"
        return web.json_response({"qrcode": code.code, "qrcode_img_content": content})

    async def get_qrcode_status(self, request: web.Request) -> web.Response:
        code = self.codes.get(request.query.get("qrcode", ""))
        if code is None:
            return web.json_response({"ret": -1, "errmsg": "unknown qrcode"})
        code.changed.clear()
        if code.status in ("wait", "scaned"):
            try:
                async with asyncio.timeout(self.hold):
                    await code.changed.wait()
            except TimeoutError:
                pass
        answer: dict[str, Any] = {"status": code.status}
        self.answered.append(code.status)
        await self.notify()
        if code.status == "confirmed":
            answer.update(
                bot_token=self.token,
                ilink_bot_id=BOT_ID,
                baseurl=self.base,
                ilink_user_id=SCANNER,
            )
        return web.json_response(answer)

    def newest_code(self) -> QrCode | None:
        return list(self.codes.values())[-1] if self.codes else None

    async def _set(self, code: str, status: str) -> None:
        qr = self.codes[code]
        qr.status = status
        qr.changed.set()
        await self.notify()

    async def scan(self, code: str) -> None:
        await self._set(code, "scaned")

    async def confirm(self, code: str) -> None:
        await self._set(code, "confirmed")

    async def expire(self, code: str) -> None:
        await self._set(code, "expired")

    # -- messages in ------------------------------------------------------------------------
    async def say(
        self,
        user: str,
        text: str = "",
        *,
        group: str = "",
        image: bytes | None = None,
        quote: str | None = None,
        full_url: str | None = None,
        voice: bytes | None = None,
        voice_text: str = "",
    ) -> str:
        """A user's message, delivered by the next getupdates; its message id. `voice`: a
        voice item (its SILK encrypted on the CDN) with iLink's transcript `voice_text`."""
        chat = f"group:{group}" if group else f"private:{user}"
        token = "ctx-" + secrets.token_hex(12)
        self.contexts.setdefault(chat, set()).add(token)
        items: list[dict[str, Any]] = []
        if text:
            item: dict[str, Any] = {"type": 1, "text_item": {"text": text}}
            if quote:
                item["ref_msg"] = {"title": quote, "message_item": {"type": 1}}
            items.append(item)
        if image is not None:
            key, param = secrets.token_bytes(16), "dl-" + secrets.token_hex(16)
            self.cdn[param] = encrypt(image, key)
            media = {
                "encrypt_query_param": param,
                "aes_key": base64.b64encode(key).decode(),
                "encrypt_type": 1,
            }
            if full_url is not None:
                media["full_url"] = full_url
            items.append({"type": 2, "image_item": {"media": media, "mid_size": len(image)}})
        if voice is not None:
            key, param = secrets.token_bytes(16), "dl-" + secrets.token_hex(16)
            self.cdn[param] = encrypt(voice, key)
            media = {
                "encrypt_query_param": param,
                "aes_key": base64.b64encode(key).decode(),
                "encrypt_type": 1,
            }
            voice_item: dict[str, Any] = {"media": media, "encode_type": 6, "playtime": 2000}
            if voice_text:
                voice_item["text"] = voice_text
            items.append({"type": 3, "voice_item": voice_item})
        ident = str(next(self._ids))
        msg: dict[str, Any] = {
            "seq": len(self.messages) + 1,
            "message_id": ident,
            "from_user_id": user,
            "to_user_id": BOT_ID,
            "create_time_ms": 1_790_000_000_000 + len(self.messages),
            "session_id": chat,
            "message_type": 1,
            "message_state": 2,
            "item_list": items,
            "context_token": token,
        }
        if group:
            msg["group_id"] = group
        self.messages.append(msg)
        self._news.set()
        await self.notify()
        return ident

    def stale(self, chat: str) -> None:
        """The chat's context tokens are taken no longer (the conversation moved on)."""
        self.contexts[chat] = set()

    async def getupdates(self, request: web.Request) -> web.Response:
        body = await request.json()
        buf = body.get("get_updates_buf")
        if not isinstance(buf, str):
            return web.json_response({"ret": -1, "errmsg": "get_updates_buf"})
        position = _position(buf)
        if position is None:
            return web.json_response({"ret": -1, "errmsg": "bad get_updates_buf"})
        if position >= len(self.messages):
            self._news.clear()
            try:
                async with asyncio.timeout(self.hold):
                    await self._news.wait()
            except TimeoutError:
                pass
        msgs = self.messages[position:]
        return web.json_response(
            {
                "ret": 0,
                "msgs": msgs,
                "get_updates_buf": _cursor(position + len(msgs)),
                "longpolling_timeout_ms": 35_000,
            }
        )

    # -- messages out -----------------------------------------------------------------------
    async def sendmessage(self, request: web.Request) -> web.Response:
        msg = (await request.json()).get("msg")
        if not isinstance(msg, dict):
            return web.json_response({"ret": -1, "errmsg": "no msg"})
        group = str(msg.get("group_id") or "")
        chat = f"group:{group}" if group else f"private:{msg.get('to_user_id')}"
        if group and msg.get("to_user_id") != group:
            return web.json_response({"ret": -1, "errmsg": "to_user_id is not the group"})
        token = msg.get("context_token")
        if not token or token not in self.contexts.get(chat, set()):
            return web.json_response({"ret": -1, "errmsg": "invalid context_token"})
        if msg.get("message_type") != 2 or msg.get("message_state") != 2:
            return web.json_response({"ret": -1, "errmsg": "message_type/message_state"})
        items = msg.get("item_list")
        if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], dict):
            return web.json_response({"ret": -1, "errmsg": "item_list"})
        if chat in self.rate_limited:
            self.rate_limited.discard(chat)
            return web.json_response({"ret": -2, "errmsg": "freq limit"})
        posted = self._posted(chat, msg, items[0])
        if isinstance(posted, str):
            return web.json_response({"ret": -1, "errmsg": posted})
        self.posted.append(posted)
        await self.notify()
        return web.json_response({"ret": 0, "message_id": posted.message_id})

    def _posted(self, chat: str, msg: dict[str, Any], item: dict[str, Any]) -> Posted | str:
        ident = str(next(self._ids))
        if item.get("type") == 1:
            text = str((item.get("text_item") or {}).get("text") or "")
            if not text or len(text) > self.max_text:
                return f"text of {len(text)} characters"
            return Posted(chat, msg, text=text, message_id=ident)
        if item.get("type") == 2:
            media = (item.get("image_item") or {}).get("media") or {}
            data = self.cdn.get(str(media.get("encrypt_query_param") or ""))
            if data is None:
                return "unknown encrypt_query_param"
            try:
                image = decrypt(data, key_of(str(media.get("aes_key") or "")))
            except (ValueError, binascii.Error):
                return "image does not decrypt with aes_key"
            return Posted(chat, msg, image=image, message_id=ident)
        if item.get("type") == 3:
            return self._voice(chat, msg, item.get("voice_item") or {}, ident)
        return f"item type {item.get('type')}"

    def _voice(
        self, chat: str, msg: dict[str, Any], voice: dict[str, Any], ident: str
    ) -> Posted | str:
        media = voice.get("media") or {}
        param = str(media.get("encrypt_query_param") or "")
        data = self.cdn.get(param)
        if data is None or self.media_types.get(param) != 4:
            return "voice not uploaded as media_type 4"
        try:
            plain = decrypt(data, key_of(str(media.get("aes_key") or "")))
        except (ValueError, binascii.Error):
            return "voice does not decrypt with aes_key"
        if voice.get("encode_type") != 6 or not plain.startswith(b"\x02#!SILK_V3"):
            return f"voice of encode_type {voice.get('encode_type')} is not SILK"
        playtime = voice.get("playtime")
        if not isinstance(playtime, int) or playtime <= 0:
            return f"voice playtime {playtime!r}"
        return Posted(chat, msg, voice=plain, message_id=ident)

    def sent_to(self, chat: str) -> list[Posted]:
        return [p for p in self.posted if p.chat == chat]

    async def getuploadurl(self, request: web.Request) -> web.Response:
        body = await request.json()
        needed = ("filekey", "media_type", "to_user_id", "rawsize", "rawfilemd5", "filesize")
        if any(body.get(k) in (None, "") for k in needed) or len(str(body.get("aeskey"))) != 32:
            return web.json_response({"ret": -1, "errmsg": "getuploadurl fields"})
        if body["filesize"] != (body["rawsize"] // 16 + 1) * 16:
            return web.json_response({"ret": -1, "errmsg": "filesize is not the ciphertext's"})
        self.uploads[str(body["filekey"])] = body
        return web.json_response({"ret": 0, "upload_param": "up-" + str(body["filekey"])})

    async def cdn_upload(self, request: web.Request) -> web.Response:
        filekey = request.query.get("filekey", "")
        announced = self.uploads.get(filekey)
        if announced is None or request.query.get("encrypted_query_param") != f"up-{filekey}":
            return web.Response(status=400, headers={"x-error-message": "unknown upload"})
        data = await request.read()
        if len(data) != announced["filesize"]:
            return web.Response(status=400, headers={"x-error-message": "size"})
        try:
            plain = decrypt(data, bytes.fromhex(announced["aeskey"]))
        except ValueError:
            return web.Response(status=400, headers={"x-error-message": "decrypt"})
        if hashlib.md5(plain).hexdigest() != announced["rawfilemd5"]:  # noqa: S324
            return web.Response(status=400, headers={"x-error-message": "md5"})
        param = "dl-" + secrets.token_hex(16)
        self.cdn[param] = data
        self.media_types[param] = int(announced["media_type"])
        return web.Response(status=200, headers={"x-encrypted-param": param})

    async def cdn_download(self, request: web.Request) -> web.Response:
        data = self.cdn.get(request.query.get("encrypted_query_param", ""))
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    # -- the rest ---------------------------------------------------------------------------
    async def getconfig(self, request: web.Request) -> web.Response:
        return web.json_response({"ret": 0, "typing_ticket": base64.b64encode(b"t").decode()})

    async def sendtyping(self, request: web.Request) -> web.Response:
        self.typing.append(await request.json())
        await self.notify()
        return web.json_response({"ret": 0})

    async def notify_start(self, request: web.Request) -> web.Response:
        self.notified.append("start")
        return web.json_response({"ret": 0, "errmsg": ""})

    async def notify_stop(self, request: web.Request) -> web.Response:
        self.notified.append("stop")
        return web.json_response({"ret": 0, "errmsg": ""})


def _uin_ok(value: str) -> bool:
    try:
        digits = base64.b64decode(value, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return digits.isdigit() and int(digits) < 2**32


def _cursor(position: int) -> str:
    return base64.b64encode(json.dumps({"pos": position}).encode()).decode()


def _position(buf: str) -> int | None:
    if not buf:
        return 0
    try:
        data = json.loads(base64.b64decode(buf, validate=True))
        return int(data["pos"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


__all__ = ["BOT_ID", "MAX_TEXT", "SCANNER", "FakeIlink", "Posted", "decrypt", "encrypt"]
