"""The WhatsApp channel: the WhatsApp Cloud API (Meta's Graph API): the verified, signed
webhook in, messages out within the 24-hour customer-service window (a template outside
it) (channel.py, send.py, api.py). This module is the declaration, found through the
`chatfn.channels` entry point `whatsapp`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
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


async def who_am_i(settings: WhatsAppSettings) -> Probe:
    """GET /{phone-number-id} with the access token: the number and its verified name."""
    from chatfn.channels.whatsapp.api import NETWORK_ERRORS, GraphApi, GraphError

    api = GraphApi(settings)

    async def ask() -> str:
        number, verified = await api.whoami()
        return f"{verified} ({number})"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, GraphError) and (
            exc.status == 401 or exc.code in (190, 102, 100, 10, 200)
        ):
            return (
                "WhatsApp refused channels.whatsapp.access_token or "
                f"channels.whatsapp.phone_number_id ({exc.message})"
            )
        if isinstance(exc, GraphError):
            return f"WhatsApp answered {exc} at {settings.api_base}"
        if isinstance(exc, NETWORK_ERRORS):
            return f"WhatsApp not reachable at {settings.api_base}: {exc!r}"
        return None

    return await asked("channel whatsapp phone number", ask, failed, api.aclose)


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
