"""KOOK's HTTP API (https://developer.kookapp.cn/doc/reference): `{api_base}/v3/...` with
`Authorization: Bot <token>`; every answer is `{"code", "message", "data"}`, code 0 for
success.

Rate limits (developer.kookapp.cn/doc/rate-limit): answers carry `X-Rate-Limit-Limit`,
`X-Rate-Limit-Remaining`, `X-Rate-Limit-Reset` (seconds until the bucket is full again),
`X-Rate-Limit-Bucket` and, when the global limit was hit, `X-Rate-Limit-Global`; past the
limit the answer is HTTP 429 with the same headers. A bucket left at 0 is not called again
before its reset (KOOK revokes bots that keep hitting the limit): the call raises the same
error as a 429 would, with the wait left, and the kit's delivery policy waits it out.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp

from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.kit.errors import ApiError
from chatfn.channels.kit.rest import NETWORK_ERRORS, ChannelApi, retry_after
from chatfn.channels.kook.settings import KookSettings

__all__ = ["ERRORS", "KookApi", "KookApiError", "KookAuthError"]


class KookApiError(ApiError):
    """A call KOOK answered with an error (HTTP status, KOOK's `code`, its `message`);
    `retry_after` is the wait a rate limit named (seconds), else None."""

    auth_codes = frozenset({401})


class KookAuthError(KookApiError):
    """KOOK refused the token."""


#: The calls' errors as the kit's (kit/classify.py).
ERRORS = ErrorKinds(
    "KOOK", "channels.kook.token", (KookAuthError,), (KookApiError,), NETWORK_ERRORS
)


def _reset(headers: Any) -> float | None:
    return retry_after(headers, ("X-Rate-Limit-Reset",))


class KookApi(ChannelApi):
    """The calls of one bot through the channel's aiohttp session."""

    cfg: KookSettings

    def __init__(self, settings: KookSettings, session: aiohttp.ClientSession) -> None:
        super().__init__(settings, session)
        self._exhausted: dict[str, float] = {}  # path -> time.monotonic() of its bucket's reset

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bot {self.cfg.token_value()}"}

    @property
    def root(self) -> str:
        return self.cfg.api_base

    async def request(self, method: str, path: str, kw: dict[str, Any]) -> Any:
        """One call (`call`); its `data`. Raises KookAuthError (401), KookApiError (any other
        refusal, with `retry_after` for a rate limit), aiohttp.ClientError / TimeoutError."""
        wait = self._exhausted.get(path, 0.0) - time.monotonic()
        if wait > 0:
            raise KookApiError(429, 0, f"rate limit bucket of {path} is empty", wait)
        return await super().request(method, path, kw)

    def answered(self, path: str, response: aiohttp.ClientResponse, body: Any) -> Any:
        reset = _reset(response.headers)
        if reset is not None and response.headers.get("X-Rate-Limit-Remaining") == "0":
            self._exhausted[path] = time.monotonic() + reset
        else:
            self._exhausted.pop(path, None)
        return _answer(response, body)


def _answer(response: aiohttp.ClientResponse, body: Any) -> Any:
    code, message = 0, ""
    if isinstance(body, dict):
        try:
            code = int(body.get("code") or 0)
        except (TypeError, ValueError):
            code = -1
        message = str(body.get("message") or "")
    status = response.status
    if status == 401 or code == 401:
        raise KookAuthError(status, code, message or "token refused")
    if status == 429:
        raise KookApiError(status, code, message or "too many requests", _reset(response.headers))
    if status >= 300 or not isinstance(body, dict) or code != 0:
        raise KookApiError(status, code, message or "not a KOOK answer")
    return body.get("data")
