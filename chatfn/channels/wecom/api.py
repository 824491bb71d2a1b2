"""WeCom's server API as the channel uses it (https://developer.work.weixin.qq.com/document/
path/90664 and on), over one aiohttp session.

- The access_token comes from `GET /cgi-bin/gettoken?corpid=&corpsecret=` (valid
  `expires_in` seconds, 7200), kept and asked for again five minutes before it ends, one
  fetch at a time however many calls wait for it; a call answered 40014 / 42001 (invalid,
  expired token: a token revoked early, another process that fetched a new one) drops it
  and is made once more with a new one.
- Answers are `{"errcode": 0, "errmsg": "ok", ...}`. Refused credentials (40001 invalid
  secret, 40013 invalid corp id, 40091 / 40056 / 301002 ...) raise `AuthRefused`; the rate
  limits (45009 "api freq out of limit", 45011, 45033 too many at once, 45047) raise
  `RateLimited` with `RATE_WAIT` (WeCom names no wait); HTTP 5xx or an answer that is not
  JSON raise `Unavailable`; any other code `WecomError`.
- The intelligent robot's active reply goes to the `response_url` its callback carries
  (`post_response`), only when that URL is under `api_base` (a forged callback cannot
  make the bot post elsewhere).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from chatfn.channels.wecom.settings import WecomSettings

__all__ = [
    "NETWORK_ERRORS",
    "RATE_WAIT",
    "AuthRefused",
    "RateLimited",
    "Unavailable",
    "WecomApi",
    "WecomError",
]

#: The access_token is invalid or expired: fetch a new one and try once more.
TOKEN_INVALID = frozenset({40014, 42001, 42007, 42009})
#: The corp id, secret or agent id are refused.
AUTH_CODES = frozenset({40001, 40013, 40056, 40091, 40082, 40084, 301002, 60011})
#: Rate limits (WeCom's global error code table).
RATE_CODES = frozenset({45009, 45011, 45033, 45047})
#: Seconds waited after a rate-limit code: WeCom names none (its limits are per minute).
RATE_WAIT = 2.0
#: Seconds one API call may take.
CALL_TIMEOUT = 15.0


class WecomError(Exception):
    """WeCom refused a call: its errcode and errmsg."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(f"{code}: {msg}" if code else msg)
        self.code = code
        self.msg = msg


class AuthRefused(WecomError):
    """gettoken (or a call) refused the corp id, secret or agent id."""


class RateLimited(WecomError):
    """A rate-limit code: wait `wait` seconds."""

    def __init__(self, code: int, msg: str, wait: float = RATE_WAIT) -> None:
        super().__init__(code, msg)
        self.wait = wait


class Unavailable(Exception):
    """HTTP 5xx, or an answer that is not WeCom's: try again later."""


NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    Unavailable,
    OSError,
    TimeoutError,
)


def checked(status: int, body: bytes) -> dict[str, Any]:
    """The answer as a dict when errcode is 0; else the error it stands for."""
    if status == 429:
        raise RateLimited(45009, "HTTP 429")
    if status >= 500:
        raise Unavailable(f"WeCom answered HTTP {status}")
    try:
        data = json.loads(body)
    except ValueError:
        raise Unavailable(f"WeCom answered HTTP {status} with a body that is not JSON") from None
    if not isinstance(data, dict):
        raise Unavailable("WeCom answered something that is not a JSON object")
    code = int(data.get("errcode") or 0)
    msg = str(data.get("errmsg") or "")
    if code == 0 and 200 <= status < 300:
        return data
    if code in RATE_CODES:
        raise RateLimited(code, msg)
    if code in AUTH_CODES:
        raise AuthRefused(code, msg)
    if code in (-1,):  # "system busy": a passing failure
        raise Unavailable(f"WeCom is busy ({code}: {msg})")
    raise WecomError(code, msg or f"HTTP {status}")


