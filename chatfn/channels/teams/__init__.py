"""The Microsoft Teams channel: Bot Framework activities in (a JWT checked against the Bot
Framework's OpenID keys), the Bot Connector REST API out (channel.py, send.py, api.py,
auth.py). Over aiohttp with PyJWT for the token check: the Bot Framework SDK for Python
(botbuilder-python) is archived, its support ended. This module is the declaration, found
through the `chatfn.channels` entry point `teams`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.teams.settings import TeamsSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: TeamsSettings) -> Any:
    from chatfn.channels.teams.channel import TeamsChannel

    return TeamsChannel(host, settings)


def offline(settings: TeamsSettings) -> list[Probe]:
    return [Probe("ok", f"app {settings.app_id}, messaging endpoint {settings.webhook_path}")]


#: A token from the login endpoint (the credentials) and the Bot Framework's keys: the
#: channel's own connect (kit/probe.py), as the bot asks them at start.
logs_in = connects(build, "channel teams login")


async def keys_read(settings: TeamsSettings) -> Probe:
    """The Bot Framework's signing keys, how many (connect reads them too: this line names
    them on their own)."""
    from chatfn.channels.teams.api import NETWORK_ERRORS, TeamsApi

    api = TeamsApi(settings)

    async def keys() -> str:
        await api.keys.refresh()
        return f"{len(api.keys.keys)} signing keys"

    def unread(exc: Exception) -> str | None:
        if isinstance(exc, (*NETWORK_ERRORS, ValueError, KeyError)):
            return f"channels.teams.openid_metadata_url: keys not read ({exc!r})"
        return None

    return await asked("channel teams keys", keys, unread, api.aclose)


async def who_am_i(settings: TeamsSettings) -> list[Probe]:
    """The login (connect) and the keys."""
    return [await logs_in(settings), await keys_read(settings)]


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
