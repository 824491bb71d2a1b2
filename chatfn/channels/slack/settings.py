"""`channels.slack:`: the Slack channel's settings (issue 25's keys, and the pacing and
splitting numbers every channel has)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator

from chatfn.channels.kit.settings import PlatformSettings, url_like

DEFAULT_API_BASE = "https://slack.com/api"


class SlackSettings(PlatformSettings):
    """A Slack app's bot user. Events come by Socket Mode (`app_token`, an `xapp-` token with
    `connections:write`) or by the Events API (`signing_secret`: Slack POSTs to
    `/slack/events` on the HTTP channel's port); Web API calls go to `{api_base}/METHOD`."""

    # The bot user's token (xoxb-...: OAuth & Permissions).
    bot_token: SecretStr | None = None
    # The app-level token for Socket Mode (xapp-..., with connections:write).
    app_token: SecretStr | None = None
    # Checks the Events API's request signatures (Basic Information -> Signing Secret).
    signing_secret: SecretStr | None = None
    # The Web API root (Slack's unless a proxy or a local server stands in).
    api_base: Annotated[str, url_like(DEFAULT_API_BASE)] = DEFAULT_API_BASE
    # Slack truncates a message's text past 40000 characters and advises staying within 4000.
    max_message_length: int = Field(default=4000, ge=100, le=40000)
    # send_rate, send_burst, max_retry_after: PlatformSettings' (chat.postMessage allows about
    # one message per second per channel).
    # Seconds a workspace member's name and admin/owner flags (users.info) are remembered.
    user_cache_seconds: float = Field(default=600.0, ge=0)

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

    def problem(self) -> str | None:
        if self.bot_token is None:
            return "channels.slack.bot_token is not set (the app's xoxb- token)"
        if not self.mode:
            return (
                "set channels.slack.app_token (Socket Mode) or channels.slack.signing_secret "
                "(Events API at /slack/events on the HTTP channel's port)"
            )
        return None
