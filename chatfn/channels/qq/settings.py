"""`channels.qq:`: the QQ official bot channel's settings (issue 25's keys `app_id`, `secret`,
`sandbox`, `api_base`, and the token URL, the way events come, pacing and splitting)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.fields import optional_url, path, url
from chatfn.channels.kit.settings import PlatformSettings

DEFAULT_API_BASE = "https://api.sgroup.qq.com"
SANDBOX_API_BASE = "https://sandbox.api.sgroup.qq.com"
DEFAULT_TOKEN_URL = "https://bots.qq.com/app/getAppAccessToken"
WEBHOOK_PATH = "/qq/webhook"


class QQSettings(
    PlatformSettings,
    send_rate=2.0,
    send_burst=5,
    pace="The pace (PlatformSettings'): a guild channel takes at most 5 messages a second.",
):
    """A bot of the QQ open platform (q.qq.com): its AppID and AppSecret. The secret buys an
    access token at `token_url` (refreshed before it expires); API calls go to `api_base`
    (the sandbox root with `sandbox: true`); events come by the WebSocket gateway
    (`mode: websocket`) or as HTTP callbacks to `webhook_path` on the HTTP channel's port
    (`mode: webhook`, signed with Ed25519 keys derived from the secret). The default is the
    webhook: Tencent is withdrawing WebSocket delivery (new bots cannot use it; the docs mark it
    as going, tencent-connect/bot-docs#278/#279); a bot that has it keeps `mode: websocket`."""

    # The bot's AppID (q.qq.com -> Development -> Settings).
    app_id: str = ""
    # The AppSecret (clientSecret): buys access tokens and signs the webhook.
    secret: SecretStr | None = None
    # Call the sandbox API root (a bot not yet published works only in its sandbox).
    sandbox: bool = False
    # None: https://api.sgroup.qq.com, or https://sandbox.api.sgroup.qq.com with sandbox.
    api_base: Annotated[str | None, optional_url(DEFAULT_API_BASE)] = None
    # Where the AppSecret buys an access token.
    token_url: Annotated[str, url(DEFAULT_TOKEN_URL)] = DEFAULT_TOKEN_URL
    # How events arrive: HTTP callbacks (`webhook`, the default) or the WebSocket gateway.
    mode: Literal["websocket", "webhook"] = "webhook"
    # The callbacks' path on the HTTP channel's port (webhook mode).
    webhook_path: Annotated[str, path(WEBHOOK_PATH)] = WEBHOOK_PATH
    # Gateway intents (WebSocket mode). None: GUILDS | GUILD_MEMBERS | DIRECT_MESSAGE |
    # GROUP_AND_C2C_EVENT | PUBLIC_GUILD_MESSAGES (1 | 1<<1 | 1<<12 | 1<<25 | 1<<30): every
    # event the channel reads that a public bot may subscribe to. A private-domain bot may add
    # GUILD_MESSAGES (1<<9, every message in a channel: MESSAGE_CREATE).
    intents: int | None = Field(default=None, ge=0)
    # QQ documents no exact length limit for text messages; 2000 characters is what the
    # clients show whole and what other adapters use.
    max_message_length: int = Field(default=2000, ge=100, le=5000)
    # Seconds a passive reply may still be sent after the message it answers: QQ allows 5
    # minutes in groups and guilds, 60 in C2C chats. Past it the reply is sent as an active
    # message (which QQ stopped allowing for groups and C2C in April 2025: it is refused,
    # and the log says why).
    group_reply_window: float = Field(default=300.0, ge=0)
    # The same for C2C (private) chats.
    c2c_reply_window: float = Field(default=3600.0, ge=0)
    # Where QQ's servers reach the bot's web server (e.g. https://bot.example.com): pictures
    # the bot sends in groups and C2C chats are then uploaded by URL, served under an
    # unguessable path for `media_ttl` seconds (media.py). Unset: uploaded as `file_data`,
    # which QQ's documentation marks "not yet supported".
    public_url: Annotated[str | None, optional_url("https://bot.example.com")] = None
    # Seconds a picture is served at its media URL.
    media_ttl: float = Field(default=600.0, ge=30, le=86400)

    @field_validator("app_id", mode="before")
    @classmethod
    def _app_id(cls, v: object) -> str:
        text = str(v).strip() if v is not None else ""
        if text and not text.isdigit():
            raise ValueError(f"expected the bot's AppID (digits), got {text!r}")
        return text

    @property
    def api_root(self) -> str:
        """Where API calls go: `api_base`, else the sandbox or the production root."""
        if self.api_base:
            return self.api_base
        return SANDBOX_API_BASE if self.sandbox else DEFAULT_API_BASE

    @property
    def gateway_intents(self) -> int:
        if self.intents is not None:
            return self.intents
        return (1 << 0) | (1 << 1) | (1 << 12) | (1 << 25) | (1 << 30)

    def problem(self) -> str | None:
        """What is not configured (a message naming the keys), or None."""
        if not self.app_id or self.secret is None:
            return (
                "channels.qq.app_id and channels.qq.secret are not set (the bot's AppID and "
                "AppSecret from q.qq.com -> Development -> Settings)"
            )
        return None

    missing = problem

    def secret_value(self) -> str:
        return self.secret_text("secret")
