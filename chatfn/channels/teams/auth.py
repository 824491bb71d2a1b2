"""The Bot Framework's two tokens
(https://learn.microsoft.com/azure/bot-service/rest-api/bot-framework-rest-connector-authentication):

- In: every activity Teams POSTs carries `Authorization: Bearer <JWT>`. It is checked as the
  protocol says: the OpenID metadata (`openid_metadata_url`) names `jwks_uri`; the JWT's
  `kid` must be one of those keys (fetched again, at most once a minute, for an unknown
  one), the key endorsed for the activity's channel (`endorsements` holds `msteams`) when it
  lists endorsements; signed RS256; issuer `https://api.botframework.com`; audience the
  bot's `app_id`; within `nbf` / `exp` (five minutes' clock skew); its `serviceUrl` claim, when
  there, the activity's `serviceUrl`. PyJWT (with cryptography) checks the signature and
  claims.
- Out: `POST {api_base}/{tenant}/oauth2/v2.0/token` (client credentials, scope
  `https://api.botframework.com/.default`), kept until five minutes before it expires.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
import jwt
from jwt.algorithms import RSAAlgorithm

from chatfn.channels.kit.errors import HttpError
from chatfn.channels.teams.settings import TeamsSettings

__all__ = ["ISSUER", "SCOPE", "AuthError", "Keys", "TokenError", "Tokens"]

ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
LEEWAY = 300
REFETCH_AFTER = 60.0


class AuthError(Exception):
    """An activity's token is not the Bot Framework's for this bot (answer 401/403)."""


class TokenError(HttpError):
    """The login endpoint refused the bot's credentials (status, its `error`: the kit's
    HttpError with no code, its `message`): "HTTP <status>: <error>"."""

    def __init__(self, status: int, error: str, retry_after: float | None = None) -> None:
        super().__init__(status, "", error, retry_after)

    @property
    def error(self) -> str:
        return self.message


class Keys:
    """The Bot Framework's signing keys, from its OpenID metadata."""

    def __init__(self, settings: TeamsSettings, session: aiohttp.ClientSession) -> None:
        self.cfg = settings
        self.session = session
        self.keys: dict[str, dict[str, Any]] = {}
        self._fetched = 0.0

    async def _json(self, url: str) -> dict[str, Any]:
        async with self.session.get(url) as r:
            r.raise_for_status()
            got = json.loads(await r.read())
        if not isinstance(got, dict):
            raise ValueError(f"{url} answered no JSON object")
        return got

    async def refresh(self) -> None:
        meta = await self._json(self.cfg.openid_metadata_url)
        jwks = await self._json(str(meta.get("jwks_uri") or ""))
        keys = jwks.get("keys")
        self.keys = {str(k["kid"]): k for k in keys or [] if isinstance(k, dict) and k.get("kid")}
        self._fetched = time.monotonic()

    async def key(self, kid: str) -> dict[str, Any] | None:
        if kid not in self.keys and time.monotonic() - self._fetched > REFETCH_AFTER:
            await self.refresh()
        return self.keys.get(kid)

    async def verify(self, header: str, activity: dict[str, Any]) -> dict[str, Any]:
        """The claims of a valid token of `header` for `activity`; AuthError otherwise."""
        scheme, _, token = header.partition(" ")
        if scheme != "Bearer" or not token:
            raise AuthError("no Bearer token")
        try:
            kid = str(jwt.get_unverified_header(token).get("kid") or "")
        except jwt.PyJWTError as exc:
            raise AuthError(f"not a JWT: {exc}") from None
        jwk = await self.key(kid)
        if jwk is None:
            raise AuthError(f"signed with an unknown key {kid!r}")
        endorsements = jwk.get("endorsements")
        channel = str(activity.get("channelId") or "")
        if isinstance(endorsements, list) and channel not in endorsements:
            raise AuthError(f"the key is not endorsed for channel {channel!r}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                RSAAlgorithm.from_jwk(json.dumps(jwk)),  # type: ignore[arg-type]
                algorithms=["RS256"],
                audience=self.cfg.app_id,
                issuer=ISSUER,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise AuthError(str(exc)) from None
        claimed = claims.get("serviceUrl") or claims.get("serviceurl")
        if claimed and claimed != activity.get("serviceUrl"):
            raise AuthError("the token's serviceUrl is not the activity's")
        return claims


class Tokens:
    """The bot's own token for the Bot Connector (module docstring)."""

    def __init__(self, settings: TeamsSettings, session: aiohttp.ClientSession) -> None:
        self.cfg = settings
        self.session = session
        self._token = ""
        self._until = 0.0

    def forget(self) -> None:
        self._token, self._until = "", 0.0

    async def token(self, fresh: bool = False) -> str:
        if fresh or not self._token or time.monotonic() >= self._until:
            await self._login()
        return self._token

    async def _login(self) -> None:
        form = {
            "grant_type": "client_credentials",
            "client_id": self.cfg.app_id,
            "client_secret": self.cfg.secret_text("app_password"),
            "scope": SCOPE,
        }
        async with self.session.post(self.cfg.token_url, data=form) as r:
            raw = await r.read()
            try:
                got = json.loads(raw)
            except ValueError:
                got = {}
            if r.status != 200 or not isinstance(got, dict) or not got.get("access_token"):
                error = (
                    got.get("error_description") or got.get("error")
                    if isinstance(got, dict)
                    else ""
                )
                wait = r.headers.get("Retry-After")
                raise TokenError(
                    r.status,
                    str(error or raw[:120]),
                    float(wait) if wait and wait.isdigit() else None,
                )
        self._token = str(got["access_token"])
        self._until = time.monotonic() + max(60.0, float(got.get("expires_in") or 3600) - 300)
