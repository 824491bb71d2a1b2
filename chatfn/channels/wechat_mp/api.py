"""The Official Account API as the channel uses it (https://developers.weixin.qq.com/doc/
offiaccount/), over one aiohttp session.

- access_token: `GET /cgi-bin/token?grant_type=client_credential&appid=&secret=` (valid
  `expires_in`, 7200 s), kept and asked for again five minutes before it ends; a call
  answered 40001 / 40014 / 42001 (the token is not valid any more: another process fetched
  a new one, which ends the old) drops it and is made once more.
- Refused credentials at /cgi-bin/token (40001, 40013 invalid AppID, 40125 invalid
  AppSecret, 40164 the caller's IP is not on the IP whitelist) raise `AuthRefused`; the rate
  limit 45009 raises `RateLimited` (`RATE_WAIT`: WeChat names no wait); 48001 (the account
  lacks the API: an unverified account) raises `NotPermitted`; HTTP 5xx, -1 (system busy) or
  a body that is not JSON raise `Unavailable`; any other code `WxError` (45015: the user
  last spoke more than 48 hours ago; 45047: the customer-service quota for this user is
  used up).

The token, the calls' retry and the errors are chatfn/channels/wxapi.py's (shared with WeCom).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from chatfn.channels.kit.classify import ErrorKinds
from chatfn.channels.wechat_mp.settings import WechatMpSettings
from chatfn.channels.wxapi import NETWORK_ERRORS, AuthRefused, Dialect, WxApi, WxError

__all__ = ["ERRORS", "CREDENTIALS_FIX", "MpApi"]

MP = Dialect(
    name="WeChat",
    token_invalid=frozenset({40001, 40014, 42001}),
    auth=frozenset({40001, 40002, 40013, 40125, 40164, 41002, 41004}),
    rate=frozenset({45009, 45011}),
    auth_on_calls=False,  # 40001 on a call is a token that ended, not a wrong secret
    not_permitted=frozenset({48001}),
)


#: The calls' errors as the kit's (kit/classify.py).
ERRORS = ErrorKinds(
    "WeChat", "channels.wechat_mp.app_id / app_secret", (AuthRefused,), (WxError,), NETWORK_ERRORS
)
#: What an operator checks when the credentials are refused.
CREDENTIALS_FIX = (
    "check the AppSecret and that the bot's address is on the IP whitelist (设置与开发 -> 基本配置)"
)


class MpApi(WxApi):
    dialect = MP
    cfg: WechatMpSettings
    token_path = "/cgi-bin/token"

    def token_params(self) -> dict[str, str]:
        return {
            "grant_type": "client_credential",
            "appid": self.cfg.app_id,
            "secret": self.cfg.secret_text("app_secret"),
        }

    async def call(
        self,
        path: str,
        *,
        payload: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        form: aiohttp.FormData | None = None,
    ) -> dict[str, Any]:
        """A POST; JSON written with its characters as they are (ensure_ascii=False)."""
        body = None if payload is None else json.dumps(payload, ensure_ascii=False).encode()
        return await self.request(
            "POST", path, params=params, data=form if form is not None else body
        )

    async def check(self) -> None:
        """get_api_domain_ip: a call that needs nothing but a valid access_token (the
        credentials still work; a token ended early is fetched again, which a rotated
        AppSecret refuses)."""
        await self.request("GET", "/cgi-bin/get_api_domain_ip")

    async def custom_send(self, payload: dict[str, Any]) -> None:
        """message/custom/send: a customer-service message (48 h after the user spoke)."""
        await self.call("/cgi-bin/message/custom/send", payload=payload)

    async def upload_image(self, data: bytes, name: str, mime: str) -> str:
        """media/upload?type=image (temporary, 3 days; at most 10 MB, png/jpeg/gif)."""
        return await self.upload("image", data, name, mime)

    async def upload_voice(self, mp3: bytes) -> str:
        """media/upload?type=voice (temporary, 3 days; AMR or MP3, at most 2 MB and 60 s)."""
        return await self.upload("voice", mp3, "voice.mp3", "audio/mpeg")
