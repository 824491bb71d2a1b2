"""The LINE channel: the Messaging API's signed webhook in, reply tokens and the push API
out, through the official SDK line-bot-sdk v3 (channel.py, send.py, api.py; pictures out
served by the bot, media.py). This module is the declaration, found through the
`chatfn.channels` entry point `line`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.line.settings import LineSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: LineSettings) -> Any:
    from chatfn.channels.line.channel import LineChannel

    return LineChannel(host, settings)


def offline(settings: LineSettings) -> list[Probe]:
    probes = [
        Probe(
            "ok",
            f"webhook at {settings.webhook_path} on the HTTP channel's port (needs --channel "
            f"http), API at {settings.api_base}, content at {settings.data_base}",
        )
    ]
    if settings.public_url is None:
        probes.append(
            Probe(
                "warn",
                "channels.line.public_url is not set: pictures the bot makes are not sent "
                "(LINE takes images only by https URL)",
            )
        )
    elif not settings.public_url.startswith("https://"):
        probes.append(
            Probe("warn", "channels.line.public_url is not https: LINE refuses such images")
        )
    return probes


#: GET /v2/bot/info with the channel access token (the bot's name): the channel's own connect
#: (kit/probe.py), as the bot asks it at start and every five minutes.
who_am_i = connects(build, "channel line bot info")


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="line",
    settings=LineSettings,
    factory=build,
    summary="LINE (Messaging API: webhook, reply tokens and push)",
    extra="line",
    modules=("linebot",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(CHAT, confirm_stored=True, connection=("webhook",)),
)