class WecomApi:
    """The calls of one app (module docstring)."""

    def __init__(self, settings: WecomSettings) -> None:
        self.cfg = settings
        self.base = settings.api_base
        self._session: aiohttp.ClientSession | None = None
        self._token = ""
        self._renew_at = 0.0
        self._lock = asyncio.Lock()
        self.fetched = 0  # tokens asked for (tests)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT))
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the token ---------------------------------------------------------------------------
    async def token(self) -> str:
        if self._token and time.monotonic() < self._renew_at:
            return self._token
        async with self._lock:
            if self._token and time.monotonic() < self._renew_at:
                return self._token
            params = {"corpid": self.cfg.corp_id, "corpsecret": self.cfg.secret_text("secret")}
            self.fetched += 1
            async with self.session().get(f"{self.base}/cgi-bin/gettoken", params=params) as r:
                data = checked(r.status, await r.read())
            token = str(data.get("access_token") or "")
            if not token:
                raise Unavailable("gettoken answered without an access_token")
            life = float(data.get("expires_in") or 7200)
            self._token, self._renew_at = token, time.monotonic() + max(life - 300, life / 2)
            return token

    def forget(self, token: str) -> None:
        if token == self._token:
            self._token, self._renew_at = "", 0.0

    # -- calls -------------------------------------------------------------------------------
    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        payload: dict[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
    ) -> dict[str, Any]:
        """One API call with the access_token (module docstring)."""
        for attempt in (0, 1):
            token = await self.token()
            query = {**(params or {}), "access_token": token}
            async with self.session().request(
                method, f"{self.base}{path}", params=query, json=payload, data=form
            ) as r:
                try:
                    return checked(r.status, await r.read())
                except WecomError as exc:
                    if exc.code not in TOKEN_INVALID or attempt:
                        raise
                    self.forget(token)
        raise AssertionError("unreachable")  # pragma: no cover

    async def agent(self) -> dict[str, Any]:
        """agent/get: the app's name and who may use it (who-am-I)."""
        return await self.call(
            "GET", "/cgi-bin/agent/get", params={"agentid": str(self.cfg.agent_id)}
        )

    async def send(self, payload: dict[str, Any]) -> str:
        """message/send (to members): the msgid."""
        data = await self.call("POST", "/cgi-bin/message/send", payload=payload)
        return str(data.get("msgid") or "")

    async def appchat_send(self, payload: dict[str, Any]) -> None:
        """appchat/send: to a group chat the app made (appchat/create)."""
        await self.call("POST", "/cgi-bin/appchat/send", payload=payload)

    async def upload_image(self, data: bytes, name: str, mime: str) -> str:
        """media/upload?type=image (at most 2 MB, jpg/png): a media_id valid three days."""
        return await self._upload("image", data, name, mime)

    async def upload_voice(self, amr: bytes) -> str:
        """media/upload?type=voice (AMR only, at most 2 MB and 60 s): a media_id valid three
        days, for a `voice` message."""
        return await self._upload("voice", amr, "voice.amr", "audio/amr")

    async def _upload(self, kind: str, data: bytes, name: str, mime: str) -> str:
        form = aiohttp.FormData()
        form.add_field("media", data, filename=name, content_type=mime)
        answer = await self.call("POST", "/cgi-bin/media/upload", params={"type": kind}, form=form)
        media_id = str(answer.get("media_id") or "")
        if not media_id:
            raise Unavailable("media/upload answered without a media_id")
        return media_id

    async def media(self, media_id: str, max_bytes: int) -> bytes:
        """media/get: a file a member sent (an image), at most `max_bytes`."""
        for attempt in (0, 1):
            token = await self.token()
            params = {"access_token": token, "media_id": media_id}
            async with self.session().get(f"{self.base}/cgi-bin/media/get", params=params) as r:
                if r.status != 200 or r.content_type in ("application/json", "text/plain"):
                    try:
                        checked(r.status, await r.read())
                    except WecomError as exc:
                        if exc.code not in TOKEN_INVALID or attempt:
                            raise
                        self.forget(token)
                        continue
                    raise Unavailable("media/get answered JSON without a file")
                if (r.content_length or 0) > max_bytes:
                    raise WecomError(0, f"image larger than {max_bytes} bytes")
                data = await r.content.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise WecomError(0, f"image larger than {max_bytes} bytes")
                return data
        raise AssertionError("unreachable")  # pragma: no cover

    async def post_response(self, url: str, payload: dict[str, Any]) -> None:
        """The intelligent robot's active reply to a callback's response_url."""
        if not url.startswith(self.base + "/"):
            raise WecomError(0, f"response_url outside {self.base} refused")
        async with self.session().post(url, json=payload) as r:
            checked(r.status, await r.read())
