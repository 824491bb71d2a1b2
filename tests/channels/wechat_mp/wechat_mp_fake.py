"""A local WeChat Official Account platform: the API the channel calls and the callback WeChat
makes, as documented (https://developers.weixin.qq.com/doc/offiaccount/: Basic_Information/
Get_access_token.html, Message_Management/Service_Center_messages.html (message/custom/send),
Asset_Management/New_temporary_materials.html and Get_temporary_materials.html (media/upload,
media/get), Basic_Information/Get_the_WeChat_server_IP_address.html (get_api_domain_ip),
Basic_Information/Access_Overview.html (the URL check), Message_Management/
Receiving_standard_messages.html and Passive_user_reply_message.html (the callback and its
reply), Message_encryption_and_decryption_instructions.html (safe mode); error codes from
Getting_Started/Global_Return_Code.html).

It refuses what WeChat refuses: a wrong AppID / AppSecret (40013 / 40125), a revoked or
expired access_token (40001 / 42001), a body that is not JSON (47001), an empty text
(44004) or one over 2048 bytes (45002), a customer-service message to a user who has not
spoken in 48 hours (45015) or from an account without the API (48001), an unknown media_id
(40007), an image upload that is not an image (40005), a voice upload that is not AMR or
MP3 (40005: decoded with ffmpeg) or over 2 MB or 60 s (40010), a voice message whose
media_id is no uploaded voice (40007), an upload of another type (40004); once, when told,
45009. A passive reply is read the way WeChat reads it: only within `answer_within` seconds
(5), only XML for this user from this account, its `MsgSignature` checked in safe mode; a
callback not answered in time (or not 200) is sent again, three tries in all."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from tests.channels.wecom.wx_platform import PlatformCrypt, new_aes_key, signature
from tests.fakes.audio_api import VoiceRefused, voice_upload
from tests.kit import send_in_pieces, serve

MAX_TEXT_BYTES = 2048
MAX_IMAGE = 10 * 1024 * 1024
MAX_VOICE = 2 * 1024 * 1024
MAX_VOICE_SECONDS = 60.0


@dataclass
class Posted:
    """One message a follower received from the bot: `via` "passive" or "custom"."""

    target: str
    msgtype: str
    via: str
    content: str = ""
    image: bytes | None = None
    voice: bytes | None = None  # a voice message: the uploaded file


def _err(code: int, msg: str) -> web.Response:
    return web.json_response({"errcode": code, "errmsg": msg})


class FakeWechatMp:
    def __init__(self, *, safe: bool = True) -> None:
        self.app_id = "wx0fake000000001"
        self.app_secret = "fake-app-secret-32-characters-00"
        self.account = "gh_0fakeaccount"
        self.token = "fakeMpToken"
        self.aes_key = new_aes_key() if safe else ""
        self.crypt = PlatformCrypt(self.token, self.aes_key, self.app_id) if safe else None
        self.tokens: set[str] = set()
        self.token_fetches = 0
        self.customer_service = True  # the account's 客服消息 permission
        self.followers: dict[str, float] = {}  # openid -> when they last spoke
        self.sent: dict[str, list[Posted]] = {}
        self.media: dict[str, bytes] = {}
        self.voices: dict[str, tuple[bytes, float]] = {}  # media_id -> (file, seconds)
        self.rate_limited: dict[str, float] = {}
        self.refusals: list[tuple[str, int]] = []
        self.callback_url = ""
        self.answer_within = 5.0  # WeChat's wait for the passive reply
        self.tries: list[int] = []  # each delivery's HTTP status (0: no answer in time)
        self._ids = itertools.count(24000000000000001)
        self._changed = asyncio.Condition()
        self._inflight: dict[str, int] = {}  # callbacks being delivered, per user
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.base = ""
        self._client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeWechatMp:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_get("/cgi-bin/token", self._token)
        app.router.add_post("/cgi-bin/message/custom/send", self._custom)
        app.router.add_post("/cgi-bin/media/upload", self._upload)
        app.router.add_get("/cgi-bin/media/get", self._media_get)
        app.router.add_get("/cgi-bin/get_api_domain_ip", self._domain_ip)
        self._runner, port = await serve(app)
        self.base = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- the API ---------------------------------------------------------------------------------
    def revoke_tokens(self) -> None:
        self.tokens.clear()

    def _refuse(self, request: web.Request, code: int, msg: str) -> web.Response:
        self.refusals.append((request.path, code))
        return _err(code, msg)

    async def _token(self, request: web.Request) -> web.Response:
        self.token_fetches += 1
        q = request.query
        if q.get("grant_type") != "client_credential":
            return self._refuse(request, 40002, "invalid grant_type")
        if q.get("appid") != self.app_id:
            return self._refuse(request, 40013, "invalid appid")
        if q.get("secret") != self.app_secret:
            return self._refuse(request, 40125, "invalid appsecret")
        token = f"mptok-{next(self._ids)}"
        self.tokens.add(token)
        return web.json_response({"access_token": token, "expires_in": 7200})

    async def _domain_ip(self, request: web.Request) -> web.Response:
        if (bad := self._token_ok(request)) is not None:
            return bad
        return web.json_response({"ip_list": ["101.89.47.18", "101.91.34.103"]})

    def _token_ok(self, request: web.Request) -> web.Response | None:
        token = request.query.get("access_token", "")
        if not token:
            return self._refuse(request, 41001, "access_token missing")
        if token not in self.tokens:
            return self._refuse(request, 40001, "invalid credential, access_token is invalid")
        return None

    def _check_custom(self, request: web.Request, body: Any) -> Posted | web.Response:
        if not isinstance(body, dict):
            return self._refuse(request, 47001, "data format error")
        if not self.customer_service:
            return self._refuse(request, 48001, "api unauthorized")
        user = str(body.get("touser") or "")
        if time.time() - self.followers.get(user, 0) > 48 * 3600:
            return self._refuse(request, 45015, "response out of time limit")
        if user in self.rate_limited:
            self.rate_limited.pop(user)
            return self._refuse(request, 45009, "reach max api daily quota limit")
        msgtype = body.get("msgtype")
        if msgtype == "text":
            content = (body.get("text") or {}).get("content")
            if not isinstance(content, str) or not content:
                return self._refuse(request, 44004, "empty content")
            if len(content.encode()) > MAX_TEXT_BYTES:
                return self._refuse(request, 45002, "content size out of limit")
            return Posted(user, "text", "custom", content=content)
        if msgtype == "image":
            media_id = (body.get("image") or {}).get("media_id")
            if media_id not in self.media:
                return self._refuse(request, 40007, "invalid media_id")
            return Posted(user, "image", "custom", image=self.media[media_id])
        if msgtype == "voice":
            media_id = (body.get("voice") or {}).get("media_id")
            if media_id not in self.voices:
                return self._refuse(request, 40007, "invalid media_id")
            return Posted(user, "voice", "custom", voice=self.voices[media_id][0])
        return self._refuse(request, 40008, "invalid message type")

    async def _custom(self, request: web.Request) -> web.Response:
        if (bad := self._token_ok(request)) is not None:
            return bad
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._refuse(request, 47001, "data format error")
        posted = self._check_custom(request, body)
        if isinstance(posted, web.Response):
            return posted
        # WeChat shows a passive reply when the callback's answer reaches it, which is before
        # a customer-service call the bot makes after answering: here the answer is read by
        # this process's client, so a call that overtakes it waits for it (at most 1 s).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0), self._changed:
                await self._changed.wait_for(lambda: not self._inflight.get(posted.target))
        await self._record(posted)
        return _err(0, "ok")

    async def _record(self, posted: Posted) -> None:
        async with self._changed:
            self.sent.setdefault(posted.target, []).append(posted)
            self._changed.notify_all()

    async def _upload(self, request: web.Request) -> web.Response:
        if (bad := self._token_ok(request)) is not None:
            return bad
        kind = request.query.get("type")
        if kind not in ("image", "voice"):
            return self._refuse(request, 40004, "invalid media type")
        data = b""
        async for part in await request.multipart():
            if getattr(part, "name", None) == "media":
                data = await part.read()  # type: ignore[union-attr]
        if kind == "voice":
            return await self._upload_voice(request, data)
        if not data or len(data) > MAX_IMAGE:
            return self._refuse(request, 40009, "invalid image size")
        if not data.startswith((b"\x89PNG", b"\xff\xd8", b"GIF8")):
            return self._refuse(request, 40005, "invalid file type")
        media_id = self.add_media(data)
        return web.json_response({"type": "image", "media_id": media_id, "created_at": 1})

    async def _upload_voice(self, request: web.Request, data: bytes) -> web.Response:
        """type=voice: AMR or MP3, at most 2 MB and 60 s (New_temporary_materials)."""
        try:
            seconds = await asyncio.to_thread(
                voice_upload, data, ("amr", "mp3"), MAX_VOICE, MAX_VOICE_SECONDS
            )
        except VoiceRefused as exc:
            code = 40005 if exc.what == "format" else 40010
            return self._refuse(request, code, f"invalid voice: {exc}")
        media_id = f"mpvoice{next(self._ids)}"
        self.voices[media_id] = (data, seconds)
        return web.json_response({"type": "voice", "media_id": media_id, "created_at": 1})

    async def _media_get(self, request: web.Request) -> web.StreamResponse:
        if (bad := self._token_ok(request)) is not None:
            return bad
        data = self.media.get(request.query.get("media_id", ""))
        if data is None:
            return self._refuse(request, 40007, "invalid media_id")
        # In pieces, as a file comes over a real network: a reader that takes only what has
        # arrived gets a cut file.
        return await send_in_pieces(request, data, "image/png")

    def add_media(self, data: bytes) -> str:
        media_id = f"mpmedia{next(self._ids)}"
        self.media[media_id] = data
        return media_id

    async def wait_sent(self, target: str, count: int, timeout: float = 15.0) -> list[Posted]:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.sent.get(target, [])) >= count)
            return list(self.sent[target])

    # -- the callback ----------------------------------------------------------------------------
    def next_id(self) -> str:
        return str(next(self._ids))

    def message_xml(self, user: str, msg_id: str, text: str = "", media_id: str = "") -> str:
        kind = "image" if media_id else "text"
        body = (
            f"<PicUrl><![CDATA[http://mmbiz.qpic.cn/{media_id}]]></PicUrl>"
            f"<MediaId><![CDATA[{media_id}]]></MediaId>"
            if media_id
            else f"<Content><![CDATA[{text}]]></Content>"
        )
        return (
            f"<xml><ToUserName><![CDATA[{self.account}]]></ToUserName>"
            f"<FromUserName><![CDATA[{user}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime>"
            f"<MsgType><![CDATA[{kind}]]></MsgType>{body}<MsgId>{msg_id}</MsgId></xml>"
        )

    def voice_xml(
        self, user: str, msg_id: str, media_id: str, recognition: str = "", fmt: str = "speex"
    ) -> str:
        """A voice message as WeChat pushes it: its media_id (`Format` amr or speex), and
        `Recognition` when the account has speech recognition on (the field is there, empty,
        when it found nothing)."""
        return (
            f"<xml><ToUserName><![CDATA[{self.account}]]></ToUserName>"
            f"<FromUserName><![CDATA[{user}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime>"
            f"<MsgType><![CDATA[voice]]></MsgType><MediaId><![CDATA[{media_id}]]></MediaId>"
            f"<Format><![CDATA[{fmt}]]></Format><Recognition><![CDATA[{recognition}]]>"
            f"</Recognition><MsgId>{msg_id}</MsgId></xml>"
        )

    def sealed(self, plain: str, *, forge: str = "") -> tuple[dict[str, str], str]:
        """(query, body) of one delivery: signed, and encrypted in safe mode. `forge`:
        "signature" or "msg_signature" made wrong."""
        stamp, nonce = str(int(time.time())), self.next_id()[-9:]
        query = {
            "signature": signature(self.token, stamp, nonce),
            "timestamp": stamp,
            "nonce": nonce,
            "openid": "x",
        }
        body = plain
        if self.crypt is not None:
            encrypt = self.crypt.encrypt(plain)
            query["encrypt_type"] = "aes"
            query["msg_signature"] = self.crypt.sign(stamp, nonce, encrypt)
            body = (
                f"<xml><ToUserName><![CDATA[{self.account}]]></ToUserName>"
                f"<Encrypt><![CDATA[{encrypt}]]></Encrypt></xml>"
            )
        if forge:
            query[forge] = "0" * 40
        return query, body

    async def post(self, query: dict[str, str], body: str) -> tuple[int, str]:
        """One delivery: (status, body); 0 when no answer came within `answer_within`."""
        url = f"{self.callback_url}?{urlencode(query)}"
        if self._client is None:  # one client, as WeChat's servers keep theirs
            self._client = aiohttp.ClientSession()
        try:
            async with self._client.post(
                url, data=body.encode(), timeout=aiohttp.ClientTimeout(total=self.answer_within)
            ) as r:
                status, text = r.status, await r.text()
        except (TimeoutError, aiohttp.ClientError):
            status, text = 0, ""
        self.tries.append(status)
        return status, text

    def read_reply(self, user: str, query: dict[str, str], text: str) -> Posted | None:
        """The passive reply as WeChat reads it: None for "success" / "" (nothing shown)."""
        if text in ("", "success"):
            return None
        root = ET.fromstring(text)
        fields = {c.tag: c.text or "" for c in root}
        if self.crypt is not None:  # safe mode: only an encrypted, signed reply
            stamp, nonce = fields["TimeStamp"], fields["Nonce"]
            assert nonce == query["nonce"], "the reply's nonce is the request's"
            assert fields["MsgSignature"] == self.crypt.sign(stamp, nonce, fields["Encrypt"])
            inner, app_id = self.crypt.decrypt(fields["Encrypt"])
            assert app_id == self.app_id
            fields = {c.tag: c.text or "" for c in ET.fromstring(inner)}
        assert fields["ToUserName"] == user and fields["FromUserName"] == self.account, fields
        assert fields["MsgType"] == "text", fields
        assert len(fields["Content"].encode()) <= MAX_TEXT_BYTES, "WeChat would cut it"
        return Posted(user, "text", "passive", content=fields["Content"])

    async def deliver(self, user: str, plain: str) -> tuple[int, str]:
        """A follower's message as WeChat sends it: the first try awaited, its passive reply
        recorded; tries not answered 200 in time are made again (three in all) in the
        background. The first try's (status, body)."""
        self.followers[user] = time.time()
        query, body = self.sealed(plain)
        first = await self._try(user, query, body)
        if first[0] != 200:
            task = asyncio.ensure_future(self._again(user, plain))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return first

    async def _try(self, user: str, query: dict[str, str], body: str) -> tuple[int, str]:
        self._inflight[user] = self._inflight.get(user, 0) + 1
        try:
            status, text = await self.post(query, body)
            if status == 200 and (posted := self.read_reply(user, query, text)) is not None:
                await self._record(posted)
        finally:
            async with self._changed:
                self._inflight[user] -= 1
                self._changed.notify_all()
        return status, text

    async def _again(self, user: str, plain: str) -> None:
        for _ in range(2):
            query, body = self.sealed(plain)  # each try is signed afresh
            if (await self._try(user, query, body))[0] == 200:
                return
