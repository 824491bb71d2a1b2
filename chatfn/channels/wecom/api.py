"""WeCom's server API as the channel uses it (https://developer.work.weixin.qq.com/document/
path/90664 and on), over one aiohttp session.

- The access_token comes from `GET /cgi-bin/gettoken?corpid=&corpsecret=` (valid
  `expires_in` seconds, 7200), kept and asked for again five minutes before it ends, one
  fetch at a time however many calls wait for it; a call answered 40014 / 42001 (invalid,
  expired token: a token revoked early, another process that fetched a new one) drops it
  and is made once more with a new one.
- Answers are `{"errcode": 0, "errmsg": "ok", ...}`. Refused credentials (40001 invalid
  secret, 40013 invalid corp id, 40091 / 40056 / 301002 ...) raise `AuthRefused`; the rate
  limits (45009 "api freq out of limit", 45011, 45033 too many at once, 45047) raise
  `RateLimited` with `RATE_WAIT` (WeCom names no wait); HTTP 5xx or an answer that is not
  JSON raise `Unavailable`; any other code `WxError`.
- The intelligent robot's active reply goes to the `response_url` its callback carries
  (`post_response`), only when that URL is under `api_base` (a forged callback cannot
  make the bot post elsewhere).

The token, the calls' retry and the errors are chatfn/channels/wxapi.py's (shared with the
Official Account channel).
"""

from __future__ import annotations

from typing import Any

import aiohttp

from chatfn.channels.wecom.settings import WecomSettings
from chatfn.channels.wxapi import Dialect, WxApi, WxError

__all__ = ["WecomApi"]

WECOM = Dialect(
    name="WeCom",
    #: The access_token is invalid or expired: fetch a new one and try once more.
    token_invalid=frozenset({40014, 42001, 42007, 42009}),
    #: The corp id, secret or agent id are refused.
    auth=frozenset({40001, 40013, 40056, 40091, 40082, 40084, 301002, 60011}),
    #: Rate limits (WeCom's global error code table).
    rate=frozenset({45009, 45011, 45033, 45047}),
)


class WecomApi(WxApi):
    """The calls of one app (module docstring)."""

    dialect = WECOM
    cfg: WecomSettings
    token_path = "/cgi-bin/gettoken"

    def token_params(self) -> dict[str, str]:
        return {"corpid": self.cfg.corp_id, "corpsecret": self.cfg.secret_text("secret")}

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        payload: dict[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
    ) -> dict[str, Any]:
        """One API call with the access_token (module docstring)."""
        return await self.request(method, path, params=params, json=payload, data=form)

    async def agent(self) -> dict[str, Any]:
        """agent/get: the app's name and who may use it (who-am-I)."""
        return await self.call(
            "GET", "/cgi-bin/agent/get", params={"agentid": str(self.cfg.agent_id)}
        )

    async def send(self, payload: dict[str, Any]) -> str:
        """message/send (to members): the msgid."""
        data = await self.call("POST", "/cgi-bin/message/send", payload=payload)
        return str(data.get("msgid") or "")

    async def appchat_send(self, payload: dict[str, Any]) -> None:
        """appchat/send: to a group chat the app made (appchat/create)."""
        await self.call("POST", "/cgi-bin/appchat/send", payload=payload)

    async def upload_image(self, data: bytes, name: str, mime: str) -> str:
        """media/upload?type=image (at most 2 MB, jpg/png): a media_id valid three days."""
        return await self.upload("image", data, name, mime)

    async def upload_voice(self, amr: bytes) -> str:
        """media/upload?type=voice (AMR only, at most 2 MB and 60 s): a media_id valid three
        days, for a `voice` message."""
        return await self.upload("voice", amr, "voice.amr", "audio/amr")

    async def post_response(self, url: str, payload: dict[str, Any]) -> None:
        """The intelligent robot's active reply to a callback's response_url."""
        if not url.startswith(self.base + "/"):
            raise WxError(0, f"response_url outside {self.base} refused")
        async with self.session().post(url, json=payload) as r:
            self.dialect.checked(r.status, await r.read())
