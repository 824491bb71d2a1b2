"""A local Discord: REST (`/api/v10/...`) and the Gateway (WebSocket, JSON encoding), enough of
both for discord.py to log in, identify, resume and send. Shapes follow Discord's API
reference (tests/fixtures/discord/README.md names the pages): Gateway payloads `{op, d, s, t}`,
HELLO (op 10) -> IDENTIFY (op 2) -> READY + GUILD_CREATE, heartbeats (op 1 -> op 11), RESUME
(op 6) replaying what was dispatched after the client's sequence, then RESUMED; messages,
users, channels, guilds, roles and attachments as the REST reference shows them; 429s with
`retry_after`, `global` and the `X-RateLimit-*` headers; `nonce` + `enforce_nonce`.

    async with FakeDiscord() as discord:
        settings = {"token": discord.token, **discord.urls}
        await discord.say(channel, "hi", author=user)      # MESSAGE_CREATE
        sent = await discord.wait_sent(channel_id, 1)      # what the bot POSTed
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.channels.fake_platform import FakePlatform

DISCORD_EPOCH = 1420070400000
BOT_ID = 990000000000000001
APP_ID = 990000000000000002
OWNER_ID = 4242
# Permission bits (discord.com/developers/docs/topics/permissions)
ADMINISTRATOR = 1 << 3
MANAGE_GUILD = 1 << 5
EVERYONE_PERMS = (1 << 10) | (1 << 11) | (1 << 16)  # view, send, read history
# Gateway intents (topics/gateway#gateway-intents)
GUILD_MEMBERS = 1 << 1
MESSAGE_CONTENT = 1 << 15


def snowflake(counter: itertools.count[int]) -> int:
    return ((int(time.time() * 1000) - DISCORD_EPOCH) << 22) | (next(counter) & 0x3FFFFF)


def iso(ms: float | None = None) -> str:
    ms = time.time() * 1000 if ms is None else ms
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + ".000000+00:00"


def user(uid: int | str, name: str | None = None, *, bot: bool = False) -> dict[str, Any]:
    """A user object (resources/user#user-object)."""
    name = name or f"user{uid}"
    return {
        "id": str(uid),
        "username": name.lower(),
        "discriminator": "0",
        "global_name": name,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


@dataclass
class Guild:
    id: int
    name: str
    owner_id: int = OWNER_ID
    channels: dict[int, dict[str, Any]] = field(default_factory=dict)
    threads: dict[int, dict[str, Any]] = field(default_factory=dict)
    system_channel_id: int | None = None

    @property
    def admin_role(self) -> int:
        return self.id + 1

    @property
    def manager_role(self) -> int:
        return self.id + 2

    def roles(self) -> list[dict[str, Any]]:
        def role(rid: int, name: str, perms: int, pos: int) -> dict[str, Any]:
            return {
                "id": str(rid),
                "name": name,
                "color": 0,
                "hoist": False,
                "icon": None,
                "unicode_emoji": None,
                "position": pos,
                "permissions": str(perms),
                "managed": False,
                "mentionable": True,
                "flags": 0,
            }

        bot_role = role(self.id + 3, "chatfn-bot", EVERYONE_PERMS, 3)
        bot_role["managed"] = True
        bot_role["tags"] = {"bot_id": str(BOT_ID)}
        return [
            role(self.id, "@everyone", EVERYONE_PERMS, 0),
            role(self.admin_role, "Admins", ADMINISTRATOR, 2),
            role(self.manager_role, "Managers", MANAGE_GUILD, 1),
            bot_role,
        ]

    def payload(self) -> dict[str, Any]:
        """GUILD_CREATE's data (topics/gateway-events#guild-create)."""
        return {
            "id": str(self.id),
            "name": self.name,
            "icon": None,
            "owner_id": str(self.owner_id),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "roles": self.roles(),
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "system_channel_id": str(self.system_channel_id) if self.system_channel_id else None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "vanity_url_code": None,
            "description": None,
            "banner": None,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "public_updates_channel_id": None,
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
            "joined_at": iso(),
            "large": False,
            "unavailable": False,
            "member_count": 3,
            "voice_states": [],
            "members": [],
            "channels": list(self.channels.values()),
            "threads": list(self.threads.values()),
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }


@dataclass
class Sent:
    """A message the bot created (POST /channels/{id}/messages), as the fake stored it."""

    channel_id: int
    payload: dict[str, Any]
    files: list[tuple[str, bytes]]
    message: dict[str, Any]


class FakeDiscord(FakePlatform):
    client_max_size = 32 * 1024 * 1024
    runner_kwargs = {"access_log": None}

    def __init__(self, token: str = "fake-bot-token") -> None:
        super().__init__()
        self.token = token
        self.ids = itertools.count(1)
        self.guilds: dict[int, Guild] = {}
        self.dms: dict[int, int] = {}  # user id -> DM channel id
        self.sent: list[Sent] = []
        self.log: list[dict[str, Any]] = []  # every message created, users' and the bot's
        self.attachments: dict[str, tuple[str, bytes]] = {}
        self.nonces: dict[str, dict[str, Any]] = {}
        self.rate_limited: dict[int, float] = {}  # channel id -> retry_after of the next POST
        self.granted_intents = GUILD_MEMBERS | MESSAGE_CONTENT  # the portal's switches
        self.app_flags = (1 << 15) | (1 << 19)  # GATEWAY_GUILD_MEMBERS_LIMITED, ..._CONTENT_
        self.posts = 0  # POSTs of messages, 429s included
        self.on_sent: Callable[[Sent], None] | None = None  # called for each message created
        self.identifies = 0
        self.resumes = 0
        self.intents: int | None = None
        self.session_id = "fake-session-1"
        self.seq = 0
        self.backlog: list[dict[str, Any]] = []  # every dispatch of this session, for RESUME
        self.ws: web.WebSocketResponse | None = None
        self.connected = asyncio.Event()
        self.interactions: list[tuple[str, int]] = []  # (interaction id, callback type)
        self._send_lock = asyncio.Lock()  # frames leave in the order they were dispatched

    # -- lifecycle ---------------------------------------------------------------------------
    def routes(self, r: web.UrlDispatcher) -> None:
        r.add_get("/gateway", self._gateway)
        r.add_get("/gateway/", self._gateway)
        r.add_get("/api/v10/gateway/bot", self._gateway_bot)
        r.add_get("/api/v10/users/@me", self._me)
        r.add_get("/api/v10/applications/@me", self._application)
        r.add_get("/api/v10/oauth2/applications/@me", self._application)
        r.add_post("/api/v10/users/@me/channels", self._open_dm)
        r.add_post("/api/v10/channels/{channel}/messages", self._create_message)
        r.add_get("/api/v10/channels/{channel}/messages", self._history)
        r.add_get("/attachments/{key}/{name}", self._attachment)
        r.add_post("/api/v10/interactions/{id}/{token}/callback", self._interaction_callback)

    async def stop(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        await super().stop()

    @property
    def urls(self) -> dict[str, str]:
        return {
            "api_base": f"{self.base}/api/v10",
            "gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
        }

    # -- the world ---------------------------------------------------------------------------
    def guild_of(self, channel_id: int, *, system: bool = True) -> Guild:
        """The guild holding text channel `channel_id` (one guild per channel, created on first
        use and announced with GUILD_CREATE, as when the bot is added to a server)."""
        for guild in self.guilds.values():
            if channel_id in guild.channels or channel_id in guild.threads:
                return guild
        guild = Guild(id=channel_id * 1000, name=f"server{channel_id}")
        guild.channels[channel_id] = self._channel(guild.id, channel_id, 0, f"chan{channel_id}")
        if system:
            guild.system_channel_id = channel_id
        self.guilds[guild.id] = guild
        self.dispatch("GUILD_CREATE", guild.payload())
        return guild

    def add_thread(self, parent_id: int, thread_id: int) -> Guild:
        guild = self.guild_of(parent_id)
        thread = self._channel(guild.id, thread_id, 11, f"thread{thread_id}")
        thread |= {
            "parent_id": str(parent_id),
            "owner_id": str(OWNER_ID),
            "member_count": 2,
            "message_count": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": iso(),
                "locked": False,
            },
        }
        guild.threads[thread_id] = thread
        self.dispatch("THREAD_CREATE", thread | {"newly_created": True})
        return guild

    @staticmethod
    def _channel(guild_id: int, cid: int, kind: int, name: str) -> dict[str, Any]:
        """A channel object (resources/channel#channel-object); type 0 text, 11 public thread."""
        return {
            "id": str(cid),
            "type": kind,
            "guild_id": str(guild_id),
            "name": name,
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "parent_id": None,
            "flags": 0,
        }

    def dm_channel(self, user_id: int) -> int:
        return self.dms.setdefault(user_id, user_id * 10 + 7)

    def user_of_dm(self, channel_id: int) -> int | None:
        return next((u for u, c in self.dms.items() if c == channel_id), None)

    async def say(
        self,
        channel_id: int | None,
        content: str,
        *,
        author: int,
        name: str | None = None,
        dm: bool = False,
        roles: list[int] | None = None,
        image: bytes | None = None,
        reply_to: dict[str, Any] | None = None,
        mentions: list[dict[str, Any]] | None = None,
        mention_roles: list[int] | None = None,
        voice: bytes | None = None,
        bot: bool = False,
    ) -> dict[str, Any]:
        """A user's message: MESSAGE_CREATE (topics/gateway-events#message-create); `bot`:
        the author is a bot account (author.bot)."""
        mid = snowflake(self.ids)
        data: dict[str, Any] = {
            "id": str(mid),
            "type": 19 if reply_to else 0,
            "content": content,
            "author": user(author, name, bot=bot),
            "timestamp": iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions or [],
            "mention_roles": [str(r) for r in mention_roles or []],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
            "components": [],
        }
        if dm:
            data["channel_id"] = str(self.dm_channel(author))
        else:
            assert channel_id is not None
            guild = self.guild_of(channel_id)
            data["channel_id"] = str(channel_id)
            data["guild_id"] = str(guild.id)
            data["member"] = {
                "roles": [str(r) for r in roles or []],
                "joined_at": iso(),
                "deaf": False,
                "mute": False,
                "flags": 0,
                "nick": None,
            }
        if image is not None:
            key = str(snowflake(self.ids))
            self.attachments[key] = ("image/png", image)
            data["attachments"].append(
                {
                    "id": key,
                    "filename": "photo.png",
                    "size": len(image),
                    "url": f"{self.base}/attachments/{key}/photo.png",
                    "proxy_url": f"{self.base}/attachments/{key}/photo.png",
                    "content_type": "image/png",
                    "width": 1,
                    "height": 1,
                }
            )
        if voice is not None:  # a voice message: an OGG/Opus attachment, flag IS_VOICE_MESSAGE
            key = str(snowflake(self.ids))
            self.attachments[key] = ("audio/ogg", voice)
            data["flags"] = 1 << 13
            data["attachments"].append(
                {
                    "id": key,
                    "filename": "voice-message.ogg",
                    "size": len(voice),
                    "url": f"{self.base}/attachments/{key}/voice-message.ogg",
                    "proxy_url": f"{self.base}/attachments/{key}/voice-message.ogg",
                    "content_type": "audio/ogg",
                    "duration_secs": 2.0,
                    "waveform": "AAAA",
                }
            )
        if reply_to is not None:
            data["message_reference"] = {
                "type": 0,
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                **({"guild_id": reply_to["guild_id"]} if "guild_id" in reply_to else {}),
            }
            data["referenced_message"] = reply_to
        self.dispatch("MESSAGE_CREATE", data)
        return data

    def member_joins(self, guild_id: int, uid: int, name: str) -> None:
        """GUILD_MEMBER_ADD (topics/gateway-events#guild-member-add): sent only to a client
        that identified with GUILD_MEMBERS."""
        if self.intents is not None and not self.intents & GUILD_MEMBERS:
            return
        self.dispatch(
            "GUILD_MEMBER_ADD",
            {
                "guild_id": str(guild_id),
                "user": user(uid, name),
                "nick": None,
                "roles": [],
                "joined_at": iso(),
                "deaf": False,
                "mute": False,
                "flags": 0,
            },
        )

    # -- Gateway -----------------------------------------------------------------------------
    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """An event of this session: sent now if connected, else kept for a RESUME."""
        if event == "MESSAGE_CREATE":
            self.log.append(data)
        self.seq += 1
        frame = {"op": 0, "s": self.seq, "t": event, "d": data}
        self.backlog.append(frame)
        ws = self.ws
        if ws is not None and not ws.closed and self.connected.is_set():
            self._queue(ws, frame)

    def _queue(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        async def send() -> None:
            async with self._send_lock:
                await _send(ws, frame)

        asyncio.ensure_future(send())

    async def drop(self, code: int = 4000) -> None:
        """Close the Gateway socket as Discord does on an error (4000 "unknown error": the
        client may resume)."""
        ws = self.ws
        self.connected.clear()
        if ws is not None:
            await ws.close(code=code, message=b"dropped by the test")

    async def invalidate(self) -> None:
        """op 9 INVALID_SESSION (d=false): the client must identify anew."""
        ws = self.ws
        if ws is not None:
            self.connected.clear()
            self.session_id = f"fake-session-{self.identifies + 2}"
            self.backlog.clear()
            await _send(ws, {"op": 9, "d": False, "s": None, "t": None})

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.query = dict(request.query)
        self.ws = ws
        await _send(ws, {"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            frame = json.loads(msg.data)
            op, d = frame.get("op"), frame.get("d")
            if op == 1:
                await _send(ws, {"op": 11, "d": None, "s": None, "t": None})
            elif op == 2:
                await self._identify(ws, d)
            elif op == 6:
                await self._resume(ws, d)
        if self.ws is ws:
            self.connected.clear()
        return ws

    async def _identify(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> None:
        if d.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        intents = int(d.get("intents", 0))
        privileged = GUILD_MEMBERS | MESSAGE_CONTENT
        if intents & privileged & ~self.granted_intents:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self.identifies += 1
        self.intents = intents
        self.session_id = f"fake-session-{self.identifies}"
        self.backlog.clear()
        ready = {
            "v": 10,
            "user": user(BOT_ID, "chatfn-bot", bot=True),
            "guilds": [{"id": str(g), "unavailable": True} for g in self.guilds],
            "session_id": self.session_id,
            "resume_gateway_url": f"ws://127.0.0.1:{self.port}/gateway",
            "shard": [0, 1],
            "application": {"id": str(APP_ID), "flags": self.app_flags},
        }
        self.connected.set()
        self.dispatch("READY", ready)
        for guild in self.guilds.values():
            self.dispatch("GUILD_CREATE", guild.payload())

    async def _resume(self, ws: web.WebSocketResponse, d: dict[str, Any]) -> None:
        if d.get("token") != self.token or d.get("session_id") != self.session_id:
            await _send(ws, {"op": 9, "d": False, "s": None, "t": None})
            return
        self.resumes += 1
        missed = [f for f in self.backlog if f["s"] > int(d.get("seq") or 0)]
        self.connected.set()
        for frame in missed:  # queued before anything dispatched from now on
            self._queue(ws, frame)
        self.dispatch("RESUMED", {})

    # -- REST --------------------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {self.token}"

    @staticmethod
    def _unauthorized() -> web.Response:
        return _json({"message": "401: Unauthorized", "code": 0}, status=401)

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return _json(
            {
                "url": f"ws://127.0.0.1:{self.port}/gateway",
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 14400000,
                    "max_concurrency": 1,
                },
            }
        )

    async def _me(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return _json(user(BOT_ID, "chatfn-bot", bot=True) | {"verified": True})

    async def _application(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return _json(
            {
                "id": str(APP_ID),
                "name": "chatfn-bot",
                "icon": None,
                "description": "",
                "bot_public": True,
                "bot_require_code_grant": False,
                "verify_key": "0" * 64,
                "owner": user(OWNER_ID, "owner"),
                "team": None,
                "flags": self.app_flags,
            }
        )

    async def _open_dm(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        body = await request.json()
        uid = int(body["recipient_id"])
        return _json(
            {
                "id": str(self.dm_channel(uid)),
                "type": 1,
                "last_message_id": None,
                "recipients": [user(uid)],
            }
        )

    async def _create_message(self, request: web.Request) -> web.Response:
        """POST /channels/{id}/messages (resources/message#create-message): JSON, or multipart
        with `payload_json` and `files[n]`."""
        if not self._authorized(request):
            return self._unauthorized()
        channel_id = int(request.match_info["channel"])
        files: list[tuple[str, bytes]] = []
        if request.content_type.startswith("multipart/"):
            payload: dict[str, Any] = {}
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    payload = json.loads(await part.text())
                elif part.name and part.name.startswith("files["):
                    files.append((part.filename or "file", bytes(await part.read())))
        else:
            payload = await request.json()
        self.posts += 1
        bucket = {
            "X-RateLimit-Bucket": f"msgbucket{channel_id}",
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Reset-After": "5.0",
            "X-RateLimit-Reset": f"{time.time() + 5:.3f}",
            "Via": "1.1 google",
        }
        retry = self.rate_limited.pop(channel_id, None)
        if retry is not None:
            return _json(
                {"message": "You are being rate limited.", "retry_after": retry, "global": False},
                status=429,
                headers=bucket
                | {
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset-After": str(retry),
                    "X-RateLimit-Scope": "user",
                    "Retry-After": str(max(1, round(retry))),
                },
            )
        nonce = payload.get("nonce")
        if nonce is not None and payload.get("enforce_nonce"):
            earlier = self.nonces.get(str(nonce))
            if earlier is not None:  # the message made the first time, not a second one
                return _json(earlier, headers=bucket | {"X-RateLimit-Remaining": "4"})
        known = any(
            channel_id in g.channels or channel_id in g.threads for g in self.guilds.values()
        )
        if not known and self.user_of_dm(channel_id) is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        message = self._message_of(channel_id, payload, files)
        if nonce is not None:
            self.nonces[str(nonce)] = message
        async with self._changed:
            self.sent.append(Sent(channel_id, payload, files, message))
            self._changed.notify_all()
        if self.on_sent is not None:
            self.on_sent(self.sent[-1])
        self.dispatch("MESSAGE_CREATE", message)
        return _json(message, headers=bucket | {"X-RateLimit-Remaining": "4"})

    def _message_of(
        self, channel_id: int, payload: dict[str, Any], files: list[tuple[str, bytes]]
    ) -> dict[str, Any]:
        content = str(payload.get("content") or "")
        guild = next(
            (
                g
                for g in self.guilds.values()
                if channel_id in g.channels or channel_id in g.threads
            ),
            None,
        )
        message: dict[str, Any] = {
            "id": str(snowflake(self.ids)),
            "channel_id": str(channel_id),
            "type": 19 if payload.get("message_reference") else 0,
            "content": content,
            "author": user(BOT_ID, "chatfn-bot", bot=True),
            "timestamp": iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [user(u) for u in re.findall(r"<@!?(\d+)>", content)],
            "mention_roles": [],
            "attachments": [
                {
                    "id": str(snowflake(self.ids)),
                    "filename": name,
                    "size": len(data),
                    "url": f"{self.base}/attachments/x/{name}",
                    "proxy_url": f"{self.base}/attachments/x/{name}",
                }
                for name, data in files
            ],
            "embeds": payload.get("embeds") or [],
            "pinned": False,
            "flags": 0,
            "components": payload.get("components") or [],
        }
        if guild is not None:
            message["guild_id"] = str(guild.id)
        if payload.get("nonce") is not None:
            message["nonce"] = payload["nonce"]
        if payload.get("message_reference"):
            message["message_reference"] = payload["message_reference"]
        return message

    async def _history(self, request: web.Request) -> web.Response:
        """GET /channels/{id}/messages (resources/message#get-channel-messages): newest first;
        `after` gives the ones after that id."""
        if not self._authorized(request):
            return self._unauthorized()
        channel_id = int(request.match_info["channel"])
        after = int(request.query.get("after", 0))
        limit = int(request.query.get("limit", 50))
        found = [
            {k: v for k, v in m.items() if k not in ("nonce", "member")}
            for m in self.log
            if int(m["channel_id"]) == channel_id and int(m["id"]) > after
        ]
        return _json(list(reversed(found[:limit])))

    async def _attachment(self, request: web.Request) -> web.Response:
        kind, data = self.attachments[request.match_info["key"]]
        return web.Response(body=data, content_type=kind)

    # -- buttons (message components) ----------------------------------------------------------
    def press(
        self,
        channel_id: int,
        author: int,
        sent: Sent,
        custom_id: str,
        roles: list[int] | None = None,
    ) -> str:
        """A user presses the button `custom_id` under the bot's message `sent`:
        INTERACTION_CREATE of type 3 (interactions/receiving-and-responding); returns the
        interaction's id (its callback names it)."""
        iid = str(snowflake(self.ids))
        guild = self.guild_of(channel_id)
        self.dispatch(
            "INTERACTION_CREATE",
            {
                "id": iid,
                "application_id": str(APP_ID),
                "type": 3,
                "token": f"tok-{iid}",
                "version": 1,
                "guild_id": str(guild.id),
                "channel_id": str(channel_id),
                "channel": guild.channels.get(channel_id) or guild.threads.get(channel_id),
                "member": {
                    "user": user(author),
                    "roles": [str(r) for r in roles or []],
                    "joined_at": iso(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                    "nick": None,
                    "permissions": "0",
                },
                "message": sent.message,
                "data": {"custom_id": custom_id, "component_type": 2},
                "app_permissions": "0",
                "attachment_size_limit": 10 * 1024 * 1024,
                "locale": "en-US",
                "guild_locale": "en-US",
                "entitlements": [],
                "authorizing_integration_owners": {},
                "context": 0,
            },
        )
        return iid

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        """POST /interactions/{id}/{token}/callback: the bot acknowledged a press."""
        body = await request.json()
        self.interactions.append((request.match_info["id"], int(body.get("type", 0))))
        return web.Response(status=204)

    # -- reading what the bot did --------------------------------------------------------------
    async def wait_sent(
        self,
        channel_id: int,
        count: int,
        timeout: float = 15.0,
        *,
        where: Callable[[Sent], bool] | None = None,
    ) -> list[Sent]:
        def mine() -> list[Sent]:
            return [
                s for s in self.sent if s.channel_id == channel_id and (where is None or where(s))
            ]

        await self.wait_for(lambda: len(mine()) >= count, timeout)
        return mine()


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer as Discord's: `Content-Type: application/json` with no charset (what
    discord.py's `json_or_text` checks for)."""
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
    )


async def _send(ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionResetError, RuntimeError):
        await ws.send_str(json.dumps(frame))
