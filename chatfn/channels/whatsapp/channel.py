"""The WhatsApp channel: the Cloud API's webhook in, the Graph API's messages out (send.py).

The webhook (https://developers.facebook.com/docs/graph-api/webhooks/getting-started):
Meta checks the URL with a GET (`hub.mode=subscribe`, `hub.verify_token`, `hub.challenge`):
the challenge is answered when the token is `verify_token`, else 403. Events are POSTed
with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body with the app secret>`: a
bad or missing one is answered 401 and nothing is read; a body that is not a
`whatsapp_business_account` object, 400.

Each change of field `messages` for this `phone_number_id` carries `messages` (a user's
text, image or audio: a voice note, transcribed by voice.stt; in a group, with its
`group_id`) and `statuses` (sent, delivered, read of the bot's own messages: ignored). A
user is `private:<wa_id>`, a group `group:<group_id>`; in a group the bot is mentioned by
`@<its display number>` in the text (cut from it). Images and voice notes come by media id:
GET /{media-id} for a short-lived URL, then that URL with the token, through
chatfn.common.fetch (its bounds; the API's own host allowed). Message ids (wamids) are taken
once: Meta sends an event again until it is answered 200, which it is once its messages are
stored (within `ack_wait`), else 500.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from chatfn.channels import kit
from chatfn.channels.kit import webhook
from chatfn.channels.kit.wire import webhook_bytes
from chatfn.channels.whatsapp.api import NETWORK_ERRORS, GraphApi, GraphError
from chatfn.channels.whatsapp.send import CREDENTIALS, WhatsAppSender, Windows
from chatfn.channels.whatsapp.settings import WhatsAppSettings
from chatfn.common import audio
from chatfn.common.messages import IncomingMessage
from chatfn.runtime.channel_host import ChannelHost

__all__ = ["MAX_BODY", "WhatsAppChannel", "signature_of"]

MAX_BODY = 3 * 1024 * 1024
_ERRORS: tuple[type[BaseException], ...] = (GraphError, *NETWORK_ERRORS)


def _fetch_errors() -> tuple[type[BaseException], ...]:
    from chatfn.common.fetch import FetchError

    return (*_ERRORS, FetchError)


def signature_of(secret: str, body: bytes) -> str:
    """X-Hub-Signature-256's value for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class _Allow:
    """`bot.fetch`'s allowance, and the Graph API's own host (the operator named it)."""

    allow_hosts: tuple[str, ...]
    allow_networks: tuple[Any, ...]


