"""DingTalk's HTTP APIs as the channel calls them (aiohttp, every URL under `api_base`):

- the app's access token: POST /v1.0/oauth2/accessToken {"appKey", "appSecret"} ->
  {"accessToken", "expireIn"} (https://open.dingtalk.com/document/orgapp/obtain-the-access_
  token-of-an-internal-app), kept until 5 minutes before it expires;
- the Stream connection's ticket: POST /v1.0/gateway/connections/open {"clientId",
  "clientSecret", "subscriptions", "ua", "localIp"} -> {"endpoint", "ticket"}
  (https://open.dingtalk.com/document/direction/stream-mode-protocol-access-description);
- the robot's sends, with the token in `x-acs-dingtalk-access-token`: a group's
  /v1.0/robot/groupMessages/send {"robotCode", "openConversationId", "msgKey", "msgParam"}
  and one-to-one /v1.0/robot/oToMessages/batchSend {"robotCode", "userIds", "msgKey",
  "msgParam"} (.../orgapp/the-robot-sends-a-group-message, .../chatbots-send-one-on-one-chat-
  messages-in-batches), both answering {"processQueryKey"};
- a session webhook (the `sessionWebhook` of a message, valid until its
  `sessionWebhookExpiredTime`): POST {msgtype, markdown: {title, text}, at: {atUserIds}} ->
  {"errcode", "errmsg"};
- a user's file: /v1.0/robot/messageFiles/download {"downloadCode", "robotCode"} ->
  {"downloadUrl"}; an image or a voice out: OAPI media/upload?access_token= (multipart
  `media`, type=image, or type=voice: AMR, at most 2 MB and 60 s) -> {"errcode": 0,
  "media_id"} (https://open.dingtalk.com/document/orgapp/upload-media-files).

Failures: `AuthRefused` (the secret or the token refused: HTTP 401/403 with an auth code, or
the token call's 4xx), `Throttled` (HTTP 429, a `...QpsLimit...` / `Throttling` code, OAPI's
errcode 130101 "send too fast" or 90018), `DingTalkError` (any other refusal: HTTP 4xx, an
errcode), `NETWORK_ERRORS` (network, timeouts, 5xx as `ServerError`).
"""

from __future__ import annotations

import json
import socket
from typing import Any

import aiohttp

from chatfn.channels.dingtalk.settings import DingTalkSettings
from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.kit.rest import ApiSession, HttpError
from chatfn.channels.kit.token import ExpiringToken

__all__ = [
    "NETWORK_ERRORS",
    "CREDENTIALS_FIX",
    "ERRORS",
    "AuthRefused",
    "DingTalkApi",
    "DingTalkError",
    "ServerError",
    "Throttled",
]

_AUTH_CODES = ("InvalidAuthentication", "Forbidden.AccessDenied.AccessTokenPermissionDenied")
_THROTTLE_ERRCODES = (130101, 90018, 90002)


class DingTalkError(HttpError):
    """DingTalk refused a call: its HTTP status and code."""


class AuthRefused(DingTalkError):
    """The client secret or the access token was refused."""


class Throttled(DingTalkError):
    """A rate limit (DingTalk names no wait)."""


class ServerError(Exception):
    """DingTalk answered 5xx: passing trouble."""


NETWORK_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, ServerError)
#: The calls' errors as the kit's (kit/classify.py).
ERRORS = ErrorKinds(
    "DingTalk",
    "channels.dingtalk.client_id / client_secret",
    (AuthRefused,),
    (DingTalkError,),
    NETWORK_ERRORS,
)
#: What an operator checks when the credentials are refused.
CREDENTIALS_FIX = "check the app's Credentials & Basic Info page"


