"""The DingTalk channel: an internal app's robot. Messages come over the Stream connection
(stream.py, through DingTalk's official SDK; no public address needed) or by the HTTP
callback (webhook.py, signed); replies go out through send.py (the chat's session webhook
while valid, else the robot send APIs); the REST calls and the access token are api.py's.

At start (and until it works, with backoff to once a minute; refused credentials: one error
line naming channels.dingtalk.client_id / client_secret, then a retry every minute): the
app's access token, DingTalk's who-am-I for an app.

A robot message (parse.py) is taken once: DingTalk's `msgId` is its id, so a message pushed
again (a resend, a new connection, a callback retried) is recognised, in this process by the
ids seen (`Inbound.once`) and after a restart among the stored messages (`host.was_stored`).
It is acknowledged (the Stream ack frame's 200, the callback's 200) only once stored, within
`ACK_WAIT` seconds; a message still waiting then is answered 500 / 503.

Roles for `bot.trust_group_admins`: DingTalk marks a sender who is an admin (`isAdmin`) on
every robot message; such a sender in a group is "admin". Images users send (a picture, a
rich text's pictures) are fetched by their downloadCode (messageFiles/download) and given to
vision models as data. DingTalk sends robots no member-joined event, so there is no welcome.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from chatfn.channels import kit
from chatfn.channels.dingtalk.api import CREDENTIALS_FIX as FIX
from chatfn.channels.dingtalk.api import ERRORS, DingTalkApi
from chatfn.channels.dingtalk.parse import Read, read_message
from chatfn.channels.dingtalk.send import DingTalkSender, Sessions
from chatfn.channels.dingtalk.settings import DingTalkSettings
from chatfn.channels.dingtalk.stream import ACK_WAIT, StreamLink
from chatfn.channels.dingtalk.webhook import Refused, check_request
from chatfn.channels.kit import webhook
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["DingTalkChannel"]


class DingTalkChannel(kit.PlatformChannel[DingTalkSettings], platform="dingtalk", label="DingTalk"):
    def __init__(self, host: ChannelHost, settings: DingTalkSettings) -> None:
        super().__init__(host, settings)
        self.api = DingTalkApi(settings)
        self.sessions = Sessions()
        self.sender = DingTalkSender(self.api, settings, self.policy, self.sessions)
        self.link: StreamLink | None = None
        if settings.mode == "webhook":
            host.add_web_route("POST", settings.webhook_path, self._webhook)

    # -- connect, serve, close -----------------------------------------------------------------
    async def connect(self) -> str:
        """The app's access token: the credentials work."""
        with ERRORS.connecting("accessToken", self.cfg.api_base, FIX):
            await self.api.token()
        how = "the Stream connection"
        if self.cfg.mode == "webhook":
            how = f"HTTP callback at {self.cfg.webhook_path}"
        return f"app {self.cfg.client_id} at {self.cfg.api_base}, messages by {how}"

    async def serve(self) -> None:
        if self.cfg.mode == "webhook":
            await super().serve()
            return
        if self.link is None:
            self.link = StreamLink(self.cfg, self.api, self._stored, self.up)
        # Connect, read, connect again after a drop (backoff to a cap); refused credentials
        # are raised (the kit's connect loop takes them).
        await self.serve_polls(self.link.session, backoff=kit.Backoff(0.5, 60.0))

    async def close(self) -> None:
        await self.quietly(self.link.close() if self.link is not None else None, self.api.aclose())

    # -- the HTTP callback ---------------------------------------------------------------------
    async def _webhook(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            data = check_request(body, request.headers, self.cfg.secret_text("client_secret"))
        except Refused as exc:
            return webhook.refused(self.log, "DingTalk callback", exc, webhook.json_says("msg"))
        ok, take = web.json_response({"msg": "success"}), lambda: self._take(data)
        return await webhook.answer(self, take, ACK_WAIT, ok, webhook.json_says("msg"))

    # -- messages ------------------------------------------------------------------------------
    async def _stored(self, data: dict[str, Any]) -> bool:
        """Take one robot message (from either way in); whether it may be acknowledged."""
        return await self._take(data).wait(ACK_WAIT, self._stopping)

    def _take(self, data: dict[str, Any]) -> kit.Taken:
        if self.stopping:
            return kit.Taken()  # never settled: not acknowledged
        try:
            read = read_message(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.log.warning("DingTalk robot message not read ({!r}): ignored", exc)
            return kit.settled()
        chat = read.chat
        if chat is None or not read.message_id:
            return kit.settled()
        if read.webhook and self._ours(read.webhook):
            self.sessions.remember(chat.key, read.webhook, read.webhook_expires)

        return self.inbound.message_once(chat.key, read.message_id, lambda: self._incoming(read))

    def _ours(self, url: str) -> bool:
        """Whether a session webhook is DingTalk's (OAPI's origin): a reply never goes to an
        address a message names elsewhere."""
        hook, oapi = urlsplit(url), urlsplit(self.cfg.oapi_base)
        return (hook.scheme, hook.netloc) == (oapi.scheme, oapi.netloc)

    async def _incoming(self, read: Read) -> IncomingMessage | None:
        assert read.chat is not None
        images = [i for c in read.download_codes[:4] if (i := await self._image(c))]
        group = read.chat.is_group
        return self.incoming(
            read.chat.key,
            read.sender,
            read.text,
            is_group=group,
            sender_name=read.sender_name,
            is_at_bot=read.mentioned,
            message_id=read.message_id,
            time=kit.sent_at(read.created, ms=True),
            images=images,
            audio=await self._voice(read),
            transcript=read.transcript,
            sender_roles=["admin"] if group and read.is_admin else [],
        )

    async def _voice(self, read: Read) -> list[str]:
        """A voice message without DingTalk's transcript: its file's URL (messageFiles/download,
        short-lived) for voice.stt, fetched through the bot's safe fetch."""
        if read.transcript or not read.audio_code:
            return []
        try:
            return [await self.api.download_url(read.audio_code)]
        except ERRORS.every as exc:
            self.log.warning("DingTalk voice not downloaded: {}", exc)
            return []

    async def _image(self, code: str) -> str | None:
        """A user's image by its downloadCode, as a data URI (no URL stored or shown)."""
        try:
            url = await self.api.download_url(code)
        except ERRORS.every as exc:
            self.log.warning("DingTalk image not downloaded: {}", exc)
            return None
        return await kit.fetch_image(self.api.session(), url, what="DingTalk image")