class WhatsAppChannel(kit.PlatformChannel[WhatsAppSettings], platform="whatsapp", label="WhatsApp"):
    def __init__(self, host: ChannelHost, settings: WhatsAppSettings) -> None:
        super().__init__(host, settings)
        self.api = GraphApi(settings)
        self.windows = Windows()
        self.sender = WhatsAppSender(self.api, settings, self.policy, self.windows)
        self.number = ""  # the display phone number, digits only (mentions in groups)
        fetch = getattr(getattr(host.settings, "bot", None), "fetch", None)
        api_host = urlsplit(settings.api_base).hostname or ""
        self.allow = _Allow(
            (*(getattr(fetch, "allow_hosts", None) or ()), api_host),
            tuple(getattr(fetch, "allow_networks", None) or ()),
        )
        host.add_web_route("GET", settings.webhook_path, self._verify)
        host.add_web_route("POST", settings.webhook_path, self._webhook)

    #: Seconds between the credential checks while serving (the token checked; the kit's serve).
    keepalive: float | None = 300.0

    async def connect(self) -> str:
        try:
            number, name = await self.api.whoami()
        except GraphError as exc:
            if exc.status == 401 or exc.code in (190, 102, 100, 10, 200):
                raise kit.CredentialsRefused(
                    f"WhatsApp refused {CREDENTIALS} or channels.whatsapp.phone_number_id "
                    f"({exc.message})"
                ) from None
            raise kit.Unreachable(f"WhatsApp answered {exc} at {self.cfg.api_base}") from None
        except NETWORK_ERRORS as exc:
            where = self.cfg.api_base
            raise kit.Unreachable(f"WhatsApp not reachable at {where} ({exc!r})") from None
        self.number = "".join(c for c in number if c.isdigit())
        return f"{name or 'business'} ({number}), webhook at {self.cfg.webhook_path}"

    async def close(self) -> None:
        await self.api.aclose()

    # -- the webhook -------------------------------------------------------------------------
    async def _verify(self, request: web.Request) -> web.Response:
        q = request.query
        token = q.get("hub.verify_token", "")
        expected = self.cfg.secret_text("verify_token")
        if q.get("hub.mode") != "subscribe" or not hmac.compare_digest(
            token.encode(), expected.encode()
        ):
            self.log.warning("WhatsApp webhook check refused: hub.verify_token is not ours")
            return web.Response(status=403, text="forbidden")
        return web.Response(text=q.get("hub.challenge", ""), content_type="text/plain")

    async def _webhook(self, request: web.Request) -> web.Response:
        body = await webhook_bytes(request, MAX_BODY)
        given = request.headers.get("X-Hub-Signature-256", "")
        expected = signature_of(self.cfg.secret_text("app_secret"), body)
        if not hmac.compare_digest(given.encode(), expected.encode()):
            self.log.warning("WhatsApp webhook refused: bad X-Hub-Signature-256")
            return web.Response(status=401, text="bad signature")
        payload = kit.json_object(body)
        if payload is None or payload.get("object") != "whatsapp_business_account":
            return web.Response(status=400, text="not a WhatsApp Business Account event")
        ok = web.Response(text="ok")  # not stored in time: a 500, and Meta sends it again
        return await webhook.answer(
            self,
            lambda: [self._take(value, m) for value, m in self._messages(payload)],
            self.cfg.ack_wait,
            ok,
            late=500,
        )

    def _messages(self, payload: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(the change's value, a message) for each user message to this number."""
        found = []
        for entry in _dicts(payload.get("entry")):
            for change in _dicts(entry.get("changes")):
                value = change.get("value")
                if change.get("field") != "messages" or not isinstance(value, dict):
                    continue
                metadata = value.get("metadata") or {}
                if str(metadata.get("phone_number_id") or "") != self.cfg.phone_number_id:
                    continue  # another number of the same business account
                found += [(value, m) for m in _dicts(value.get("messages"))]
        return found

    def _take(self, value: dict[str, Any], message: dict[str, Any]) -> kit.Taken:
        ident, sender = str(message.get("id") or ""), str(message.get("from") or "")
        if message.get("type") not in ("text", "image", "audio") or not ident or not sender:
            return kit.settled()  # stickers, reactions, locations...
        group = message.get("group_id")
        chat = f"group:{group}" if group else f"private:{sender}"
        self.windows.saw(chat, _seconds(message.get("timestamp")))

        return self.inbound.message_once(chat, ident, lambda: self._incoming(chat, value, message))

    async def _incoming(
        self, chat: str, value: dict[str, Any], message: dict[str, Any]
    ) -> IncomingMessage | None:
        sender = str(message["from"])
        names = {
            str(c.get("wa_id")): str((c.get("profile") or {}).get("name") or "")
            for c in _dicts(value.get("contacts"))
        }
        images: list[str] = []
        voices: list[str] = []
        if message.get("type") == "image":
            image = message.get("image") or {}
            text = str(image.get("caption") or "")
            got = await self._image(str(image.get("id") or ""))
            images = [got] if got else []
        elif message.get("type") == "audio":  # a voice note (OGG/Opus) or an audio file
            text = ""
            data = await self._download(str((message.get("audio") or {}).get("id") or ""), "voice")
            voices = [] if data is None else [kit.data_uri(data, audio.audio_mime(data))]
        else:
            text = str((message.get("text") or {}).get("body") or "")
        group = chat.startswith("group:")
        at_bot = False
        if group and self.number and f"@{self.number}" in text:
            text, at_bot = text.replace(f"@{self.number}", "").strip(), True
        return self.incoming(
            chat,
            sender,
            text,
            sender_name=names.get(sender, ""),
            is_group=group,
            is_at_bot=at_bot,
            message_id=str(message["id"]),
            time=kit.sent_at(message.get("timestamp")),
            images=images,
            audio=voices,
        )

    async def _image(self, media_id: str) -> str | None:
        """A user's image by its media id, as a data URI."""
        data = await self._download(media_id, "image")
        mime = None if data is None else kit.image_mime(data)
        return None if data is None or mime is None else kit.data_uri(data, mime)

    async def _download(self, media_id: str, what: str) -> bytes | None:
        """A user's media by its id: its URL from the API, then the file with the token
        through chatfn.common.fetch; None with a warning."""
        from chatfn.common.fetch import fetch

        if not media_id:
            return None
        try:
            url, _mime = await self.api.media(media_id)
            got = await fetch(
                url,
                allow=self.allow,
                max_bytes=kit.MAX_IMAGE_IN,
                timeout=20,
                headers=self.api.auth,
            )
        except _fetch_errors() as exc:
            self.log.warning("WhatsApp {} {} not downloaded: {}", what, media_id, exc)
            return None
        return got.data


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _seconds(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
