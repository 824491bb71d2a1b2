"""`channels.teams:`: the Microsoft Teams channel's settings: issue 36's keys (`app_id`,
`app_password`, `tenant_id`, `api_base`, `openid_metadata_url`) and the webhook's path, the
pacing and splitting numbers every channel has."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings, path_like, url_like

_WHERE = "(Azure portal -> the Azure Bot resource -> Configuration)"
OPENID = "https://login.botframework.com/v1/.well-known/openidconfiguration"


class TeamsSettings(PlatformSettings):
    """An Azure Bot (the Bot Framework) with the Microsoft Teams channel on: Teams POSTs
    activities to `webhook_path` on the HTTP channel's port (the bot's messaging endpoint),
    each with a JWT the Bot Framework signed (checked against `openid_metadata_url`'s keys);
    answers go to the activity's service URL with a token of `app_id` / `app_password` from
    `{api_base}/{tenant_id}/oauth2/v2.0/token`."""

    # The bot's Microsoft App ID (a GUID), from its Azure Bot resource.
    app_id: str = ""
    app_password: SecretStr | None = None  # its client secret
    # The bot's tenant (single-tenant bots); "" = botframework.com (multi-tenant bots).
    tenant_id: str = ""
    # Where the bot's access token comes from (Microsoft Entra ID).
    api_base: Annotated[str, url_like("https://login.microsoftonline.com")] = (
        "https://login.microsoftonline.com"
    )
    # The Bot Framework's OpenID metadata: the keys incoming activities are checked with.
    openid_metadata_url: str = OPENID
    # The messaging endpoint's path (on the HTTP channel's port), as set in the Azure Bot.
    webhook_path: Annotated[str, path_like("/api/messages")] = "/api/messages"
    # Characters per message (Teams refuses a message over about 28 KB).
    max_message_length: int = Field(default=20000, ge=100, le=28000)

    @field_validator("openid_metadata_url")
    @classmethod
    def _openid(cls, v: str) -> str:
        if not v.startswith(("https://", "http://")):
            raise ValueError(f"expected an http(s) URL like {OPENID}, got {v!r}")
        return v

    @property
    def token_url(self) -> str:
        return f"{self.api_base}/{self.tenant_id or 'botframework.com'}/oauth2/v2.0/token"

    def problem(self) -> str | None:
        return self.unset("teams", ("app_id", "app_password"), _WHERE)
