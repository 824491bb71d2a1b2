"""A local WeCom (企业微信) server: the parts of the server API the channel calls and the
callback WeCom makes, as documented (shapes from https://developer.work.weixin.qq.com/document/
path/91039 gettoken, 90227 agent/get, 90236 message/send, 90248 appchat/send, 90253
media/upload, 90254 media/get, 90930 / 90238 the callback, 96213 the intelligent robot's
callback; error codes from 90313, the global error code table).

It refuses what WeCom refuses: a wrong corp id or secret (40013 / 40001), a missing, revoked
or expired access_token (40014 / 42001), another agent id (40056), a body that is not JSON
(47001), an empty text (44004), a text over 2048 bytes (45002: WeCom documents that it cuts
such a text; refusing it here proves the channel never sends one), an unknown media_id
(40007), an image upload over 2 MB or not an image (40009 / 40005), a voice upload that
is not AMR (40005: decoded with ffmpeg) or over 2 MB or 60 s (40010), a voice message whose
media_id is no uploaded voice (40007), and, when told, one
rate-limit answer (45009). Callbacks are encrypted and signed with the platform-side crypto
of wx_platform.py and redelivered the way WeCom does: a delivery not answered 200 in time is
made again, three tries in all."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from tests.channels.wecom.wx_platform import PlatformCrypt, new_aes_key
from tests.fakes.audio_api import VoiceRefused, voice_upload
from tests.kit import send_in_pieces, serve

MAX_TEXT_BYTES = 2048
MAX_IMAGE = 2 * 1024 * 1024
MAX_VOICE = 2 * 1024 * 1024
MAX_VOICE_SECONDS = 60.0


@dataclass
class Posted:
    """One message the bot sent, as WeCom received it."""

    target: str  # touser or chatid
    msgtype: str
    content: str = ""  # text / markdown
    image: bytes | None = None
    voice: bytes | None = None  # a voice message: the uploaded AMR
    msgid: str = ""
    body: dict[str, Any] = field(default_factory=dict)


def _err(code: int, msg: str, status: int = 200) -> web.Response:
    return web.json_response({"errcode": code, "errmsg": msg}, status=status)


class FakeWecom:
    def __init__(self, *, receive_id: str | None = None) -> None:
        self.corp_id = "ww0fakecorp0000001"
        self.secret = "fake-app-secret"
        self.agent_id = 1000002
        self.token = "fakeToken123"
        self.aes_key = new_aes_key()
        self.crypt = PlatformCrypt(
            self.token, self.aes_key, self.corp_id if receive_id is None else receive_id
        )
        self.tokens: dict[str, float] = {}  # access_token -> expiry (monotonic)
        self.token_life = 7200
        self.token_fetches = 0
        #: agent/get calls answered (the channel's keepalive credential check among them).
        self.agent_checks = 0
        self.sent: dict[str, list[Posted]] = {}
        self.media: dict[str, bytes] = {}
        self.voices: dict[str, tuple[bytes, float]] = {}  # media_id -> (AMR, seconds)
        self.rate_limited: dict[str, float] = {}
        self.refusals: list[tuple[str, int]] = []  # (path, errcode) of each refusal
        self.callback_url = ""
        self.callbacks: list[int] = []  # each callback delivery's HTTP status
        self.redeliver_after = 0.5  # WeCom: 5 s
        self._ids = itertools.count(7000000000000000001)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.base = ""
        self._client: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> FakeWecom:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_get("/cgi-bin/gettoken", self._gettoken)
        app.router.add_get("/cgi-bin/agent/get", self._agent)
        app.router.add_post("/cgi-bin/message/send", self._send)
        app.router.add_post("/cgi-bin/appchat/send", self._appchat)
        app.router.add_post("/cgi-bin/media/upload", self._upload)
        app.router.add_get("/cgi-bin/media/get", self._media_get)
        self._routes(app)
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

    def _routes(self, app: web.Application) -> None:
        """More routes (the robot's)."""

    # -- the API -------------------------------------------------------------------------------
    def revoke_tokens(self) -> None:
        self.tokens.clear()

    def _refuse(self, request: web.Request, code: int, msg: str) -> web.Response:
        self.refusals.append((request.path, code))
        return _err(code, msg)

    def _token_ok(self, request: web.Request) -> web.Response | None:
        token = request.query.get("access_token", "")
        if not token:
            return self._refuse(request, 41001, "access_token missing")
        expiry = self.tokens.get(token)
        if expiry is None:
            return self._refuse(request, 40014, "invalid access_token")
        if time.monotonic() > expiry:
            return self._refuse(request, 42001, "access_token expired")
        return None

    async def _gettoken(self, request: web.Request) -> web.Response:
        self.token_fetches += 1
        if request.query.get("corpid") != self.corp_id:
            return self._refuse(request, 40013, "invalid corpid")
        if request.query.get("corpsecret") != self.secret:
            return self._refuse(request, 40001, "invalid credential")
        token = f"tok-{next(self._ids)}"
        self.tokens[token] = time.monotonic() + self.token_life
        return web.json_response(
            {"errcode": 0, "errmsg": "ok", "access_token": token, "expires_in": self.token_life}
        )

    async def _agent(self, request: web.Request) -> web.Response:
        if (bad := self._token_ok(request)) is not None:
            return bad
        if request.query.get("agentid") != str(self.agent_id):
            return self._refuse(request, 40056, "invalid agentid")
        self.agent_checks += 1
        return web.json_response(
            {"errcode": 0, "errmsg": "ok", "agentid": self.agent_id, "name": "chatfn test app"}
        )

    async def _json(self, request: web.Request) -> dict[str, Any] | web.Response:
        if (bad := self._token_ok(request)) is not None:
            return bad
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._refuse(request, 47001, "data format error")
        if not isinstance(body, dict):
            return self._refuse(request, 47001, "data format error")
        return body

    def _content(self, request: web.Request, body: dict[str, Any]) -> Posted | web.Response:
        msgtype = body.get("msgtype")
        target = str(body.get("touser") or body.get("chatid") or "")
        if not target:
            return self._refuse(request, 40031, "invalid user list")
        if target in self.rate_limited:
            self.rate_limited.pop(target)
            return self._refuse(request, 45009, "api freq out of limit")
        if msgtype in ("text", "markdown"):
            content = (body.get(msgtype) or {}).get("content")
            if not isinstance(content, str) or not content:
                return self._refuse(request, 44004, "empty content")
            if len(content.encode()) > MAX_TEXT_BYTES:
                return self._refuse(request, 45002, "content size out of limit")
            return Posted(target, msgtype, content=content, body=body)
        if msgtype == "image":
            media_id = (body.get("image") or {}).get("media_id")
            if media_id not in self.media:
                return self._refuse(request, 40007, "invalid media_id")
            return Posted(target, "image", image=self.media[media_id], body=body)
        if msgtype == "voice":
            media_id = (body.get("voice") or {}).get("media_id")
            if media_id not in self.voices:
                return self._refuse(request, 40007, "invalid media_id")
            return Posted(target, "voice", voice=self.voices[media_id][0], body=body)
        return self._refuse(request, 40008, "invalid message type")

    async def _record(self, posted: Posted) -> None:
        async with self._changed:
            self.sent.setdefault(posted.target, []).append(posted)
            self._changed.notify_all()

    async def _send(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        if body.get("agentid") != self.agent_id:
            return self._refuse(request, 40056, "invalid agentid")
        posted = self._content(request, body)
        if isinstance(posted, web.Response):
            return posted
        posted.msgid = f"msg{next(self._ids)}"
        await self._record(posted)
        return web.json_response(
            {"errcode": 0, "errmsg": "ok", "invaliduser": "", "msgid": posted.msgid}
        )

    async def _appchat(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        posted = self._content(request, body)
        if isinstance(posted, web.Response):
            return posted
        await self._record(posted)
        return _err(0, "ok")

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
        if not data.startswith((b"\x89PNG", b"\xff\xd8")):
            return self._refuse(request, 40005, "invalid file type")
        media_id = f"media{next(self._ids)}"
        self.media[media_id] = data
        return web.json_response(
            {
                "errcode": 0,
                "errmsg": "ok",
                "type": "image",
                "media_id": media_id,
                "created_at": str(int(time.time())),
            }
        )

    async def _upload_voice(self, request: web.Request, data: bytes) -> web.Response:
        """type=voice: AMR only, at most 2 MB and 60 s (media/upload's limits)."""
        try:
            seconds = await asyncio.to_thread(
                voice_upload, data, ("amr",), MAX_VOICE, MAX_VOICE_SECONDS
            )
        except VoiceRefused as exc:
            code = 40005 if exc.what == "format" else 40010
            return self._refuse(request, code, f"invalid voice: {exc}")
        media_id = f"media{next(self._ids)}"
        self.voices[media_id] = (data, seconds)
        return web.json_response(
            {
                "errcode": 0,
                "errmsg": "ok",
                "type": "voice",
                "media_id": media_id,
                "created_at": str(int(time.time())),
            }
        )

    async def _media_get(self, request: web.Request) -> web.StreamResponse:
        if (bad := self._token_ok(request)) is not None:
            return bad
        data = self.media.get(request.query.get("media_id", ""))
        if data is None:
            return self._refuse(request, 40007, "invalid media_id")
        # In pieces, as a file comes over a real network: a reader that takes only what has
        # arrived gets a cut file.
        return await send_in_pieces(request, data, "image/png")

    async def wait_sent(self, target: str, count: int, timeout: float = 15.0) -> list[Posted]:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.sent.get(target, [])) >= count)
            return list(self.sent[target])

    # -- the callback ----------------------------------------------------------------------------
    def next_id(self) -> str:
        return str(next(self._ids))

    def add_media(self, data: bytes) -> str:
        media_id = f"media{next(self._ids)}"
        self.media[media_id] = data
        return media_id

    def message_xml(self, user: str, msg_id: str, text: str = "", media_id: str = "") -> str:
        """A member's message to the app, as the callback's plaintext (90239)."""
        kind = "image" if media_id else "text"
        body = (
            f"<PicUrl><![CDATA[https://wework.qpic.cn/{media_id}]]></PicUrl>"
            f"<MediaId><![CDATA[{media_id}]]></MediaId>"
            if media_id
            else f"<Content><![CDATA[{text}]]></Content>"
        )
        return (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<FromUserName><![CDATA[{user}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime>"
            f"<MsgType><![CDATA[{kind}]]></MsgType>{body}"
            f"<MsgId>{msg_id}</MsgId><AgentID>{self.agent_id}</AgentID></xml>"
        )

    def voice_xml(self, user: str, msg_id: str, media_id: str) -> str:
        """A member's voice message to the app (`Format` amr; the file by media/get)."""
        return (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<FromUserName><![CDATA[{user}]]></FromUserName>"
            f"<CreateTime>{int(time.time())}</CreateTime><MsgType><![CDATA[voice]]></MsgType>"
            f"<MediaId><![CDATA[{media_id}]]></MediaId><Format><![CDATA[amr]]></Format>"
            f"<MsgId>{msg_id}</MsgId><AgentID>{self.agent_id}</AgentID></xml>"
        )

    def sealed(self, plain: str, *, forge: bool = False) -> tuple[dict[str, str], str]:
        """(query, body) of a POSTed callback: encrypted, signed (badly with `forge`)."""
        encrypt = self.crypt.encrypt(plain)
        stamp, nonce = str(int(time.time())), self.next_id()[-9:]
        sig = self.crypt.sign(stamp, nonce, encrypt)
        if forge:
            sig = "0" * 40
        query = {"msg_signature": sig, "timestamp": stamp, "nonce": nonce}
        body = (
            f"<xml><ToUserName><![CDATA[{self.corp_id}]]></ToUserName>"
            f"<AgentID><![CDATA[{self.agent_id}]]></AgentID>"
            f"<Encrypt><![CDATA[{encrypt}]]></Encrypt></xml>"
        )
        return query, body

    async def post(
        self, query: dict[str, str], body: str | bytes, *, timeout: float = 5.0
    ) -> tuple[int, str]:
        """One delivery to the callback URL: (status, body); a timeout is status 0."""
        url = f"{self.callback_url}?{urlencode(query)}"
        if self._client is None:  # one client, as WeCom's servers keep theirs
            self._client = aiohttp.ClientSession()
        try:
            async with self._client.post(
                url, data=body, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as r:
                status, text = r.status, await r.text()
        except (TimeoutError, aiohttp.ClientError):
            status, text = 0, ""
        self.callbacks.append(status)
        return status, text

    async def verify_url(self, echo: str, *, forge: bool = False) -> tuple[int, str]:
        """The URL check (GET with echostr), as when the admin saves the callback."""
        encrypt = self.crypt.encrypt(echo)
        stamp, nonce = str(int(time.time())), "1372623149"
        sig = "1" * 40 if forge else self.crypt.sign(stamp, nonce, encrypt)
        query = {"msg_signature": sig, "timestamp": stamp, "nonce": nonce, "echostr": encrypt}
        async with aiohttp.ClientSession() as s, s.get(self.callback_url, params=query) as r:
            return r.status, await r.text()

    async def deliver(self, plain: str) -> tuple[int, str]:
        """A callback as WeCom makes it: posted, and posted again (three tries in all) while
        it is not answered 200; the first answer is returned, the retries run on."""
        query, body = self.sealed(plain)
        first = await self.post(query, body)
        if first[0] != 200:
            task = asyncio.ensure_future(self._redeliver(query, body))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return first

    async def _redeliver(self, query: dict[str, str], body: str) -> None:
        for _ in range(2):
            await asyncio.sleep(self.redeliver_after)
            if (await self.post(query, body))[0] == 200:
                return


# -- the intelligent robot (mode: aibot) -----------------------------------------------------------
MAX_STREAM_BYTES = 20480  # a stream's content (100719 / 101031)


class FakeAibot(FakeWecom):
    """WeCom's side of an intelligent robot: JSON callbacks encrypted for the receive id ""
    (https://developer.work.weixin.qq.com/document/path/100719), the stream answered and
    refreshed the way WeCom asks for it (流式消息刷新, 101031) until `finish`, and the
    response_url's active reply (one per URL). A stream answer is checked as WeCom checks it:
    its `msgsignature` over the ciphertext, its receive id, JSON with the stream's id, content
    within 20480 bytes."""

    def __init__(self) -> None:
        super().__init__(receive_id="")
        self.robot_name = "chatfnbot"
        self.aibot_id = "aibFAKE0001"
        self.poll_every = 0.05  # WeCom asks about once a second
        self.poll_for = 30.0  # WeCom: six minutes
        self.response_codes: dict[str, str] = {}  # response_code -> chat native id
        self.streams_seen: list[dict[str, Any]] = []  # every stream frame answered
        self.plain_images: set[str] = set()  # images served unencrypted (tests)

    async def __aenter__(self) -> FakeAibot:
        await super().__aenter__()
        return self

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/cgi-bin/aibot/response", self._response)
        app.router.add_get("/aibot/img/{name}", self._image)

    async def _image(self, request: web.Request) -> web.Response:
        """An image a user sent, stored encrypted with the robot's key (as WeCom's is)."""
        data = self.media.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        if request.match_info["name"] in self.plain_images:  # a test's broken file
            return web.Response(body=data, content_type="image/png")
        return web.Response(body=self.crypt.encrypt_file(data), content_type="image/png")

    def image_message(self, user: str, data: bytes, text: str = "") -> dict[str, Any]:
        """A user's image (with `text`: a mixed message of the two)."""
        message = self.message(user, text)
        url = f"{self.base}/aibot/img/{self.add_media(data)}"
        image = {"msgtype": "image", "image": {"url": url}}
        del message["text"]
        if text:
            message["msgtype"] = "mixed"
            message["mixed"] = {"msg_item": [{"msgtype": "text", "text": {"content": text}}, image]}
        else:
            message.update(image)
        return message

    async def _response(self, request: web.Request) -> web.Response:
        chat = self.response_codes.pop(request.query.get("response_code", ""), None)
        if chat is None:  # used before, or never given (the docs name no code for it)
            return self._refuse(request, 40008, "invalid response_code")
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._refuse(request, 47001, "data format error")
        content = (body.get("markdown") or {}).get("content") if isinstance(body, dict) else None
        if body.get("msgtype") != "markdown" or not isinstance(content, str) or not content:
            return self._refuse(request, 44004, "empty content")
        if len(content.encode()) > MAX_STREAM_BYTES:
            return self._refuse(request, 45002, "content size out of limit")
        await self._record(Posted(chat, "markdown", content=content, body=body))
        return _err(0, "ok")

    def message(
        self, user: str, text: str, *, group: str = "", mention: bool = True
    ) -> dict[str, Any]:
        """A user's text to the robot (in `group` it starts with the robot's mention)."""
        msgid = f"CAIQ{self.next_id()}"
        code = f"rc{self.next_id()}"
        self.response_codes[code] = group or user
        message: dict[str, Any] = {
            "msgid": msgid,
            "aibotid": self.aibot_id,
            "chattype": "group" if group else "single",
            "from": {"userid": user},
            "response_url": f"{self.base}/cgi-bin/aibot/response?response_code={code}",
            "msgtype": "text",
            "text": {"content": f"@{self.robot_name} {text}" if group and mention else text},
        }
        if group:
            message["chatid"] = group
        return message

    def sealed_json(self, payload: dict[str, Any]) -> tuple[dict[str, str], str]:
        encrypt = self.crypt.encrypt(json.dumps(payload, ensure_ascii=False))
        stamp, nonce = str(int(time.time())), self.next_id()[-9:]
        query = {
            "msg_signature": self.crypt.sign(stamp, nonce, encrypt),
            "timestamp": stamp,
            "nonce": nonce,
        }
        return query, json.dumps({"encrypt": encrypt})

    def read_answer(self, query: dict[str, str], text: str) -> dict[str, Any] | None:
        """A stream frame as WeCom reads the answer (None for an empty answer)."""
        if not text:
            return None
        body = json.loads(text)
        assert str(body["nonce"]) == query["nonce"], "the answer's nonce is the request's"
        sig = self.crypt.sign(str(body["timestamp"]), str(body["nonce"]), body["encrypt"])
        assert body["msgsignature"] == sig, "bad msgsignature"
        plain, receiver = self.crypt.decrypt(body["encrypt"])
        assert receiver == "", receiver
        frame: dict[str, Any] = json.loads(plain)
        assert frame["msgtype"] == "stream", frame
        content = frame["stream"]["content"]
        assert isinstance(frame["stream"]["finish"], bool) and isinstance(content, str)
        assert len(content.encode()) <= MAX_STREAM_BYTES, "WeCom refuses it"
        self.streams_seen.append(frame)
        return frame

    async def say(self, message: dict[str, Any]) -> int:
        """Deliver a message; its stream is refreshed in the background until it finishes
        (then its content is a Posted of the chat). The first delivery's status."""
        query, body = self.sealed_json(message)
        status, text = await self.post(query, body)
        if status != 200:  # WeCom sends it again
            task = asyncio.ensure_future(self._again(message))
        else:
            task = asyncio.ensure_future(self._refresh(message, self.read_answer(query, text)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return status

    async def _again(self, message: dict[str, Any]) -> None:
        for _ in range(2):
            await asyncio.sleep(self.redeliver_after)
            query, body = self.sealed_json(message)
            status, text = await self.post(query, body)
            if status == 200:
                await self._refresh(message, self.read_answer(query, text))
                return

    async def _refresh(self, message: dict[str, Any], frame: dict[str, Any] | None) -> None:
        chat = str(message.get("chatid") or message["from"]["userid"])
        deadline = time.monotonic() + self.poll_for
        while frame is not None and not frame["stream"]["finish"]:
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(self.poll_every)
            refresh = {
                "msgid": f"CAIQ{self.next_id()}",
                "aibotid": self.aibot_id,
                "chattype": message["chattype"],
                "from": message["from"],
                "msgtype": "stream",
                "stream": {"id": frame["stream"]["id"]},
            }
            if "chatid" in message:
                refresh["chatid"] = message["chatid"]
            query, body = self.sealed_json(refresh)
            status, text = await self.post(query, body)
            if status == 200:
                frame = self.read_answer(query, text)
        if frame is not None and frame["stream"]["content"]:
            await self._record(Posted(chat, "stream", content=frame["stream"]["content"]))
