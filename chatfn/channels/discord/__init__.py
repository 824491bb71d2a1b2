"""The Discord channel (channel.py; discord.py pointed at `api_base`/`gateway_url`
client.py; chat ids, mentions, roles and reply parts message.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `discord`; it imports
no discord.py, so finding channels works without the extra."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.discord.settings import API_BASE, DiscordSettings
from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: DiscordSettings) -> Any:
    from chatfn.channels.discord.channel import DiscordChannel

    return DiscordChannel(host, settings)


def unset(settings: DiscordSettings) -> str | None:
    return None if settings.token else "channels.discord.token is not set (the bot's token)"


def offline(settings: DiscordSettings) -> list[Probe]:
    where = "" if settings.api_base == API_BASE else f" at {settings.api_base}"
    return [Probe("ok", f"token set{where}")]


async def online(settings: DiscordSettings) -> Probe:
    from chatfn.channels.discord.probe import who_am_i  # discord.py only when asked

    return await who_am_i(settings)


check = checks(offline, online, unset=unset)

SPEC = ChannelSpec(
    name="discord",
    settings=DiscordSettings,
    factory=build,
    summary="Discord guild channels, threads and DMs (discord.py, Gateway + REST)",
    extra="discord",
    modules=("discord",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        threads=True,
        buttons=True,
        markdown="Discord Markdown",
        delivery_ids=True,
        connection=("long connection",),
    ),
)
