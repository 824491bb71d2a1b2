"""The server API plumbing Tencent's two WeChat platforms share, written once: the WeCom
channel's `WecomApi` and the Official Account channel's `MpApi` are each this plus their own
token request, error codes and calls (as chatfn/channels/wxcrypt.py is their shared
callback encryption).

Both platforms answer `{"errcode": 0, "errmsg": "ok", ...}`, hand out an `access_token`
(`expires_in` seconds, 7200) from a GET under /cgi-bin/ that every call carries as a query
parameter, end a token early when another process fetches a new one, and take uploads at
/cgi-bin/media/upload and serve a member's files at /cgi-bin/media/get. So, here:

- the token is kept and asked for again five minutes before it ends, one fetch at a time
  however many calls wait for it; a call answered with one of the dialect's token-invalid
  codes drops it and is made once more with a new one;
- an answer becomes its dict, or the error it stands for (`checked`): an HTTP 429 or a
  rate-limit code `RateLimited` (`RATE_WAIT`: neither platform names a wait); a refused
  credential `AuthRefused` (WeCom: on any call; an Official Account: only at its token
  endpoint, where 40001 means a wrong secret, while elsewhere it means a token that ended);
  a permission code `NotPermitted`; HTTP 5xx, -1 (system busy) or a body that is not a JSON
  object `Unavailable`; any other code `WxError`.

What differs between the platforms is a `Dialect` (the codes) and `token_params`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import aiohttp

from chatfn.channels import kit
from chatfn.channels.kit import rest
from chatfn.channels.kit.rest import ApiSession, CodedError, Unavailable
from chatfn.channels.kit.token import ExpiringToken
from chatfn.common.fetch import FetchTooLarge, read_limited

__all__ = [
    "API_ERRORS",
    "NETWORK_ERRORS",
    "RATE_WAIT",
    "AuthRefused",
    "Dialect",
    "NotPermitted",
    "RateLimited",
    "Unavailable",
    "WxApi",
    "WxError",
    "classify",
    "said",
    "voice_uploads",
]

#: Seconds waited after a rate-limit code: neither platform names one.
RATE_WAIT = 2.0
#: Seconds one API call may take.
CALL_TIMEOUT = 15.0
#: Seconds of a spoken reply per voice message: both platforms play at most 60 s.
VOICE_CLIP = 59.0

T = TypeVar("T")


class WxError(CodedError):
    """The platform refused a call: its errcode and errmsg."""


class AuthRefused(WxError):
    """The token endpoint (or, on WeCom, a call) refused the app's id or secret."""


class NotPermitted(WxError):
    """The account has no permission for this API (an unverified Official Account)."""


class RateLimited(WxError):
    """A rate-limit code: wait `wait` seconds (its `retry_after` too, so the kit's error
    family reads it as a limit)."""

    def __init__(self, code: int, msg: str, wait: float = RATE_WAIT) -> None:
        super().__init__(code, msg, retry_after=wait)

    @property
    def wait(self) -> float:
        return self.retry_after or 0.0


#: HTTP 5xx, system busy, or an answer that is not the platform's (`Unavailable`), and the
#: network's: try again later.
NETWORK_ERRORS = rest.PASSING_ERRORS
#: Any failure of a call: the platform's refusal or the network.
API_ERRORS: tuple[type[BaseException], ...] = (WxError, *NETWORK_ERRORS)


@dataclass(frozen=True)
class Dialect:
    """One platform's error codes (module docstring)."""

    name: str  # in messages: "WeCom", "WeChat"
    token_invalid: frozenset[int]
    auth: frozenset[int]
    rate: frozenset[int]
    #: Whether `auth` codes mean refused credentials on every call, or only at the token
    #: endpoint (an Official Account's 40001 is a token that ended on any other call).
    auth_on_calls: bool = True
    not_permitted: frozenset[int] = frozenset()

    def checked(self, status: int, body: bytes, *, token_call: bool = False) -> dict[str, Any]:
        """The answer as a dict when errcode is 0; else the error it stands for."""
        if status == 429:
            raise RateLimited(45009, "HTTP 429")
        if status >= 500:
            raise Unavailable(f"{self.name} answered HTTP {status}")
        try:
            data = json.loads(body)
        except ValueError:
            raise Unavailable(
                f"{self.name} answered HTTP {status} with a body that is not JSON"
            ) from None
        if not isinstance(data, dict):
            raise Unavailable(f"{self.name} answered something that is not a JSON object")
        code = int(data.get("errcode") or 0)
        msg = str(data.get("errmsg") or "")
        if code == 0 and 200 <= status < 300:
            return data
        if code in self.rate:
            raise RateLimited(code, msg)
        if code in self.auth and (token_call or self.auth_on_calls):
            raise AuthRefused(code, msg)
        if code in self.not_permitted:
            raise NotPermitted(code, msg)
        if code == -1:  # "system busy": a passing failure
            raise Unavailable(f"{self.name} is busy ({code}: {msg})")
        raise WxError(code, msg or f"HTTP {status}")


