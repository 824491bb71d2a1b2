"""A local Bot Framework for Teams, on the fake-platform base (tests/channels/fake_platform.py):
it is the OpenID / JWKS issuer, the login endpoint and the Bot Connector, and it signs the
activities it POSTs to the bot, as
https://learn.microsoft.com/azure/bot-service/rest-api/bot-framework-rest-connector-authentication
and .../bot-framework-rest-connector-api-reference describe them.

- GET /v1/.well-known/openidconfiguration: the metadata (issuer, `jwks_uri`); GET
  /v1/.well-known/keys: its RSA key (`kid`, `endorsements: ["msteams"]`).
- POST /{tenant}/oauth2/v2.0/token: client credentials (`client_id`, `client_secret`, scope
  `https://api.botframework.com/.default`); else 401 `invalid_client` / 400 `invalid_scope`
  (as Microsoft's login endpoint answers). Tokens it issued are the only ones the connector
  takes (revoked with the secret).
- The connector at `{base}/teams/` (the activities' serviceUrl): POST
  /v3/conversations/{id}/activities[/{replyToId}]: a token it issued (else 401), a known
  conversation (else 404 ConversationNotFound), a JSON `message` activity (else 400
  BadArgument), its text at most `max_length` characters (else 413 MessageSizeTooBig), a
  `replyToId` one of the conversation's activities (else 400); `rate_limited[conv] = s`: 429
  with Retry-After for s seconds. GET /teams/v3/attachments/{id}/views/original: a user's
  image (the bot's token required).
- `deliver(activity)` POSTs an activity to `callback_url` with `Authorization: Bearer <JWT>`
  signed RS256 by its key (iss https://api.botframework.com, aud the app id, nbf/exp,
  serviceUrl); `sign(...)` makes bad ones for the tests (another key, audience, expiry).
"""

from __future__ import annotations

import itertools
import json
import math
import secrets
import time
from datetime import UTC, datetime
from typing import Any

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.channels.fake_platform import FakePlatform

ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _error(status: int, code: str, message: str, **headers: str) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message}}, status=status, headers=headers
    )


