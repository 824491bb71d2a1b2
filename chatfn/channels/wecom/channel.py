"""The WeCom (企业微信) channel: a self-built app's callback and message API (`mode: app`), or
an intelligent robot's callback and streaming reply (`mode: aibot`, aibot.py).

The callback (https://developer.work.weixin.qq.com/document/path/90930, 90238): WeCom checks
the URL with a GET (`msg_signature`, `timestamp`, `nonce`, `echostr`), answered with the
decrypted echostr; then POSTs each message as `<xml><ToUserName/><AgentID/><Encrypt/></xml>`
signed with the token and encrypted with the EncodingAESKey (chatfn/channels/wxcrypt.py).
A request that is not signed with the token, does not decrypt, or is for another corp id is
refused (401 / 400, one warning line); a message for another app (`AgentID`) is ignored.

Confirm once stored: WeCom waits five seconds for an answer and otherwise sends the same
message again (three times in all). The answer (an empty 200: the reply goes through the
message API) is given once the message is stored, within `ACK_WAIT` seconds; a message still
waiting then behind its chat's running turn is answered 503, and its next delivery is
answered once it is stored. Each MsgId is handled once (`inbound.once`, and a message
delivered again after a restart is found among the stored messages).

Chats: `private:<userid>` (a member's chat with the app). App-created group chats
(`group:<chatid>`, appchat/create) can be written to but WeCom does not deliver their
messages to the app, so in app mode the bot answers members one to one. Images members send
are downloaded with media/get (no URL from the message is fetched).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from chatfn.channels import kit, wxapi
from chatfn.channels.kit import webhook
from chatfn.channels.wecom.api import WecomApi
from chatfn.channels.wecom.send import CREDENTIALS, WecomSender
from chatfn.channels.wecom.settings import WecomSettings
from chatfn.channels.wxapi import NETWORK_ERRORS, AuthRefused, RateLimited
from chatfn.channels.wxapi import WxError as WecomError
from chatfn.channels.wxcrypt import MAX_BODY, CryptError, WxCrypt, read_xml
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["ACK_WAIT", "WecomChannel", "read_body"]

#: Seconds a callback's answer waits for its message to be stored (WeCom waits 5).
ACK_WAIT = 4.0
_HINT = "check the app's Secret and AgentId and the corp id (我的企业 -> 企业信息)"


async def read_body(request: web.Request) -> bytes:
    """The request's body, at most MAX_BODY (CryptError past it)."""
    body = await kit.webhook_body(request, MAX_BODY)
    if body is None:
        raise CryptError("body too large", 413)
    return body


class WecomChannel(kit.PlatformChannel[WecomSettings], platform="wecom", label="WeCom"):
    #: Seconds between the credential checks while serving (agent/get; the kit's serve).
    keepalive: float | None = 300.0

    def __init__(self, host: ChannelHost, settings: WecomSettings) -> None:
        super().__init__(host, settings)
        receive_id = settings.corp_id if settings.mode == "app" else ""
        self.crypt = WxCrypt(
            settings.secret_text("token"), settings.secret_text("encoding_aes_key"), receive_id
        )
        self.api = WecomApi(settings)
        self.sender = self._sender()
        host.add_web_route("GET", settings.webhook_path, self._verify)
        host.add_web_route("POST", settings.webhook_path, self._callback)

    def _sender(self) -> kit.PlatformSender[Any]:
        return WecomSender(self.api, self.cfg, self.policy)

    # -- connect, close ------------------------------------------------------------------------
    async def connect(self) -> str:
        """The app's token and agent/get: the credentials work and the agent is this app."""
        try:
            agent = await self.api.agent()
        except AuthRefused as exc:
            raise kit.CredentialsRefused(f"WeCom refused {CREDENTIALS} ({exc}): {_HINT}") from None
        except RateLimited as exc:
            raise kit.Unreachable(f"WeCom agent/get rate limited ({exc})") from None
        except WecomError as exc:
            raise kit.CredentialsRefused(
                f"WeCom agent/get refused channels.wecom.agent_id {self.cfg.agent_id} ({exc}): "
                f"{_HINT}"
            ) from None
        except NETWORK_ERRORS as exc:
            raise kit.Unreachable(f"WeCom not reachable at {self.cfg.api_base} ({exc})") from None
        name = agent.get("name") or "?"
        return f"app {name} (agent {self.cfg.agent_id}), callback at {self.cfg.webhook_path}"

    async def close(self) -> None:
        await self.api.aclose()

    # -- the callback --------------------------------------------------------------------------
    def refused(self, exc: webhook.Refused) -> web.Response:
        return webhook.refused(self.log, "WeCom callback", exc)

    async def _verify(self, request: web.Request) -> web.Response:
        """The URL check: the echostr decrypted, as plain text."""
        q = request.query
        try:
            echo = self.crypt.open(
                q.get("msg_signature", ""),
                q.get("timestamp", ""),
                q.get("nonce", ""),
                q.get("echostr", ""),
            )
        except CryptError as exc:
            return self.refused(exc)
        return web.Response(text=echo)

    async def opened(self, request: web.Request) -> str:
        """The decrypted message of a POSTed callback (XML in app mode)."""
        q = request.query
        outer = read_xml(await read_body(request))
        return self.crypt.open(
            q.get("msg_signature", ""),
            q.get("timestamp", ""),
            q.get("nonce", ""),
            outer.get("Encrypt", ""),
        )

    async def _callback(self, request: web.Request) -> web.StreamResponse:
        try:
            fields = read_xml(await self.opened(request))
        except CryptError as exc:
            return self.refused(exc)
        # Not ready, or not stored within ACK_WAIT: a 503, and WeCom sends it again.
        return await webhook.answer(
            self, lambda: self._take(fields), ACK_WAIT, web.Response(text="")
        )

    def _take(self, fields: dict[str, str]) -> kit.Taken:
        kind = fields.get("MsgType", "")
        agent = fields.get("AgentID", "")
        if agent and agent != str(self.cfg.agent_id):
            self.log.warning(
                "WeCom callback for agent {} ignored (this is {})", agent, self.cfg.agent_id
            )
            return kit.settled()
        user, msg_id = fields.get("FromUserName", ""), fields.get("MsgId", "")
        if kind not in ("text", "image", "voice") or not user or not msg_id:
            return kit.settled()  # events (enter_agent, subscribe ...), video, location
        chat = f"private:{user}"

        return self.inbound.message_once(chat, msg_id, lambda: self._incoming(chat, fields))

    async def _incoming(self, chat: str, fields: dict[str, str]) -> IncomingMessage | None:
        images = []
        if fields.get("MsgType") == "image" and (media := fields.get("MediaId")):
            if (image := await self._image(media)) is not None:
                images.append(image)
        audio_in = await self._voice(fields)
        return self.incoming(chat, **wxapi.said(fields), images=images, audio=audio_in)

    async def _voice(self, fields: dict[str, str]) -> list[str]:
        """A voice message's file (AMR, by `MediaId` through media/get) for voice.stt."""
        media = fields.get("MediaId")
        if fields.get("MsgType") != "voice" or not media:
            return []
        if (data := await self.api.received(media, "voice", self.log)) is None:
            return []
        return [kit.data_uri(data, audio.audio_mime(data))]

    async def _image(self, media_id: str) -> str | None:
        if (data := await self.api.received(media_id, "image", self.log)) is None:
            return None
        mime = kit.image_mime(data)
        return None if mime is None else kit.data_uri(data, mime)
