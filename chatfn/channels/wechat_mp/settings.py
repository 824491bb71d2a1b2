"""`channels.wechat_mp:`: the WeChat Official Account (微信公众号) channel's settings: issue
42's keys (`app_id`, `app_secret`, `token`, `encoding_aes_key`, `api_base`), where the
callback is served, whether the account may use the customer-service message API, and the
pacing and splitting numbers every channel has."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings, path_like, url_like

DEFAULT_API_BASE = "https://api.weixin.qq.com"
_WHERE = "(the account's 设置与开发 -> 基本配置 page)"


class WechatMpSettings(PlatformSettings):
    """An Official Account in developer mode. WeChat POSTs each message to `webhook_path` on
    the HTTP channel's port, signed with `token` (and, in safe mode, encrypted with
    `encoding_aes_key`); the answer goes back in the callback's reply within 5 seconds, or
    through the customer-service message API (`customer_service`) where the account may.
    API calls go to `{api_base}/cgi-bin/...` with an access_token from `app_id` +
    `app_secret`."""

    # The account's AppID (wx...), from 设置与开发 -> 基本配置.
    app_id: str = ""
    app_secret: SecretStr | None = None
    token: SecretStr | None = None  # 服务器配置 -> 令牌(Token)
    # 服务器配置 -> 消息加解密密钥: set it for safe mode (安全模式, recommended); not set, the
    # account must be in plain mode (明文模式) and an encrypted callback is refused.
    encoding_aes_key: SecretStr | None = None
    # WeChat's API (api.weixin.qq.com); another address for a proxy or a test server.
    api_base: Annotated[str, url_like(DEFAULT_API_BASE)] = DEFAULT_API_BASE
    # Where WeChat POSTs messages (the server URL's path, on the HTTP channel's port).
    webhook_path: Annotated[str, path_like("/wechat_mp/callback")] = "/wechat_mp/callback"
    # Whether the account may send customer-service messages (客服消息: verified
    # subscription and service accounts). Without it every answer must fit the passive reply.
    customer_service: bool = True
    # Seconds a callback waits for its answer before answering "success" (WeChat waits 5,
    # then sends the message again, three tries in all).
    reply_wait: float = Field(default=4.5, gt=0, le=4.8)
    # Bytes of UTF-8 per text message (WeChat cuts longer texts; 2048 is what it shows).
    max_message_length: int = Field(default=2048, ge=100, le=2048)

    @field_validator("encoding_aes_key")
    @classmethod
    def _aes_key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and v.get_secret_value():
            # Imported here: wxcrypt brings `cryptography` (6.7 MB of RSS), and every bot
            # loads every channel's settings model (bench/README.md, issue 41).
            from chatfn.channels.wxcrypt import aes_key

            aes_key(v.get_secret_value())
        return v

    def problem(self) -> str | None:
        return self.unset("wechat_mp", ("app_id", "app_secret", "token"), _WHERE)
