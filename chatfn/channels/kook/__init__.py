"""The KOOK channel: a KOOK (formerly KaiHeiLa) bot in guild text channels and direct
messages, by KOOK's WebSocket gateway and HTTP API (channel.py; the API api.py, the gateway
gateway.py, chat ids and what comes in parse.py, the way out send.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `kook`; it needs only
aiohttp, a base dependency (KOOK publishes no Python SDK)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.kook.settings import KookSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: KookSettings) -> Any:
    from chatfn.channels.kook.channel import KookChannel

    return KookChannel(host, settings)


def offline(settings: KookSettings) -> list[Probe]:
    return [Probe("ok", f"WebSocket gateway and API at {settings.api_base}")]


#: GET /v3/user/me (the bot): the channel's own connect (kit/probe.py), as the bot asks it at
#: start.
who_am_i = connects(build, "channel kook /v3/user/me")


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="kook",
    settings=KookSettings,
    factory=build,
    summary="KOOK bots (guild channels and DMs: WebSocket gateway)",
    extra="kook",
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        markdown="KMarkdown",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection",),
    ),
)
