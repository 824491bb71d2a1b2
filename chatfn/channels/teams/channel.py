"""The Microsoft Teams channel: the Bot Framework's activities in (POSTed to `webhook_path`
on the bot's web server), the Bot Connector's REST API out (send.py).

Connect: a token from the login endpoint (client credentials: a refused `app_password` is
the kit's refused credentials) and the Bot Framework's OpenID metadata and keys (auth.py).
Every POST must carry a JWT the Bot Framework signed for this bot (auth.Keys.verify): else
401, nothing read. Activities:

- `message`: a user's message. The chat is `private:<conversation id>` for a 1:1
  (`conversationType` personal), `group:<conversation id>` for a group chat or a channel (a
  channel's conversation id holds its thread, `;messageid=`). A `mention` entity of the bot
  (its `mentioned.id` the activity's `recipient.id`) makes a group message for the bot, its
  `<at>name</at>` cut from the text; other users' `<at>` tags read `@name`. Images: the
  attachments of an image or audio type, the Bot Connector's own downloaded with the bot's
  token (audio goes to voice.stt).
- `conversationUpdate` with `membersAdded` (not the bot): the member-joined event.

The activity's `serviceUrl` is remembered per conversation (send.py answers there). The
activity is answered 200 once it is stored (within ACK_WAIT; else 500 and the Bot
Framework sends it again, taken once by its id).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from chatfn.channels import kit
from chatfn.channels.kit import webhook
from chatfn.channels.kit.downloads import downloaded
from chatfn.channels.kit.wire import webhook_bytes
from chatfn.channels.teams.api import NETWORK_ERRORS, ApiError, TeamsApi
from chatfn.channels.teams.auth import AuthError, TokenError
from chatfn.channels.teams.send import CREDENTIALS, TeamsSender
from chatfn.channels.teams.settings import TeamsSettings
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage, SystemEvent
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["TeamsChannel"]

MAX_BODY = 1024 * 1024
ACK_WAIT = 5.0
_KEY_ERRORS: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, ValueError)
_FETCH_ERRORS: tuple[type[BaseException], ...] = (ApiError, TokenError, *NETWORK_ERRORS)
_AT = re.compile(r"<at>(.*?)</at>", re.S)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class TeamsChannel(kit.PlatformChannel[TeamsSettings], platform="teams", label="Teams"):
    #: Seconds between the credential checks while serving (a fresh token; the kit's serve).
    keepalive: float | None = 300.0

    def __init__(self, host: ChannelHost, settings: TeamsSettings) -> None:
        super().__init__(host, settings)
        self.api = TeamsApi(settings)
        self.sender: TeamsSender = TeamsSender(self.api, settings, self.policy)
        host.add_web_route("POST", settings.webhook_path, self._webhook)

    async def connect(self) -> str:
        try:
            await self.api.tokens.token(fresh=True)
        except TokenError as exc:
            if exc.status in (400, 401, 403):
                raise kit.CredentialsRefused(
                    f"Microsoft refused {CREDENTIALS} ({exc.error}): make a new client secret "
                    "in the Azure Bot's Configuration"
                ) from None
            raise kit.Unreachable(f"the Microsoft login endpoint answered {exc}") from None
        except NETWORK_ERRORS as exc:
            raise kit.Unreachable(f"{self.cfg.token_url} not reachable ({exc!r})") from None
        try:
            await self.api.keys.refresh()
        except _KEY_ERRORS as exc:
            raise kit.Unreachable(
                f"the Bot Framework's keys not read from channels.teams.openid_metadata_url "
                f"({exc!r})"
            ) from None
        return f"app {self.cfg.app_id}, messaging endpoint {self.cfg.webhook_path}"

    async def close(self) -> None:
        await self.api.aclose()

    # -- the messaging endpoint ---------------------------------------------------------------
    async def _webhook(self, request: web.Request) -> web.Response:
        body = await webhook_bytes(request, MAX_BODY)
        activity = kit.json_object(body)
        if activity is None or not activity.get("type"):
            return web.Response(status=400, text="not an activity")
        try:
            await self.api.keys.verify(request.headers.get("Authorization", ""), activity)
        except AuthError as exc:
            self.log.warning("Teams activity refused: {}", exc)
            return web.Response(status=401, text="unauthorized")
        except _KEY_ERRORS as exc:
            self.log.warning("Teams activity not checked: the keys not read ({!r})", exc)
            return web.Response(status=503, text="keys not available")
        ok = web.Response(status=200)  # not stored in time: a 500, and it is sent again
        return await webhook.answer(self, lambda: self._take(activity), ACK_WAIT, ok, late=500)

    def _take(self, activity: dict[str, Any]) -> kit.Taken:
        conversation = _dict(activity.get("conversation"))
        ident, where = str(activity.get("id") or ""), str(conversation.get("id") or "")
        if not ident or not where:
            return kit.settled()
        service = str(activity.get("serviceUrl") or "")
        if service:
            self.sender.service_urls[where] = self.sender.last_service = service
        group = conversation.get("conversationType", "personal") != "personal" or bool(
            conversation.get("isGroup")
        )
        chat = f"{'group' if group else 'private'}:{where}"
        kind = activity.get("type")
        if kind == "conversationUpdate":
            self._added(chat, activity)
            return kit.settled()
        if kind != "message":
            return kit.settled()
        sender = _dict(activity.get("from"))
        if sender.get("id") and sender.get("name"):
            self.sender.names[str(sender["id"])] = str(sender["name"])

        return self.inbound.message_once(chat, ident, lambda: self._incoming(chat, group, activity))

    async def _incoming(
        self, chat: str, group: bool, activity: dict[str, Any]
    ) -> IncomingMessage | None:
        bot = str(_dict(activity.get("recipient")).get("id") or "")
        sender = _dict(activity.get("from"))
        text = str(activity.get("text") or "")
        at_bot = False
        for entity in activity.get("entities") or []:
            entity = _dict(entity)
            if entity.get("type") != "mention":
                continue
            if str(_dict(entity.get("mentioned")).get("id") or "") == bot:
                at_bot = True
                text = text.replace(str(entity.get("text") or "\0"), "")
        text = _AT.sub(lambda m: "@" + m.group(1), text).strip()
        service = str(activity.get("serviceUrl") or "")
        attachments = activity.get("attachments") or []
        images = [i for i in [await self._media(a, service, "image/") for a in attachments] if i]
        # an audio attachment (a recorded clip, an audio file): for voice.stt
        voices = [v for v in [await self._media(a, service, "audio/") for a in attachments] if v]
        return self.incoming(
            chat,
            str(sender.get("id") or ""),
            text,
            sender_name=str(sender.get("name") or ""),
            chat_name=str(_dict(activity.get("conversation")).get("name") or ""),
            is_group=group,
            is_at_bot=at_bot,
            message_id=str(activity["id"]),
            time=kit.sent_at(activity.get("timestamp")),
            images=images,
            audio=voices,
        )

    async def _media(self, attachment: Any, service: str, kind: str) -> str | None:
        """An attachment of `kind` ("image/", "audio/"): the Bot Connector's own downloaded
        with the bot's token (a data URI), another https URL passed on (fetched later within
        `bot.fetch`'s bounds), a data URI of that kind kept."""
        attachment = _dict(attachment)
        url = str(attachment.get("contentUrl") or "")
        if not str(attachment.get("contentType") or "").startswith(kind) or not url:
            return None
        if url.startswith(f"data:{kind}"):
            return url
        if service and _origin(url) == _origin(service):
            download, limit = self.api.download, kit.MAX_IMAGE_IN
            data = await downloaded(
                "Teams attachment", _FETCH_ERRORS, download, url, limit, log=self.log
            )
            if data is None:
                return None
            if kind == "image/":
                mime = kit.image_mime(data)
                return None if mime is None else kit.data_uri(data, mime)
            return kit.data_uri(data, audio.audio_mime(data))
        return url if url.startswith("https://") else None

    def _added(self, chat: str, activity: dict[str, Any]) -> None:
        bot = str(_dict(activity.get("recipient")).get("id") or "")
        members = [_dict(m) for m in activity.get("membersAdded") or []]
        joined = [m for m in members if m.get("id") and str(m["id"]) != bot]
        if not joined:
            return

        async def events() -> list[SystemEvent]:
            return [
                kit.member_joined("teams", chat, str(m["id"]), str(m.get("name") or m["id"]))
                for m in joined
            ]

        self.inbound.events(chat, events)