def local_ip() -> str:
    """This machine's address as the Stream registration's `localIp` (for DingTalk's
    diagnostics); no packet is sent (a UDP socket's connect only picks the route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
    except OSError:
        return ""


def _refusal(status: int, body: dict[str, Any], raw: str) -> DingTalkError:
    code = str(body.get("code") or body.get("errcode") or "")
    message = str(body.get("message") or body.get("errmsg") or raw[:200])
    if status == 429 or "QpsLimit" in code or "Throttling" in code:
        return Throttled(status, code, message)
    if status in (401, 403) and (code in _AUTH_CODES or status == 401):
        return AuthRefused(status, code, message)
    return DingTalkError(status, code, message)


class DingTalkApi(ApiSession):
    """DingTalk's APIs for one app (module docstring)."""

    timeout = 30.0

    def __init__(self, settings: DingTalkSettings) -> None:
        super().__init__()
        self.cfg = settings
        self._token = ExpiringToken(self._fetch_token, lambda life: max(life - 300, 60))

    # -- the token and the Stream ticket -------------------------------------------------------
    def _credentials(self) -> tuple[str, str]:
        return self.cfg.client_id, self.cfg.secret_text("client_secret")

    async def token(self) -> str:
        """The app's access token (cached until 5 minutes before it expires)."""
        return await self._token.get()

    async def _fetch_token(self) -> tuple[str, float]:
        key, secret = self._credentials()
        body = await self._post_plain(
            "/v1.0/oauth2/accessToken", {"appKey": key, "appSecret": secret}, auth=True
        )
        token = str(body.get("accessToken") or "")
        if not token:
            raise DingTalkError(200, "", "no accessToken in the answer")
        return token, float(body.get("expireIn") or 7200)

    async def open_connection(self, subscriptions: list[dict[str, str]], ua: str) -> dict[str, Any]:
        """A Stream connection's endpoint and one-use ticket."""
        key, secret = self._credentials()
        payload = {
            "clientId": key,
            "clientSecret": secret,
            "subscriptions": subscriptions,
            "ua": ua,
            "localIp": local_ip(),
        }
        body = await self._post_plain("/v1.0/gateway/connections/open", payload, auth=True)
        if not body.get("endpoint") or not body.get("ticket"):
            raise DingTalkError(200, "", "no endpoint or ticket in the answer")
        return body

    async def _post_plain(self, path: str, payload: dict[str, Any], *, auth: bool) -> Any:
        """A POST without a token; with `auth`, a 4xx other than 429 is the credentials'."""
        async with self.session().post(self.cfg.api_base + path, json=payload) as response:
            body, raw = await _read(response)
        if response.status >= 500:
            raise ServerError(f"HTTP {response.status} from {path}")
        if response.status >= 400:
            refusal = _refusal(response.status, body, raw)
            if auth and not isinstance(refusal, Throttled):
                raise AuthRefused(refusal.status, refusal.code, refusal.message)
            raise refusal
        return body

    # -- OpenAPI calls with the token ----------------------------------------------------------
    async def call(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST `payload` to the OpenAPI with the token; a refused token is fetched again
        once before the refusal is raised."""

        async def once(token: str) -> dict[str, Any]:
            headers = {"x-acs-dingtalk-access-token": token}
            async with self.session().post(
                self.cfg.api_base + path, json=payload, headers=headers
            ) as response:
                body, raw = await _read(response)
            if response.status >= 500:
                raise ServerError(f"HTTP {response.status} from {path}")
            if response.status < 400:
                return body
            raise _refusal(response.status, body, raw)

        return await self._token.using(once, lambda exc: isinstance(exc, AuthRefused))

    async def send_group(self, conversation: str, msg_key: str, param: dict[str, Any]) -> str:
        body = await self.call(
            "/v1.0/robot/groupMessages/send",
            {
                "robotCode": self.cfg.robot,
                "openConversationId": conversation,
                "msgKey": msg_key,
                "msgParam": json.dumps(param, ensure_ascii=False),
            },
        )
        return str(body.get("processQueryKey") or "")

    async def send_private(self, user: str, msg_key: str, param: dict[str, Any]) -> str:
        body = await self.call(
            "/v1.0/robot/oToMessages/batchSend",
            {
                "robotCode": self.cfg.robot,
                "userIds": [user],
                "msgKey": msg_key,
                "msgParam": json.dumps(param, ensure_ascii=False),
            },
        )
        if user in (body.get("flowControlledStaffIdList") or []):
            raise Throttled(200, "flowControlled", f"sends to {user} are flow-controlled")
        if user in (body.get("invalidStaffIdList") or []):
            raise DingTalkError(200, "invalidStaffId", f"{user} is not a user of this org")
        return str(body.get("processQueryKey") or "")

    async def session_send(self, url: str, payload: dict[str, Any]) -> None:
        """A message through a session webhook (no token: the URL is the credential)."""
        async with self.session().post(url, json=payload) as response:
            body, raw = await _read(response)
        if response.status >= 500:
            raise ServerError(f"HTTP {response.status} from the session webhook")
        code = body.get("errcode", 0 if response.status < 400 else response.status)
        if response.status >= 400 or code not in (0, "0"):
            message = str(body.get("errmsg") or raw[:200])
            if code in _THROTTLE_ERRCODES or response.status == 429:
                raise Throttled(response.status, str(code), message)
            raise DingTalkError(response.status, str(code), message)

    async def download_url(self, download_code: str) -> str:
        body = await self.call(
            "/v1.0/robot/messageFiles/download",
            {"downloadCode": download_code, "robotCode": self.cfg.robot},
        )
        url = str(body.get("downloadUrl") or "")
        if not url:
            raise DingTalkError(200, "", "no downloadUrl in the answer")
        return url

    async def upload_image(self, data: bytes, name: str, mime: str) -> str:
        """An image uploaded through OAPI's media/upload: its media_id."""
        return await self._upload("image", data, name, mime)

    async def upload_voice(self, amr: bytes) -> str:
        """A voice (AMR, at most 2 MB and 60 s) uploaded through OAPI's media/upload: the
        media_id a `sampleAudio` message plays."""
        return await self._upload("voice", amr, "voice.amr", "audio/amr")

    async def _upload(self, kind: str, data: bytes, name: str, mime: str) -> str:
        token = await self.token()
        form = aiohttp.FormData()
        form.add_field("type", kind)
        form.add_field("media", data, filename=name, content_type=mime)
        url = f"{self.cfg.oapi_base}/media/upload"
        async with self.session().post(
            url, params={"access_token": token, "type": kind}, data=form
        ) as response:
            body, raw = await _read(response)
        if response.status >= 500:
            raise ServerError(f"HTTP {response.status} from media/upload")
        code = body.get("errcode", response.status if response.status >= 400 else 0)
        if code in (40014, 42001, 88):  # token invalid / expired
            self._token.forget(token)
            raise AuthRefused(response.status, str(code), str(body.get("errmsg") or ""))
        if code not in (0, "0") or not body.get("media_id"):
            raise DingTalkError(response.status, str(code), str(body.get("errmsg") or raw[:200]))
        return str(body["media_id"])


async def _read(response: aiohttp.ClientResponse) -> tuple[dict[str, Any], str]:
    raw = await response.text()
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    return (body if isinstance(body, dict) else {}), raw
