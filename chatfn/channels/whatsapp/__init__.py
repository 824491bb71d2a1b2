"""The WhatsApp channel: the WhatsApp Cloud API (Meta's Graph API): the verified, signed
webhook in, messages out within the 24-hour customer-service window (a template outside
it) (channel.py, send.py, api.py). This module is the declaration, found through the
`chatfn.channels` entry point `whatsapp`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.whatsapp.settings import WhatsAppSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: WhatsAppSettings) -> Any:
    from chatfn.channels.whatsapp.channel import WhatsAppChannel

    return WhatsAppChannel(host, settings)


def offline(settings: WhatsAppSettings) -> list[Probe]:
    probes = [
        Probe(
            "ok",
            f"phone number id {settings.phone_number_id}: webhook at {settings.webhook_path} "
            f"on the HTTP channel's port (needs --channel http), API at {settings.graph}",
        )
    ]
    if not settings.template:
        probes.append(
            Probe(
                "warn",
                "channels.whatsapp.template is not set: answers to users who last wrote more "
                "than 24 hours ago are refused (logged), not sent",
            )
        )
    return probes


#: GET /{phone-number-id} with the access token (the number and its verified name): the
#: channel's own connect (kit/probe.py), as the bot asks it at start and every five minutes.
who_am_i = connects(build, "channel whatsapp phone number")


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="whatsapp",
    settings=WhatsAppSettings,
    factory=build,
    summary="WhatsApp (Cloud API: webhook and Graph API messages)",
    extra="whatsapp",
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT, markdown="WhatsApp formatting", confirm_stored=True, connection=("webhook",)
    ),
)
