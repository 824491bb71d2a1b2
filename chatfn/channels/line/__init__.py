"""The LINE channel: the Messaging API's signed webhook in, reply tokens and the push API
out, through the official SDK line-bot-sdk v3 (channel.py, send.py, api.py; pictures out
served by the bot, media.py). This module is the declaration, found through the
`chatfn.channels` entry point `line`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.line.settings import LineSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: LineSettings) -> Any:
    from chatfn.channels.line.channel import LineChannel

    return LineChannel(host, settings)


async def check(settings: LineSettings, online: bool) -> list[Probe]:
    why = settings.problem()
    if why:
        return [Probe("fail", why)]
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
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: LineSettings) -> Probe:
    """GET /v2/bot/info with the channel access token: the bot's name, or what failed."""
    from chatfn.channels.line.api import NETWORK_ERRORS, LineApi, LineError

    name = "channel line bot info"
    api = LineApi(settings)
    try:
        user, display = await api.bot_info()
    except LineError as exc:
        if exc.status in (401, 403):
            return Probe(
                "fail",
                f"LINE refused channels.line.channel_access_token ({exc.message})",
                name=name,
            )
        return Probe("fail", f"LINE answered {exc} at {settings.api_base}", name=name)
    except NETWORK_ERRORS as exc:
        return Probe("fail", f"LINE not reachable at {settings.api_base}: {exc!r}", name=name)
    finally:
        await api.aclose()
    return Probe("ok", f"{display} ({user})", name=name)


SPEC = ChannelSpec(
    name="line",
    settings=LineSettings,
    factory=build,
    summary="LINE (Messaging API: webhook, reply tokens and push)",
    extra="line",
    modules=("linebot",),
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
        markdown="plain",
        confirm_stored=True,
        connection=("webhook",),
    ),
)
