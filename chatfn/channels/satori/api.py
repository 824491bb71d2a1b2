"""Satori's HTTP API (https://satori.chat/en-US/protocol/api.html) as the channel uses it:
`POST {endpoint}/v1/{resource}.{method}` with a JSON body, `Authorization: Bearer <token>`
and the login it speaks as in `Satori-Platform` / `Satori-User-ID` (the current spec's
names; `X-Platform` / `X-Self-ID`, the names before v1.1, are sent too for older servers).

Errors: the HTTP status (400 a malformed request, 401 the token, 403, 404 an API the platform
lacks, 5xx), raised as `ApiError(status, text, retry_after)` (the kit's HttpError, with no
code of Satori's own); a 429 (a proxy's, the spec
names none) with `Retry-After`.
"""

from __future__ import annotations

import json
from typing import Any

from chatfn.channels.kit.errors import HttpError
from chatfn.channels.kit.rest import NETWORK_ERRORS, ApiSession, retry_after
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.common.fetch import FetchTooLarge, read_limited

__all__ = ["NETWORK_ERRORS", "ApiError", "SatoriApi"]


class ApiError(HttpError):
    """The Satori server answered with an error status: the HTTP `status`, its `text` (the
    kit's `message`) and the wait it named; "HTTP <status>: <text>"."""

    def __init__(self, status: int, text: str, retry_after: float | None = None) -> None:
        super().__init__(status, "", text, retry_after)

    @property
    def text(self) -> str:
        return self.message

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.message}".strip()


class SatoriApi(ApiSession):
    def __init__(self, settings: SatoriSettings) -> None:
        super().__init__()
        self.cfg = settings

    def headers(self, platform: str = "", self_id: str = "") -> dict[str, str]:
        got = {"Content-Type": "application/json"}
        token = self.cfg.secret_text("token")
        if token:
            got["Authorization"] = f"Bearer {token}"
        if platform:
            got.update({"Satori-Platform": platform, "X-Platform": platform})
        if self_id:
            got.update({"Satori-User-ID": self_id, "X-Self-ID": self_id})
        return got

    async def call(
        self, name: str, body: dict[str, Any], platform: str = "", self_id: str = ""
    ) -> Any:
        """`POST /v1/{name}` (e.g. `message.create`) as the login (platform, self_id)."""
        url = f"{self.cfg.api}/{name}"
        headers = self.headers(platform, self_id)
        async with self.session().post(url, data=json.dumps(body), headers=headers) as r:
            raw = await r.read()
            if not 200 <= r.status < 300:
                text = raw[:200].decode(errors="replace")
                raise ApiError(r.status, text, retry_after(r.headers))
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise ApiError(r.status, "an answer that is not JSON") from None

    async def meta(self) -> dict[str, Any]:
        """`POST /v1/meta`: the server's logins (and proxy URLs); checks the token."""
        got = await self.call("meta", {})
        if not isinstance(got, dict) or not isinstance(got.get("logins"), list):
            raise ApiError(200, "/v1/meta answered without logins")
        return got

    async def create(self, platform: str, self_id: str, channel: str, content: str) -> list[str]:
        """`message.create`: the ids of the messages the platform made of `content`."""
        body = {"channel_id": channel, "content": content}
        got = await self.call("message.create", body, platform, self_id)
        if not isinstance(got, list):
            return []
        return [str(m.get("id")) for m in got if isinstance(m, dict) and m.get("id")]

    async def download(self, url: str, max_bytes: int) -> bytes:
        """A resource of the server (its proxy route, `{endpoint}/v1/proxy/...`)."""
        headers = self.headers()
        headers.pop("Content-Type")
        async with self.session().get(url, headers=headers) as r:
            if r.status != 200:
                raise ApiError(r.status, (await r.read())[:200].decode(errors="replace"))
            try:
                return await read_limited(r, max_bytes)
            except FetchTooLarge:
                raise ApiError(0, f"file larger than {max_bytes} bytes") from None
