"""A local DingTalk for the DingTalk channel's tests: the OpenAPI calls the channel makes, the
Stream protocol (the connection endpoint, then a WebSocket carrying CALLBACK / EVENT / SYSTEM
frames and the client's acks), session webhooks, OAPI's media upload, file downloads, and the
HTTP callback (signed) to a bot's address. The real dingtalk-stream SDK talks to it through
`channels.dingtalk.api_base`.

Shapes are those of DingTalk's official references (open.dingtalk.com/document/...):
- Stream: direction/stream-mode-protocol-access-description, and its fuller copy in
  open-dingtalk/developerpedia docs/learn/stream/protocol.md: POST /v1.0/gateway/
  connections/open {"clientId", "clientSecret", "subscriptions": [{"type", "topic"}], "ua",
  "localIp"} -> {"endpoint", "ticket"} (one connection per ticket, valid 90 s); frames
  {"specVersion", "type", "headers": {"topic", "messageId", "contentType", "time", ...},
  "data": "<json>"}; acks {"code", "headers": {"messageId", "contentType"}, "message",
  "data"}; SYSTEM `ping` (answered with its `opaque`) and `disconnect`.
- the robot message: orgapp/receive-message (conversationId, conversationType "1" / "2",
  msgId, senderStaffId, senderNick, isAdmin, isInAtList, atUsers, chatbotUserId, robotCode,
  sessionWebhook, sessionWebhookExpiredTime, createAt, msgtype text / picture / richText).
  A group sends the robot only the messages that @-mention it.
- the HTTP callback's signature: the same page: headers `timestamp` (ms) and `sign` =
  base64(HmacSHA256(appSecret, timestamp + "\\n" + appSecret)).
- token: orgapp/obtain-the-access_token-of-an-internal-app (POST /v1.0/oauth2/accessToken
  {"appKey", "appSecret"} -> {"accessToken", "expireIn"}); a refused token on the OpenAPI is
  HTTP 401 {"code": "InvalidAuthentication"} (server-api-error-codes-1).
- sends: orgapp/the-robot-sends-a-group-message (/v1.0/robot/groupMessages/send; msgParam
  at most 15,000 bytes), orgapp/chatbots-send-one-on-one-chat-messages-in-batches
  (/v1.0/robot/oToMessages/batchSend), orgapp/robot-message-types-and-data-format
  (sampleMarkdown {"title", "text"}, sampleImageMsg {"photoURL"}); rate limits: HTTP 429
  {"code": "Forbidden.AccessDenied.QpsLimitForApi"}; a session webhook as a custom robot's
  send (errcode 130101 "send too fast", a message over 20,000 bytes refused).
- files: orgapp/download-the-file-content-of-the-robot-receiving-message
  (/v1.0/robot/messageFiles/download -> {"downloadUrl"}); OAPI media/upload (multipart
  `media`, `type=image` or `type=voice` -> {"errcode": 0, "media_id"}; errcode 40014 for a
  bad token; orgapp/upload-media-files: a voice is AMR, at most 2 MB and 60 s, decoded here
  with ffmpeg and refused otherwise); the robot's `sampleAudio` {"mediaId" of an uploaded
  voice, "duration" in ms as a string}.
What DingTalk's references do not spell out (the exact code of a refused secret on the
token call, of an over-long message) is a 400 with a code named here; the channel depends
only on the HTTP status for those.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.fakes.audio_api import VoiceRefused, voice_upload
from tests.kit import serve

ROBOT_TOPIC = "/v1.0/im/bot/messages/get"
BOT_USER = "$:LWCP_v1:$botuser0000000000"
MAX_PARAM_BYTES = 15000
MAX_SESSION_BYTES = 20000
MAX_VOICE_BYTES = 2 * 1024 * 1024
MAX_VOICE_SECONDS = 60.0


@dataclass
class Posted:
    """One message the bot sent, as the fake received it."""

    target: str  # a group's openConversationId or a user's staff id
    is_group: bool
    way: str  # "session" or "api"
    msgtype: str  # markdown / sampleMarkdown / sampleImageMsg / sampleAudio / text
    title: str = ""
    text: str = ""
    at: list[str] = field(default_factory=list)
    image: bytes | None = None
    voice: bytes | None = None  # sampleAudio: the uploaded AMR
    duration: int = 0  # sampleAudio: the length it was given, ms


@dataclass
class Ack:
    code: int
    message: str
    data: str


class FakeDingTalk:
    """The fake platform (module docstring). Use as `async with FakeDingTalk() as fake:`."""

    def __init__(self, app_key: str = "dingtestappkey0001", app_secret: str = "s3cret") -> None:
        self.app_key, self.app_secret = app_key, app_secret
        self.port = 0
        self._runner: web.AppRunner | None = None
        self.tokens: set[str] = set()
        self.tickets: dict[str, float] = {}
        self.sockets: list[web.WebSocketResponse] = []
        self.connections = 0
        self.subscriptions: list[Any] = []
        self.sent: list[Posted] = []
        self.changed = asyncio.Event()
        self.acks: dict[str, Ack] = {}
        self.bad_frames: list[str] = []  # frames from the client that are no ack at all
        self.unanswerable: list[dict[str, Any]] = []  # acks naming no messageId (ignored)
        self.sessions: dict[str, tuple[str, bool, float]] = {}  # session -> (target, group, expiry)
        self.files: dict[str, bytes] = {}
        self.media: dict[str, bytes] = {}
        self.voices: dict[str, tuple[bytes, float]] = {}  # media_id -> (AMR, seconds)
        self.throttled: dict[str, float] = {}  # target -> monotonic time the window ends
        self.groups: set[str] = set()  # groups the robot is in
        self.refused: list[tuple[str, int, str]] = []  # (path, status, code) of refusals
        self._ids = itertools.count(1)
        self.on_sent: Callable[[Posted], None] | None = None  # benches: each message taken

    # -- lifecycle --------------------------------------------------------------------------
    async def __aenter__(self) -> FakeDingTalk:
        app = web.Application(client_max_size=30 * 1024 * 1024)
        r = app.router
        r.add_post("/v1.0/oauth2/accessToken", self._access_token)
        r.add_post("/v1.0/gateway/connections/open", self._open)
        r.add_get("/connect", self._connect)
        r.add_post("/v1.0/robot/groupMessages/send", self._group_send)
        r.add_post("/v1.0/robot/oToMessages/batchSend", self._batch_send)
        r.add_post("/v1.0/robot/messageFiles/download", self._download)
        r.add_get("/files/{code}", self._file)
        r.add_post("/robot/sendBySession", self._session_send)
        r.add_post("/media/upload", self._upload)
        self._runner, self.port = await serve(app)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def _record(self, posted: Posted) -> None:
        self.sent.append(posted)
        if self.on_sent is not None:
            self.on_sent(posted)
        self._changed()

    def _refuse(self, request: web.Request, status: int, code: str, message: str) -> web.Response:
        self.refused.append((request.path, status, code))
        body = {"requestid": uuid.uuid4().hex, "code": code, "message": message}
        return web.json_response(body, status=status)

    # -- token and Stream connection --------------------------------------------------------
    async def _access_token(self, request: web.Request) -> web.Response:
        body = await _json(request)
        if body is None or not isinstance(body.get("appKey"), str):
            return self._refuse(request, 400, "MissingappKey", "appKey is mandatory")
        if body.get("appKey") != self.app_key or body.get("appSecret") != self.app_secret:
            return self._refuse(
                request, 400, "invalidClientIdOrSecret", "无效的clientId或clientSecret"
            )
        token = uuid.uuid4().hex
        self.tokens.add(token)
        return web.json_response({"accessToken": token, "expireIn": 7200})

    async def _open(self, request: web.Request) -> web.Response:
        body = await _json(request)
        if body is None or not isinstance(body.get("subscriptions"), list):
            return self._refuse(request, 400, "InvalidParameter", "subscriptions is mandatory")
        if body.get("clientId") != self.app_key or body.get("clientSecret") != self.app_secret:
            return self._refuse(request, 401, "InvalidAuthentication", "clientId or clientSecret")
        subs = body["subscriptions"]
        if not all(isinstance(s, dict) and s.get("type") in ("EVENT", "CALLBACK") for s in subs):
            return self._refuse(request, 400, "InvalidParameter", "subscriptions: type, topic")
        self.subscriptions = subs
        ticket = str(uuid.uuid4())
        self.tickets[ticket] = time.monotonic() + 90
        return web.json_response(
            {"endpoint": f"ws://127.0.0.1:{self.port}/connect", "ticket": ticket}
        )

    async def _connect(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        expires = self.tickets.pop(ticket, 0.0)  # one connection per ticket
        if expires < time.monotonic():
            return web.Response(status=401, text="invalid ticket")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets.append(ws)
        self.connections += 1
        self._changed()
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    self._ack(frame.data)
        finally:
            if ws in self.sockets:
                self.sockets.remove(ws)
            self._changed()
        return ws

    def _ack(self, raw: str) -> None:
        try:
            ack = json.loads(raw)
            code, headers = int(ack["code"]), ack["headers"]
            message_id = headers.get("messageId")
        except (ValueError, KeyError, TypeError, AttributeError):
            self.bad_frames.append(raw)
        else:
            if message_id is None:  # an answer to a disconnect, which wants none: ignored
                self.unanswerable.append(ack)
            else:
                data = str(ack.get("data") or "")
                self.acks[str(message_id)] = Ack(code, str(ack.get("message") or ""), data)
        self._changed()

    async def frame(
        self, kind: str, topic: str, data: dict[str, Any], message_id: str | None = None
    ) -> str:
        """Push one frame to a connected client (waiting for one); its messageId."""
        await self.wait_connected()
        message_id = message_id or f"{uuid.uuid4().hex[:8]}_{next(self._ids)}"
        headers = {
            "appId": "1305d5f5-0000-484f-0000-97d90000ef67",
            "contentType": "application/json",
            "messageId": message_id,
            "time": str(int(time.time() * 1000)),
            "topic": topic,
        }
        if kind == "SYSTEM" and topic == "disconnect":
            del headers["messageId"]
        frame = {"specVersion": "1.0", "type": kind, "headers": headers, "data": json.dumps(data)}
        await self.sockets[-1].send_str(json.dumps(frame))
        return message_id

    async def push(self, data: dict[str, Any], message_id: str | None = None) -> str:
        """A robot message over the Stream connection; the frame's messageId."""
        return await self.frame("CALLBACK", ROBOT_TOPIC, data, message_id)

    async def ping(self) -> str:
        return await self.frame("SYSTEM", "ping", {"opaque": uuid.uuid4().hex})

    async def wait_connected(self, timeout: float = 15.0, count: int = 1) -> None:
        async with asyncio.timeout(timeout):
            while len(self.sockets) < 1 or self.connections < count:
                await self.changed.wait()

    async def wait_ack(self, message_id: str, timeout: float = 15.0) -> Ack:
        async with asyncio.timeout(timeout):
            while message_id not in self.acks:
                await self.changed.wait()
        return self.acks[message_id]

    async def drop(self) -> None:
        """Cut every connection (the network dropped it)."""
        dropped, self.sockets = list(self.sockets), []
        for ws in dropped:
            await ws.close()

    def revoke_tokens(self) -> None:
        self.tokens.clear()

    # -- robot messages ---------------------------------------------------------------------
    def robot_message(
        self,
        *,
        group: str | None,
        sender: str,
        text: str = "",
        mention: bool = False,
        image: bytes | None = None,
        admin: bool = False,
        nick: str = "",
        voice: bytes | None = None,
        recognition: str = "",
    ) -> dict[str, Any]:
        """A robot message as DingTalk sends it (orgapp/receive-message), with a session
        webhook valid for 90 minutes. `group` None: a one-to-one chat with `sender`."""
        session = uuid.uuid4().hex
        target = group if group is not None else sender
        expires = time.time() + 5400
        self.sessions[session] = (target, group is not None, expires)
        if group is not None:
            self.groups.add(group)
        data: dict[str, Any] = {
            "conversationId": group or f"cidp{sender}==",
            "conversationType": "2" if group is not None else "1",
            "msgId": f"msg{uuid.uuid4().hex}==",
            "senderId": f"$:LWCP_v1:${sender}",
            "senderStaffId": sender,
            "senderNick": nick or f"user{sender}",
            "senderCorpId": "dingcorp0001",
            "isAdmin": admin,
            "chatbotCorpId": "dingcorp0001",
            "chatbotUserId": BOT_USER,
            "robotCode": self.app_key,
            "sessionWebhook": f"{self.base}/robot/sendBySession?session={session}",
            "sessionWebhookExpiredTime": int(expires * 1000),
            "createAt": int(time.time() * 1000),
        }
        if group is not None:
            data["conversationTitle"] = f"group {group}"
            data["isInAtList"] = mention
            data["atUsers"] = [{"dingtalkId": BOT_USER}] if mention else []
        if voice is not None:  # an audio message: its file, its length, DingTalk's transcript
            code = f"dc{uuid.uuid4().hex}"
            self.files[code] = voice
            data["msgtype"] = "audio"
            data["content"] = {"downloadCode": code, "duration": "2000", "recognition": recognition}
        elif image is not None:
            code = f"dc{uuid.uuid4().hex}"
            self.files[code] = image
            if text:
                data["msgtype"] = "richText"
                data["content"] = {
                    "richText": [{"text": text}, {"type": "picture", "downloadCode": code}]
                }
            else:
                data["msgtype"] = "picture"
                data["content"] = {"downloadCode": code, "pictureDownloadCode": code}
        else:
            data["msgtype"] = "text"
            data["text"] = {"content": (" " + text) if mention else text}
        return data

    def delivers(self, data: dict[str, Any]) -> bool:
        """Whether DingTalk hands this message to the robot: a group's only when @-mentioned."""
        return data["conversationType"] == "1" or bool(data.get("isInAtList"))

    async def callback(
        self,
        url: str,
        data: dict[str, Any],
        secret: str | None = None,
        timestamp: int | None = None,
    ) -> aiohttp.ClientResponse:
        """The HTTP callback (webhook mode): POST the message, signed as DingTalk signs it."""
        stamp = str(timestamp if timestamp is not None else int(time.time() * 1000))
        secret = self.app_secret if secret is None else secret
        digest = hmac.new(secret.encode(), f"{stamp}\n{secret}".encode(), hashlib.sha256).digest()
        headers = {"timestamp": stamp, "sign": base64.b64encode(digest).decode()}
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=json.dumps(data), headers=headers) as response:
                await response.read()
                return response

    # -- sends ------------------------------------------------------------------------------
    def _token_ok(self, request: web.Request) -> bool:
        return request.headers.get("x-acs-dingtalk-access-token", "") in self.tokens

    def _throttle(self, target: str) -> bool:
        until = self.throttled.get(target)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        del self.throttled[target]
        return False

    def rate_limit(self, target: str, seconds: float) -> None:
        """Sends to `target` are refused as over DingTalk's rate for `seconds` from now."""
        self.throttled[target] = time.monotonic() + seconds

    async def _api_send(self, request: web.Request, group: bool) -> web.Response:
        if not self._token_ok(request):
            return self._refuse(request, 401, "InvalidAuthentication", "不合法的access_token")
        body = await _json(request)
        if body is None or not isinstance(body.get("msgParam"), str) or not body.get("msgKey"):
            return self._refuse(
                request, 400, "MissingmsgParam", "msgKey and msgParam are mandatory"
            )
        if body.get("robotCode") != self.app_key:
            return self._refuse(request, 400, "robot.not.exist", "robotCode 无效")
        if len(body["msgParam"].encode()) > MAX_PARAM_BYTES:
            return self._refuse(request, 400, "param.msgParamTooLong", "msgParam 超过15000字节")
        try:
            param = json.loads(body["msgParam"])
        except ValueError:
            return self._refuse(request, 400, "InvalidParameter.msgParam", "msgParam 不是JSON")
        if group:
            target = str(body.get("openConversationId") or "")
            if target not in self.groups:
                return self._refuse(request, 400, "resource.not.found", "机器人不在群内")
        else:
            users = body.get("userIds")
            if not isinstance(users, list) or len(users) != 1:
                return self._refuse(request, 400, "InvalidParameter.userIds", "userIds")
            target = str(users[0])
        if self._throttle(target):
            return self._refuse(
                request, 429, "Forbidden.AccessDenied.QpsLimitForApi", "api qps limit"
            )
        posted = self._posted(target, group, "api", str(body["msgKey"]), param)
        if isinstance(posted, web.Response):
            return posted
        self._record(posted)
        answer: dict[str, Any] = {"processQueryKey": uuid.uuid4().hex}
        if not group:
            answer.update(invalidStaffIdList=[], flowControlledStaffIdList=[])
        return web.json_response(answer)

    def _posted(
        self, target: str, group: bool, way: str, key: str, param: dict[str, Any]
    ) -> Posted | web.Response:
        if key == "sampleMarkdown" and isinstance(param.get("text"), str) and param.get("title"):
            return Posted(target, group, way, key, str(param["title"]), param["text"])
        if key == "sampleText" and isinstance(param.get("content"), str):
            return Posted(target, group, way, key, "", param["content"])
        if key == "sampleImageMsg" and str(param.get("photoURL") or "") in self.media:
            return Posted(target, group, way, key, image=self.media[param["photoURL"]])
        duration = param.get("duration")
        if (
            key == "sampleAudio"
            and str(param.get("mediaId") or "") in self.voices
            and isinstance(duration, str)
            and duration.isdigit()
        ):
            voice = self.voices[param["mediaId"]][0]
            return Posted(target, group, way, key, voice=voice, duration=int(duration))
        return web.json_response(
            {"code": "InvalidParameter.msgParam", "message": f"{key} {param}"}, status=400
        )

    async def _group_send(self, request: web.Request) -> web.Response:
        return await self._api_send(request, True)

    async def _batch_send(self, request: web.Request) -> web.Response:
        return await self._api_send(request, False)

    async def _session_send(self, request: web.Request) -> web.Response:
        found = self.sessions.get(request.query.get("session", ""))
        if found is None or found[2] < time.time():
            return web.json_response({"errcode": 300001, "errmsg": "session 不存在或已过期"})
        target, group, _ = found
        raw = await request.read()
        body = _object(raw)
        if body is None or body.get("msgtype") not in ("text", "markdown"):
            return web.json_response({"errcode": 40035, "errmsg": "缺少参数 json"})
        if len(raw) > MAX_SESSION_BYTES:
            return web.json_response({"errcode": 460101, "errmsg": "message too long"})
        if self._throttle(target):
            return web.json_response(
                {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}
            )
        at = body.get("at") if isinstance(body.get("at"), dict) else {}
        users = [str(u) for u in (at.get("atUserIds") or [])]
        if body["msgtype"] == "markdown":
            md = body.get("markdown") if isinstance(body.get("markdown"), dict) else {}
            if not md.get("title") or not isinstance(md.get("text"), str):
                return web.json_response({"errcode": 40035, "errmsg": "markdown: title, text"})
            posted = Posted(
                target, group, "session", "markdown", str(md["title"]), md["text"], users
            )
        else:
            content = (
                (body.get("text") or {}).get("content")
                if isinstance(body.get("text"), dict)
                else None
            )
            if not isinstance(content, str):
                return web.json_response({"errcode": 40035, "errmsg": "text: content"})
            posted = Posted(target, group, "session", "text", "", content, users)
        self._record(posted)
        return web.json_response({"errcode": 0, "errmsg": "ok"})

    # -- files ------------------------------------------------------------------------------
    async def _download(self, request: web.Request) -> web.Response:
        if not self._token_ok(request):
            return self._refuse(request, 401, "InvalidAuthentication", "不合法的access_token")
        body = await _json(request) or {}
        code = str(body.get("downloadCode") or "")
        if body.get("robotCode") != self.app_key or code not in self.files:
            return self._refuse(request, 400, "resource.not.found", "downloadCode 无效")
        return web.json_response(
            {"downloadUrl": f"{self.base}/files/{code}?Expires=3600&Signature=x"}
        )

    async def _file(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["code"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    async def _upload(self, request: web.Request) -> web.Response:
        if request.query.get("access_token", "") not in self.tokens:
            return web.json_response({"errcode": 40014, "errmsg": "不合法的access_token"})
        form = await request.post()
        media = form.get("media")
        kind = request.query.get("type", form.get("type"))
        if not isinstance(media, web.FileField) or kind not in ("image", "voice"):
            return web.json_response({"errcode": 40004, "errmsg": "不合法的媒体文件类型"})
        data = media.file.read()
        if not data:
            return web.json_response({"errcode": 40005, "errmsg": "不合法的文件"})
        media_id = f"@lADP{uuid.uuid4().hex}"
        if kind == "voice":
            try:
                seconds = await asyncio.to_thread(
                    voice_upload, data, ("amr",), MAX_VOICE_BYTES, MAX_VOICE_SECONDS
                )
            except VoiceRefused as exc:
                code = 40005 if exc.what == "format" else 40006
                self.refused.append(("/media/upload", 200, f"{code} {exc}"))
                return web.json_response({"errcode": code, "errmsg": f"不合法的语音文件: {exc}"})
            self.voices[media_id] = (data, seconds)
        else:
            self.media[media_id] = data
        return web.json_response(
            {
                "errcode": 0,
                "errmsg": "ok",
                "media_id": media_id,
                "type": kind,
                "created_at": int(time.time() * 1000),
            }
        )

    # -- reading what was sent --------------------------------------------------------------
    def sent_to(self, target: str) -> list[Posted]:
        return [p for p in self.sent if p.target == target]

    async def wait_sent(self, target: str, count: int, timeout: float = 15.0) -> list[Posted]:
        async with asyncio.timeout(timeout):
            while len(self.sent_to(target)) < count:
                await self.changed.wait()
        return self.sent_to(target)


async def _json(request: web.Request) -> dict[str, Any] | None:
    return _object(await request.read())


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*(?:\([^)]*\))?[^)\s]*)\)")


def read_markdown(text: str, at: list[str]) -> tuple[str, set[str], list[str]]:
    """What a user reads of DingTalk Markdown: (visible text, styles shown, users mentioned)."""
    styles: set[str] = set()
    mentions = [u for u in at if f"@{u}" in text]
    for user in mentions:
        text = text.replace(f"@{user} ", "", 1).replace(f"@{user}", "", 1)
    lines = []
    for line in text.split("\n"):
        if line.startswith("```"):
            styles.add("code")
            continue
        lines.append(line)
    text = "\n".join(lines)
    if _LINK.search(text):
        styles.add("link")
    text = _LINK.sub(
        lambda m: f"{m.group(1)} ({m.group(2)})" if m.group(1) != m.group(2) else m.group(2), text
    )
    if re.search(r"\*\*[^*]+\*\*", text):
        styles.add("bold")
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    if re.search(r"(?<![*\w])\*[^*\s][^*]*\*(?!\*)", text):
        styles.add("italic")
    text = re.sub(r"(?<![*\w])\*([^*\s][^*]*)\*(?!\*)", r"\1", text)
    if re.search(r"`[^`]+`", text):
        styles.add("code")
    text = re.sub(r"`([^`]+)`", r"\1", text)
    return text, styles, mentions
