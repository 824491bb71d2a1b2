"""Mattermost's REST API v4 (https://api.mattermost.com/) as the channel uses it, over one
aiohttp session with the bot's token (`Authorization: Bearer`).

Errors are Mattermost's `{"id", "message", "status_code"}`, raised as `ApiError(status, id,
message, retry_after)` (the kit's HttpError); a 429 names its wait in `X-Ratelimit-Reset`
(seconds) or `Retry-After`.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from chatfn.channels.kit.rest import (
    NETWORK_ERRORS,
    BearerApi,
    HttpError,
    read_file,
    retry_after,
)
from chatfn.channels.mattermost.settings import MattermostSettings

__all__ = ["NETWORK_ERRORS", "ApiError", "MattermostApi"]

WAIT_HEADERS = ("Retry-After", "X-Ratelimit-Reset")


class ApiError(HttpError):
    """Mattermost answered with an error (`code`: its error id)."""


class MattermostApi(BearerApi):
    cfg: MattermostSettings

    def refused(self, status: int, body: bytes, headers: Any) -> ApiError:
        return ApiError.answered(status, body, retry_after(headers, WAIT_HEADERS), code="id")

    def garbled(self, status: int, message: str) -> ApiError:
        return ApiError(status, "", message)

    async def call(self, method: str, path: str, **kw: Any) -> Any:
        return await self.json_call(method, f"{self.cfg.api}{path}", **kw)

    async def me(self) -> dict[str, Any]:
        got = await self.call("GET", "/users/me")
        if not isinstance(got, dict) or not got.get("id"):
            raise ApiError(200, "", "/users/me answered without a user")
        return got

    async def team(self, name: str) -> dict[str, Any]:
        got = await self.call("GET", f"/teams/name/{name}")
        if not isinstance(got, dict) or not got.get("id"):
            raise ApiError(200, "", f"/teams/name/{name} answered without a team")
        return got

    async def user(self, user_id: str) -> dict[str, Any]:
        got = await self.call("GET", f"/users/{user_id}")
        return got if isinstance(got, dict) else {}

    async def member(self, channel_id: str, user_id: str) -> dict[str, Any]:
        """The user's membership of the channel (its `roles`, `scheme_admin`)."""
        got = await self.call("GET", f"/channels/{channel_id}/members/{user_id}")
        return got if isinstance(got, dict) else {}

    async def post(self, body: dict[str, Any]) -> str:
        got = await self.call("POST", "/posts", json=body)
        return str(got.get("id") or "") if isinstance(got, dict) else ""

    async def upload(self, channel_id: str, data: bytes, name: str, mime: str) -> str:
        form = aiohttp.FormData()
        form.add_field("channel_id", channel_id)
        form.add_field("files", data, filename=name, content_type=mime)
        got = await self.call("POST", "/files", data=form)
        infos = got.get("file_infos") if isinstance(got, dict) else None
        if not isinstance(infos, list) or not infos or not infos[0].get("id"):
            raise ApiError(201, "", "the upload answered without a file id")
        return str(infos[0]["id"])

    async def file(self, file_id: str, max_bytes: int) -> bytes:
        url = f"{self.cfg.api}/files/{file_id}"
        async with self.session().get(url, headers=self.auth) as r:
            return await read_file(r, max_bytes, self.refused)
