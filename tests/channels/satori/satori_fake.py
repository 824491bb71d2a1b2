"""A local Satori server (https://satori.chat/en-US/protocol/events.html, .../api.html,
.../elements.html), on the fake-platform base (tests/channels/fake_platform.py), speaking what
the channel uses and refusing what a Satori server (Koishi's @satorijs/server) refuses.

- Two logins (platform `alpha`, bot `900`; platform `beta`, bot `901`): one server bridging
  two platforms.
- HTTP: `Authorization: Bearer <token>` or 401. POST /v1/meta: the logins. POST
  /v1/message.create: `Satori-Platform` and `Satori-User-ID` must name a login (the current
  spec's header names; else 403), the body JSON with string `channel_id` and `content` (else
  400), the channel known to that login (else 404), the content well-formed element text
  (escaped `&`, `<`, `>`; else 400) of at most `max_length` characters (else 400: the bridged
  platform's limit). Answers `Message[]` with the new ids. `rate_limited[channel] = s`: 429
  with `Retry-After` for s seconds. GET /v1/proxy/{url}: a file a user sent (token required).
- WebSocket /v1/events: the first signal must be IDENTIFY (op 3) with the token (else the
  socket is closed with 3000 Unauthorized, as @satorijs/server does); READY (op 4) with the
  logins; PING (op 1) answered by PONG (op 2); EVENT (op 0) each with its `sn`. IDENTIFY with
  an `sn` gets the events after it first (session recovery). Revoking the token closes the
  sockets.
"""

from __future__ import annotations

import itertools
import math
import time
import xml.etree.ElementTree as ET
from typing import Any

from aiohttp import WSMsgType, web

from tests.channels.fake_platform import FakePlatform

EVENT, PING, PONG, IDENTIFY, READY = 0, 1, 2, 3, 4
TEXT, DIRECT = 0, 1


def well_formed(content: str) -> ET.Element | None:
    """The content as elements, None when it is not well-formed (an unescaped `<` or `&`)."""
    try:
        return ET.fromstring(f"<message>{content}</message>")
    except ET.ParseError:
        return None


