"""`channels.discord:`: the Discord channel's settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from chatfn.channels.kit.settings import url_like
from chatfn.common.config import Section

#: Discord's REST API root (v10) and Gateway, what discord.py uses unless told otherwise.
API_BASE = "https://discord.com/api/v10"
GATEWAY_URL = "wss://gateway.discord.gg/"


class DiscordSettings(Section):
    """A Discord bot account (discord.com/developers/applications -> Bot -> Token)."""

    # The bot's token (developer portal -> Bot -> Reset Token).
    token: str | None = None
    # REST root and Gateway URL: Discord's own unless a proxy or a local server (the tests)
    # stands in. `api_base` replaces `https://discord.com/api/v10` in every REST URL.
    api_base: Annotated[str, url_like(API_BASE)] = API_BASE
    # The Gateway's WebSocket URL (Discord's unless a proxy or a local server stands in).
    gateway_url: str = GATEWAY_URL
    # Discord's limit is 2000 characters a message; replies are split below it.
    max_message_length: int = Field(default=2000, ge=50, le=2000)
    # Ask for the privileged GUILD_MEMBERS intent (member joins -> welcome). Turn it off for a
    # bot whose portal page does not enable "Server Members Intent": Discord refuses the
    # connection (close code 4014) when a bot asks for an intent it was not granted.
    member_events: bool = True
    # Seconds discord.py waits after the last GUILD_CREATE before it calls the bot ready.
    guild_ready_timeout: float = Field(default=2.0, ge=0)

    @field_validator("token")
    @classmethod
    def _empty_token_is_none(cls, v: str | None) -> str | None:
        return (v or "").strip() or None

    @field_validator("gateway_url")
    @classmethod
    def _gateway(cls, v: str) -> str:
        if not v.startswith(("ws://", "wss://")):
            raise ValueError(f"expected a ws:// or wss:// URL, got {v!r}")
        return v.rstrip("/") + "/"
