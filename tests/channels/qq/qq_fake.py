"""A local QQ bot platform for the QQ channel's tests: the token endpoint, the OpenAPI calls the
channel makes, the WebSocket gateway and signed webhook callbacks, with the shapes of the
official documentation, https://bot.q.qq.com/wiki/develop/api-v2/ (its source is
github.com/tencent-connect/bot-docs, docs/develop/api-v2/):

- token: `POST /app/getAppAccessToken` `{"appId", "clientSecret"}` -> `{"access_token",
  "expires_in"}` (dev-prepare/interface-framework/api-use.md); a wrong secret -> `{"code":
  100016, "message": "invalid appid or secret"}`. Calls need `Authorization: QQBot {token}`
  of a token that has not expired: else HTTP 401, code 11244 (openapi/error/error.md).
- `GET /users/@me`, `GET /gateway`, `GET /guilds/{guild_id}/channels`.
- sending (server-inter/message/send-receive/send.md, rich-media.md, post_messages.md):
  `POST /v2/groups/{group_openid}/messages`, `/v2/users/{openid}/messages` (msg_type 0 text,
  7 media with `file_info`; `msg_id` + `msg_seq`: the same pair twice -> code 40054005),
  `POST /v2/{groups|users}/{id}/files` (`file_type` 1 image or 3 voice, SILK only; `url` or
  `file_data`),
  `POST /channels/{channel_id}/messages` and `/dms/{guild_id}/messages` (JSON or multipart
  with `file_image`; `message_reference`). A passive reply past its window (5 minutes, 60
  in C2C) -> code 304027 MSG_EXPIRE. An active message (no msg_id / event_id) to a group or
  C2C chat is refused: QQ stopped them on 2025-04-21 and documents no code for it; the fake
  answers 304022 (PUSH_TIME). A rate-limited chat answers HTTP 429 (no Retry-After: QQ
  documents none) until its window passes.
- the gateway (dev-prepare/interface-framework/event-emit.md): Hello (op 10), Identify (op 2)
  -> READY, Resume (op 6) -> the events after `seq` again, then RESUMED; heartbeats (op 1)
  acknowledged (op 11); events (op 0, `s`, `t`, `id`, `d`).
- webhooks (sign.md): events POSTed with `X-Signature-Ed25519` / `X-Signature-Timestamp`
  signed with the key derived from the bot secret; op 13 URL validation. The fake signs with
  `cryptography` itself, as sign.md says (not with the channel's code, so a mistake there is
  not repeated here); `qq_sign` reproduces the docs' published example (test_qq.py).
- attachments users send are served at `/files/{name}`.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.channels.fake_platform import FakePlatform

APP_ID = "102000001"
SECRET = "fakeQQsecretForTests"
BOT_ID = "11900000000000000001"


def qq_key(secret: str) -> Ed25519PrivateKey:
    """sign.md: the bot secret repeated until it is at least 32 bytes, its first 32 bytes the
    Ed25519 seed."""
    seed = secret.encode()
    while len(seed) < 32:
        seed += seed
    return Ed25519PrivateKey.from_private_bytes(seed[:32])


def qq_sign(secret: str, message: bytes) -> str:
    """QQ's signature of `message` (timestamp + body, or event_ts + plain_token), hex."""
    return qq_key(secret).sign(message).hex()


@dataclass
class Posted:
    """One message the bot sent, as the fake took it."""

    scene: str  # group, c2c, channel, dm
    target: str
    body: dict[str, Any]
    id: str
    images: list[bytes | str] = field(default_factory=list)

    @property
    def content(self) -> str:
        return str(self.body.get("content") or "")

    @property
    def msg_id(self) -> str | None:
        return self.body.get("msg_id") or None


@dataclass
class _Session:
    id: str
    events: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, with its s
    seq: int = 0


def _now_rfc3339(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, UTC).isoformat()


