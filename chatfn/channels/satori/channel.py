"""The Satori channel: the server's event stream in, its HTTP API out (send.py).

Connect: POST /v1/meta (the server's logins; 401: the token is refused; a server without the
meta API answers 404 and the logins come with READY). Serve: the WebSocket at
`{endpoint}/v1/events` (https://satori.chat/en-US/protocol/events.html): IDENTIFY (op 3) with
the token and, after a drop, the `sn` of the last event received, so the server sends what
was missed; READY (op 4) with the logins; PING (op 1) every 10 s, answered by PONG (op 2);
EVENT (op 0) the events; META (op 5) ignored. A socket silent for 30 s (no PONG) is dead and
opened again (the kit's backoff). A socket the server closes before READY is checked against
POST /v1/meta: a refused token is the kit's refused credentials.

One Satori server serves several logins (a platform account each: discord, telegram,
chronocat's QQ ...): every chat id carries its login, `private:` or `group:` +
`<platform>:<bot user id>:<channel id>` (the channel id last: it may hold colons). With
`platform` set only that platform's logins are answered. `message-created` events are
messages (the bot's own skipped; a DIRECT channel is private, any other a group);
`guild-member-added` is the member-joined event (in the event's channel, else the guild's
id, which is its main channel on the platforms where a guild is a group). Both the current
event shape (`sn`, `login`) and the one before Satori 1.1 (`id`, `platform`, `self_id`) are
read.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from chatfn.channels import kit
from chatfn.channels.satori import elements
from chatfn.channels.satori.api import NETWORK_ERRORS, ApiError, SatoriApi
from chatfn.channels.satori.send import ERRORS, SatoriSender, chat_id
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.common import audio
from chatfn.common.fetch import FetchTooLarge, read_limited
from chatfn.common.messages import IncomingMessage, SystemEvent
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["SatoriChannel"]

EVENT, PING, PONG, IDENTIFY, READY, META = 0, 1, 2, 3, 4, 5
PING_EVERY = 10.0
SILENT_FOR = 30.0
DIRECT = 1  # Channel.Type.DIRECT
_WS_TIMEOUT = aiohttp.ClientWSTimeout(ws_receive=SILENT_FOR)
_SOCKET_ERRORS: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, ApiError)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def login_of(login: dict[str, Any]) -> tuple[str, str]:
    """(platform, the bot's user id) of a Login (current: `user.id`; older: `self_id`)."""
    user = _dict(login.get("user"))
    return str(login.get("platform") or ""), str(user.get("id") or login.get("self_id") or "")


class SatoriChannel(kit.PlatformChannel[SatoriSettings], platform="satori", label="Satori"):
    def __init__(self, host: ChannelHost, settings: SatoriSettings) -> None:
        super().__init__(host, settings)
        self.api = SatoriApi(settings)
        self.sender = SatoriSender(self.api, settings, self.policy)
        self.logins: dict[tuple[str, str], dict[str, Any]] = {}
        self._sn: int | None = None  # the last event's sequence number (to resume)

    async def connect(self) -> str:
        try:
            meta = await self.api.meta()
        except ERRORS.every as exc:
            if not isinstance(exc, ApiError) or exc.status not in (404, 405):
                fix = "use the token of its configuration (Koishi: the server plugin's token)"
                raise ERRORS.for_connect(exc, self.cfg.endpoint, fix) from None
            meta = {"logins": []}  # an older server: the logins come with READY
        self._logins(meta["logins"])
        if meta["logins"] and not self.logins:
            raise kit.CredentialsRefused(
                f"the Satori server has no login of channels.satori.platform "
                f"{self.cfg.platform!r} (it serves: {self._served(meta['logins'])})"
            )
        return f"{self.cfg.endpoint}: " + (
            self._served(list(self.logins.values())) or "logins at READY"
        )

    def _logins(self, logins: Any) -> None:
        for login in logins if isinstance(logins, list) else []:
            platform, self_id = login_of(_dict(login))
            if platform and self_id and self.cfg.platform in ("", platform):
                self.logins[(platform, self_id)] = login

    @staticmethod
    def _served(logins: list[Any]) -> str:
        return ", ".join("{}:{}".format(*login_of(_dict(x))) for x in logins)

    async def serve(self) -> None:
        where = f"Satori events at {self.cfg.events}"
        await self.serve_socket(self._socket, _SOCKET_ERRORS, where)

    async def _socket(self) -> None:
        session = self.api.session()
        async with session.ws_connect(self.cfg.events, timeout=_WS_TIMEOUT) as ws:
            body: dict[str, Any] = {"token": self.cfg.secret_text("token")}
            if self._sn is not None:
                body["sn"] = self._sn
            await ws.send_json({"op": IDENTIFY, "body": body})
            pinging = asyncio.ensure_future(self._ping(ws))
            ready = False
            try:
                async for signal in kit.json_frames(ws, "Satori events"):
                    ready = self._signal(signal) or ready
            finally:
                pinging.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pinging
            if not ready:
                await self.connect()  # a refused token raises CredentialsRefused here
        raise ConnectionResetError(f"the event stream closed ({ws.close_code})")

    async def _ping(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while not ws.closed:
            await asyncio.sleep(PING_EVERY)
            with contextlib.suppress(*NETWORK_ERRORS, RuntimeError):
                await ws.send_json({"op": PING})

    def _signal(self, signal: dict[str, Any]) -> bool:
        """Handle one signal; True for READY."""
        op, body = signal.get("op"), _dict(signal.get("body"))
        if op == READY:
            self._logins(body.get("logins"))
            self.up()
            return True
        if op == EVENT:
            self._event(body)
        return False

    def _event(self, body: dict[str, Any]) -> None:
        kind = str(body.get("type") or "")
        login = _dict(body.get("login"))
        if kind.startswith("login-"):
            self._logins([login])
            return
        sn = body.get("sn", body.get("id"))
        if isinstance(sn, int):
            self._sn = sn
        platform = str(login.get("platform") or body.get("platform") or "")
        self_id = login_of(login)[1] or str(body.get("self_id") or "")
        if not platform or not self_id or self.cfg.platform not in ("", platform):
            return
        if kind == "message-created":
            self._message(body, platform, self_id)
        elif kind == "guild-member-added":
            self._added(body, platform, self_id)

    def _message(self, body: dict[str, Any], platform: str, self_id: str) -> None:
        message = _dict(body.get("message"))
        user = _dict(body.get("user") or message.get("user"))
        channel = _dict(body.get("channel") or message.get("channel"))
        guild = _dict(body.get("guild") or message.get("guild"))
        if not message.get("id") or not channel.get("id") or not user.get("id"):
            return
        if str(user["id"]) == self_id:
            return  # the bot's own
        if "type" in channel:
            group = channel.get("type") != DIRECT
        else:
            group = bool(guild.get("id"))
        chat = chat_id(group, platform, self_id, str(channel["id"]))
        ident = str(message["id"])
        if not self.inbound.first_sight((platform, self_id, ident)):
            return
        read = lambda: self._incoming(chat, group, self_id, body, message, user)  # noqa: E731
        self.inbound.message(chat, ident, read)

    async def _incoming(
        self,
        chat: str,
        group: bool,
        self_id: str,
        body: dict[str, Any],
        message: dict[str, Any],
        user: dict[str, Any],
    ) -> IncomingMessage | None:
        parsed = elements.parse(str(message.get("content") or ""), self_id)
        quoted = parsed.quoted
        if quoted is None and message.get("quote"):
            quoted = elements.parse(str(_dict(message["quote"]).get("content") or ""), self_id).text
        member = _dict(body.get("member") or message.get("member"))
        images = [i for i in [await self._image(src) for src in parsed.images] if i]
        voices = [v for v in [await self._voice(src) for src in parsed.audio] if v]
        return self.incoming(
            chat,
            str(user["id"]),
            parsed.text,
            sender_name=str(member.get("nick") or user.get("nick") or user.get("name") or ""),
            chat_name=str(_dict(body.get("channel")).get("name") or ""),
            is_group=group,
            is_at_bot=parsed.at_bot,
            message_id=str(message["id"]),
            quoted=quoted or None,
            time=kit.sent_at(message.get("created_at") or body.get("timestamp"), ms=True),
            images=images,
            audio=voices,
            sender_is_bot=user.get("is_bot") is True,
        )

    async def _image(self, src: str) -> str | None:
        """An image of a message: a data URI as it is, one of the server's own (its proxy
        route) downloaded with the token, any other http(s) URL handed on as a reference."""
        if src.startswith("data:image/"):
            return src
        if src.startswith(self.cfg.endpoint + "/"):
            auth = {k: v for k, v in self.api.headers().items() if k == "Authorization"}
            return await kit.fetch_image(self.api.session(), src, headers=auth, what="Satori image")
        return src if src.startswith(("https://", "http://")) else None

    async def _voice(self, src: str) -> str | None:
        """A voice message (`<audio>`): a data URI as it is; one of the server's own (its
        proxy route) downloaded with the token; another http(s) URL handed on to voice.stt,
        which fetches it within `bot.fetch`'s bounds."""
        if src.startswith("data:audio/"):
            return src
        if src.startswith(self.cfg.endpoint + "/"):
            auth = {k: v for k, v in self.api.headers().items() if k == "Authorization"}
            try:
                async with self.api.session().get(src, headers=auth) as got:
                    got.raise_for_status()
                    data = await read_limited(got, kit.MAX_IMAGE_IN)
            except (aiohttp.ClientError, TimeoutError, FetchTooLarge) as exc:
                self.log.warning("Satori voice not downloaded: {}", exc)
                return None
            return kit.data_uri(data, audio.audio_mime(data))
        return src if src.startswith(("https://", "http://")) else None

    def _added(self, body: dict[str, Any], platform: str, self_id: str) -> None:
        user = _dict(body.get("user") or _dict(body.get("member")).get("user"))
        where = _dict(body.get("channel")).get("id") or _dict(body.get("guild")).get("id")
        if not user.get("id") or not where or str(user["id"]) == self_id:
            return
        chat = chat_id(True, platform, self_id, str(where))
        name = str(
            _dict(body.get("member")).get("nick")
            or user.get("nick")
            or user.get("name")
            or user["id"]
        )

        async def joined() -> list[SystemEvent]:
            return [kit.member_joined("satori", chat, str(user["id"]), name)]

        self.inbound.events(chat, joined)

    async def close(self) -> None:
        await self.api.aclose()
