"""The Mattermost channel: the WebSocket's events in, REST API v4 out (channel.py, send.py,
api.py; aiohttp: the `mattermostdriver` library's last release is of January 2022). This
module is the declaration, found through the `chatfn.channels` entry point `mattermost`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.mattermost.settings import MattermostSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: MattermostSettings) -> Any:
    from chatfn.channels.mattermost.channel import MattermostChannel

    return MattermostChannel(host, settings)


def offline(settings: MattermostSettings) -> list[Probe]:
    return [Probe("ok", f"{settings.api}, team {settings.team}")]


#: GET /users/me and /teams/name/{team}: the channel's own connect (kit/probe.py), as the bot
#: asks it at start (the bot's name, or the refused token, the team it is not in, the network).
who_am_i = connects(build, "channel mattermost bot")


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
