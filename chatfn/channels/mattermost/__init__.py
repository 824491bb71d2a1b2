"""The Mattermost channel: the WebSocket's events in, REST API v4 out (channel.py, send.py,
api.py; aiohttp: the `mattermostdriver` library's last release is of January 2022). This
module is the declaration, found through the `chatfn.channels` entry point `mattermost`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.mattermost.settings import MattermostSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: MattermostSettings) -> Any:
    from chatfn.channels.mattermost.channel import MattermostChannel

    return MattermostChannel(host, settings)


def offline(settings: MattermostSettings) -> list[Probe]:
    return [Probe("ok", f"{settings.api}, team {settings.team}")]


async def who_am_i(settings: MattermostSettings) -> Probe:
    """GET /users/me and /teams/name/{team}: the bot's name, or what failed."""
    from chatfn.channels.mattermost.api import NETWORK_ERRORS, ApiError, MattermostApi

    api = MattermostApi(settings)

    async def ask() -> str:
        me = await api.me()
        await api.team(settings.team)
        return f"@{me.get('username')} ({me.get('id')}) in team {settings.team}"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, ApiError) and exc.status == 401:
            return f"Mattermost refused channels.mattermost.token ({exc.message})"
        if isinstance(exc, ApiError) and exc.status in (403, 404):
            return (
                f"Mattermost: no team channels.mattermost.team {settings.team!r} for the bot "
                f"({exc.message})"
            )
        if isinstance(exc, ApiError):
            return f"Mattermost answered {exc} at {settings.url}"
        if isinstance(exc, NETWORK_ERRORS):
            return f"Mattermost not reachable at {settings.url}: {exc!r}"
        return None

    return await asked("channel mattermost bot", ask, failed, api.aclose)


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="mattermost",
    settings=MattermostSettings,
    factory=build,
    summary="Mattermost (WebSocket events and REST API v4)",
    extra="mattermost",
    check=check,
    readme=readme(__file__),
    capabilities=replace(CHAT, threads=True, markdown="Markdown", connection=("long connection",)),
)