class FakeQQ(FakePlatform):
    client_max_size = 50 * 1024 * 1024

    def __init__(self, *, token_ttl: int = 7200, heartbeat_ms: int = 30000) -> None:
        super().__init__()
        self.app_id = APP_ID
        self.secret = SECRET
        self.token_ttl = token_ttl
        self.heartbeat_ms = heartbeat_ms
        self.posted: list[Posted] = []
        self.refused: list[tuple[str, dict[str, Any], int]] = []  # (path, body, code)
        self.calls: list[str] = []
        self.tokens: dict[str, float] = {}  # token -> expiry (time.monotonic())
        self.identifies = 0
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.acks = True  # False: heartbeats go unanswered (a half-dead connection)
        self.refuse_identify: int | None = None  # a close code answering every Identify
        # the close code that ended the session when QQ's table says it cannot be resumed
        # (4006, 4007, 4900-4913): a Resume of it is closed with that code again, as QQ does
        # ("reset by resume", tencent-connect/bot-node-sdk#94)
        self.killed: int | None = None
        self.sockets_opened = 0
        self.rate_limited: dict[str, float] = {}  # target -> refused until (monotonic)
        self.messages: dict[str, tuple[str, float]] = {}  # msg id -> (scene, sent at)
        self.channels: dict[str, str] = {}  # channel id -> guild id
        self.seqs: set[tuple[str, int]] = set()
        # False: a message with a link is refused (304003 URL_NOT_ALLOWED: its domain is not
        # registered for the bot at q.qq.com)
        self.urls_registered = True
        self._uploads: dict[str, bytes | str] = {}
        self._voice_infos: set[str] = set()  # uploads of file_type 3
        # Voice messages sent (msg_type 7 with a file_type 3 upload): (scene, target, SILK).
        self.voices: list[tuple[str, str, bytes | str]] = []
        self.file_data_refused = False  # answer file_data uploads as QQ's reports say (500)
        self.fetched: list[tuple[str, int]] = []  # (url, status) of the uploads fetched
        self._files: dict[str, bytes] = {}
        self._session: _Session | None = None
        self._ids = itertools.count(1)

    # -- server --------------------------------------------------------------------------------
    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/app/getAppAccessToken", self._token)
        router.add_get("/websocket", self._gateway_socket)
        router.add_get("/files/{name}", self._file)
        router.add_route("*", "/{path:.*}", self._api)

    @property
    def token_url(self) -> str:
        return f"{self.base}/app/getAppAccessToken"

    def next_id(self, prefix: str = "ROBOT1.0_") -> str:
        return f"{prefix}{next(self._ids):08d}"

    def sent_to(self, scene: str, target: str) -> list[Posted]:
        return [p for p in self.posted if p.scene == scene and p.target == target]

    async def wait_sent(self, scene: str, target: str, count: int, timeout: float) -> list[Posted]:
        def enough() -> list[Posted] | None:
            found = self.sent_to(scene, target)
            return found if len(found) >= count else None

        return await self.wait_for(enough, timeout)

    # -- token and calls -----------------------------------------------------------------------
    async def _token(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("appId") != self.app_id or body.get("clientSecret") != self.secret:
            return web.json_response({"code": 100016, "message": "invalid appid or secret"})
        token = uuid.uuid4().hex
        self.tokens[token] = time.monotonic() + self.token_ttl
        return web.json_response({"access_token": token, "expires_in": str(self.token_ttl)})

    def revoke_tokens(self) -> None:
        self.tokens.clear()

    def _authorised(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        token = header.removeprefix("QQBot ") if header.startswith("QQBot ") else ""
        expires = self.tokens.get(token)
        return expires is not None and time.monotonic() < expires

    async def _api(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._call(request)
        finally:
            await self.notify()  # what waits for a call, a refusal or a message looks again

    async def _call(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        self.calls.append(f"{request.method} {path}")
        if not self._authorised(request):
            return _error(401, 11244, "token not exist or expire")
        parts = path.strip("/").split("/")
        if request.method == "GET" and path == "/users/@me":
            return web.json_response(
                {"id": BOT_ID, "username": "chatfn-test", "avatar": "", "union_openid": "u1"}
            )
        if request.method == "GET" and path == "/gateway":
            return web.json_response({"url": f"ws://127.0.0.1:{self.port}/websocket"})
        if request.method == "GET" and parts[0] == "guilds" and parts[-1] == "channels":
            guild = parts[1]
            found = [
                {"id": "9" + guild, "guild_id": guild, "name": "voice", "type": 2, "position": 0}
            ] + [
                {"id": c, "guild_id": guild, "name": f"text {c}", "type": 0, "position": 1}
                for c, g in self.channels.items()
                if g == guild
            ]
            return web.json_response(found)
        if request.method != "POST":
            return _error(404, 0, "not found")
        if parts[0] == "v2" and len(parts) == 4 and parts[1] in ("groups", "users"):
            scene = "group" if parts[1] == "groups" else "c2c"
            if parts[3] == "files":
                return await self._upload(await request.json())
            if parts[3] == "messages":
                return await self._post_v2(scene, parts[2], path, await request.json())
        if len(parts) == 3 and parts[0] in ("channels", "dms") and parts[2] == "messages":
            scene = "channel" if parts[0] == "channels" else "dm"
            return await self._post_guild(scene, parts[1], path, request)
        return _error(404, 0, "not found")

    async def _upload(self, body: dict[str, Any]) -> web.Response:
        file_type = body.get("file_type")
        if file_type not in (1, 3):  # 1 image, 3 voice (SILK); 2 video, 4 file: not here
            return _error(400, 12002, "RequestInvalid")
        if body.get("file_data"):
            if self.file_data_refused:  # "not yet supported" (the rich-media docs)
                return _error(500, 850027, "file_data is not supported")
            data: bytes | str = base64.b64decode(body["file_data"])
        elif body.get("url"):
            data = str(body["url"])
            if data.startswith("http://127.0.0.1:"):  # one the fake can reach: QQ fetches it
                fetched = await self._fetch(data)
                if fetched is None:
                    return _error(400, 850012, "file download failed")
                data = fetched
        else:
            return _error(400, 12002, "RequestInvalid")
        if file_type == 3 and not (isinstance(data, bytes) and _is_silk(data)):
            # QQ plays SILK only (rich-media docs: "语音仅支持 silk 格式")
            return _error(400, 850026, "voice must be silk (the fake's code)")
        info = base64.b64encode(uuid.uuid4().bytes).decode()
        self._uploads[info] = data
        if file_type == 3:
            self._voice_infos.add(info)
        return web.json_response({"file_uuid": uuid.uuid4().hex, "file_info": info, "ttl": 3600})

    async def _fetch(self, url: str) -> bytes | None:
        """What QQ's servers do with an upload's `url`: download it, now; None when that fails
        or what comes back is not a picture."""
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as r:
                body = await r.read()
                self.fetched.append((url, r.status))
                ok = r.status == 200 and r.content_type.startswith("image/")
                return body if ok else None

    def _limited(self, target: str) -> web.Response | None:
        until = self.rate_limited.get(target)
        if until is None or time.monotonic() >= until:
            self.rate_limited.pop(target, None)
            return None
        return _error(429, 22009, "msg limit exceed")

    def _passive(self, scene: str, body: dict[str, Any]) -> web.Response | None:
        """None when the message may go out: a registered link, a passive reply within its
        window or an allowed active message."""
        if not self.urls_registered and re.search(r"https?://|\.com\b", str(body.get("content"))):
            return _error(400, 304003, "URL_NOT_ALLOWED")
        return self._window(scene, body)

    def _window(self, scene: str, body: dict[str, Any]) -> web.Response | None:
        """None when the passive reply may go out (or the message is an allowed active one)."""
        msg_id = body.get("msg_id")
        if msg_id:
            seen = self.messages.get(str(msg_id))
            if seen is None:
                return _error(400, 304026, "MSG_ID")
            window = 3600 if scene == "c2c" else 300
            if time.time() - seen[1] > window:
                return _error(400, 304027, "MSG_EXPIRE")
            return None
        if body.get("event_id"):
            return None
        if scene in ("group", "c2c"):
            return _error(400, 304022, "PUSH_TIME")
        return None

    async def _post_v2(
        self, scene: str, target: str, path: str, body: dict[str, Any]
    ) -> web.Response:
        if (limited := self._limited(target)) is not None:
            return limited
        if (refused := self._passive(scene, body)) is not None:
            self.refused.append((path, body, _code(refused)))
            return refused
        if body.get("msg_id"):
            key = (str(body["msg_id"]), int(body.get("msg_seq") or 1))
            if key in self.seqs:
                self.refused.append((path, body, 40054005))
                return _error(400, 40054005, "消息被去重，请检查请求msgseq")
            if sum(1 for m, _ in self.seqs if m == key[0]) >= 5:
                # 5 passive replies to one message (send.md); QQ documents no code for the
                # sixth: the fake answers one of its own
                self.refused.append((path, body, 304999))
                return _error(400, 304999, "passive reply limit reached (the fake's code)")
            self.seqs.add(key)
        images: list[bytes | str] = []
        if body.get("msg_type") == 7:
            info = str((body.get("media") or {}).get("file_info") or "")
            if info not in self._uploads:
                return _error(400, 304083, "convert media info fail")
            if info in self._voice_infos:
                self.voices.append((scene, target, self._uploads[info]))
            else:
                images.append(self._uploads[info])
        elif body.get("msg_type") != 0 or not str(body.get("content") or "").strip():
            return _error(400, 50006, "CannotSendEmptyMessage")
        if scene == "group" and re.search(r"<@!?\w+>", str(body.get("content") or "")):
            # a mention in a plain-text group message is deprecated and shown as its raw
            # token; QQ renders group mentions only in Markdown (bot-docs#272): the fake
            # refuses it (its own code) so that a test sees it
            self.refused.append((path, body, 304998))
            return _error(400, 304998, "mention in a plain-text group message (the fake's code)")
        return await self._took(scene, target, body, images)

    async def _post_guild(
        self, scene: str, target: str, path: str, request: web.Request
    ) -> web.Response:
        images: list[bytes | str] = []
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            body: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
            upload = form.get("file_image")
            if upload is not None and not isinstance(upload, str):
                images.append(upload.file.read())
        else:
            body = await request.json()
        if body.get("image"):
            images.append(str(body["image"]))
        if (limited := self._limited(target)) is not None:
            return limited
        if (refused := self._passive(scene, body)) is not None:
            self.refused.append((path, body, _code(refused)))
            return refused
        if not str(body.get("content") or "").strip() and not images:
            return _error(400, 50006, "CannotSendEmptyMessage")
        return await self._took(scene, target, body, images)

    async def _took(
        self, scene: str, target: str, body: dict[str, Any], images: list[bytes | str]
    ) -> web.Response:
        posted = Posted(scene, target, body, self.next_id("BOTMSG_"), images)
        self.posted.append(posted)
        await self.notify()
        return web.json_response({"id": posted.id, "timestamp": int(time.time())})

    async def _file(self, request: web.Request) -> web.Response:
        data = self._files.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="image/png")

    def attachment(self, data: bytes) -> dict[str, Any]:
        name = f"{uuid.uuid4().hex}.png"
        self._files[name] = data
        return {
            "content_type": "image/png",
            "filename": name,
            "height": 1,
            "width": 1,
            "size": len(data),
            "url": f"{self.base}/files/{name}",
        }

    # -- the gateway ---------------------------------------------------------------------------
    async def _gateway_socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        self.sockets_opened += 1
        try:
            await ws.send_json({"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}})
            first = await ws.receive_json(timeout=10)
            token = str((first.get("d") or {}).get("token") or "").removeprefix("QQBot ")
            if token not in self.tokens:
                await ws.close(code=4004)
                return ws
            if first.get("op") == 2 and self.refuse_identify:
                await ws.close(code=self.refuse_identify)  # e.g. 4014: intents not allowed
                return ws
            if first.get("op") == 6 and self.killed:
                await ws.close(code=self.killed)
                return ws
            if first.get("op") == 2:
                self.killed = None
                self.identifies += 1
                self._session = _Session(uuid.uuid4().hex)
                await self._dispatch(
                    ws,
                    "READY",
                    {
                        "version": 1,
                        "session_id": self._session.id,
                        "user": {"id": BOT_ID, "username": "chatfn-test", "bot": True},
                        "shard": [0, 1],
                    },
                )
            elif first.get("op") == 6:
                d = first.get("d") or {}
                self.resumes.append(d)
                session = self._session
                if session is None or d.get("session_id") != session.id:
                    await ws.send_json({"op": 9, "d": False})
                    return ws
                for event in session.events:
                    if event["s"] > int(d.get("seq") or 0):
                        await ws.send_json(event)
                await self._dispatch(ws, "RESUMED", "")
            else:
                await ws.close(code=4001)
                return ws
            await self.notify()
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                if payload.get("op") == 1:
                    self.heartbeats += 1
                    if self.acks:
                        await ws.send_json({"op": 11})
                    await self.notify()
        finally:
            self._sockets.remove(ws)
            await self.notify()
        return ws

    async def _dispatch(self, ws: web.WebSocketResponse | None, kind: str, data: Any) -> None:
        session = self._session
        assert session is not None
        session.seq += 1
        event = {
            "op": 0,
            "s": session.seq,
            "t": kind,
            "id": f"{kind}:{uuid.uuid4().hex}",
            "d": data,
        }
        if kind not in ("READY", "RESUMED"):
            session.events.append(event)
        if ws is not None and not ws.closed:
            await ws.send_json(event)

    @property
    def connected(self) -> bool:
        return any(not ws.closed for ws in self._sockets)

    async def wait_connected(self, timeout: float = 15.0) -> None:
        await self.wait_for(lambda: self.connected and self._session is not None, timeout)

    async def push(self, kind: str, data: dict[str, Any]) -> None:
        """An event through the gateway (kept for a Resume if no socket is open now)."""
        ws = next((w for w in self._sockets if not w.closed), None)
        await self._dispatch(ws, kind, data)

    async def drop(self) -> None:
        """The connection breaks (as a network failure would, not a goodbye)."""
        for ws in list(self._sockets):
            await ws.close(code=4000)  # resumable

    async def close_with(self, code: int) -> None:
        """QQ closes the connection with `code`; per its table (bot-docs dev-prepare/error-trace/
        websocket.md) 4006, 4007 and 4900-4913 end the session: it cannot be resumed."""
        if code in (4006, 4007) or 4900 <= code <= 4913:
            self.killed = code
        for ws in list(self._sockets):
            await ws.close(code=code)

    async def invalidate_session(self) -> None:
        for ws in list(self._sockets):
            await ws.send_json({"op": 9, "d": False})
        self._session = None

    async def ask_reconnect(self) -> None:
        for ws in list(self._sockets):
            await ws.send_json({"op": 7})

    # -- webhooks ------------------------------------------------------------------------------
    def signed(self, body: bytes, at: int | None = None) -> dict[str, str]:
        stamp = str(at if at is not None else int(time.time()))
        return {
            "X-Signature-Ed25519": qq_sign(self.secret, stamp.encode() + body),
            "X-Signature-Timestamp": stamp,
            "X-Bot-Appid": self.app_id,
            "User-Agent": "QQBot-Callback",
            "Content-Type": "application/json",
        }

    def verify(self, message: bytes, signature: str) -> bool:
        """Whether `signature` (hex) is the bot's own signature of `message`, as QQ checks the
        answer to op 13."""
        try:
            qq_key(self.secret).public_key().verify(bytes.fromhex(signature), message)
        except (InvalidSignature, ValueError):
            return False
        return True

    def callback(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"op": 0, "id": f"{kind}:{uuid.uuid4().hex}", "d": data, "t": kind}

    # -- events users cause ----------------------------------------------------------------------
    def message_event(
        self,
        kind: str,
        *,
        target: str,
        sender: str,
        content: str,
        attachments: list[dict[str, Any]] | None = None,
        roles: list[str] | None = None,
        at: float | None = None,
    ) -> dict[str, Any]:
        """The `d` of a message event of `kind` (send-receive/event.md's examples)."""
        msg_id = self.next_id()
        scene = {
            "GROUP_AT_MESSAGE_CREATE": "group",
            "C2C_MESSAGE_CREATE": "c2c",
            "DIRECT_MESSAGE_CREATE": "dm",
        }.get(kind, "channel")
        self.messages[msg_id] = (scene, time.time() if at is None else at)
        d: dict[str, Any] = {"id": msg_id, "content": content, "timestamp": _now_rfc3339(at)}
        if attachments:
            d["attachments"] = attachments
        if kind == "GROUP_AT_MESSAGE_CREATE":
            d.update(author={"member_openid": sender}, group_openid=target)
        elif kind == "C2C_MESSAGE_CREATE":
            d.update(author={"user_openid": sender})
        else:
            guild = self.channels.setdefault(target, "G" + target) if scene == "channel" else target
            d.update(
                author={"id": sender, "username": f"Person {sender}", "bot": False, "avatar": ""},
                channel_id=target if scene == "channel" else "D" + target,
                guild_id=guild,
                member={"joined_at": "2021-04-12T16:34:42+08:00", "roles": roles or ["1"]},
                seq=next(self._ids),
            )
        return d


def _code(response: web.Response) -> int:
    return int(json.loads(response.text or "{}").get("code") or response.status)


def _error(status: int, code: int, message: str) -> web.Response:
    return web.json_response(
        {"code": code, "message": message}, status=status, headers={"X-Tps-trace-ID": "trace"}
    )


__all__ = ["APP_ID", "BOT_ID", "SECRET", "FakeQQ", "Posted", "qq_sign"]


def _is_silk(data: bytes) -> bool:
    """A SILK v3 stream, as QQ's clients write it (Tencent's variant starts with 0x02)."""
    return data.startswith((b"#!SILK_V3", b"\x02#!SILK_V3"))
