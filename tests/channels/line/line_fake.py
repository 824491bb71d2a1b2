"""A local LINE Messaging API (https://developers.line.biz/en/reference/messaging-api/), on
the fake-platform base (tests/channels/fake_platform.py), speaking what the channel uses and
refusing what LINE refuses.

- Webhooks out: `deliver(events)` POSTs `{"destination", "events"}` to the bot's webhook,
  signed as LINE signs (`X-Line-Signature`: base64 of HMAC-SHA256 of the body with the
  channel secret; https://developers.line.biz/en/reference/messaging-api/#signature-validation).
  Message events carry a reply token the fake issued (single use; refused after `reply_ttl`
  seconds) and a quote token; image messages' content is served at the content endpoint.
- API in: every call needs `Authorization: Bearer <channel access token>` (401 otherwise).
  POST /v2/bot/message/reply and /push take 1 to 5 messages (400 otherwise) of type text
  (1..5000 characters, UTF-16 units), textV2 (each `{name}` a substitution, each substitution
  used) or image (https URLs of at most 2000 characters, unless `allow_http`); a reply token
  unknown, used or too old is 400 "Invalid reply token"; push's `X-Line-Retry-Key` must be a
  UUID and a key seen before is answered 409 with `x-line-accepted-request-id`, nothing sent
  (https://developers.line.biz/en/docs/messaging-api/retrying-api-request/). A body that is
  not JSON is 400.
- `rate_limited[to] = seconds`: sends to `to` are answered 429 (no Retry-After, as LINE)
  until the seconds have passed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.channels.fake_platform import FakePlatform

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]+)\}")


def sign(secret: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Posted:
    """One message the bot sent, as a member sees it."""

    to: str
    via: str  # "reply" or "push"
    text: str = ""
    mentions: list[str] = field(default_factory=list)
    quote: str | None = None  # the message id whose quote token it carried
    image: bytes | str | None = None
    audio_ms: int | None = None  # an audio message's duration


class Bad(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


class FakeLine(FakePlatform):
    def __init__(self) -> None:
        super().__init__()
        self.secret = "fake-channel-secret-0123456789ab"
        self.token = "fake-long-lived-access-token"
        self.bot_id = "U" + "b" * 32
        self.callback_url = ""
        self.allow_http = False  # the bot's media URL in tests is plain http on 127.0.0.1
        self.reply_ttl = 60.0
        self.redeliveries = 3  # webhook redelivery: on
        self.sent: dict[str, list[Posted]] = {}
        self.rate_limited: dict[str, float] = {}
        self.names: dict[str, str] = {}
        self.webhook_answers: list[int] = []
        self._tokens: dict[str, tuple[str, float, bool]] = {}  # reply token -> (to, at, used)
        self._quotes: dict[str, str] = {}  # quote token -> message id
        self._content: dict[str, bytes] = {}
        self._keys: dict[str, str] = {}  # retry key -> accepted request id
        self._ids = itertools.count(100000)
        self._limited_until: dict[str, float] = {}

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v2/bot/info", self._info)
        router.add_post("/v2/bot/message/reply", self._reply)
        router.add_post("/v2/bot/message/push", self._push)
        router.add_get("/v2/bot/message/{id}/content", self._get_content)
        router.add_get("/v2/bot/profile/{user}", self._profile)
        router.add_get("/v2/bot/group/{chat}/member/{user}", self._profile)
        router.add_get("/v2/bot/room/{chat}/member/{user}", self._profile)

    async def check(self, request: web.Request) -> web.StreamResponse | None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response(
                {
                    "message": "Authentication failed. Confirm that the access token in the "
                    "authorization header is valid."
                },
                status=401,
            )
        return None

    # -- webhooks to the bot ---------------------------------------------------------------------
    def next_id(self) -> str:
        return str(next(self._ids))

    def message_event(
        self,
        source: dict[str, Any],
        message: dict[str, Any],
        *,
        redelivery: bool = False,
        event_id: str | None = None,
    ) -> dict[str, Any]:
        """A message event as LINE sends it (https://developers.line.biz/en/reference/
        messaging-api/#message-event), with a fresh reply token and quote token."""
        to = source.get("groupId") or source.get("roomId") or source["userId"]
        reply_token = uuid.uuid4().hex
        self._tokens[reply_token] = (to, time.monotonic(), False)
        quote = "q" + uuid.uuid4().hex
        self._quotes[quote] = message["id"]
        return {
            "type": "message",
            "mode": "active",
            "timestamp": int(time.time() * 1000),
            "source": source,
            "webhookEventId": event_id or "01" + uuid.uuid4().hex.upper()[:24],
            "deliveryContext": {"isRedelivery": redelivery},
            "replyToken": reply_token,
            "message": {**message, "quoteToken": quote},
        }

    def text_message(self, text: str, mention_self: bool = False) -> dict[str, Any]:
        message: dict[str, Any] = {"id": self.next_id(), "type": "text", "text": text}
        if mention_self:
            message["text"] = "@Bot " + text
            message["mention"] = {
                "mentionees": [
                    {"index": 0, "length": 4, "type": "user", "userId": self.bot_id, "isSelf": True}
                ]
            }
        return message

    def image_message(self, data: bytes) -> dict[str, Any]:
        ident = self.next_id()
        self._content[ident] = data
        return {"id": ident, "type": "image", "contentProvider": {"type": "line"}}

    def audio_message(self, data: bytes, duration_ms: int = 2000) -> dict[str, Any]:
        """A voice message (LINE sends M4A): its content at the content endpoint."""
        ident = self.next_id()
        self._content[ident] = data
        return {
            "id": ident,
            "type": "audio",
            "duration": duration_ms,
            "contentProvider": {"type": "line"},
        }

    async def deliver(self, *events: dict[str, Any], signature: str | None = None) -> int:
        """POST the events to the bot's webhook, signed; the HTTP status it answered last.
        An answer other than 2xx is followed by a redelivery (webhook redelivery on: the same
        events, `deliveryContext.isRedelivery` true), `redeliveries` times at most."""
        status = 0
        batch = list(events)
        for _ in range(1 + self.redeliveries):
            body = json.dumps({"destination": self.bot_id, "events": batch}).encode()
            headers = {
                "Content-Type": "application/json",
                "X-Line-Signature": sign(self.secret, body) if signature is None else signature,
            }
            status = await self.post_raw(body, headers)
            if 200 <= status < 300 or signature is not None:
                return status
            batch = [{**e, "deliveryContext": {"isRedelivery": True}} for e in batch]
        return status

    async def post_raw(self, body: bytes, headers: dict[str, str]) -> int:
        async with aiohttp.ClientSession() as session:
            async with session.post(self.callback_url, data=body, headers=headers) as r:
                self.webhook_answers.append(r.status)
                return r.status

    # -- the API ---------------------------------------------------------------------------------
    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "userId": self.bot_id,
                "basicId": "@000fake",
                "displayName": "Fake Bot",
                "chatMode": "bot",
                "markAsReadMode": "auto",
            }
        )

    async def _profile(self, request: web.Request) -> web.Response:
        user = request.match_info["user"]
        return web.json_response({"userId": user, "displayName": self.names.get(user, "User")})

    async def _get_content(self, request: web.Request) -> web.Response:
        data = self._content.get(request.match_info["id"])
        if data is None:
            return web.json_response({"message": "Not found"}, status=404)
        return web.Response(body=data, content_type="image/png")

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.read())
        except ValueError:
            raise Bad(400, "The request body could not be parsed as JSON") from None
        if not isinstance(body, dict):
            raise Bad(400, "The request body has 1 error(s)")
        return body

    def _limited(self, to: str) -> bool:
        now = time.monotonic()
        if to in self.rate_limited:
            self._limited_until[to] = now + self.rate_limited.pop(to)
        return now < self._limited_until.get(to, 0.0)

    async def _answer(self, job: Any) -> web.Response:
        try:
            headers, sent = await job
        except Bad as exc:
            return web.json_response(
                {
                    "message": exc.message,
                    **({"details": exc.extra["details"]} if "details" in exc.extra else {}),
                },
                status=exc.status,
                headers=exc.extra.get("headers"),
            )
        return web.json_response({"sentMessages": sent}, headers=headers or {})

    async def _reply(self, request: web.Request) -> web.Response:
        return await self._answer(self._do_reply(request))

    async def _do_reply(self, request: web.Request) -> tuple[None, list[dict[str, str]]]:
        body = await self._body(request)
        messages = self._validate(body.get("messages"))
        token = str(body.get("replyToken") or "")
        held = self._tokens.get(token)
        if held is None or held[2] or time.monotonic() - held[1] > self.reply_ttl:
            raise Bad(400, "Invalid reply token")
        if self._limited(held[0]):
            raise Bad(429, "Too Many Requests")
        self._tokens[token] = (held[0], held[1], True)
        return None, await self._record(held[0], "reply", messages)

    async def _push(self, request: web.Request) -> web.Response:
        return await self._answer(self._do_push(request))

    async def _do_push(self, request: web.Request) -> tuple[dict[str, str], list[dict[str, str]]]:
        key = request.headers.get("X-Line-Retry-Key")
        if key is not None:
            try:
                uuid.UUID(key)
            except ValueError:
                raise Bad(400, "The retry key is not a UUID") from None
            if key in self._keys:
                raise Bad(
                    409,
                    "The retry key is already accepted",
                    headers={"x-line-accepted-request-id": self._keys[key]},
                )
        body = await self._body(request)
        messages = self._validate(body.get("messages"))
        to = str(body.get("to") or "")
        if not re.fullmatch(r"[UCR][0-9a-f]{32}", to):
            raise Bad(400, "The property, 'to', in the request body is invalid")
        if self._limited(to):
            raise Bad(429, "Too Many Requests")
        if key is not None:
            self._keys[key] = uuid.uuid4().hex
        sent = await self._record(to, "push", messages)
        return {"x-line-request-id": uuid.uuid4().hex}, sent

    def _validate(self, messages: Any) -> list[dict[str, Any]]:
        if not isinstance(messages, list) or not 1 <= len(messages) <= 5:
            raise Bad(
                400,
                "The request body has 1 error(s)",
                details=[{"message": "Size must be between 1 and 5", "property": "messages"}],
            )
        for n, m in enumerate(messages):
            problem = _problem(m, self.allow_http)
            if problem:
                raise Bad(
                    400,
                    "The request body has 1 error(s)",
                    details=[{"message": problem, "property": f"messages[{n}]"}],
                )
        return messages

    async def _record(
        self, to: str, via: str, messages: list[dict[str, Any]]
    ) -> list[dict[str, str]]:
        """Keep what a member sees; LINE's `sentMessages` (an id and quote token each)."""
        ids = []
        for m in messages:
            ids.append({"id": self.next_id(), "quoteToken": "q" + uuid.uuid4().hex})
            posted = Posted(to=to, via=via)
            if m["type"] == "image":
                posted.image = await self._download(m["originalContentUrl"])
            elif m["type"] == "audio":  # kept where a member plays it: `image` holds its bytes
                posted.image = await self._download(m["originalContentUrl"])
                posted.audio_ms = int(m["duration"])
            else:
                text, mentions = m["text"], []
                for name, sub in (m.get("substitution") or {}).items():
                    mentions.append(sub["mentionee"]["userId"])
                    text = text.replace("{" + name + "}", "")
                posted.text, posted.mentions = text.strip(), mentions
                posted.quote = self._quotes.get(m.get("quoteToken") or "")
            self.sent.setdefault(to, []).append(posted)
        await self.notify()
        return ids

    async def _download(self, url: str) -> bytes | str:
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(url) as r:
                    return await r.read() if r.status == 200 else url
        except aiohttp.ClientError:
            return url

    async def wait_sent(self, to: str, count: int, timeout: float = 15.0) -> list[Posted]:
        return await self.wait_for(
            lambda: self.sent[to] if len(self.sent.get(to, [])) >= count else None, timeout
        )