class FakeSatori(FakePlatform):
    def __init__(self, max_length: int = 2000) -> None:
        super().__init__()
        self.token = "satori-token-1"
        self.max_length = max_length
        self.logins: list[dict[str, Any]] = [
            {
                "sn": 1,
                "platform": "alpha",
                "user": {"id": "900", "name": "chatbot", "is_bot": True},
                "status": 1,
                "adapter": "alpha",
                "features": ["message.create"],
            },
            {
                "sn": 2,
                "platform": "beta",
                "user": {"id": "901", "name": "chatbot", "is_bot": True},
                "status": 1,
                "adapter": "beta",
                "features": ["message.create"],
            },
        ]
        self.channels: dict[tuple[str, str], int] = {}  # (platform, channel id) -> type
        self.sent: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.files: dict[str, bytes] = {}
        self.events: list[dict[str, Any]] = []
        self.rate_limited: dict[str, float] = {}
        self._limited_until: dict[str, float] = {}
        self._sockets_open: list[web.WebSocketResponse] = []
        self.pongs = 0  # PONGs sent (PINGs answered)
        self.identified: list[dict[str, Any]] = []  # every IDENTIFY body received
        self._ids = itertools.count(1)

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/events", self._websocket)
        router.add_post("/v1/meta", self._meta)
        router.add_post("/v1/message.create", self._create)
        router.add_get("/v1/proxy/{path:.*}", self._proxy)

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        if request.path == "/v1/events":
            return None  # authenticated by IDENTIFY
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.Response(status=401, text="Unauthorized")
        return None

    def login(self, platform: str) -> dict[str, Any]:
        return next(x for x in self.logins if x["platform"] == platform)

    def self_id(self, platform: str) -> str:
        return str(self.login(platform)["user"]["id"])

    # -- users' side ---------------------------------------------------------------------------
    def channel(self, platform: str, channel: str, kind: int) -> None:
        self.channels[(platform, channel)] = kind

    def file(self, data: bytes) -> str:
        name = f"f{next(self._ids)}.png"
        self.files[name] = data
        return f"{self.base}/v1/proxy/upload/{name}"

    async def say(
        self,
        platform: str,
        channel: str,
        user: str,
        content: str,
        *,
        name: str = "",
        kind: int = TEXT,
    ) -> str:
        self.channel(platform, channel, kind)
        ident = f"m{next(self._ids)}"
        body: dict[str, Any] = {
            "type": "message-created",
            "timestamp": int(time.time() * 1000),
            "login": {
                "sn": self.login(platform)["sn"],
                "platform": platform,
                "user": {"id": self.self_id(platform)},
            },
            "channel": {"id": channel, "type": kind, "name": "" if kind == DIRECT else "room"},
            "user": {"id": user, "name": name or f"user{user}"},
            "message": {"id": ident, "content": content, "created_at": int(time.time() * 1000)},
        }
        if kind != DIRECT:
            body["guild"] = {"id": channel, "name": "room"}
            body["member"] = {"nick": name or f"User {user}"}
        await self.emit(body)
        return ident

    async def member_added(self, platform: str, guild: str, user: str, name: str) -> None:
        await self.emit(
            {
                "type": "guild-member-added",
                "timestamp": int(time.time() * 1000),
                "login": {
                    "sn": self.login(platform)["sn"],
                    "platform": platform,
                    "user": {"id": self.self_id(platform)},
                },
                "guild": {"id": guild},
                "user": {"id": user, "name": name},
                "member": {"nick": name},
            }
        )

    async def emit(self, body: dict[str, Any]) -> None:
        body["sn"] = len(self.events) + 1
        self.events.append(body)
        for ws in list(self._sockets_open):
            if not ws.closed:
                await ws.send_json({"op": EVENT, "body": body})

    async def drop_sockets(self) -> None:
        for ws in list(self._sockets_open):
            await ws.close()
        self._sockets_open.clear()

    async def revoke(self) -> None:
        self.token = "revoked"
        await self.drop_sockets()

    def connected(self) -> int:
        return sum(1 for ws in self._sockets_open if not ws.closed)

    # -- the event stream ----------------------------------------------------------------------
    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        first = await ws.receive(timeout=10)
        try:
            signal = first.json() if first.type == WSMsgType.TEXT else {}
        except ValueError:
            signal = {}
        body = signal.get("body") if isinstance(signal, dict) else None
        if (
            signal.get("op") != IDENTIFY
            or not isinstance(body, dict)
            or body.get("token") != self.token
        ):
            await ws.close(code=3000, message=b"Unauthorized")
            return ws
        self.identified.append(body)
        await ws.send_json(
            {"op": READY, "body": {"logins": self.logins, "proxy_urls": ["upload://"]}}
        )
        sn = body.get("sn")
        if isinstance(sn, int):
            for event in self.events[sn:]:
                await ws.send_json({"op": EVENT, "body": event})
        self._sockets_open.append(ws)
        await self.notify()
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                continue
            if frame.json().get("op") == PING:
                await ws.send_json({"op": PONG})
                self.pongs += 1
        return ws

    # -- the HTTP API --------------------------------------------------------------------------
    async def _meta(self, request: web.Request) -> web.Response:
        return web.json_response({"logins": self.logins, "proxy_urls": ["upload://"]})

    async def _proxy(self, request: web.Request) -> web.Response:
        name = request.match_info["path"].rsplit("/", 1)[-1]
        if name not in self.files:
            return web.Response(status=404)
        return web.Response(body=self.files[name], content_type="image/png")

    async def _create(self, request: web.Request) -> web.Response:
        platform = request.headers.get("Satori-Platform", "")
        self_id = request.headers.get("Satori-User-ID", "")
        if not any(x["platform"] == platform and x["user"]["id"] == self_id for x in self.logins):
            return web.Response(status=403, text="login not found")
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="bad request")
        channel, content = body.get("channel_id"), body.get("content")
        if not isinstance(channel, str) or not isinstance(content, str):
            return web.Response(status=400, text="channel_id and content are required")
        if (platform, channel) not in self.channels:
            return web.Response(status=404, text="channel not found")
        now = time.monotonic()
        if channel in self.rate_limited:
            self._limited_until[channel] = now + self.rate_limited.pop(channel)
        if now < self._limited_until.get(channel, 0.0):
            wait = str(math.ceil(self._limited_until[channel] - now))
            return web.Response(status=429, text="Too Many Requests", headers={"Retry-After": wait})
        tree = well_formed(content)
        if tree is None:
            return web.Response(status=400, text="malformed message elements")
        # the limit is on what a member reads: a media element's src (a data: URL) is not text
        if len("".join(tree.itertext())) > self.max_length or not content.strip():
            return web.Response(status=400, text="message too long or empty")
        ident = f"s{next(self._ids)}"
        self.sent.setdefault((platform, channel), []).append({"id": ident, "content": content})
        await self.notify()
        return web.json_response([{"id": ident, "content": content}])

    async def wait_sent(
        self, platform: str, channel: str, count: int, timeout: float = 15.0
    ) -> list[Any]:
        key = (platform, channel)
        return await self.wait_for(
            lambda: self.sent[key] if len(self.sent.get(key, [])) >= count else None, timeout
        )
