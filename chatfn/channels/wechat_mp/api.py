"""The Official Account API as the channel uses it (https://developers.weixin.qq.com/doc/
offiaccount/), over one aiohttp session.

- access_token: `GET /cgi-bin/token?grant_type=client_credential&appid=&secret=` (valid
  `expires_in`, 7200 s), kept and asked for again five minutes before it ends; a call
  answered 40001 / 40014 / 42001 (the token is not valid any more: another process fetched
  a new one, which ends the old) drops it and is made once more.
- Refused credentials at /cgi-bin/token (40001, 40013 invalid AppID, 40125 invalid
  AppSecret, 40164 the caller's IP is not on the IP whitelist) raise `AuthRefused`; the rate
  limit 45009 raises `RateLimited` (`RATE_WAIT`: WeChat names no wait); 48001 (the account
  lacks the API: an unverified account) raises `NotPermitted`; HTTP 5xx, -1 (system busy) or
  a body that is not JSON raise `Unavailable`; any other code `MpError` (45015: the user
  last spoke more than 48 hours ago; 45047: the customer-service quota for this user is
  used up).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from chatfn.channels.wechat_mp.settings import WechatMpSettings

__all__ = [
    "NETWORK_ERRORS",
    "RATE_WAIT",
    "AuthRefused",
    "MpApi",
    "MpError",
    "NotPermitted",
    "RateLimited",
    "Unavailable",
]

TOKEN_INVALID = frozenset({40001, 40014, 42001})
AUTH_CODES = frozenset({40001, 40002, 40013, 40125, 40164, 41002, 41004})
RATE_CODES = frozenset({45009, 45011})
RATE_WAIT = 2.0
CALL_TIMEOUT = 15.0


class MpError(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(f"{code}: {msg}" if code else msg)
        self.code = code
        self.msg = msg


class AuthRefused(MpError):
    """/cgi-bin/token refused the AppID, AppSecret or the caller's IP."""


class NotPermitted(MpError):
    """48001: the account has no permission for this API (unverified)."""


class RateLimited(MpError):
    def __init__(self, code: int, msg: str, wait: float = RATE_WAIT) -> None:
        super().__init__(code, msg)
        self.wait = wait


class Unavailable(Exception):
    """HTTP 5xx, system busy, or an answer that is not WeChat's: try again later."""


NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    Unavailable,
    OSError,
    TimeoutError,
)


def checked(status: int, body: bytes, *, token_call: bool = False) -> dict[str, Any]:
    if status >= 500:
        raise Unavailable(f"WeChat answered HTTP {status}")
    try:
        data = json.loads(body)
    except ValueError:
        raise Unavailable(f"WeChat answered HTTP {status} with a body that is not JSON") from None
    if not isinstance(data, dict):
        raise Unavailable("WeChat answered something that is not a JSON object")
    code = int(data.get("errcode") or 0)
    msg = str(data.get("errmsg") or "")
    if code == 0 and 200 <= status < 300:
        return data
    if code in RATE_CODES or status == 429:
        raise RateLimited(code or 45009, msg)
    if token_call and code in AUTH_CODES:
        raise AuthRefused(code, msg)
    if code == 48001:
        raise NotPermitted(code, msg)
    if code == -1:
        raise Unavailable(f"WeChat is busy ({msg})")
    raise MpError(code, msg or f"HTTP {status}")


class MpApi:
    def __init__(self, settings: WechatMpSettings) -> None:
        self.cfg = settings
        self.base = settings.api_base
        self._session: aiohttp.ClientSession | None = None
        self._token = ""
        self._renew_at = 0.0
        self._lock = asyncio.Lock()

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT))
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def token(self) -> str:
        if self._token and time.monotonic() < self._renew_at:
            return self._token
        async with self._lock:
            if self._token and time.monotonic() < self._renew_at:
                return self._token
            params = {
                "grant_type": "client_credential",
                "appid": self.cfg.app_id,
                "secret": self.cfg.secret_text("app_secret"),
            }
            async with self.session().get(f"{self.base}/cgi-bin/token", params=params) as r:
                data = checked(r.status, await r.read(), token_call=True)
            token = str(data.get("access_token") or "")
            if not token:
                raise Unavailable("/cgi-bin/token answered without an access_token")
            life = float(data.get("expires_in") or 7200)
            self._token, self._renew_at = token, time.monotonic() + max(life - 300, life / 2)
            return token

    def forget(self, token: str) -> None:
        if token == self._token:
            self._token, self._renew_at = "", 0.0

    async def call(
        self,
        path: str,
        *,
        payload: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        form: aiohttp.FormData | None = None,
    ) -> dict[str, Any]:
        for attempt in (0, 1):
            token = await self.token()
            query = {**(params or {}), "access_token": token}
            body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode()
            async with self.session().post(
                f"{self.base}{path}", params=query, data=form if form is not None else body
            ) as r:
                try:
                    return checked(r.status, await r.read())
                except MpError as exc:
                    if exc.code not in TOKEN_INVALID or attempt:
                        raise
                    self.forget(token)
        raise AssertionError("unreachable")  # pragma: no cover

    async def check(self) -> None:
        """get_api_domain_ip: a call that needs nothing but a valid access_token (the
        credentials still work; a token ended early is fetched again, which a rotated
        AppSecret refuses)."""
        for attempt in (0, 1):
            token = await self.token()
            url = f"{self.base}/cgi-bin/get_api_domain_ip"
            async with self.session().get(url, params={"access_token": token}) as r:
                try:
                    checked(r.status, await r.read())
                    return
                except MpError as exc:
                    if exc.code not in TOKEN_INVALID or attempt:
                        raise
                    self.forget(token)

    async def custom_send(self, payload: dict[str, Any]) -> None:
        """message/custom/send: a customer-service message (48 h after the user spoke)."""
        await self.call("/cgi-bin/message/custom/send", payload=payload)

    async def upload_image(self, data: bytes, name: str, mime: str) -> str:
        """media/upload?type=image (temporary, 3 days; at most 10 MB, png/jpeg/gif)."""
        return await self._upload("image", data, name, mime)

    async def upload_voice(self, mp3: bytes) -> str:
        """media/upload?type=voice (temporary, 3 days; AMR or MP3, at most 2 MB and 60 s)."""
        return await self._upload("voice", mp3, "voice.mp3", "audio/mpeg")

    async def _upload(self, kind: str, data: bytes, name: str, mime: str) -> str:
        form = aiohttp.FormData()
        form.add_field("media", data, filename=name, content_type=mime)
        answer = await self.call("/cgi-bin/media/upload", params={"type": kind}, form=form)
        media_id = str(answer.get("media_id") or "")
        if not media_id:
            raise Unavailable("media/upload answered without a media_id")
        return media_id

    async def media(self, media_id: str, max_bytes: int) -> bytes:
        """media/get: a temporary material (an image a user sent), at most `max_bytes`."""
        for attempt in (0, 1):
            token = await self.token()
            params = {"access_token": token, "media_id": media_id}
            async with self.session().get(f"{self.base}/cgi-bin/media/get", params=params) as r:
                if r.status != 200 or r.content_type in ("application/json", "text/plain"):
                    try:
                        checked(r.status, await r.read())
                    except MpError as exc:
                        if exc.code not in TOKEN_INVALID or attempt:
                            raise
                        self.forget(token)
                        continue
                    raise Unavailable("media/get answered JSON without a file")
                data = await r.content.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise MpError(0, f"image larger than {max_bytes} bytes")
                return data
        raise AssertionError("unreachable")  # pragma: no cover
