"""Tencent's iLink bot API, as the peers speak it (Tencent/openclaw-weixin src/api/api.ts and
docs/protocol.md; AstrBot's weixin_oc client; Hermes Agent's gateway/platforms/weixin.py).

- JSON POSTs to `{base}/ilink/bot/<method>`, each body with `base_info`; the QR login's two
  calls are unauthenticated (login.py).
- Headers: `AuthorizationType: ilink_bot_token`, `Authorization: Bearer <bot_token>`,
  `X-WECHAT-UIN`: base64 of a random uint32 in decimal, new for every request, and the app's
  `iLink-App-Id` / `iLink-App-ClientVersion`.
- An answer with a non-zero `ret` or `errcode` is an `IlinkError`; -14 is the session timed
  out (the token no longer works: log in again), -2 iLink's frequency limit.
"""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

import aiohttp

from chatfn.channels.kit.errors import CodedError
from chatfn.common.version import __version__

__all__ = [
    "RATE_LIMITED",
    "SESSION_EXPIRED",
    "IlinkApi",
    "IlinkError",
    "base_info",
    "client_headers",
    "ok",
]

#: "Error code returned by the server when the bot session has expired" (openclaw-weixin
#: src/api/session-guard.ts SESSION_EXPIRED_ERRCODE).
SESSION_EXPIRED = -14
#: iLink's frequency limit (Hermes Agent: "-2: iLink frequency limit: backoff and retry").
RATE_LIMITED = -2


class IlinkError(CodedError):
    """iLink answered the call `what` with an error (`ret`/`errcode` non-zero) or an HTTP
    status: the kit's CodedError, its text "<what>: <code> <message>"."""

    auth_codes, rate_codes = frozenset({SESSION_EXPIRED}), frozenset({RATE_LIMITED})

    def __init__(self, what: str, code: int, message: str, status: int = 200) -> None:
        self.what = what
        super().__init__(code, message, status)

    def describe(self) -> str:
        return f"{self.what}: {self.code} {self.message}".strip()

    @property
    def expired(self) -> bool:
        return self.code == SESSION_EXPIRED or self.status in (401, 403)

    @property
    def rate_limited(self) -> bool:
        return self.code == RATE_LIMITED or self.status == 429


def _version_number() -> int:
    """iLink-App-ClientVersion: 0x00MMNNPP of the client's version."""
    parts = [int(p) if p.isdigit() else 0 for p in __version__.split(".")[:3]] + [0, 0, 0]
    return ((parts[0] & 0xFF) << 16) | ((parts[1] & 0xFF) << 8) | (parts[2] & 0xFF)


def client_headers() -> dict[str, str]:
    """What every request carries, the unauthenticated QR calls too."""
    return {"iLink-App-Id": "bot", "iLink-App-ClientVersion": str(_version_number())}


def base_info() -> dict[str, str]:
    return {"channel_version": __version__, "bot_agent": f"chatfn/{__version__}"}


def ok(answer: Any) -> bool:
    if not isinstance(answer, dict):
        return False
    return not _code(answer)


def _code(answer: dict[str, Any]) -> int:
    for key in ("ret", "errcode"):
        try:
            value = int(answer.get(key) or 0)
        except (TypeError, ValueError):
            value = -1
        if value:
            return value
    return 0


class IlinkApi:
    """The bot's calls: `post(method, body)` on `base_url` with `token`."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, token: str) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")
        self.token = token

    def headers(self) -> dict[str, str]:
        uin = base64.b64encode(str(secrets.randbits(32)).encode()).decode()
        return {
            "Content-Type": "application/json",
            "AuthorizationType": "ilink_bot_token",
            "Authorization": f"Bearer {self.token}",
            "X-WECHAT-UIN": uin,
            **client_headers(),
        }

    async def post(self, method: str, body: dict[str, Any], timeout: float = 15.0) -> Any:
        """POST `ilink/bot/<method>`: the answer, or IlinkError; aiohttp's errors and
        TimeoutError as they are."""
        payload = json.dumps({**body, "base_info": base_info()}, ensure_ascii=False)
        url = f"{self.base_url}/ilink/bot/{method}"
        async with self.session.post(
            url,
            data=payload.encode(),
            headers=self.headers(),
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            text = await response.text()
            if response.status >= 400:
                error = IlinkError(method, 0, text[:200], response.status)
                error.retry_after = _retry_after(response.headers.get("Retry-After"))
                raise error
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            raise IlinkError(method, -1, f"not JSON: {text[:80]!r}") from None
        if not isinstance(answer, dict):
            raise IlinkError(method, -1, "not a JSON object")
        if code := _code(answer):
            raise IlinkError(method, code, str(answer.get("errmsg") or ""))
        return answer


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
