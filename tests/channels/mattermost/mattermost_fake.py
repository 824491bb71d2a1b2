"""A local Mattermost server (REST API v4 and its WebSocket, https://api.mattermost.com/ and
https://developers.mattermost.com/api-documentation/#/#websocket), on the fake-platform base
(tests/channels/fake_platform.py), speaking what the channel uses and refusing what
Mattermost refuses.

- REST: `Authorization: Bearer <token>` or 401 (`api.context.session_expired.app_error`).
  GET /users/me, /users/{id}, /teams/name/{name} (404 for another team), /files/{id};
  POST /files (multipart `channel_id` + `files`); POST /posts: the channel must exist, the
  message at most 16383 characters (400 `model.post.is_valid.msg.app_error`), a `root_id` a
  root post of the same channel (400 otherwise), `file_ids` uploaded to that channel; a
  `pending_post_id` seen in the last 30 s answers the post made then (no second post).
  GET /channels/{id}/members/{user}: `scheme_admin` for the pairs in `admins`.
  `rate_limited[channel] = s`: 429 with `X-Ratelimit-Reset` for s seconds.
- WebSocket /api/v4/websocket: the first frame must be the `authentication_challenge` with a
  valid token (else a FAIL reply, nothing more); then `hello` with the connection's id, and
  events (`posted`, `user_added`) each with its sequence number. A connection opened again
  with `connection_id` and `sequence_number` gets the events it missed (reliable WebSocket).
  Revoking the token closes the sockets.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.channels.fake_platform import FakePlatform

MAX_RUNES = 16383


def mm_id(prefix: str, native: str) -> str:
    """A 26-character Mattermost id for a test's native id."""
    return prefix + native.rjust(25, "0")


@dataclass
class _Connection:
    events: list[dict[str, Any]] = field(default_factory=list)  # every event, by seq
    ws: web.WebSocketResponse | None = None


def _error(status: int, ident: str, message: str, **headers: str) -> web.Response:
    return web.json_response(
        {"id": ident, "message": message, "status_code": status}, status=status, headers=headers
    )


