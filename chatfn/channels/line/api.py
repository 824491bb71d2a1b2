"""The Messaging API as the channel uses it, through the official SDK (line-bot-sdk v3,
`linebot.v3.messaging`: its asynchronous client, on aiohttp) pointed at `api_base`.

- `bot_info()`: GET /v2/bot/info, the bot's user id and name (who am I; a refused token is
  401).
- `reply(token, messages)`: POST /v2/bot/message/reply, at most 5 messages, with a reply
  token (single use; LINE answers 400 "Invalid reply token" once it is used or too old).
- `push(to, messages, retry_key)`: POST /v2/bot/message/push with `X-Line-Retry-Key`: a
  request sent again with the same key is not delivered twice (LINE answers 409 with
  `x-line-accepted-request-id`: already accepted).
- `content(message_id, max_bytes)`: GET {api-data}/v2/bot/message/{id}/content, the image a
  user sent, read within `max_bytes` (with aiohttp: see the method).
- `profile(source, user)`: the display name of a user (in a group or room: its member
  profile).

Failures come out as `LineError(status, message, retry_after, accepted)` (the kit's
HttpError, with no code of LINE's own) from the SDK's ApiException, or as the network's own
errors (NETWORK_ERRORS).
"""

from __future__ import annotations

import json
from typing import Any

from linebot.v3.messaging import (
    AsyncApiClient,
    AsyncMessagingApi,
    Configuration,
    PushMessageRequest,
    ReplyMessageRequest,
)
from linebot.v3.messaging.exceptions import ApiException

from chatfn.channels.kit.errors import HttpError
from chatfn.channels.kit.rest import NETWORK_ERRORS, ApiSession, retry_after
from chatfn.channels.line.settings import LineSettings
from chatfn.common.fetch import FetchTooLarge, read_limited

__all__ = ["CALL_TIMEOUT", "NETWORK_ERRORS", "LineApi", "LineError"]

CALL_TIMEOUT = 20.0


class LineError(HttpError):
    """LINE answered a call with an error status (`message` from its JSON body): "HTTP
    <status>: <message>", the message alone when there is no status."""

    def __init__(
        self,
        status: int,
        message: str,
        retry_after: float | None = None,
        accepted: str | None = None,
    ) -> None:
        super().__init__(status, "", message, retry_after)
        self.accepted = accepted  # 409 to a retry key: the request id LINE accepted before

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.message}" if self.status else self.message


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if str(key).lower() == name.lower():
            return str(value)
    return None


def from_api(exc: ApiException) -> LineError:
    """The SDK's ApiException as a LineError (status, LINE's message, Retry-After)."""
    body = exc.body
    message = str(exc.reason or "")
    if body:
        try:
            data = json.loads(body)
        except (TypeError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("message"):
            message = str(data["message"])
            details = data.get("details")
            if isinstance(details, list) and details:
                message += " " + "; ".join(
                    f"{d.get('property', '')}: {d.get('message', '')}"
                    for d in details
                    if isinstance(d, dict)
                )
    accepted = _header(exc.headers, "x-line-accepted-request-id")
    return LineError(int(exc.status or 0), message, retry_after(exc.headers), accepted)


class LineApi(ApiSession):
    """One SDK client for the API and one for its content host, made on first use (the SDK's
    aiohttp session needs a running loop)."""

    def __init__(self, settings: LineSettings) -> None:
        super().__init__()
        self.cfg = settings
        self._clients: list[AsyncApiClient] = []
        self._api: AsyncMessagingApi | None = None

    def _client(self, host: str) -> AsyncApiClient:
        config = Configuration(host=host, access_token=self.cfg.secret_text("channel_access_token"))
        client = AsyncApiClient(config)
        client.user_agent = "chatfn (line-bot-sdk)"
        self._clients.append(client)
        return client

    @property
    def api(self) -> AsyncMessagingApi:
        if self._api is None:
            self._api = AsyncMessagingApi(self._client(self.cfg.api_base))
        return self._api

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        self._api = None
        for client in clients:
            await client.close()
        await super().aclose()

    async def bot_info(self) -> tuple[str, str]:
        """(user id, display name) of the bot."""
        try:
            info = await self.api.get_bot_info(_request_timeout=CALL_TIMEOUT)
        except ApiException as exc:
            raise from_api(exc) from None
        return info.user_id, info.display_name

    async def reply(self, token: str, messages: list[Any]) -> None:
        request = ReplyMessageRequest(reply_token=token, messages=messages)
        try:
            await self.api.reply_message(request, _request_timeout=CALL_TIMEOUT)
        except ApiException as exc:
            raise from_api(exc) from None

    async def push(self, to: str, messages: list[Any], retry_key: str) -> None:
        """Push `messages` to `to`; a 409 to `retry_key` (sent before) counts as sent."""
        request = PushMessageRequest(to=to, messages=messages)
        try:
            await self.api.push_message(
                request, x_line_retry_key=retry_key, _request_timeout=CALL_TIMEOUT
            )
        except ApiException as exc:
            error = from_api(exc)
            if error.status == 409 and error.accepted:
                return  # accepted before: this retry key's messages went out once
            raise error from None

    async def content(self, message_id: str, max_bytes: int) -> bytes:
        """The content of a user's message (an image), at most `max_bytes`. Read with aiohttp,
        not the SDK: its blob call reads the whole body with no limit, and its raw mode
        (`_preload_content=False`) fails on aiohttp's response (no `getheaders`)."""
        url = f"{self.cfg.data_base}/v2/bot/message/{message_id}/content"
        token = self.cfg.secret_text("channel_access_token")
        async with self.session().get(url, headers={"Authorization": f"Bearer {token}"}) as r:
            if r.status != 200:
                raise LineError(r.status, (await r.text())[:200])
            try:
                return await read_limited(r, max_bytes)
            except FetchTooLarge:
                raise LineError(0, f"content larger than {max_bytes} bytes") from None

    async def profile(self, source: str, chat: str, user: str) -> str:
        """The display name of `user` (in the group or room `chat`, by `source`)."""
        try:
            if source == "group":
                got: Any = await self.api.get_group_member_profile(
                    chat, user, _request_timeout=CALL_TIMEOUT
                )
            elif source == "room":
                got = await self.api.get_room_member_profile(
                    chat, user, _request_timeout=CALL_TIMEOUT
                )
            else:
                got = await self.api.get_profile(user, _request_timeout=CALL_TIMEOUT)
        except ApiException as exc:
            raise from_api(exc) from None
        return str(got.display_name or "")
