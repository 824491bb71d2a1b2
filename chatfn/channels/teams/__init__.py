"""The Microsoft Teams channel: Bot Framework activities in (a JWT checked against the Bot
Framework's OpenID keys), the Bot Connector REST API out (channel.py, send.py, api.py,
auth.py). Over aiohttp with PyJWT for the token check: the Bot Framework SDK for Python
(botbuilder-python) is archived, its support ended. This module is the declaration, found
through the `chatfn.channels` entry point `teams`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.teams.settings import TeamsSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: TeamsSettings) -> Any:
    from chatfn.channels.teams.channel import TeamsChannel

    return TeamsChannel(host, settings)


def offline(settings: TeamsSettings) -> list[Probe]:
    return [Probe("ok", f"app {settings.app_id}, messaging endpoint {settings.webhook_path}")]


async def who_am_i(settings: TeamsSettings) -> list[Probe]:
    """A token from the login endpoint (the credentials) and the Bot Framework's keys."""
    from chatfn.channels.teams.api import NETWORK_ERRORS, TeamsApi
    from chatfn.channels.teams.auth import TokenError

    api = TeamsApi(settings)

    async def token() -> str:
        await api.tokens.token(fresh=True)
        return f"a token for app {settings.app_id}"

    def refused(exc: Exception) -> str | None:
        if isinstance(exc, TokenError):
            what = (
                "Microsoft refused channels.teams.app_id / channels.teams.app_password"
                if exc.status in (400, 401, 403)
                else "the login endpoint answered"
            )
            return f"{what} ({exc}) at {settings.token_url}"
        if isinstance(exc, NETWORK_ERRORS):
            return f"{settings.token_url} not reachable: {exc!r}"
        return None

    async def keys() -> str:
        await api.keys.refresh()
        return f"{len(api.keys.keys)} signing keys"

    def unread(exc: Exception) -> str | None:
        if isinstance(exc, (*NETWORK_ERRORS, ValueError, KeyError)):
            return f"channels.teams.openid_metadata_url: keys not read ({exc!r})"
        return None

    try:
        return [
            await asked("channel teams login", token, refused),
            await asked("channel teams keys", keys, unread),
        ]
    finally:
        await api.aclose()


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="teams",
    settings=TeamsSettings,
    factory=build,
    summary="Microsoft Teams (Bot Framework activities and the Bot Connector API)",
    extra="teams",
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        voice_out=False,
        markdown="Markdown",
        confirm_stored=True,
        connection=("webhook",),
    ),
)
