"""The Feishu open platform's REST API as the channel uses it, through lark-oapi's client.

Why the token is kept here rather than by lark-oapi: the SDK fetches the tenant_access_token
inside `verify()` with the blocking `requests` library, even on its async (`a...`) methods, so
every refresh would stall the event loop; and it forgets a token only by its clock, never when
the platform says the token is no longer valid. So the client is built with
`enable_set_token(True)` and each call carries the token the client keeps (kit.token.ExpiringToken):

- fetched with auth/v3/tenant_access_token/internal (app_id + app_secret), through the SDK's
  async transport (https://open.feishu.cn/document/ukTMukTMukTM/ukDNz4SO0MjL5QzM/auth-v3/auth/
  tenant_access_token_internal: valid `expire` seconds, at most 2 hours; asked again with fewer
  than 30 minutes left, the platform hands a new one while the old one keeps working);
- renewed once fewer than 30 minutes remain (or half its life, for short ones), one fetch at
  a time however many calls wait for it;
- dropped and fetched again (once per call) when a call is answered 99991661 / 99991663
  (missing / invalid access token): a token revoked early, or a clock that drifted.

Why the requests go through `send_raw` rather than the SDK's `a...` methods: those open a new
httpx client for every call (`Transport.aexecute`), and building one (its SSL context) costs
about 50 ms of CPU on a loaded machine, which capped the channel near 10 messages per second
(bench/bench_channel_feishu.py); a shared httpx client was still slow under 50 requests in
flight (its pool scans every connection per request). So the SDK builds each request (its
request models, `verify`, URL and headers: `_build_url`, `_build_header`) and parses each
answer (its response models), and one aiohttp session per channel (the project's HTTP stack)
carries them; the wire format is the SDK's own.

Rate limits (https://open.feishu.cn/document/ukTMukTMukTM/uUzN04SN3QjL1cDN): the API answers
HTTP 429 with code 99991400 and `x-ogw-ratelimit-reset` (seconds until the window resets);
sending to one chat faster than 5 per second is code 230020. Both raise `RateLimited` with the
wait, and the caller decides whether to wait it out (send.py).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import lark_oapi as lark
from lark_oapi.api.auth.v3 import (
    InternalTenantAccessTokenRequest,
    InternalTenantAccessTokenRequestBody,
)
from lark_oapi.api.im.v1 import (
    CreateFileRequest,
    CreateFileRequestBody,
    CreateFileResponse,
    CreateImageRequest,
    CreateImageRequestBody,
    CreateImageResponse,
    CreateMessageRequest,
    CreateMessageRequestBody,
    CreateMessageResponse,
    GetChatMembersRequest,
    GetChatMembersResponse,
    GetChatRequest,
    GetMessageResourceRequest,
    PatchMessageRequest,
    PatchMessageRequestBody,
    PatchMessageResponse,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
    ReplyMessageResponse,
)
from lark_oapi.core.const import UTF_8
from lark_oapi.core.enum import AccessTokenType, HttpMethod
from lark_oapi.core.http.transport import _build_header, _build_url
from lark_oapi.core.json import JSON
from lark_oapi.core.model import BaseRequest, BaseResponse, RawResponse, RequestOption
from lark_oapi.core.token import verify
from lark_oapi.core.utils import Files

from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.kit import rest
from chatfn.channels.kit.bodies import request_body
from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.kit.rest import ApiSession, CodedError, Unavailable
from chatfn.channels.kit.token import ExpiringToken
from chatfn.channels.kit.wire import json_object

__all__ = [
    "ERRORS",
    "AuthRefused",
    "FeishuApi",
    "FeishuError",
    "NETWORK_ERRORS",
    "RateLimited",
    "Sent",
]

#: Codes of a call whose access token is missing or no longer valid: fetch a new one.
TOKEN_INVALID = frozenset({99991661, 99991663, 99991664})
RATE_LIMIT_CODES = frozenset({99991400, 230020})


#: Network trouble and the platform's 5xx (`Unavailable`): the message waits in the outbox.
NETWORK_ERRORS = rest.PASSING_ERRORS
R = TypeVar("R", bound=BaseResponse)


class FeishuError(CodedError):
    """The platform refused a call: its `code` and `msg` (and the HTTP status)."""


class AuthRefused(FeishuError):
    """tenant_access_token/internal refused app_id / app_secret (a dead or mistyped secret)."""


class RateLimited(FeishuError):
    """429 / 99991400 / 230020: wait `wait` seconds before the same call (its `retry_after`
    too, so the kit's error family reads it as a limit)."""

    def __init__(self, code: int, msg: str, wait: float, status: int = 429) -> None:
        super().__init__(code, msg, status, wait)

    @property
    def wait(self) -> float:
        return self.retry_after or 0.0


#: What the channel and its sender make of a failed call (kit.classify).
ERRORS = ErrorKinds(
    "Feishu", "channels.feishu.app_id / app_secret", (AuthRefused,), (FeishuError,), NETWORK_ERRORS
)


@dataclass(frozen=True, slots=True)
class Sent:
    """A message the platform took: its id (om_...), and the chat it is in."""

    message_id: str
    chat_id: str


def _body(raw: Any) -> dict[str, Any]:
    return json_object(raw.content or b"{}") or {}


def check(response: Any) -> Any:
    """`response` (an SDK response) when it succeeded; else the error it stands for."""
    raw = getattr(response, "raw", None)
    status = int(getattr(raw, "status_code", 200) or 200)
    code = int(getattr(response, "code", 0) or 0)
    msg = str(getattr(response, "msg", "") or "")
    if status == 429 or code in RATE_LIMIT_CODES:
        wait = rest.retry_after(getattr(raw, "headers", None), ("x-ogw-ratelimit-reset",))
        wait = 1.0 if wait is None else wait
        raise RateLimited(code or 99991400, msg or "rate limited", wait, status)
    if status >= 500:  # the platform failed, whatever code it names: the outbox tries again
        raise Unavailable(f"Feishu answered HTTP {status}" + (f" ({code}: {msg})" if code else ""))
    if code or not 200 <= status < 300:
        raise FeishuError(code, msg or f"HTTP {status}", status)
    return response


def _token_invalid(exc: Exception) -> bool:
    return isinstance(exc, FeishuError) and exc.code in TOKEN_INVALID


class FeishuApi(ApiSession):
    """The calls the channel makes, each with the tenant token, errors as FeishuError."""

    timeout = 30.0

    def __init__(self, settings: FeishuSettings) -> None:
        super().__init__()
        self.cfg = settings
        self.client = (
            lark.Client.builder()
            .app_id(settings.app_id)
            .app_secret(settings.secret_text("app_secret"))
            .domain(settings.base_url)
            .enable_set_token(True)
            .timeout(int(self.timeout))
            .log_level(lark.LogLevel.ERROR)
            .build()
        )
        self.token = ExpiringToken(self._fetch_token, lambda life: max(life - 1800.0, life / 2))

    async def _fetch_token(self) -> tuple[str, float]:
        """A new tenant_access_token and its life; AuthRefused when the app's are refused."""
        request = (
            InternalTenantAccessTokenRequest.builder()
            .request_body(
                InternalTenantAccessTokenRequestBody.builder()
                .app_id(self.cfg.app_id)
                .app_secret(self.cfg.secret_text("app_secret"))
                .build()
            )
            .build()
        )
        raw = await self.send_raw(request, RequestOption())
        if int(getattr(raw, "status_code", 200) or 200) >= 500:
            raise Unavailable(f"Feishu answered HTTP {raw.status_code}")
        # The token and its life are top-level fields of this answer, not under `data`
        # (which is where the SDK's response model looks), so the body is read here.
        body = _body(raw)
        code = int(body.get("code", -1) if isinstance(body.get("code"), int) else -1)
        token = str(body.get("tenant_access_token") or "")
        if code != 0 or not token:
            raise AuthRefused(code, str(body.get("msg") or "no token"), raw.status_code)
        return token, max(1.0, float(body.get("expire") or 7200))

    async def send_raw(self, request: BaseRequest, option: RequestOption) -> RawResponse:
        """One request as the SDK builds it, over the pooled client (module docstring)."""
        config = self.client.config
        assert config is not None
        verify(config, request, option)  # with enable_set_token: picks the token type only
        request.files = Files.extract_files(request.body)
        url = _build_url(config.domain, request.uri, request.paths)
        headers = _build_header(request, option, config)
        fields = json.loads(JSON.marshal(request.body)) if request.body is not None else None
        body = request_body(fields, request.files)
        async with self.session().request(
            str(request.http_method.name),
            url,
            headers=headers,
            params=request.queries,
            data=body,
        ) as response:
            content = await response.read()
        raw = RawResponse()
        raw.status_code = response.status
        raw.headers = {k.lower(): v for k, v in response.headers.items()}
        raw.content = content
        return raw

    async def _answer(
        self, request: BaseRequest, option: RequestOption, kind: type[R], binary: bool
    ) -> R:
        """`request` sent; its answer as the SDK's response model `kind` (raw kept). A binary
        answer (a file, 2xx) is code 0 with the file in `raw.content`."""
        raw = await self.send_raw(request, option)
        binary = binary and 200 <= raw.status_code < 300
        try:
            response = kind() if binary else JSON.unmarshal(str(raw.content, UTF_8), kind)
        except ValueError:  # not JSON (a proxy's error page): status and body tell
            response = kind()
        if binary:
            response.code = 0
        response.raw = raw
        return response

    async def ask(
        self, request: Callable[[], BaseRequest], kind: type[R], binary: bool = False
    ) -> R:
        """The request `request()` builds (anew for each try), sent with the tenant token, once
        more with a new token if the platform says the token is not valid; its answer as the
        SDK's response model `kind`, checked (`check`); `binary`: a file's."""

        async def once(token: str) -> R:
            option = RequestOption.builder().tenant_access_token(token).build()
            return check(await self._answer(request(), option, kind, binary))

        return await self.token.using(once, _token_invalid)

    # -- who am I ---------------------------------------------------------------------------
    async def bot_info(self) -> dict[str, Any]:
        """bot/v3/info: {"app_name", "open_id", "activate_status", ...}
        (https://open.feishu.cn/document/client-docs/bot-v3/obtain-bot-info)."""
        request = (
            BaseRequest.builder()
            .http_method(HttpMethod.GET)
            .uri("/open-apis/bot/v3/info")
            .token_types({AccessTokenType.TENANT})
            .build()
        )
        response = await self.ask(lambda: request, BaseResponse)
        bot = _body(response.raw).get("bot")
        if not isinstance(bot, dict) or not bot.get("open_id"):
            raise FeishuError(0, "bot/v3/info gave no bot (is the app's bot ability on?)")
        return bot

    # -- messages -----------------------------------------------------------------------------
    async def send(self, chat_id: str, msg_type: str, content: str, uuid: str) -> Sent:
        """im/v1/messages with receive_id_type=chat_id; `uuid`: the platform sends at most
        one message per uuid within an hour (a repeat answers with the first one)."""
        request = (
            CreateMessageRequest.builder()
            .receive_id_type("chat_id")
            .request_body(
                CreateMessageRequestBody.builder()
                .receive_id(chat_id)
                .msg_type(msg_type)
                .content(content)
                .uuid(uuid)
                .build()
            )
            .build()
        )
        response = await self.ask(lambda: request, CreateMessageResponse)
        return Sent(str(response.data.message_id), str(response.data.chat_id or chat_id))

    async def reply(
        self, message_id: str, msg_type: str, content: str, uuid: str, in_thread: bool = False
    ) -> Sent:
        """im/v1/messages/{message_id}/reply: the answer quotes the message it answers
        (`in_thread`: it goes into that message's thread instead)."""
        request = (
            ReplyMessageRequest.builder()
            .message_id(message_id)
            .request_body(
                ReplyMessageRequestBody.builder()
                .msg_type(msg_type)
                .content(content)
                .uuid(uuid)
                .reply_in_thread(in_thread)
                .build()
            )
            .build()
        )
        response = await self.ask(lambda: request, ReplyMessageResponse)
        return Sent(str(response.data.message_id), str(response.data.chat_id or ""))

    async def update_card(self, message_id: str, content: str) -> None:
        """PATCH im/v1/messages/{message_id}: a card the bot sent shown as `content` instead,
        for everyone (a JSON 2.0 card is a shared one;
        https://open.feishu.cn/document/server-docs/im-v1/message-card/patch)."""
        request = (
            PatchMessageRequest.builder()
            .message_id(message_id)
            .request_body(PatchMessageRequestBody.builder().content(content).build())
            .build()
        )
        await self.ask(lambda: request, PatchMessageResponse)

    async def upload_image(self, data: bytes) -> str:
        """im/v1/images (image_type=message): the image_key an image message shows."""
        response = await self.ask(
            lambda: (
                CreateImageRequest.builder()
                .request_body(
                    CreateImageRequestBody.builder()
                    .image_type("message")
                    .image(io.BytesIO(data))  # a new one for each try: the send reads it
                    .build()
                )
                .build()
            ),
            CreateImageResponse,
        )
        return str(response.data.image_key)

    async def upload_audio(self, data: bytes, duration_ms: int) -> str:
        """im/v1/files (file_type=opus, OGG/Opus: the only audio Feishu plays): the file_key an
        audio message carries."""
        response = await self.ask(
            lambda: (
                CreateFileRequest.builder()
                .request_body(
                    CreateFileRequestBody.builder()
                    .file_type("opus")
                    .file_name("voice.opus")
                    .duration(duration_ms)
                    .file(io.BytesIO(data))  # a new one for each try: the send reads it
                    .build()
                )
                .build()
            ),
            CreateFileResponse,
        )
        return str(response.data.file_key)

    async def download(self, message_id: str, key: str, kind: str = "image") -> bytes:
        """im/v1/messages/{message_id}/resources/{key}?type=image: an image a user sent."""
        request = (
            GetMessageResourceRequest.builder().message_id(message_id).file_key(key).type(kind)
        )
        response = await self.ask(request.build, BaseResponse, binary=True)
        return bytes(response.raw.content or b"")

    async def chat(self, chat_id: str) -> dict[str, Any]:
        """im/v1/chats/{chat_id} (open ids): owner_id, user_manager_id_list, name, ..."""
        request = GetChatRequest.builder().chat_id(chat_id).user_id_type("open_id").build()
        response = await self.ask(lambda: request, BaseResponse)
        data = _body(response.raw).get("data")
        return data if isinstance(data, dict) else {}

    async def members(self, chat_id: str, pages: int = 5) -> dict[str, str]:
        """im/v1/chats/{chat_id}/members (open ids): open_id -> name, up to `pages` pages of
        100 (the same im:chat:readonly scope as the chat; no contact scope needed)."""
        names: dict[str, str] = {}
        token = ""
        for _ in range(pages):
            builder = (
                GetChatMembersRequest.builder()
                .chat_id(chat_id)
                .member_id_type("open_id")
                .page_size(100)
            )
            if token:
                builder = builder.page_token(token)
            response = await self.ask(builder.build, GetChatMembersResponse)
            data = response.data
            for item in (data.items if data is not None else None) or []:
                if item.member_id:
                    names[str(item.member_id)] = str(item.name or "")
            token = str(data.page_token or "") if data is not None else ""
            if data is None or not data.has_more or not token:
                break
        return names
