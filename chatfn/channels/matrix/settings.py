"""`channels.matrix:`: the Matrix channel's settings (issue 25's keys, a store folder, and the
pacing and splitting numbers every channel has)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, SecretStr, field_validator

from chatfn.channels.kit.settings import PlatformSettings, url_like
from chatfn.common.config import ConfigPath

#: A Matrix user id: `@localpart:server` (https://spec.matrix.org/v1.16/appendices/#user-identifiers).
_USER_ID = re.compile(r"^@[^:\s]+:[^\s]+$")


class MatrixSettings(
    PlatformSettings,
    send_burst=5,
    pace="The pace per room (PlatformSettings'): Synapse's default rc_message is 0.2/s with a "
    "burst of 10 per user.",
):
    """A Matrix account the bot logs in as, on `homeserver` (the client-server API's base URL,
    e.g. `https://matrix.example.org`). Either `access_token` (of a device you logged in
    once) or `password` (the channel logs in itself, keeping the token it got in
    `store_path`); `device_id` names the device, so a restart keeps it (and with it the
    transaction ids Matrix deduplicates sends by)."""

    # The homeserver's client-server API base URL (https://matrix.example.org).
    homeserver: Annotated[str | None, url_like("https://matrix.org", unset=None)] = None
    # The bot's Matrix id (@bot:example.org).
    user_id: str | None = None
    # An access token of a device logged in once (or `password` instead).
    access_token: SecretStr | None = None
    # The account's password: the channel logs in itself and keeps the token in `store_path`.
    password: SecretStr | None = None
    # The device's id, kept across restarts (sends are deduplicated per device).
    device_id: str | None = None
    # Where the sync position (`since` token) and a password login's access token are kept
    # between runs (one small JSON file per account): a restart catches up from there,
    # answering what came meanwhile once, and nothing twice.
    store_path: ConfigPath = "data/matrix"
    # Join rooms and direct chats the account is invited to.
    autojoin: bool = True
    # Seconds one /sync long poll waits for events.
    sync_timeout: float = Field(default=30.0, ge=0, le=300)
    # Events per room one sync returns; a restart after a busy while reads the rest with
    # /messages (nothing between the stored position and now is skipped).
    timeline_limit: int = Field(default=50, ge=1, le=1000)
    # Characters of one message's Markdown. An event may hold 65536 bytes of JSON, with the
    # text twice in it (`body` and the HTML `formatted_body`): 16000 leaves room for both and
    # for escaping.
    max_message_length: int = Field(default=16000, ge=100, le=30000)

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, v: str | None) -> str | None:
        if not v:
            return None
        if not _USER_ID.match(v):
            raise ValueError(f"expected a full Matrix user id like @bot:example.org, got {v!r}")
        return v

    @field_validator("device_id")
    @classmethod
    def _device_id(cls, v: str | None) -> str | None:
        return v or None

    def problem(self) -> str | None:
        """What keeps the channel from logging in, naming the key; None when nothing does."""
        if self.homeserver is None:
            return "channels.matrix.homeserver is not set (e.g. https://matrix.example.org)"
        if self.user_id is None:
            return "channels.matrix.user_id is not set (the bot account, @bot:example.org)"
        if self.access_token is None and self.password is None:
            return "set channels.matrix.access_token or channels.matrix.password"
        return None