class FakeMattermost(FakePlatform):
    def __init__(self) -> None:
        super().__init__()
        self.token = "fakebottoken0000000000000a"
        self.bot_id = "b" * 26
        self.bot_name = "chatbot"
        self.team = {"id": "t" * 26, "name": "crew", "display_name": "Crew"}
        self.users: dict[str, dict[str, str]] = {
            self.bot_id: {"id": self.bot_id, "username": self.bot_name, "nickname": ""}
        }
        self.channels: dict[str, str] = {}  # id -> type (D, O)
        self.posts: dict[str, dict[str, Any]] = {}
        self.sent: dict[str, list[dict[str, Any]]] = {}  # the bot's posts by channel
        self.files: dict[str, tuple[bytes, str]] = {}  # id -> (data, channel)
        self.rate_limited: dict[str, float] = {}
        self._limited_until: dict[str, float] = {}
        self._pending: dict[str, tuple[float, dict[str, Any]]] = {}
        self._connections: dict[str, _Connection] = {}
        self._ids = itertools.count(1)
        self.admins: set[tuple[str, str]] = set()  # (channel, user): channel admins

    def next_id(self, prefix: str = "p") -> str:
        return mm_id(prefix, str(next(self._ids)))

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/api/v4/websocket", self._websocket)
        router.add_get("/api/v4/users/me", self._me)
        router.add_get("/api/v4/users/{id}", self._user)
        router.add_get("/api/v4/teams/name/{name}", self._team)
        router.add_post("/api/v4/posts", self._post)
        router.add_post("/api/v4/files", self._upload)
        router.add_get("/api/v4/files/{id}", self._file)
        router.add_get("/api/v4/channels/{channel}/members/{user}", self._member)

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        if request.path == "/api/v4/websocket":
            return None  # authenticated by its first frame
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(
                401, "api.context.session_expired.app_error", "Invalid or expired session"
            )
        return None

    # -- users and events ------------------------------------------------------------------------
    def user(self, native: str) -> str:
        ident = mm_id("u", native)
        self.users.setdefault(
            ident, {"id": ident, "username": f"user{native}", "nickname": f"User {native}"}
        )
        return ident

    def channel(self, native: str, kind: str) -> str:
        ident = mm_id("c", native)
        self.channels[ident] = "D" if kind == "private" else "O"
        return ident

    async def say(
        self,
        channel: str,
        sender: str,
        message: str,
        *,
        mention: bool = False,
        file_ids: list[str] | None = None,
        root_id: str = "",
        props: dict[str, Any] | None = None,
    ) -> str:
        """A user's post in `channel`, broadcast as `posted` (`props`: the post's, as a bot
        account's carry `{"from_bot": "true"}`)."""
        post = {
            "id": self.next_id(),
            "create_at": int(time.time() * 1000),
            "update_at": int(time.time() * 1000),
            "user_id": sender,
            "channel_id": channel,
            "root_id": root_id,
            "message": f"@{self.bot_name} {message}" if mention else message,
            "type": "",
            "props": props or {},
            "file_ids": file_ids or [],
        }
        self.posts[post["id"]] = post
        kind = self.channels[channel]
        data = {
            "channel_display_name": "Town Square" if kind == "O" else "",
            "channel_name": "town-square" if kind == "O" else f"{sender}__{self.bot_id}",
            "channel_type": kind,
            "post": json.dumps(post),
            "sender_name": "@" + self.users[sender]["username"],
            "set_online": True,
            "team_id": self.team["id"] if kind == "O" else "",
        }
        if mention:
            data["mentions"] = json.dumps([self.bot_id])
        await self.broadcast("posted", data, {"channel_id": channel})
        return str(post["id"])

    def upload_as_user(self, channel: str, data: bytes) -> str:
        ident = self.next_id("f")
        self.files[ident] = (data, channel)
        return ident

    async def add_member(self, channel: str, user: str) -> None:
        data = {"team_id": self.team["id"], "user_id": user}
        await self.broadcast("user_added", data, {"channel_id": channel})

    async def broadcast(self, event: str, data: dict[str, Any], broadcast: dict[str, Any]) -> None:
        for connection in self._connections.values():
            frame = {
                "event": event,
                "data": data,
                "broadcast": {"omit_users": None, "user_id": "", "team_id": "", **broadcast},
                "seq": len(connection.events),
            }
            connection.events.append(frame)
            if connection.ws is not None and not connection.ws.closed:
                await connection.ws.send_json(frame)

    async def revoke(self, token: str = "revoked") -> None:
        """The token revoked: sessions end, their sockets are closed."""
        self.token = token
        for connection in self._connections.values():
            if connection.ws is not None:
                await connection.ws.close()

    async def drop_sockets(self) -> None:
        for connection in self._connections.values():
            if connection.ws is not None:
                await connection.ws.close()
                connection.ws = None

    # -- the WebSocket ---------------------------------------------------------------------------
    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        first = await ws.receive()
        try:
            challenge = json.loads(first.data) if first.type == WSMsgType.TEXT else {}
        except ValueError:
            challenge = {}
        if challenge.get("action") != "authentication_challenge" or (
            (challenge.get("data") or {}).get("token") != self.token
        ):
            await ws.send_json(
                {
                    "status": "FAIL",
                    "seq_reply": challenge.get("seq", 0),
                    "error": {"id": "api.web_socket_router.not_authenticated.app_error"},
                }
            )
            await ws.receive()  # nothing more is said to it
            return ws
        await ws.send_json({"status": "OK", "seq_reply": challenge.get("seq", 0)})
        await self._attach(ws, request.query)
        await self.notify()
        async for _ in ws:
            pass
        return ws

    async def _attach(self, ws: web.WebSocketResponse, query: Any) -> None:
        known = self._connections.get(query.get("connection_id", ""))
        if known is not None:  # resumed: what it missed, then hello (the same id)
            known.ws = ws
            start = int(query.get("sequence_number") or 0)
            for frame in known.events[start:]:
                await ws.send_json(frame)
            await self._hello(known, query["connection_id"])
            return
        ident = self.next_id("w")
        await self._hello(self._connections.setdefault(ident, _Connection(ws=ws)), ident)

    async def _hello(self, connection: _Connection, ident: str) -> None:
        hello = {
            "event": "hello",
            "data": {"connection_id": ident, "server_version": "10.5.0"},
            "broadcast": {"user_id": self.bot_id},
            "seq": len(connection.events),
        }
        connection.events.append(hello)
        assert connection.ws is not None
        await connection.ws.send_json(hello)

    def connected(self) -> int:
        return sum(1 for c in self._connections.values() if c.ws is not None and not c.ws.closed)

    # -- REST ------------------------------------------------------------------------------------
    async def _me(self, request: web.Request) -> web.Response:
        return web.json_response(self.users[self.bot_id])

    async def _user(self, request: web.Request) -> web.Response:
        user = self.users.get(request.match_info["id"])
        if user is None:
            return _error(404, "app.user.missing_account.const", "Unable to find the user.")
        return web.json_response(user)

    async def _team(self, request: web.Request) -> web.Response:
        if request.match_info["name"] != self.team["name"]:
            return _error(404, "app.team.get_by_name.missing.app_error", "Unable to find the team.")
        return web.json_response(self.team)

    async def _member(self, request: web.Request) -> web.Response:
        channel, user = request.match_info["channel"], request.match_info["user"]
        if channel not in self.channels or user not in self.users:
            return _error(404, "app.channel.get_member.missing.app_error", "No channel member")
        admin = (channel, user) in self.admins
        return web.json_response(
            {
                "channel_id": channel,
                "user_id": user,
                "roles": "channel_user channel_admin" if admin else "channel_user",
                "scheme_user": True,
                "scheme_admin": admin,
            }
        )

    async def _file(self, request: web.Request) -> web.Response:
        got = self.files.get(request.match_info["id"])
        if got is None:
            return _error(404, "app.file_info.get.app_error", "Unable to get the file info.")
        return web.Response(body=got[0], content_type="image/png")

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        channel, upload = str(form.get("channel_id") or ""), form.get("files")
        if channel not in self.channels or not hasattr(upload, "file"):
            return _error(400, "api.file.upload_file.incorrect_channelId.app_error", "bad upload")
        ident = self.next_id("f")
        self.files[ident] = (upload.file.read(), channel)  # type: ignore[union-attr]
        return web.json_response(
            {"file_infos": [{"id": ident, "channel_id": channel}], "client_ids": []}, status=201
        )

    async def _post(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "api.context.invalid_body_param.app_error", "Invalid post")
        channel = str(body.get("channel_id") or "")
        if channel not in self.channels:
            return _error(403, "api.context.permissions.app_error", "no permission to post")
        now = time.monotonic()
        if channel in self.rate_limited:
            self._limited_until[channel] = now + self.rate_limited.pop(channel)
        if now < self._limited_until.get(channel, 0.0):
            wait = str(math.ceil(self._limited_until[channel] - now))
            return _error(
                429, "api.context.429", "Too many requests", **{"X-Ratelimit-Reset": wait}
            )
        pending = str(body.get("pending_post_id") or "")
        seen = self._pending.get(pending)
        if pending and seen is not None and now - seen[0] < 30:
            return web.json_response(seen[1], status=201)
        refused = self._refused(channel, body)
        if refused is not None:
            return refused
        post = {
            "id": self.next_id(),
            "create_at": int(time.time() * 1000),
            "user_id": self.bot_id,
            "channel_id": channel,
            "root_id": str(body.get("root_id") or ""),
            "message": str(body.get("message") or ""),
            "file_ids": list(body.get("file_ids") or []),
            "pending_post_id": pending,
            "type": "",
        }
        self.posts[post["id"]] = post
        if pending:
            self._pending[pending] = (now, post)
        self.sent.setdefault(channel, []).append(post)
        await self.notify()
        return web.json_response(post, status=201)

    def _refused(self, channel: str, body: dict[str, Any]) -> web.Response | None:
        message = str(body.get("message") or "")
        files = list(body.get("file_ids") or [])
        if len(message) > MAX_RUNES:
            return _error(400, "model.post.is_valid.msg.app_error", "Invalid message")
        if not message and not files:
            return _error(400, "api.post.create_post.message_or_file.app_error", "empty post")
        root = str(body.get("root_id") or "")
        if root:
            parent = self.posts.get(root)
            if parent is None or parent["channel_id"] != channel or parent["root_id"]:
                return _error(400, "api.post.create_post.root_id.app_error", "Invalid RootId")
        if any(self.files.get(f, (b"", ""))[1] != channel for f in files):
            return _error(400, "api.post.create_post.file_ids.app_error", "Invalid file ids")
        return None

    async def wait_sent(self, channel: str, count: int, timeout: float = 15.0) -> list[Any]:
        return await self.wait_for(
            lambda: self.sent[channel] if len(self.sent.get(channel, [])) >= count else None,
            timeout,
        )
