"""The Graph API as the WhatsApp channel uses it (https://developers.facebook.com/docs/
whatsapp/cloud-api/reference), over one aiohttp session with the access token.

- `whoami()`: GET /{phone-number-id}?fields=display_phone_number,verified_name.
- `send(payload)`: POST /{phone-number-id}/messages; the message's id (a wamid).
- `upload(data, mime)`: POST /{phone-number-id}/media (multipart); the media id.
- `media(media_id)`: GET /{media-id}: the URL (valid for minutes, needs the token) and type
  of a file a user sent; the channel downloads it through chatfn.common.fetch.

An error answer is Graph's `{"error": {"message", "type", "code", "error_subcode"}}`, raised
as `GraphError(status, code, message)` (the kit's ApiError, with Graph's codes): 190 (the
token is invalid or expired) and HTTP 401 are refused credentials; 130429, 131056, 80007, 4
and 80008 rate limits (RATE_CODES); 131047 the 24-hour window (WINDOW_CODE).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from chatfn.channels.kit.errors import ApiError
from chatfn.channels.kit.rest import NETWORK_ERRORS, BearerApi, retry_after
from chatfn.channels.whatsapp.settings import WhatsAppSettings

__all__ = [
    "AUTH_CODES",
    "NETWORK_ERRORS",
    "RATE_CODES",
    "WINDOW_CODE",
    "GraphApi",
    "GraphError",
]

#: Throughput (130429), pair rate (131056: too many to one user), account (80007), app (4),
#: WABA (80008) rate limits (https://developers.facebook.com/docs/whatsapp/cloud-api/support/
#: error-codes).
RATE_CODES = frozenset({4, 80007, 80008, 130429, 131056})
AUTH_CODES = frozenset({190, 102})
#: "Re-engagement message": more than 24 hours since the user last wrote.
WINDOW_CODE = 131047


class GraphError(ApiError):
    """Graph answered with an error: "HTTP <status>, code <code>: <message>" (the code named
    even when 0)."""

    auth_codes, rate_codes = AUTH_CODES, RATE_CODES

    def describe(self) -> str:
        return f"HTTP {self.status}, code {self.code}: {self.message}"


def _error(status: int, body: bytes, headers: Any) -> GraphError:
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return GraphError(status, 0, f"an answer that is not Graph's ({body[:100]!r})")
    code = error.get("code")
    return GraphError(
        status,
        int(code) if isinstance(code, int | str) and str(code).isdigit() else 0,
        str(error.get("message") or ""),
        retry_after(headers),
    )


class GraphApi(BearerApi):
    cfg: WhatsAppSettings
    token_key = "access_token"

    refused = staticmethod(_error)

    def garbled(self, status: int, message: str) -> GraphError:
        return GraphError(status, 0, message)

    async def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        data = await self.json_call(method, f"{self.cfg.graph}/{path}", **kw)
        if not isinstance(data, dict):
            raise GraphError(200, 0, "an answer that is not a JSON object")
        return data

    async def whoami(self) -> tuple[str, str]:
        """(display phone number, verified name) of the phone number id."""
        params = {"fields": "display_phone_number,verified_name"}
        data = await self._call("GET", self.cfg.phone_number_id, params=params)
        return str(data.get("display_phone_number") or ""), str(data.get("verified_name") or "")

    async def send(self, payload: dict[str, Any]) -> str:
        body = {"messaging_product": "whatsapp", **payload}
        data = await self._call("POST", f"{self.cfg.phone_number_id}/messages", json=body)
        messages = data.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[0], dict):
            return str(messages[0].get("id") or "")
        return ""

    async def upload(self, data: bytes, mime: str, name: str) -> str:
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        form.add_field("file", data, filename=name, content_type=mime)
        answer = await self._call("POST", f"{self.cfg.phone_number_id}/media", data=form)
        media_id = str(answer.get("id") or "")
        if not media_id:
            raise GraphError(200, 0, "media upload answered without an id")
        return media_id

    async def media(self, media_id: str) -> tuple[str, str]:
        """(download URL, mime type) of a media id."""
        params = {"phone_number_id": self.cfg.phone_number_id}
        data = await self._call("GET", media_id, params=params)
        url = str(data.get("url") or "")
        if not url:
            raise GraphError(200, 0, f"media {media_id} has no URL")
        return url, str(data.get("mime_type") or "")
