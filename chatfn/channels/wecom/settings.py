"""`channels.wecom:`: the WeCom (企业微信) channel's settings: issue 42's keys (`corp_id`,
`secret`, `agent_id`, `token`, `encoding_aes_key`, `mode`, `api_base`), where the callback is
served, and the pacing and splitting numbers every channel has."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings, path_like, url_like

DEFAULT_API_BASE = "https://qyapi.weixin.qq.com"
_WHERE = "(the app's page in the admin console: 应用管理 -> the app -> 接收消息 -> 设置API接收)"


class WecomSettings(
    PlatformSettings,
    send_rate=0.5,
    send_burst=5,
    pace="WeCom allows 30 messages a minute to one member per app (more are dropped): one "
    "every two seconds after a burst.",
):
    """A WeCom self-built app (`mode: app`: its callback and the message API, with the app's
    `corp_id`, `secret` and `agent_id`) or an intelligent robot (`mode: aibot`: its callback
    and the streaming reply, `token` and `encoding_aes_key` only). The callback is served at
    `webhook_path` on the HTTP channel's port; API calls go to `{api_base}/cgi-bin/...`."""

    # The company's CorpID (ww...), from 我的企业 -> 企业信息 -> 企业ID.
    corp_id: str = ""
    secret: SecretStr | None = None  # the app's Secret
    agent_id: int | None = None  # the app's AgentId
    token: SecretStr | None = None  # the callback's Token
    encoding_aes_key: SecretStr | None = None  # the callback's EncodingAESKey (43 characters)
    mode: Literal["app", "aibot"] = "app"
    # WeCom's API (qyapi.weixin.qq.com); another address for a proxy or a test server.
    api_base: Annotated[str, url_like(DEFAULT_API_BASE)] = DEFAULT_API_BASE
    # Where WeCom sends the callback (on the HTTP channel's port).
    webhook_path: Annotated[str, path_like("/wecom/callback")] = "/wecom/callback"
    # Bytes of UTF-8 per text message: message/send takes at most 2048 (longer is cut).
    max_message_length: int = Field(default=2048, ge=100, le=2048)

    @field_validator("encoding_aes_key")
    @classmethod
    def _aes_key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and v.get_secret_value():
            # Imported here: wxcrypt brings `cryptography` (6.7 MB of RSS), and every bot
            # loads every channel's settings model (bench/README.md, issue 41).
            from chatfn.channels.wxcrypt import aes_key

            aes_key(v.get_secret_value())  # ValueError naming the shape; pydantic names the key
        return v

    def missing(self) -> list[str]:
        """The keys this mode needs that are not set."""
        need = ["token", "encoding_aes_key"]
        if self.mode == "app":
            need = ["corp_id", "secret", "agent_id", *need]
        return [k for k in need if getattr(self, k) in (None, "")]

    def problem(self) -> str | None:
        missing = self.missing()
        if missing:
            keys = ", ".join(f"channels.wecom.{k}" for k in missing)
            return f"{keys} must be set for mode: {self.mode} {_WHERE}"
        return None