def _problem(m: Any, allow_http: bool) -> str | None:
    """What LINE would refuse in one message object, or None."""
    if not isinstance(m, dict):
        return "must be an object"
    kind = m.get("type")
    if kind in ("text", "textV2"):
        text = m.get("text")
        if not isinstance(text, str) or not 1 <= utf16_len(text) <= 5000:
            return "Length must be between 1 and 5000"
        if kind == "textV2":
            subs = m.get("substitution") or {}
            names = set(_PLACEHOLDER.findall(text))
            if names != set(subs):
                return "Every placeholder must have a substitution, and every one be used"
        return None
    if kind == "image":
        for key in ("originalContentUrl", "previewImageUrl"):
            url = m.get(key)
            schemes = ("https://", "http://") if allow_http else ("https://",)
            if not isinstance(url, str) or not url.startswith(schemes) or len(url) > 2000:
                return f"{key} must be an https URL of at most 2000 characters"
        return None
    if kind == "audio":  # MP3 or M4A by https URL, with its length in milliseconds
        url = m.get("originalContentUrl")
        schemes = ("https://", "http://") if allow_http else ("https://",)
        if not isinstance(url, str) or not url.startswith(schemes) or len(url) > 2000:
            return "originalContentUrl must be an https URL of at most 2000 characters"
        if not isinstance(m.get("duration"), int) or m["duration"] <= 0:
            return "duration must be a positive number of milliseconds"
        return None
    return f"Unsupported message type: {kind!r}"
