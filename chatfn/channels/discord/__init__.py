"""The Discord channel (channel.py; discord.py pointed at `api_base`/`gateway_url`
client.py; chat ids, mentions, roles and reply parts message.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `discord`; it imports
no discord.py, so finding channels works without the extra."""

from __future__ import annotations

from typing import Any

from chatfn.channels.discord.settings import API_BASE, DiscordSettings
from chatfn.channels.kit.declare import readme
from chatfn.runtime.channel_host import Capabilities, ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: DiscordSettings) -> Any:
    from chatfn.channels.discord.channel import DiscordChannel

    return DiscordChannel(host, settings)


async def check(settings: DiscordSettings, online: bool) -> list[Probe]:
    if not settings.token:
        return [Probe("fail", "channels.discord.token is not set (the bot's token)")]
    where = "" if settings.api_base == API_BASE else f" at {settings.api_base}"
    probes = [Probe("ok", f"token set{where}")]
    if online:
        from chatfn.channels.discord.probe import who_am_i

        probes.append(await who_am_i(settings))
    return probes


SPEC = ChannelSpec(
    name="discord",
    settings=DiscordSettings,
    factory=build,
    summary="Discord guild channels, threads and DMs (discord.py, Gateway + REST)",
    extra="discord",
    modules=("discord",),
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        dms=True,
        groups=True,
        mentions=True,
        replies=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        threads=True,
        buttons=True,
        markdown="Discord Markdown",
        delivery_ids=True,
        connection=("long connection",),
    ),
)
