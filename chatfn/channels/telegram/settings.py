"""`channels.telegram:`: the Telegram channel's settings (issue 25's keys, and the pacing and
splitting numbers every channel has)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from chatfn.channels.kit.fields import url
from chatfn.channels.kit.settings import PlatformSettings

DEFAULT_BASE_URL = "https://api.telegram.org"


class TelegramSettings(PlatformSettings):
    """A Telegram bot (its token from @BotFather). Requests go to
    `{base_url}/bot{token}/METHOD` and files come from `{base_url}/file/bot{token}/PATH`, the
    layout of api.telegram.org and of a self-hosted Bot API server alike."""

    # The bot's token from @BotFather ("123456:ABC...").
    token: SecretStr | None = None
    # The Bot API server: api.telegram.org, or a self-hosted one.
    base_url: Annotated[str, url(DEFAULT_BASE_URL)] = DEFAULT_BASE_URL
    # polling: getUpdates long polling (no public address needed). webhook: Telegram POSTs
    # updates to `webhook_url`, whose path is served on the HTTP channel's port.
    mode: Literal["polling", "webhook"] = "polling"
    # Webhook mode: the public https URL registered with setWebhook (its path is served).
    webhook_url: str | None = None
    # Sent by Telegram in X-Telegram-Bot-Api-Secret-Token with every webhook POST (setWebhook's
    # secret_token: 1-256 characters of A-Z a-z 0-9 _ -); a POST without it is refused.
    secret_token: SecretStr | None = None
    # Seconds one getUpdates call waits for updates (long polling).
    poll_timeout: int = Field(default=30, ge=0, le=300)
    # Telegram's limit is 4096 UTF-16 code units per message (after entity parsing).
    max_message_length: int = Field(default=4096, ge=100, le=4096)
    # send_rate, send_burst, max_retry_after: PlatformSettings'. Telegram asks for about one
    # message per second in a chat and 20 per minute in a group.

    @field_validator("secret_token")
    @classmethod
    def _secret_chars(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None:
            return v
        raw = v.get_secret_value()
        if len(raw) > 256 or not all(c.isascii() and (c.isalnum() or c in "_-") for c in raw):
            raise ValueError(
                "expected 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule)"
            )
        return v

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, v: str | None) -> str | None:
        if not v:
            return None
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"expected an https URL Telegram can reach, got {v!r}")
        if not parts.path or parts.path == "/":
            raise ValueError("expected a URL with a path (it is served on the HTTP channel's port)")
        return v

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> TelegramSettings:
        if self.mode == "webhook" and self.webhook_url is None:
            raise ValueError("mode webhook needs channels.telegram.webhook_url")
        return self

    @property
    def webhook_path(self) -> str:
        """The path of `webhook_url`, served on the HTTP channel's port."""
        return urlsplit(self.webhook_url or "").path

    def problem(self) -> str | None:
        if self.token is None:
            return "channels.telegram.token is not set (the token @BotFather gave)"
        return None

    def token_value(self) -> str:
        return self.secret_text("token")
