"""The QQ bot OpenAPI over HTTP: the access token and one call.

- Token (https://bot.q.qq.com/wiki/develop/api-v2/dev-prepare/interface-framework/api-use.html):
  `POST {token_url}` with `{"appId", "clientSecret"}` answers `{"access_token", "expires_in"}`
  (seconds, as a string; 7200). A new token is fetched `REFRESH_BEFORE` seconds before the old
  one expires (QQ keeps the old one valid for the last 60 s, so calls in flight still pass),
  and at once when a call is answered 401.
- Calls: `{api_root}{path}` with `Authorization: QQBot {access_token}` and `X-Union-Appid`.
  A refusal is an HTTP status (401, 404, 429, 500, ...) with a body `{"code", "message"}`
  (https://bot.q.qq.com/wiki/develop/api-v2/openapi/error/error.html): QQApiError carries
  both, and says which kind it is (auth, rate limit, a duplicate msg_seq, an expired passive
  reply window).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import aiohttp

from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.kit.errors import ApiError
from chatfn.channels.kit.rest import NETWORK_ERRORS, ChannelApi
from chatfn.channels.kit.token import ExpiringToken
from chatfn.channels.qq.settings import QQSettings

__all__ = [
    "AUTH_CODES",
    "DUPLICATE_CODES",
    "EXPIRED_CODES",
    "RATE_CODES",
    "QQApi",
    "QQApiError",
    "QQAuthError",
]

REFRESH_BEFORE = 60.0
#: Codes of a token or an AppID that is not accepted (fixable: messages wait).
AUTH_CODES = frozenset({11241, 11242, 11243, 11244, 11251, 11261, 11275, 100007, 100016})
#: "msg limit exceed" (22009) and a channel's write rate (20028): slow down.
RATE_CODES = frozenset({22009, 20028})
#: The same msg_id + msg_seq sent again: QQ already has this reply.
DUPLICATE_CODES = frozenset({40054005})
#: The message a passive reply answers is too old (304027 MSG_EXPIRE and the v2 API's codes).
EXPIRED_CODES = frozenset({304027, 304103, 40034005, 40034128})
#: Taken, and waiting for QQ's manual review (an active / a passive message): sent.
ASYNC_OK_CODES = frozenset({304023, 304024})
#: An active message QQ no longer allows (groups and C2C since 2025-04-21) or a closed switch.
ACTIVE_REFUSED_CODES = frozenset({22007, 40034006, 304022, 304031})


class QQApiError(ApiError):
    """A call QQ answered with an error status or code."""

    auth_codes, rate_codes = AUTH_CODES, RATE_CODES

    @property
    def is_duplicate(self) -> bool:
        return self.code in DUPLICATE_CODES

    @property
    def is_expired(self) -> bool:
        return self.code in EXPIRED_CODES


class QQAuthError(QQApiError):
    """getAppAccessToken refused the AppID and AppSecret."""

    def __str__(self) -> str:
        return f"getAppAccessToken: {super().__str__()}"


#: The calls' errors as the kit's (kit/classify.py), and what the operator does when QQ refuses
#: the AppID and AppSecret.
ERRORS = ErrorKinds(
    "QQ",
    "channels.qq.app_id / channels.qq.secret",
    (QQAuthError,),
    (QQApiError,),
    NETWORK_ERRORS,
)
FIX = "check the AppID and AppSecret at q.qq.com -> Development -> Settings"


class QQApi(ChannelApi):
    """The token and the calls of one bot; `session` is the channel's aiohttp session."""

    cfg: QQSettings

    def __init__(self, settings: QQSettings, session: aiohttp.ClientSession) -> None:
        super().__init__(settings, session)
        # Used until REFRESH_BEFORE seconds (a quarter of a short life) before it expires.
        self._token = ExpiringToken(
            self._fetch_token, lambda life: life - min(REFRESH_BEFORE, life / 4)
        )

    @property
    def tokens_fetched(self) -> int:
        return self._token.fetched

    async def token(self, *, fresh: bool = False) -> str:
        """The access token, fetched again when it is about to expire (or `fresh`)."""
        return await self._token.get(fresh=fresh)

    async def _fetch_token(self) -> tuple[str, float]:
        body = {"appId": self.cfg.app_id, "clientSecret": self.cfg.secret_value()}
        async with self.session.post(
            self.cfg.token_url, json=body, timeout=aiohttp.ClientTimeout(total=15)
        ) as response:
            data = await _json(response)
        token = str(data.get("access_token") or "") if isinstance(data, dict) else ""
        if not token:
            code, message = _error(data)
            raise QQAuthError(response.status, code, message or "no access_token in the answer")
        try:
            return token, float(data.get("expires_in") or 7200)
        except (TypeError, ValueError):
            return token, 7200.0

    async def who_am_i(self) -> dict[str, Any]:
        """GET /users/@me: the bot (connecting, and the online check). Raises the kit's
        CredentialsRefused (naming the keys to fix) or Unreachable."""
        with ERRORS.connecting("GET /users/@me", self.cfg.api_root, FIX):
            me = await self.call("GET", "/users/@me")
        return me if isinstance(me, dict) else {}

    @property
    def root(self) -> str:
        return self.cfg.api_root

    async def request(self, method: str, path: str, kw: dict[str, Any]) -> Any:
        """One OpenAPI call (`call`); its JSON answer (None for 204). Raises QQApiError. A 401
        fetches a new token and tries once more (kit/token.py)."""

        def once(token: str) -> Awaitable[Any]:
            headers = {"Authorization": f"QQBot {token}", "X-Union-Appid": self.cfg.app_id}
            return self.send(method, path, kw, headers)

        return await self._token.using(
            once, lambda exc: isinstance(exc, QQApiError) and exc.status == 401
        )

    def answered(self, path: str, response: aiohttp.ClientResponse, body: Any) -> Any:
        code, message = _error(body)
        if response.status < 300 and (not code or code in ASYNC_OK_CODES):
            return body
        raise QQApiError(response.status, code, message)


async def _json(response: aiohttp.ClientResponse) -> Any:
    try:
        return await response.json(content_type=None)
    except ValueError:
        return {}


def _error(data: Any) -> tuple[int, str]:
    """(code, message) of an error body; (0, "") when the body is not one."""
    if not isinstance(data, dict):
        return 0, ""
    raw = data.get("code", data.get("err_code", 0))
    try:
        code = int(raw or 0)
    except (TypeError, ValueError):
        code = 0
    return code, str(data.get("message") or data.get("msg") or "")
