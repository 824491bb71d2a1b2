"""The WhatsApp channel: the WhatsApp Cloud API (Meta's Graph API): the verified, signed
webhook in, messages out within the 24-hour customer-service window (a template outside
it) (channel.py, send.py, api.py). This module is the declaration, found through the
`chatfn.channels` entry point `whatsapp`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.whatsapp.settings import WhatsAppSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: WhatsAppSettings) -> Any:
    from chatfn.channels.whatsapp.channel import WhatsAppChannel

    return WhatsAppChannel(host, settings)


async def check(settings: WhatsAppSettings, online: bool) -> list[Probe]:
    why = settings.problem()
    if why:
        return [Probe("fail", why)]
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
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: WhatsAppSettings) -> Probe:
    """GET /{phone-number-id} with the access token: the number and its verified name."""
    from chatfn.channels.whatsapp.api import NETWORK_ERRORS, GraphApi, GraphError

    name = "channel whatsapp phone number"
    api = GraphApi(settings)
    try:
        number, verified = await api.whoami()
    except GraphError as exc:
        if exc.status == 401 or exc.code in (190, 102, 100, 10, 200):
            return Probe(
                "fail",
                "WhatsApp refused channels.whatsapp.access_token or "
                f"channels.whatsapp.phone_number_id ({exc.message})",
                name=name,
            )
        return Probe("fail", f"WhatsApp answered {exc} at {settings.api_base}", name=name)
    except NETWORK_ERRORS as exc:
        return Probe("fail", f"WhatsApp not reachable at {settings.api_base}: {exc!r}", name=name)
    finally:
        await api.aclose()
    return Probe("ok", f"{verified} ({number})", name=name)


SPEC = ChannelSpec(
    name="whatsapp",
    settings=WhatsAppSettings,
    factory=build,
    summary="WhatsApp (Cloud API: webhook and Graph API messages)",
    extra="whatsapp",
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        groups=True,
        dms=True,
        mentions=True,
        replies=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        markdown="WhatsApp formatting",
        confirm_stored=True,
        connection=("webhook",),
    ),
)
