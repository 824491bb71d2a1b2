"""The QQ channel: a bot of the QQ open platform (q.qq.com) in QQ groups, C2C chats, guild
channels and guild DMs, through the documented HTTP and WebSocket API
(https://bot.q.qq.com/wiki/develop/api-v2/) with aiohttp.

Why not qq-botpy, Tencent's Python SDK: its API root and scheme are fixed in the class
`botpy.http.Route` (api.sgroup.qq.com / sandbox.api.sgroup.qq.com over https) and the token URL
in `botpy.robot.Token`, so it cannot be pointed at `channels.qq.api_base` (a local server in the
tests, a proxy in deployments) without patching its globals; it has no webhook mode, which
Tencent is moving bots to; its last release (1.2.1) dates from 2024. The protocol is small:
a token (api.py), a WebSocket session (gateway.py), Ed25519 callbacks (webhook.py) and a few
POSTs (send.py).

Events come by the gateway (`mode: websocket`) or as signed HTTP callbacks to
`channels.qq.webhook_path` on the HTTP channel's port (`mode: webhook`). Handled:
GROUP_AT_MESSAGE_CREATE (a group message @-mentioning the bot: QQ sends no others),
C2C_MESSAGE_CREATE, AT_MESSAGE_CREATE and MESSAGE_CREATE (guild channels; one message coming
as both is handled once), DIRECT_MESSAGE_CREATE, GUILD_MEMBER_ADD (the welcome, posted to
the guild's first text channel as a passive message on the event), GROUP_ADD_ROBOT and
FRIEND_ADD (their event ids let the next message to that chat be passive). A message QQ
sends twice (it may, says its documentation) or that was stored before a restart is
answered once.

Roles for `bot.trust_group_admins`: guild channels carry `member.roles` (4: the guild's
creator -> "owner"; 2: administrator -> "admin"). QQ groups report no roles: a group
message's author is only a `member_openid`, and bots have no API to read a group's owner or
admins, so in QQ groups only `bot.admins` may use the per-chat admin commands.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
from aiohttp import web
from loguru import logger

from chatfn.channels import kit
from chatfn.channels.kit.gateway_channel import GatewayChannel
from chatfn.channels.qq.api import QQApi, QQApiError
from chatfn.channels.qq.gateway import Gateway
from chatfn.channels.qq.media import MEDIA_ROUTE, MediaShelf
from chatfn.channels.qq.parse import ChatRef, guild_roles, read_content
from chatfn.channels.qq.send import Passive, QQSender
from chatfn.channels.qq.settings import QQSettings
from chatfn.common.messages import (
    IncomingMessage,
    SystemEvent,
)
from chatfn.common.payload import object_at
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["QQChannel"]

_MESSAGES = {
    "GROUP_AT_MESSAGE_CREATE",
    "C2C_MESSAGE_CREATE",
    "AT_MESSAGE_CREATE",
    "MESSAGE_CREATE",
    "DIRECT_MESSAGE_CREATE",
}


class QQChannel(GatewayChannel, kit.PlatformChannel[QQSettings], platform="qq", label="QQ"):
    def __init__(self, host: ChannelHost, settings: QQSettings) -> None:
        super().__init__(host, settings)
        self.passive = Passive()
        self.bot_id = ""
        self.bot_name = ""
        self.api: QQApi | None = None
        self.sender: QQSender | None = None
        self.gateway: Gateway | None = None
        self._welcome_channels: dict[str, str] = {}
        self._signer: Any = None
        if settings.mode == "webhook":
            from chatfn.channels.qq.webhook import Signer

            self._signer = Signer(settings.secret_value())
            host.add_web_route("POST", settings.webhook_path, self._webhook)
        # Pictures handed to QQ by URL from the bot's own web server (media.py).
        self.media: MediaShelf | None = None
        if settings.public_url:
            self.media = MediaShelf(settings.public_url, settings.media_ttl)
            host.add_web_route("GET", MEDIA_ROUTE, self.media.serve)

    def _count_dropped(self, reason: str) -> None:
        """A message given up before QQ saw it (e.g. `reply_limit`): the bot's metric."""
        self.host.metrics.messages_dropped.labels(self.platform, reason).inc()

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """A token and GET /users/@me: who the bot is."""
        if self._http is None:
            self._http = aiohttp.ClientSession()
            self.api = QQApi(self.cfg, self._http)
            self.sender = QQSender(
                self.api,
                self.cfg,
                self.passive,
                self.policy,
                dropped=self._count_dropped,
                media=self.media,
            )
        assert self.api is not None
        me = await self.api.who_am_i()
        self.bot_id = str(me.get("id") or "")
        self.bot_name = str(me.get("username") or "")
        way = "gateway" if self.cfg.mode == "websocket" else f"webhook {self.cfg.webhook_path}"
        return f"bot {self.bot_name} (id {self.bot_id}) at {self.cfg.api_root} ({way})"

    async def serve(self) -> None:
        if self.cfg.mode != "websocket":
            await super().serve()
            return
        assert self.api is not None and self._http is not None
        self.gateway = Gateway(self.api, self.cfg, self._http, self._on_event, self)
        await self.gateway.run()

    # -- webhook -------------------------------------------------------------------------------
    async def _webhook(self, request: web.Request) -> web.Response:
        body = await request.read()
        stamp = request.headers.get("X-Signature-Timestamp", "")
        signature = request.headers.get("X-Signature-Ed25519", "")
        signed = bool(stamp and signature and self._signer.verify(stamp, body, signature))
        payload = kit.json_object(body)
        if payload is None:
            return web.json_response({"error": "not a JSON object"}, status=400)
        data = object_at(payload, "d")
        if payload.get("op") == 13:
            # Answered unsigned (QQ's validation request may carry no signature), but only
            # for a token and a timestamp of QQ's shape: the answer signs event_ts +
            # plain_token, which must never be a timestamp + an event body.
            token, ts = str(data.get("plain_token") or ""), str(data.get("event_ts") or "")
            if (stamp or signature) and not signed:
                return web.json_response({"error": "invalid signature"}, status=401)
            if not (token.isascii() and token.isalnum() and ts.isdigit() and len(token) <= 128):
                return web.json_response({"error": "not a validation request"}, status=400)
            return web.json_response(self._signer.validation(token, ts))
        if not signed:
            logger.warning("QQ webhook request with a missing or bad signature refused")
            return web.json_response({"error": "invalid signature"}, status=401)
        if payload.get("op") != 0:
            return web.json_response({"op": 12})
        if not self._ready.is_set() or self.stopping:
            return web.json_response({"error": "not ready"}, status=503)  # QQ sends it again
        self._on_event(str(payload.get("t") or ""), data, str(payload.get("id") or ""))
        return web.json_response({"op": 12})

    # -- events --------------------------------------------------------------------------------
    def _on_event(self, kind: str, data: dict[str, Any], event_id: str) -> None:
        if event_id and not self.inbound.first_sight(f"event:{event_id}"):
            return
        if kind in _MESSAGES:
            ref = _chat_of(kind, data)
            msg_id = str(data.get("id") or "")
            author = data.get("author") or {}
            if ref is None or not msg_id or not isinstance(author, dict) or author.get("bot"):
                return
            if not self.inbound.first_sight(f"message:{msg_id}"):
                return  # AT_MESSAGE_CREATE and MESSAGE_CREATE of one message, or sent again
            self.passive.message(ref.key, msg_id, _arrived(data.get("timestamp")))
            self.inbound.message(ref.key, msg_id, lambda: self._incoming(kind, ref, data))
        elif kind == "GUILD_MEMBER_ADD":
            guild = str(data.get("guild_id") or "")
            if guild:
                self.inbound.events(f"guild:{guild}", lambda: self._member_joined(data, event_id))
        elif kind in ("GROUP_ADD_ROBOT", "FRIEND_ADD"):
            target = str(data.get("group_openid") or data.get("openid") or "")
            scene = "group" if kind == "GROUP_ADD_ROBOT" else "c2c"
            if target and event_id:
                self.passive.event(f"{scene}:{target}", event_id)
            logger.info("QQ: {} ({}:{})", kind, scene, target)

    async def _incoming(
        self, kind: str, ref: ChatRef, data: dict[str, Any]
    ) -> IncomingMessage | None:
        msg_id = str(data["id"])
        author = data.get("author") or {}
        member = object_at(data, "member")
        sender = str(
            author.get("member_openid") or author.get("user_openid") or author.get("id") or ""
        )
        if not sender:
            return None
        text, mentioned = read_content(str(data.get("content") or ""), self.bot_id)
        mentioned = mentioned or kind in ("GROUP_AT_MESSAGE_CREATE", "AT_MESSAGE_CREATE")
        attachments = data.get("attachments") or []
        images = [i for a in attachments if (i := await self._image(a))]
        audio, transcript = voice_of(attachments)
        return self.incoming(
            ref,
            sender,
            text,
            sender_name=str(member.get("nick") or author.get("username") or sender),
            is_at_bot=mentioned,
            message_id=msg_id,
            time=kit.sent_at(data.get("timestamp")),
            images=images,
            audio=audio,
            transcript=transcript,
            sender_roles=guild_roles(member) if ref.scene == "channel" else [],
        )

    async def _image(self, attachment: Any) -> str | None:
        """An image attachment as a data URI (QQ's attachment URLs are public CDN links,
        sometimes without a scheme)."""
        if not isinstance(attachment, dict):
            return None
        mime = str(attachment.get("content_type") or "")
        if not mime.startswith("image/"):
            return None
        url = _attachment_url(attachment.get("url"))
        if url is None:
            return None
        if int(attachment.get("size") or 0) > kit.MAX_IMAGE_IN:
            return None
        assert self._http is not None
        what = f"QQ attachment {attachment.get('filename')}"
        return await kit.fetch_image(self._http, url, mime=mime, what=what)

    async def _welcome_channel(self, guild: str) -> str | None:
        """The guild's first text channel (GET /guilds/{guild_id}/channels, type 0)."""
        if guild in self._welcome_channels:
            return self._welcome_channels[guild]
        assert self.api is not None
        try:
            found = await self.api.call("GET", f"/guilds/{guild}/channels")
        except (QQApiError, aiohttp.ClientError, TimeoutError) as exc:
            logger.warning("QQ: the channels of guild {} not read ({})", guild, exc)
            return None
        text = [c for c in found or [] if isinstance(c, dict) and c.get("type") in (0, "0")]
        text.sort(key=lambda c: int(c.get("position") or 0))
        if not text:
            return None
        self._welcome_channels[guild] = str(text[0]["id"])
        return self._welcome_channels[guild]

    async def _member_joined(self, data: dict[str, Any], event_id: str) -> list[SystemEvent]:
        guild = str(data["guild_id"])
        user = object_at(data, "user")
        user_id = str(user.get("id") or "")
        if not user_id or user.get("bot") or user_id == self.bot_id:
            return []
        channel = await self._welcome_channel(guild)
        if channel is None:
            logger.info("QQ: member {} joined guild {}, which has no text channel", user_id, guild)
            return []
        chat_id = f"channel:{channel}"
        if event_id:
            self.passive.event(chat_id, event_id)
        name = str(data.get("nick") or user.get("username") or "")
        by = str(data.get("op_user_id") or "")
        return [
            kit.member_joined(self.platform, chat_id, user_id, name, guild_id=guild, added_by=by)
        ]


