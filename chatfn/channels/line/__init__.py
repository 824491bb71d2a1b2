"""The LINE channel: the Messaging API's signed webhook in, reply tokens and the push API
out, through the official SDK line-bot-sdk v3 (channel.py, send.py, api.py; pictures out
served by the bot, media.py). This module is the declaration, found through the
`chatfn.channels` entry point `line`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
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


async def who_am_i(settings: LineSettings) -> Probe:
    """GET /v2/bot/info with the channel access token: the bot's name, or what failed."""
    from chatfn.channels.line.api import NETWORK_ERRORS, LineApi, LineError

    api = LineApi(settings)

    async def ask() -> str:
        user, display = await api.bot_info()
        return f"{display} ({user})"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, LineError) and exc.status in (401, 403):
            return f"LINE refused channels.line.channel_access_token ({exc.message})"
        if isinstance(exc, LineError):
            return f"LINE answered {exc} at {settings.api_base}"
        if isinstance(exc, NETWORK_ERRORS):
            return f"LINE not reachable at {settings.api_base}: {exc!r}"
        return None

    return await asked("channel line bot info", ask, failed, api.aclose)


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
