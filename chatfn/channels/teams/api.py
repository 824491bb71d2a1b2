"""The Bot Connector REST API as the channel uses it
(https://learn.microsoft.com/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference):
`POST {serviceUrl}/v3/conversations/{id}/activities` (a new message) and
`.../activities/{activityId}` (a reply to it, in its thread), with the bot's token
(auth.Tokens). Errors are `{"error": {"code", "message"}}`, raised as `ApiError(status,
code, message, retry_after)`; a 429 names its wait in `Retry-After`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import aiohttp

from chatfn.channels.kit.rest import (
    NETWORK_ERRORS,
    ApiSession,
    HttpError,
    read_file,
    retry_after,
)
from chatfn.channels.teams.auth import Keys, Tokens
from chatfn.channels.teams.settings import TeamsSettings

__all__ = ["NETWORK_ERRORS", "ApiError", "TeamsApi"]


class ApiError(HttpError):
    """The Bot Connector answered with an error."""


def _error(status: int, body: bytes, headers: Any) -> ApiError:
    return ApiError.answered(status, body, retry_after(headers), under="error")


class TeamsApi(ApiSession):
    def __init__(self, settings: TeamsSettings) -> None:
        super().__init__()
        self.cfg = settings
        self.tokens = Tokens(settings, self.session())
        self.keys = Keys(settings, self.session())

    def session(self) -> aiohttp.ClientSession:
        """The session, shared with the token and key fetchers (a new one given to them)."""
        session = super().session()
        if hasattr(self, "tokens") and self.tokens.session is not session:
            self.tokens.session = self.keys.session = session
        return session

    async def send(
        self, service_url: str, conversation: str, activity: dict[str, Any], reply_to: str | None
    ) -> str:
        """Post `activity` to the conversation (as a reply to `reply_to`); its id."""
        url = (
            f"{service_url.rstrip('/')}/v3/conversations/{quote(conversation, safe='')}/activities"
        )
        if reply_to:
            url += f"/{quote(reply_to, safe='')}"
        token = await self.tokens.token()
        headers = {"Authorization": f"Bearer {token}"}
        async with self.session().post(url, json=activity, headers=headers) as r:
            body = await r.read()
            if not 200 <= r.status < 300:
                if r.status == 401:
                    self.tokens.forget()
                raise _error(r.status, body, r.headers)
        try:
            got = json.loads(body) if body else {}
        except ValueError:
            got = {}
        return str(got.get("id") or "") if isinstance(got, dict) else ""

    async def download(self, url: str, max_bytes: int) -> bytes:
        """An attachment of the Bot Connector (its token required)."""
        token = await self.tokens.token()
        async with self.session().get(url, headers={"Authorization": f"Bearer {token}"}) as r:
            return await read_file(r, max_bytes, _error)
