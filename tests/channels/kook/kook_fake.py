"""A local KOOK for the KOOK channel's tests: the HTTP API calls the channel makes and the
WebSocket gateway, with the shapes of KOOK's documentation (https://developer.kookapp.cn/doc/,
whose source is github.com/kaiheila/api-docs, docs/zh-cn/):

- every call needs `Authorization: Bot <token>`: else HTTP 401, `{"code": 401}`
  (reference.md, "鉴权"); answers are `{"code", "message", "data"}`.
- `GET /api/v3/user/me` (http/user.md), `GET /api/v3/gateway/index?compress=` (http/gateway.md:
  `{"url": "wss://..."}`, the URL carrying the token), `GET /api/v3/guild/view`,
  `GET /api/v3/guild-role/list` (http/guild-role.md: `items` with `role_id` and `permissions`,
  bit 0 the administrator), `GET /api/v3/user/view`.
- `POST /api/v3/message/create` and `/api/v3/direct-message/create` (http/message.md,
  http/direct-message.md: `type`, `target_id`, `content`, `quote`, `nonce`, `temp_target_id`
  -> `{"msg_id", "msg_timestamp", "nonce"}`). Refused as KOOK refuses: a body that is not a
  JSON object, a missing or unknown `type`, no `target_id`, an empty `content`, content over
  8000 characters (message.md: "请不要超过 8000 字符"), a `quote` of a message that does not
  exist, an image message (`type: 2`) whose content is not an uploaded asset's URL (KOOK
  documents no codes for these: the fake answers code 40000 with its own message).
- `POST /api/v3/asset/create` (http/asset.md: multipart `file` -> `{"url"}`); the assets are
  served back at `/assets/{name}`.
- `GET /api/v3/message/list` / `/api/v3/direct-message/list?target_id=`: the chat's messages
  (`items`: `id`, `type`, `content`, `author_id`, `create_at` in ms), for the channel's
  find_sent.
- rate limits (rate-limit.md): every answer carries `X-Rate-Limit-Limit/-Remaining/-Reset/
  -Bucket`; a rate-limited chat answers HTTP 429 with `X-Rate-Limit-Reset` (seconds left).
- the gateway (websocket.md): the URL's `token` must be the bot's, else HELLO `{"code": 40101}`;
  with `compress=1` every frame to the client is zlib data in a binary frame; HELLO `{"s": 1,
  "d": {"code": 0, "session_id"}}`; events `{"s": 0, "d", "sn"}`; PING `{"s": 2, "sn"}` ->
  PONG `{"s": 3}`; `resume=1&sn=&session_id=` replays the events after `sn`, then RESUME ACK
  `{"s": 6}`; a ping whose `sn` is behind the newest event gets every event after it again
  (websocket.md, 信令[0] 注意事项 4); a resume of an unknown session or `sn` -> RECONNECT
  `{"s": 5, "d": {"code": 40106|40107|40108}}`; `reconnect()` sends RECONNECT to the client.
"""

from __future__ import annotations

import itertools
import json
import math
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.channels.fake_platform import FakePlatform

TOKEN = "1/MTAwMDA=/fakeKookBotToken=="
BOT_ID = "1900000001"
ADMIN_ROLE = 702
MEMBER_ROLE = 703
MAX_CONTENT = 8000
TYPES = {1, 2, 8, 9, 10}  # text, image, audio, KMarkdown, card


@dataclass
class Posted:
    """One message the bot sent, as the fake took it."""

    kind: str  # "group" (a channel) or "private" (a DM)
    target: str
    body: dict[str, Any]
    id: str
    at: float  # ms
    image: bytes | None = None

    @property
    def content(self) -> str:
        return str(self.body.get("content") or "")

    @property
    def type(self) -> int:
        return int(self.body.get("type") or 0)


@dataclass
class _Session:
    id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    sn: int = 0


def _answer(
    data: Any = None,
    status: int = 200,
    code: int = 0,
    message: str = "操作成功",
    headers: dict[str, str] | None = None,
) -> web.Response:
    return web.json_response(
        {"code": code, "message": message, "data": {} if data is None else data},
        status=status,
        headers=headers,
    )