class WxApi(ApiSession):
    """One app's session and access_token (module docstring); a platform's API subclasses
    it with its `dialect`, `token_path`, `token_params` and its calls. `cfg`: the channel's
    settings (their `api_base` the address)."""

    timeout = CALL_TIMEOUT
    dialect: ClassVar[Dialect]
    #: The GET that hands out an access_token ("/cgi-bin/token", "/cgi-bin/gettoken").
    token_path: ClassVar[str]

    def __init__(self, settings: Any) -> None:
        super().__init__()
        self.cfg = settings
        self.base: str = settings.api_base
        # Used until five minutes (half a short life) before it ends: kit/token.py.
        self._token = ExpiringToken(self._fetch_token, lambda life: max(life - 300, life / 2))

    @property
    def fetched(self) -> int:
        """Tokens asked for (tests)."""
        return self._token.fetched

    def token_params(self) -> dict[str, str]:
        """The query of the token request: the app's id and secret."""
        raise NotImplementedError

    async def token(self) -> str:
        return await self._token.get()

    async def _fetch_token(self) -> tuple[str, float]:
        url = f"{self.base}{self.token_path}"
        async with self.session().get(url, params=self.token_params()) as r:
            data = self.dialect.checked(r.status, await r.read(), token_call=True)
        token = str(data.get("access_token") or "")
        if not token:
            raise Unavailable(f"{self.token_path} answered without an access_token")
        return token, float(data.get("expires_in") or 7200)

    def forget(self, token: str) -> None:
        self._token.forget(token)

    async def with_token(self, attempt: Callable[[str], Awaitable[T]]) -> T:
        """`attempt(token)`, made once more with a new token when the platform says the
        token is not valid any more (another process fetched a new one, which ends it)."""
        for tries in (0, 1):
            token = await self.token()
            try:
                return await attempt(token)
            except WxError as exc:
                if exc.code not in self.dialect.token_invalid or tries:
                    raise
                self.forget(token)
        raise AssertionError("unreachable")  # pragma: no cover

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: dict[str, Any] | None = None,
        data: Any = None,
    ) -> dict[str, Any]:
        """One API call with the access_token; the answer checked."""

        async def attempt(token: str) -> dict[str, Any]:
            query = {**(params or {}), "access_token": token}
            async with self.session().request(
                method, f"{self.base}{path}", params=query, json=json, data=data
            ) as r:
                return self.dialect.checked(r.status, await r.read())

        return await self.with_token(attempt)

    async def upload(self, kind: str, data: bytes, name: str, mime: str) -> str:
        """media/upload?type=`kind`: a temporary media_id (valid three days)."""
        form = aiohttp.FormData()
        form.add_field("media", data, filename=name, content_type=mime)
        answer = await self.request(
            "POST", "/cgi-bin/media/upload", params={"type": kind}, data=form
        )
        media_id = str(answer.get("media_id") or "")
        if not media_id:
            raise Unavailable("media/upload answered without a media_id")
        return media_id

    async def received(self, media_id: str, what: str, log: Any) -> bytes | None:
        """A file a user sent (media/get, within the kit's image limit); None, with a warning
        on `log` naming `what` ("image", "voice"), when it cannot be had: the message goes
        on without it."""
        try:
            return await self.media(media_id, kit.MAX_IMAGE_IN)
        except API_ERRORS as exc:
            log.warning("{} {} {} not downloaded: {}", self.dialect.name, what, media_id, exc)
            return None

    async def media(self, media_id: str, max_bytes: int) -> bytes:
        """media/get: a file a user sent (an image), at most `max_bytes`."""

        async def attempt(token: str) -> bytes:
            params = {"access_token": token, "media_id": media_id}
            async with self.session().get(f"{self.base}/cgi-bin/media/get", params=params) as r:
                if r.status != 200 or r.content_type in ("application/json", "text/plain"):
                    self.dialect.checked(r.status, await r.read())
                    raise Unavailable("media/get answered JSON without a file")
                try:  # to its end: content.read(n) returns only what has arrived so far
                    return await read_limited(r, max_bytes)
                except FetchTooLarge:
                    raise WxError(0, f"file larger than {max_bytes} bytes") from None

        return await self.with_token(attempt)


def classify(
    exc: Exception, key: str, name: str, credentials: str, api_base: str
) -> Exception | None:
    """A send's failure as the kit's error (kit/errors.py): a rate limit waits `wait` in the
    chat's order, refused `credentials` wait in the outbox, any other refusal drops the
    message, the network and 5xx are tried again; None for what is not the API's."""
    if isinstance(exc, RateLimited):
        return kit.RateLimited(f"{name} rate limit sending to {key} ({exc})", exc.wait)
    if isinstance(exc, AuthRefused):
        return kit.CredentialsRefused(f"{name} refused {credentials} ({exc})")
    if isinstance(exc, WxError):
        return kit.DeliveryRefused(f"{name} refused the message to {key}: {exc}")
    if isinstance(exc, NETWORK_ERRORS):
        return kit.Unreachable(f"{name} not reachable at {api_base} ({exc})")
    return None


def said(fields: dict[str, str]) -> dict[str, Any]:
    """A callback message's XML fields as the kit's `incoming` takes them: who sent it, its
    text, its id and when."""
    return {
        "sender_id": fields["FromUserName"],
        "text": fields.get("Content", ""),
        "message_id": fields["MsgId"],
        "time": kit.sent_at(fields.get("CreateTime")),
    }


async def voice_uploads(
    sender: kit.PlatformSender[Any],
    key: str,
    voice_ref: str,
    convert: Callable[[bytes], Awaitable[bytes]],
    plays: str,
) -> AsyncIterator[str]:
    """The media ids of a spoken reply's clips (`VOICE_CLIP` seconds each) for the chat `key`,
    each converted by `convert` (to a format the platform plays, `plays` saying which when the
    reply is not audio) and uploaded with type=voice as it comes."""
    for wav, _seconds in await kit.voice_clips(voice_ref, VOICE_CLIP, plays):
        data = await convert(wav)
        yield await sender.call(key, functools.partial(sender.client.upload_voice, data))
