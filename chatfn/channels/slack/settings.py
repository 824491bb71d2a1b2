"""`channels.slack:`: the Slack channel's settings (issue 25's keys, and the pacing and
splitting numbers every channel has)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from chatfn.common.config import Section

DEFAULT_API_BASE = "https://slack.com/api"


class SlackSettings(Section):
    """A Slack app's bot user. Events come by Socket Mode (`app_token`, an `xapp-` token with
    `connections:write`) or by the Events API (`signing_secret`: Slack POSTs to
    `/slack/events` on the HTTP channel's port); Web API calls go to `{api_base}/METHOD`."""

    bot_token: SecretStr | None = None  # xoxb-...
    app_token: SecretStr | None = None  # xapp-... (Socket Mode)
    signing_secret: SecretStr | None = None  # Events API request signatures
    api_base: str = DEFAULT_API_BASE
    # Slack truncates a message's text past 40000 characters and advises staying within 4000.
    max_message_length: int = Field(default=4000, ge=100, le=40000)
    # Per chat: messages per second after a burst (chat.postMessage allows about one per
    # second per channel); 0 disables it. A 429's Retry-After is honoured whatever these say.
    send_rate: float = Field(default=1.0, ge=0)
    send_burst: int = Field(default=3, ge=1)
    # The longest Retry-After waited out inside one delivery (seconds); a longer one leaves
    # the message in the outbox for later.
    max_retry_after: float = Field(default=60.0, ge=0)
    # Seconds a workspace member's name and admin/owner flags (users.info) are remembered.
    user_cache_seconds: float = Field(default=600.0, ge=0)

    @field_validator("bot_token", "app_token", "signing_secret")
    @classmethod
    def _empty_is_none(cls, v: SecretStr | None) -> SecretStr | None:
        return v if v is not None and v.get_secret_value() else None

    @field_validator("bot_token")
    @classmethod
    def _bot_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and v.get_secret_value().startswith("xapp-"):
            raise ValueError("expected the bot token (xoxb-...); the xapp- token is app_token")
        return v

    @field_validator("app_token")
    @classmethod
    def _app_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value().startswith("xapp-"):
            raise ValueError("expected an app-level token (xapp-...) with connections:write")
        return v

    @field_validator("api_base")
    @classmethod
    def _api_base(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"expected an http(s) URL like {DEFAULT_API_BASE}, got {v!r}")
        if parts.query or parts.fragment:
            raise ValueError("expected the Web API root without a query or fragment")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _one_way_in(self) -> SlackSettings:
        if self.app_token is not None and self.signing_secret is not None:
            raise ValueError(
                "set channels.slack.app_token (Socket Mode) or signing_secret (Events API), "
                "not both"
            )
        return self

    @property
    def mode(self) -> str:
        """Which way events come: "socket" (app_token), "events" (signing_secret) or ""."""
        if self.app_token is not None:
            return "socket"
        return "events" if self.signing_secret is not None else ""

    def secret(self, name: str) -> str:
        value = getattr(self, name)
        return value.get_secret_value() if value is not None else ""
