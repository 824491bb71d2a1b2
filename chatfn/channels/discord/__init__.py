"""The Discord channel (channel.py; discord.py pointed at `api_base`/`gateway_url`
client.py; chat ids, mentions, roles and reply parts message.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `discord`; it imports
no discord.py, so finding channels works without the extra."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.discord.settings import API_BASE, DiscordSettings
from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: DiscordSettings) -> Any:
    from chatfn.channels.discord.channel import DiscordChannel

    return DiscordChannel(host, settings)


def unset(settings: DiscordSettings) -> str | None:
    return None if settings.token else "channels.discord.token is not set (the bot's token)"


def offline(settings: DiscordSettings) -> list[Probe]:
    where = "" if settings.api_base == API_BASE else f" at {settings.api_base}"
    return [Probe("ok", f"token set{where}")]


#: Log in (GET /users/@me): the channel's own connect (kit/probe.py), as the bot asks it at
#: start.
who_am_i = connects(build, "channel discord")


async def online(settings: DiscordSettings) -> list[Probe]:
    """The login, then (with a token that works) the privileged intents, which the login does
    not show."""
    probes = [await who_am_i(settings)]
    if probes[0].status == "ok":
        from chatfn.channels.discord.probe import intents  # discord.py only when asked

        probes.append(await intents(settings))
    return probes


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
