"""The Satori channel: a Satori server's event stream in, its HTTP API out (channel.py,
send.py, api.py, elements.py; aiohttp: no Python client of the protocol is needed for what
it uses). One channel answers every platform account the server bridges (Koishi's
server-satori, Chronocat). This module is the declaration, found through the
`chatfn.channels` entry point `satori`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.satori.settings import SatoriSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: SatoriSettings) -> Any:
    from chatfn.channels.satori.channel import SatoriChannel

    return SatoriChannel(host, settings)


def offline(settings: SatoriSettings) -> list[Probe]:
    only = f", platform {settings.platform}" if settings.platform else ", every platform"
    return [Probe("ok", f"{settings.endpoint}{only}")]


#: The online probes' name.
NAME = "channel satori logins"


async def who_am_i(settings: SatoriSettings) -> list[Probe]:
    """POST /v1/meta: the channel's own connect (kit/probe.py), as the bot asks it at start
    (the logins of `platform` it answers; a refused token or none of `platform` among those
    the server serves: ✗); and, as before, ✗ when the server serves no login at all yet, which
    connect lets pass (an account may still log in, an older server names them at READY)."""
    built: list[Any] = []

    def building(host: ChannelHost, given: SatoriSettings) -> Any:
        built.append(build(host, given))  # kept: its logins, once connected
        return built[-1]

    found = await connects(building, NAME)(settings)
    if found.status != "ok" or built[0].logins:
        return [found]
    none = f"no login of channels.satori.platform {settings.platform!r} (served: none)"
    return [found, Probe("fail", none, name=NAME)]


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="satori",
    settings=SatoriSettings,
    factory=build,
    summary="Satori (a Koishi / Chronocat server: its event stream and HTTP API)",
    extra="satori",
    check=check,
    readme=readme(__file__),
    capabilities=replace(CHAT, markdown="Satori elements", connection=("long connection",)),
)
