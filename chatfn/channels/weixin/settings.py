"""`channels.weixin:`: personal WeChat through Tencent's iLink bot API (issue 42's keys
`base_url` and `token`), the CDN for images, the long poll and the splitting.

The token is what a QR-code login gives (`chatfn login weixin` keeps it in the bot's
database); `token` here is for one got elsewhere and, when set, wins over the stored login.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr

from chatfn.channels.kit.settings import PlatformSettings, url_like

#: iLink's API root (Tencent/openclaw-weixin docs/protocol.md: "The default API base URL is
#: https://ilinkai.weixin.qq.com"); the QR login starts there, and the login's `baseurl`
#: names the host the bot's calls go to afterwards.
DEFAULT_BASE_URL = "https://ilinkai.weixin.qq.com"
#: The media CDN (the same document: "The default CDN base URL").
DEFAULT_CDN_BASE_URL = "https://novac2c.cdn.weixin.qq.com/c2c"
#: Characters of one text message. OpenClaw's plugin splits at 4000 (`textChunkLimit`),
#: Hermes Agent at 2000 ("iLink chunks at ~2048 chars"): the lower one.
WEIXIN_MAX_TEXT = 2000


class WeixinSettings(PlatformSettings):
    """A personal WeChat account logged in to iLink as a bot (README.md)."""

    # Tencent's iLink bot API (the QR login and the message calls).
    base_url: Annotated[str, url_like(DEFAULT_BASE_URL)] = DEFAULT_BASE_URL
    token: SecretStr | None = None
    # The CDN that pictures, files and voice are uploaded to and downloaded from.
    cdn_base_url: Annotated[str, url_like(DEFAULT_CDN_BASE_URL)] = DEFAULT_CDN_BASE_URL
    # Characters of one text message; longer replies are split.
    max_message_length: int = Field(default=WEIXIN_MAX_TEXT, ge=100, le=4000)
    # Seconds one getupdates long poll may be held (iLink suggests 35 s and may say otherwise).
    poll_timeout: float = Field(default=35.0, gt=0, le=120)
    # iLink's `bot_type` of the QR login (3 in every peer's client).
    bot_type: str = "3"
    # Seconds `chatfn login weixin` waits for the scan and confirmation.
    login_timeout: float = Field(default=480.0, gt=0)

    def token_value(self) -> str:
        return self.secret_text("token")