class FakeTeams(FakePlatform):
    def __init__(self, max_length: int = 28000) -> None:
        super().__init__()
        self.app_id = "a1b2c3d4-0000-4000-8000-000000000001"
        self.app_password = "s3cret~password"
        self.tenant = "botframework.com"
        self.max_length = max_length
        self.kid = "fake-key-1"
        self.key = _key()
        self.other_key = _key()  # never published: a forged signature
        self.issued: set[str] = set()
        self.conversations: dict[str, str] = {}  # id -> conversationType
        self.activities: dict[str, set[str]] = {}  # conversation -> activity ids
        self.sent: dict[str, list[dict[str, Any]]] = {}
        self.files: dict[str, bytes] = {}
        self.rate_limited: dict[str, float] = {}
        self._limited_until: dict[str, float] = {}
        self.callback_url = ""
        self.answers: list[int] = []
        self._ids = itertools.count(1)

    @property
    def service_url(self) -> str:
        return f"{self.base}/teams/"

    @property
    def openid_url(self) -> str:
        return f"{self.base}/v1/.well-known/openidconfiguration"

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_get("/v1/.well-known/openidconfiguration", self._openid)
        router.add_get("/v1/.well-known/keys", self._keys)
        router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        router.add_post("/teams/v3/conversations/{conv}/activities", self._send)
        router.add_post("/teams/v3/conversations/{conv}/activities/{reply}", self._send)
        router.add_get("/teams/v3/attachments/{id}/views/original", self._attachment)

    # -- the issuer ------------------------------------------------------------------------------
    async def _openid(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": ISSUER,
                "authorization_endpoint": f"{self.base}/v1/.well-known/authorize",
                "jwks_uri": f"{self.base}/v1/.well-known/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            }
        )

    async def _keys(self, request: web.Request) -> web.Response:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": self.kid, "use": "sig", "endorsements": ["msteams"]})
        return web.json_response({"keys": [jwk]})

    def sign(self, activity: dict[str, Any], *, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "iss": ISSUER,
            "aud": self.app_id,
            "nbf": now - 5,
            "exp": now + 3600,
            "serviceUrl": activity.get("serviceUrl"),
            **claims,
        }
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    # -- the login endpoint ----------------------------------------------------------------------
    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        if form.get("client_id") != self.app_id or form.get("client_secret") != self.app_password:
            return web.json_response(
                {
                    "error": "invalid_client",
                    "error_description": "AADSTS7000215: Invalid client secret provided.",
                },
                status=401,
            )
        if form.get("scope") != SCOPE:
            return web.json_response({"error": "invalid_scope"}, status=400)
        token = secrets.token_urlsafe(24)
        self.issued.add(token)
        return web.json_response(
            {
                "token_type": "Bearer",
                "expires_in": 3599,
                "ext_expires_in": 3599,
                "access_token": token,
            }
        )

    def revoke(self) -> None:
        self.app_password = "another~secret"
        self.issued.clear()

    # -- the connector ---------------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return scheme == "Bearer" and token in self.issued

    async def _send(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, "Unauthorized", "Authorization has been denied for this request.")
        conv, reply = request.match_info["conv"], request.match_info.get("reply")
        if conv not in self.conversations:
            return _error(404, "ConversationNotFound", "Conversation not found.")
        try:
            activity = json.loads(await request.read())
        except ValueError:
            return _error(400, "BadArgument", "Malformed activity")
        if not isinstance(activity, dict) or activity.get("type") != "message":
            return _error(400, "BadArgument", "Unknown activity type")
        now = time.monotonic()
        if conv in self.rate_limited:
            self._limited_until[conv] = now + self.rate_limited.pop(conv)
        if now < self._limited_until.get(conv, 0.0):
            wait = str(math.ceil(self._limited_until[conv] - now))
            return _error(429, "TooManyRequests", "Too many requests", **{"Retry-After": wait})
        text = activity.get("text") or ""
        if not isinstance(text, str) or len(text) > self.max_length:
            return _error(413, "MessageSizeTooBig", "Message size too big")
        if not text and not activity.get("attachments"):
            return _error(400, "BadArgument", "Activity has no text or attachments")
        if reply and reply not in self.activities.get(conv, set()):
            return _error(400, "BadArgument", "Unknown replyToId")
        ident = f"1{next(self._ids):012d}"
        self.sent.setdefault(conv, []).append({**activity, "id": ident, "replyToId": reply})
        self.activities.setdefault(conv, set()).add(ident)
        await self.notify()
        return web.json_response({"id": ident}, status=201)

    async def _attachment(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return _error(401, "Unauthorized", "Authorization has been denied for this request.")
        data = self.files.get(request.match_info["id"])
        if data is None:
            return _error(404, "NotFound", "no such attachment")
        return web.Response(body=data, content_type="image/png")

    # -- users' side -----------------------------------------------------------------------------
    def file(self, data: bytes) -> str:
        ident = f"att{next(self._ids)}"
        self.files[ident] = data
        return f"{self.service_url}v3/attachments/{ident}/views/original"

    def activity(self, conv: str, kind: str, user: str, name: str, **fields: Any) -> dict[str, Any]:
        self.conversations[conv] = kind
        ident = f"act{next(self._ids)}"
        self.activities.setdefault(conv, set()).add(ident)
        conversation: dict[str, Any] = {"id": conv, "conversationType": kind, "tenantId": "t1"}
        if kind != "personal":
            conversation["isGroup"] = True
        return {
            "type": "message",
            "id": ident,
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "serviceUrl": self.service_url,
            "channelId": "msteams",
            "from": {
                "id": user,
                "name": name,
                "aadObjectId": "00000000-0000-0000-0000-" + user[-12:].rjust(12, "0"),
            },
            "conversation": conversation,
            "recipient": {"id": f"28:{self.app_id}", "name": "chatbot"},
            "textFormat": "plain",
            "locale": "en-US",
            **fields,
        }

    async def deliver(self, activity: dict[str, Any], token: str | None = None) -> int:
        """POST `activity` to the bot with a valid JWT (or `token`); the bot's status."""
        auth = {"Authorization": f"Bearer {token if token is not None else self.sign(activity)}"}
        async with aiohttp.ClientSession() as session:
            async with session.post(self.callback_url, json=activity, headers=auth) as r:
                self.answers.append(r.status)
                return r.status

    async def wait_sent(self, conv: str, count: int, timeout: float = 15.0) -> list[Any]:
        return await self.wait_for(
            lambda: self.sent[conv] if len(self.sent.get(conv, [])) >= count else None, timeout
        )