def _attachment_url(raw: object) -> str | None:
    """An attachment URL with its scheme (QQ's sometimes come without one)."""
    url = str(raw or "")
    if url.startswith("//"):
        url = "https:" + url
    elif url and "://" not in url:
        url = "https://" + url
    return url if url.startswith(("https://", "http://")) else None


def voice_of(attachments: list[Any]) -> tuple[list[str], str | None]:
    """A voice message's audio and QQ's own transcript of it: an attachment whose
    content_type is "voice" (or audio/*) gives its `voice_wav_url` (WAV, else its `url`: SILK
    or AMR) and `asr_refer_text` (QQ's speech recognition: used instead of an STT call)."""
    for attachment in attachments:
        if not isinstance(attachment, dict):
            continue
        kind = str(attachment.get("content_type") or "")
        if kind != "voice" and not kind.startswith("audio/"):
            continue
        url = _attachment_url(attachment.get("voice_wav_url")) or _attachment_url(
            attachment.get("url")
        )
        said = str(attachment.get("asr_refer_text") or "").strip()
        return ([url] if url else []), (said or None)
    return [], None


def _chat_of(kind: str, data: dict[str, Any]) -> ChatRef | None:
    author = object_at(data, "author")
    if kind == "GROUP_AT_MESSAGE_CREATE":
        target, scene = data.get("group_openid"), "group"
    elif kind == "C2C_MESSAGE_CREATE":
        target, scene = author.get("user_openid"), "c2c"
    elif kind == "DIRECT_MESSAGE_CREATE":
        target, scene = data.get("guild_id"), "dm"
    else:
        target, scene = data.get("channel_id"), "channel"
    return ChatRef(scene, str(target)) if target else None  # type: ignore[arg-type]


def _arrived(stamp: Any) -> float:
    """When a message was sent (its RFC 3339 `timestamp`; now if absent or in the future)."""
    return min(time.time(), kit.sent_at(stamp).timestamp())
