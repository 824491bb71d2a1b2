"""A local WhatsApp Cloud API (Meta's Graph API, https://developers.facebook.com/docs/
whatsapp/cloud-api/reference), on the fake-platform base (tests/channels/fake_platform.py),
speaking what the channel uses and refusing what WhatsApp refuses.

- Webhooks out: `verify()` is Meta's URL check (GET `hub.mode=subscribe`,
  `hub.verify_token`, `hub.challenge`); `deliver(messages)` POSTs a
  `whatsapp_business_account` change of field `messages` (https://developers.facebook.com/
  docs/whatsapp/cloud-api/webhooks/payload-examples), signed `X-Hub-Signature-256:
  sha256=<hex HMAC-SHA256 of the body with the app secret>`, and sends it again while the
  bot answers other than 200 (Meta retries), `redeliveries` times at most.
- API in: `Authorization: Bearer <token>` or 401 with code 190. POST /{ver}/{phone}/messages
  needs `messaging_product: whatsapp`; a text's body is 1..4096 characters (else 400, code
  100); an image is an uploaded media id or an https link; a template must be one the
  account has approved (else 132001). A free-form message to a user who last wrote more than
  24 hours ago (`age()`) is refused with 131047 (templates go). `rate_limited[to] = s`: 131056
  (pair rate limit) for s seconds. POST /{phone}/media takes a multipart upload; GET
  /{media-id} names a download URL (on this server) that needs the token too.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.channels.fake_platform import FakePlatform

VERSION = "v23.0"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Posted:
    """One message the bot sent, as the user sees it."""

    to: str
    kind: str  # text, image, audio, template
    text: str = ""
    quote: str | None = None
    image: bytes | str | None = None
    audio: bytes | None = None
    template: str | None = None
    wamid: str = ""


@dataclass
class _Error(Exception):
    status: int
    code: int
    message: str
    extra: dict[str, Any] = field(default_factory=dict)


class FakeWhatsApp(FakePlatform):
    def __init__(self) -> None:
        super().__init__()
        self.token = "EAAGfaketoken"
        self.app_secret = "fake-app-secret-0123"
        self.verify_token = "fake-verify-token"
        self.phone_number_id = "106540352242922"
        self.display_number = "+1 555-010-0999"
        self.templates = {"answer_waiting"}
        self.callback_url = ""
        self.redeliveries = 3
        self.sent: dict[str, list[Posted]] = {}
        self.last_inbound: dict[str, float] = {}  # who wrote when (the 24-hour window)
        self.rate_limited: dict[str, float] = {}
        self.webhook_answers: list[int] = []
        self._limited_until: dict[str, float] = {}
        self._media: dict[str, tuple[bytes, str]] = {}
        self._ids = itertools.count(1)

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(f"/{VERSION}/{{phone}}/messages", self._messages)
        router.add_post(f"/{VERSION}/{{phone}}/media", self._upload)
        router.add_get(f"/{VERSION}/{{node}}", self._node)
        router.add_get("/download/{media}", self._download)

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error_response(
                _Error(401, 190, "Invalid OAuth access token - Cannot parse access token")
            )
        return None

    # -- webhooks to the bot ---------------------------------------------------------------------
    def next_wamid(self) -> str:
        return "wamid.HBgL" + uuid.uuid4().hex.upper()

    def text(self, sender: str, body: str, group: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "from": sender,
            "id": self.next_wamid(),
            "timestamp": str(int(time.time())),
            "type": "text",
            "text": {"body": body},
        }
        if group:
            message["group_id"] = group
        return message

    def audio(self, sender: str, data: bytes, voice: bool = True) -> dict[str, Any]:
        """A voice note (`voice: true`, OGG/Opus) as the webhook carries it: its media id."""
        media = str(next(self._ids) + 900000)
        mime = "audio/ogg; codecs=opus"
        self._media[media] = (data, mime)
        body = {"id": media, "mime_type": mime, "sha256": hashlib.sha256(data).hexdigest()}
        return {
            "from": sender,
            "id": self.next_wamid(),
            "timestamp": str(int(time.time())),
            "type": "audio",
            "audio": {**body, "voice": voice},
        }

    def image(self, sender: str, data: bytes, caption: str = "") -> dict[str, Any]:
        media = str(next(self._ids) + 900000)
        self._media[media] = (data, "image/png")
        image = {"id": media, "mime_type": "image/png", "sha256": hashlib.sha256(data).hexdigest()}
        if caption:
            image["caption"] = caption
        return {
            "from": sender,
            "id": self.next_wamid(),
            "timestamp": str(int(time.time())),
            "type": "image",
            "image": image,
        }

    def envelope(self, messages: list[dict[str, Any]], **value: Any) -> dict[str, Any]:
        contacts = [
            {"profile": {"name": f"User {m['from']}"}, "wa_id": m["from"]} for m in messages
        ]
        return {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102290129340398",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": self.display_number,
                                    "phone_number_id": self.phone_number_id,
                                },
                                "contacts": contacts,
                                "messages": messages,
                                **value,
                            },
                        }
                    ],
                }
            ],
        }

    async def deliver(self, *messages: dict[str, Any], signature: str | None = None) -> int:
        """POST the messages to the bot's webhook, signed; again while not answered 200."""
        for m in messages:
            self.last_inbound[m.get("group_id") or m["from"]] = time.time()
        body = json.dumps(self.envelope(list(messages))).encode()
        return await self.post(body, signature)

    async def post(self, body: bytes, signature: str | None = None) -> int:
        status = 0
        for _ in range(1 + self.redeliveries):
            headers = {
                "Content-Type": "application/json",
                "X-Hub-Signature-256": sign(self.app_secret, body)
                if signature is None
                else signature,
            }
            async with aiohttp.ClientSession() as session:
                async with session.post(self.callback_url, data=body, headers=headers) as r:
                    status = r.status
            self.webhook_answers.append(status)
            if status == 200 or signature is not None:
                break
        return status

    async def verify(self, token: str, challenge: str = "1158201444") -> tuple[int, str]:
        params = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
        async with aiohttp.ClientSession() as session:
            async with session.get(self.callback_url, params=params) as r:
                return r.status, await r.text()

    def age(self, who: str, hours: float) -> None:
        """`who` last wrote `hours` ago."""
        self.last_inbound[who] = time.time() - hours * 3600

    # -- the API ---------------------------------------------------------------------------------
    async def _node(self, request: web.Request) -> web.Response:
        node = request.match_info["node"]
        if node == self.phone_number_id:
            return web.json_response(
                {
                    "display_phone_number": self.display_number,
                    "verified_name": "Fake Business",
                    "id": node,
                }
            )
        if node in self._media:
            data, mime = self._media[node]
            return web.json_response(
                {
                    "url": f"{self.base}/download/{node}",
                    "mime_type": mime,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "file_size": len(data),
                    "id": node,
                    "messaging_product": "whatsapp",
                }
            )
        return _error_response(
            _Error(400, 100, f"Unsupported get request. Object with ID '{node}' does not exist")
        )

    async def _download(self, request: web.Request) -> web.Response:
        got = self._media.get(request.match_info["media"])
        if got is None:
            return web.Response(status=404)
        return web.Response(body=got[0], content_type=got[1])

    async def _upload(self, request: web.Request) -> web.Response:
        try:
            form = await request.post()
        except ValueError:
            return _error_response(_Error(400, 100, "Invalid parameter"))
        upload = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not hasattr(upload, "file"):
            return _error_response(_Error(400, 100, "Invalid parameter"))
        media = str(next(self._ids) + 800000)
        self._media[media] = (upload.file.read(), str(form.get("type") or ""))  # type: ignore[union-attr]
        return web.json_response({"id": media})

    async def _messages(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
            posted = self._check(body if isinstance(body, dict) else {})
        except ValueError:
            return _error_response(_Error(400, 100, "Invalid parameter"))
        except _Error as exc:
            return _error_response(exc)
        self.sent.setdefault(posted.to, []).append(posted)
        await self.notify()
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": posted.to, "wa_id": posted.to}],
                "messages": [{"id": posted.wamid}],
            }
        )

    def _check(self, body: dict[str, Any]) -> Posted:
        if body.get("messaging_product") != "whatsapp":
            raise _Error(400, 100, "The parameter messaging_product is required.")
        to, kind = str(body.get("to") or ""), body.get("type")
        if not to:
            raise _Error(400, 100, "The parameter to is required.")
        now = time.monotonic()
        if to in self.rate_limited:
            self._limited_until[to] = now + self.rate_limited.pop(to)
        if now < self._limited_until.get(to, 0.0):
            raise _Error(400, 131056, "(Business Account, Consumer Account) pair rate limit hit")
        posted = Posted(to=to, kind=str(kind), wamid=self.next_wamid())
        if kind == "template":
            name = (body.get("template") or {}).get("name")
            if name not in self.templates:
                raise _Error(404, 132001, "Template name does not exist in the translation")
            posted.template = name
            return posted
        if time.time() - self.last_inbound.get(to, 0.0) > 24 * 3600:
            raise _Error(
                400,
                131047,
                "Re-engagement message: more than 24 hours have passed since the recipient "
                "last replied to the sender number.",
            )
        if kind == "text":
            text = (body.get("text") or {}).get("body")
            if not isinstance(text, str) or not 1 <= len(text) <= 4096:
                raise _Error(400, 100, "Invalid parameter: text.body must be 1 to 4096 characters")
            posted.text = text
            posted.quote = (body.get("context") or {}).get("message_id")
            return posted
        if kind == "image":
            image = body.get("image") or {}
            if "id" in image and str(image["id"]) in self._media:
                posted.image = self._media[str(image["id"])][0]
            elif str(image.get("link") or "").startswith("https://"):
                posted.image = str(image["link"])
            else:
                raise _Error(400, 131053, "Media upload error: no such media id or https link")
            return posted
        if kind == "audio":
            # Cloud API audio: AAC, AMR, MP3, MP4 audio, OGG (Opus only), by an uploaded id
            media = self._media.get(str((body.get("audio") or {}).get("id") or ""))
            kinds = ("audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg")
            if media is None or media[1].split(";")[0].strip() not in kinds:
                raise _Error(400, 131053, "Media upload error: not an uploaded audio file")
            posted.audio = media[0]
            return posted
        raise _Error(400, 100, f"Invalid parameter: type {kind!r}")

    async def wait_sent(self, to: str, count: int, timeout: float = 15.0) -> list[Posted]:
        return await self.wait_for(
            lambda: self.sent[to] if len(self.sent.get(to, [])) >= count else None, timeout
        )


def _error_response(exc: _Error) -> web.Response:
    return web.json_response(
        {
            "error": {
                "message": exc.message,
                "type": "OAuthException",
                "code": exc.code,
                "fbtrace_id": "AbCdEf" + uuid.uuid4().hex[:10],
            }
        },
        status=exc.status,
    )