def _refuse(message: str, code: int = 40000, status: int = 200) -> web.Response:
    return _answer(None, status=status, code=code, message=message)


class FakeKook(FakePlatform):
    """KOOK on the fake-platform base (tests/channels/fake_platform.py): its server, `wait_for`
    and `notify`; `drop()` here is KOOK's own (the gateway's sockets cut, the session kept)."""

    client_max_size = 50 * 1024 * 1024

    def __init__(self) -> None:
        super().__init__()
        self.token = TOKEN
        self.posted: list[Posted] = []
        self.refused: list[tuple[str, str]] = []  # (path, why)
        self.calls: list[str] = []
        self.rate_limited: dict[str, float] = {}  # target -> refused until (monotonic)
        self.messages: dict[str, str] = {}  # msg id -> target (users' and the bot's)
        self.guild_owner: dict[str, str] = {}  # guild -> owner user id
        self.user_names: dict[str, str] = {}
        self.pongs = True  # False: pings go unanswered (a half-dead connection)
        self.hellos = True  # False: no HELLO is sent (the client must give up after 6 s)
        self.hello_code: int | None = None  # the next HELLO refuses with this code
        self.on_sent: Callable[[Posted], None] | None = None  # told of each message taken
        self.compressed_frames = 0
        self.pings: list[int] = []
        self.connects: list[dict[str, str]] = []  # the query of every gateway connection
        self.resumed = 0
        self.resent = 0  # events sent again after a ping whose sn was behind
        self._assets: dict[str, bytes] = {}
        self._session: _Session | None = None
        self._compress: dict[int, bool] = {}  # id(socket) -> whether its frames are zlib
        self._ids = itertools.count(1)

    # -- server --------------------------------------------------------------------------------
    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/gateway", self._gateway)
        router.add_get("/assets/{name}", self._asset)
        router.add_route("*", "/api/v3/{path:.*}", self._api)

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        """Every API call needs `Authorization: Bot <token>` (reference.md, 鉴权)."""
        if not request.path.startswith("/api/"):
            return None
        if request.headers.get("Authorization") != f"Bot {self.token}":
            self.calls.append(f"{request.method} {request.path.removeprefix('/api/v3/')}")
            await self.notify()
            return _refuse("你的用户凭证不正确", code=401, status=401)
        return None

    @property
    def api_base(self) -> str:
        return f"{self.base}/api"

    def sent_to(self, kind: str, target: str) -> list[Posted]:
        return [p for p in self.posted if p.kind == kind and p.target == target]

    def next_id(self) -> str:
        return f"{uuid.UUID(int=next(self._ids))}"

    # -- HTTP ----------------------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._call(request)
        finally:
            await self.notify()

    async def _call(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        self.calls.append(f"{request.method} {path}")
        q = request.query
        gets = {
            "user/me": lambda: _answer(
                {
                    "id": BOT_ID,
                    "username": "chatfn-test",
                    "identify_num": "0001",
                    "bot": True,
                    "online": True,
                }
            ),
            "gateway/index": lambda: _answer({"url": self._gateway_url(q.get("compress", "1"))}),
            "guild/view": lambda: _answer(self._guild_view(q.get("guild_id", ""))),
            "guild-role/list": lambda: _answer(self._roles()),
            "user/view": lambda: _answer(self._user(q.get("user_id", ""))),
            "message/list": lambda: _answer({"items": self._history("group", q["target_id"])}),
            "direct-message/list": lambda: _answer(
                {"items": self._history("private", q["target_id"])}
            ),
        }
        if request.method == "GET" and path in gets:
            return gets[path]()
        if request.method == "POST" and path == "asset/create":
            return await self._upload(request)
        if request.method == "POST" and path in ("message/create", "direct-message/create"):
            kind = "group" if path == "message/create" else "private"
            return await self._create(kind, path, request)
        return _refuse("not found", code=404, status=404)

    def _gateway_url(self, compress: str) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway?compress={compress}&token={self.token}"

    @staticmethod
    def guild_of(channel: str) -> str:
        return "9" + channel

    def _guild_view(self, guild: str) -> dict[str, Any]:
        channel = guild[1:]
        return {
            "id": guild,
            "name": f"guild {guild}",
            "user_id": self.guild_owner.get(guild, "1"),
            "default_channel_id": channel,
            "welcome_channel_id": "0",
        }

    def _roles(self) -> dict[str, Any]:
        items = [
            {"role_id": 0, "name": "@全体成员", "permissions": 148691464},
            {"role_id": ADMIN_ROLE, "name": "管理员", "permissions": 1 | 2048},
            {"role_id": MEMBER_ROLE, "name": "成员", "permissions": 2048 | 4096},
        ]
        meta = {"page": 1, "page_total": 1, "page_size": 100, "total": len(items)}
        return {"items": items, "meta": meta, "sort": {}}

    def _user(self, user: str) -> dict[str, Any]:
        name = self.user_names.get(user, f"user{user}")
        return {"id": user, "username": name, "nickname": name, "bot": False}

    def _history(self, kind: str, target: str) -> list[dict[str, Any]]:
        return [
            {
                "id": p.id,
                "type": p.type,
                "content": p.content,
                "author_id": BOT_ID,
                "create_at": int(p.at),
            }
            for p in reversed(self.sent_to(kind, target))
        ][:50]

    def _limit_headers(self, target: str, left: float = 0.0) -> dict[str, str]:
        return {
            "X-Rate-Limit-Limit": "5",
            "X-Rate-Limit-Remaining": "0" if left > 0 else "4",
            "X-Rate-Limit-Reset": str(math.ceil(left)) if left > 0 else "1",
            "X-Rate-Limit-Bucket": "message/create",
        }

    async def _upload(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            self.refused.append(("asset/create", "not multipart"))
            return _refuse("file 必须上传")
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            self.refused.append(("asset/create", "no file"))
            return _refuse("file 必须上传")
        data = upload.file.read()
        voice = data.startswith((b"OggS", b"ID3"))  # an audio file (OGG, MP3)
        if not voice and not data.startswith((b"\x89PNG", b"\xff\xd8\xff", b"GIF8")):
            self.refused.append(("asset/create", "not an image or audio"))
            return _refuse("文件类型不支持")
        name = f"{uuid.uuid4().hex}.{'ogg' if voice else 'png'}"
        self._assets[name] = data
        return _answer({"url": f"{self.base}/assets/{name}"})

    async def _asset(self, request: web.Request) -> web.Response:
        data = self._assets.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        kind = "audio/ogg" if name_of_audio(request.match_info["name"]) else "image/png"
        return web.Response(body=data, content_type=kind)

    def asset(self, data: bytes, suffix: str = "png") -> str:
        """A user's image (or, `suffix` ogg, voice message), as KOOK's asset URL."""
        name = f"{uuid.uuid4().hex}.{suffix}"
        self._assets[name] = data
        return f"{self.base}/assets/{name}"

    def _invalid(self, body: Any) -> str | None:
        """Why KOOK would refuse this message body (None: it takes it)."""
        if not isinstance(body, dict):
            return "not a JSON object"
        if body.get("type", 1) not in TYPES:
            return f"type {body.get('type')!r}"
        if not isinstance(body.get("target_id"), str) or not body["target_id"]:
            return "no target_id"
        content = body.get("content")
        if not isinstance(content, str) or not content.strip():
            return "empty content"
        if len(content) > MAX_CONTENT:
            return f"content of {len(content)} characters"
        quote = body.get("quote")
        if quote and quote not in self.messages:
            return f"quote {quote} does not exist"
        if body.get("type") == 2 and content.rpartition("/")[2] not in self._assets:
            return "image URL is not an uploaded asset"
        if body.get("type") == 8 and not name_of_audio(content.rpartition("/")[2]):
            return "audio URL is not an uploaded audio asset"
        return None

    async def _create(self, kind: str, path: str, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        target = str(body.get("target_id") or "") if isinstance(body, dict) else ""
        left = self.rate_limited.get(target, 0.0) - time.monotonic()
        if left > 0:
            self.refused.append((path, "429"))
            return web.json_response(
                {"code": 429, "message": "请求过于频繁", "data": {}},
                status=429,
                headers=self._limit_headers(target, left),
            )
        self.rate_limited.pop(target, None)
        why = self._invalid(body)
        if why is not None:
            self.refused.append((path, why))
            return _refuse(f"参数错误: {why}")
        assert isinstance(body, dict)
        image = None
        if body.get("type") in (2, 8):  # the uploaded image, or the audio (type 8)
            image = self._assets[str(body["content"]).rpartition("/")[2]]
        posted = Posted(kind, target, body, self.next_id(), time.time() * 1000, image)
        self.posted.append(posted)
        self.messages[posted.id] = target
        if self.on_sent is not None:
            self.on_sent(posted)
        if kind == "group":  # KOOK sends a bot its own channel messages too
            await self.push(
                self.event(
                    posted.id, "GROUP", target, BOT_ID, posted.content, kind=posted.type, bot=True
                )
            )
        return web.json_response(
            {
                "code": 0,
                "message": "操作成功",
                "data": {
                    "msg_id": posted.id,
                    "msg_timestamp": int(posted.at),
                    "nonce": body.get("nonce") or "",
                },
            },
            headers=self._limit_headers(target),
        )

    # -- the gateway ---------------------------------------------------------------------------
    async def _send(
        self, ws: web.WebSocketResponse, payload: dict[str, Any], compress: bool
    ) -> None:
        if ws.closed:
            return
        raw = json.dumps(payload, ensure_ascii=False).encode()
        if compress:
            self.compressed_frames += 1
            await ws.send_bytes(zlib.compress(raw))
        else:
            await ws.send_str(raw.decode())

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        q = dict(request.query)
        self.connects.append(q)
        compress = q.get("compress") == "1"
        self._compress[id(ws)] = compress
        self._sockets.append(ws)
        try:
            if await self._open(ws, q, compress):
                await self._listen(ws, compress)
        finally:
            self._sockets.remove(ws)
            self._compress.pop(id(ws), None)
            await self.notify()
        return ws

    async def _open(self, ws: web.WebSocketResponse, q: dict[str, str], compress: bool) -> bool:
        """HELLO (or its refusal), a resume's replay and RESUME ACK; False: closed."""
        if not self.hellos:
            return True
        if self.hello_code is not None:  # once: e.g. 40103, the token expired
            code, self.hello_code = self.hello_code, None
            await self._send(ws, {"s": 1, "d": {"code": code}}, compress)
            await ws.close()
            return False
        if q.get("token") != self.token:
            await self._send(ws, {"s": 1, "d": {"code": 40101}}, compress)
            await ws.close()
            return False
        if q.get("resume") == "1":
            session, asked = self._session, q.get("session_id") or q.get("sessionId")
            if session is None or asked != session.id:
                await self._send(
                    ws, {"s": 5, "d": {"code": 40106, "err": "resume failed"}}, compress
                )
                await ws.close()
                return False
            sn = int(q.get("sn") or 0)
            if sn > session.sn:
                await self._send(ws, {"s": 5, "d": {"code": 40108, "err": "invalid sn"}}, compress)
                await ws.close()
                return False
            self.resumed += 1
            await self._send(ws, {"s": 1, "d": {"code": 0, "session_id": session.id}}, compress)
            for event in session.events:
                if event["sn"] > sn:
                    await self._send(ws, event, compress)
            await self._send(ws, {"s": 6, "d": {"session_id": session.id}}, compress)
        else:
            self._session = _Session(str(uuid.uuid4()))
            await self._send(
                ws, {"s": 1, "d": {"code": 0, "session_id": self._session.id}}, compress
            )
        await self.notify()
        return True

    async def _listen(self, ws: web.WebSocketResponse, compress: bool) -> None:
        async for frame in ws:
            try:
                payload = json.loads(frame.data)
            except (ValueError, TypeError):
                await ws.close(code=1003)  # the client's frames are plain JSON text
                return
            if isinstance(payload, dict) and payload.get("s") == 2:
                sn = int(payload.get("sn") or 0)
                self.pings.append(sn)
                if self.pongs:
                    await self._send(ws, {"s": 3}, compress)
                # websocket.md, 信令[0] 注意事项 4: a ping's sn behind the newest event: every
                # event after it is sent again
                session = self._session
                for event in session.events if session is not None else []:
                    if event["sn"] > sn:
                        self.resent += 1
                        await self._send(ws, event, compress)
                await self.notify()

    @property
    def connected(self) -> bool:
        return any(not ws.closed for ws in self._sockets)

    async def push(self, d: dict[str, Any]) -> None:
        """An event: to the open socket, and kept for a resume."""
        session = self._session
        assert session is not None, "no session: nothing connected yet"
        session.sn += 1
        event = {"s": 0, "d": d, "sn": session.sn}
        session.events.append(event)
        for ws in list(self._sockets):
            await self._send(ws, event, self._compress.get(id(ws), True))

    async def drop(self) -> None:
        """The gateway connection breaks (the session stays: the client resumes); the HTTP
        server stays up (the base's drop restarts it)."""
        for ws in list(self._sockets):
            await ws.close(code=4000)

    async def reconnect(self, code: int = 40107) -> None:
        """RECONNECT: the session is gone; the client must start from the gateway."""
        for ws in list(self._sockets):
            payload = {"s": 5, "d": {"code": code, "err": "session expired"}}
            await self._send(ws, payload, self._compress.get(id(ws), True))
        self._session = None

    # -- events users cause ----------------------------------------------------------------------
    def event(
        self,
        msg_id: str,
        channel_type: str,
        target: str,
        author: str,
        content: str,
        *,
        kind: int = 9,
        mention: list[str] | None = None,
        roles: list[int] | None = None,
        bot: bool = False,
        quote: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The `d` of a message event (event/message.md's examples)."""
        extra: dict[str, Any] = {
            "type": kind,
            "author": {
                "id": author,
                "username": self.user_names.get(author, f"user{author}"),
                "nickname": self.user_names.get(author, f"user{author}"),
                "identify_num": "1234",
                "roles": roles or [],
                "bot": bot,
                "avatar": "",
                "online": True,
            },
            "mention": mention or [],
            "mention_all": False,
            "mention_roles": [],
            "mention_here": False,
            "kmarkdown": {
                "raw_content": content,
                "mention_part": [
                    {"id": m, "username": self.user_names.get(m, f"user{m}")} for m in mention or []
                ],
                "mention_role_part": [],
            },
        }
        if channel_type == "GROUP":
            extra.update(guild_id=self.guild_of(target), channel_name=f"channel {target}")
        else:
            extra["code"] = uuid.uuid4().hex
        if quote is not None:
            extra["quote"] = quote
        return {
            "channel_type": channel_type,
            "type": kind,
            "target_id": target,
            "author_id": author,
            "content": content,
            "msg_id": msg_id,
            "msg_timestamp": int(time.time() * 1000),
            "nonce": "",
            "extra": extra,
        }

    async def say(
        self,
        kind: str,
        target: str,
        sender: str,
        content: str,
        *,
        msg_type: int = 9,
        mention: bool = False,
        roles: list[int] | None = None,
    ) -> str:
        """A user's message: to the channel `target` (`kind` "group") or to the bot
        (`kind` "private", `target` the user); its msg_id."""
        msg_id = self.next_id()
        self.messages[msg_id] = target
        mentions = [BOT_ID] if mention else []
        if mention:
            content = f"(met){BOT_ID}(met) {content}"
        channel_type = "GROUP" if kind == "group" else "PERSON"
        to = target if kind == "group" else BOT_ID
        d = self.event(
            msg_id, channel_type, to, sender, content, kind=msg_type, mention=mentions, roles=roles
        )
        await self.push(d)
        return msg_id

    async def joined(self, guild: str, user: str) -> None:
        d = {
            "channel_type": "GROUP",
            "type": 255,
            "target_id": guild,
            "author_id": "1",
            "content": "[系统消息]",
            "extra": {
                "type": "joined_guild",
                "body": {"user_id": user, "joined_at": int(time.time() * 1000)},
            },
            "msg_id": self.next_id(),
            "msg_timestamp": int(time.time() * 1000),
            "nonce": "",
        }
        await self.push(d)


__all__ = ["ADMIN_ROLE", "BOT_ID", "MEMBER_ROLE", "TOKEN", "FakeKook", "Posted"]


def name_of_audio(name: str) -> bool:
    return name.endswith(".ogg")
