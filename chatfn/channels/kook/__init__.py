"""The KOOK channel: a KOOK (formerly KaiHeiLa) bot in guild text channels and direct
messages, by KOOK's WebSocket gateway and HTTP API (channel.py; the API api.py, the gateway
gateway.py, chat ids and what comes in parse.py, the way out send.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `kook`; it needs only
aiohttp, a base dependency (KOOK publishes no Python SDK)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.kook.settings import KookSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: KookSettings) -> Any:
    from chatfn.channels.kook.channel import KookChannel

    return KookChannel(host, settings)


def offline(settings: KookSettings) -> list[Probe]:
    return [Probe("ok", f"WebSocket gateway and API at {settings.api_base}")]


async def who_am_i(settings: KookSettings) -> Probe:
    """GET /v3/user/me: the bot, or why the token or the API is not usable."""
    import aiohttp

    from chatfn.channels.kook.api import KookApi, KookApiError, KookAuthError

    session = aiohttp.ClientSession()

    async def ask() -> str:
        me = await KookApi(settings, session).call("GET", "/v3/user/me", timeout=15)
        bot = me if isinstance(me, dict) else {}
        return f"bot {bot.get('username')} (id {bot.get('id')}) at {settings.api_base}"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, KookAuthError):
            return f"KOOK refused channels.kook.token ({exc})"
        if isinstance(exc, KookApiError):
            return f"KOOK GET /v3/user/me failed: {exc}"
        if isinstance(exc, (aiohttp.ClientError, TimeoutError)):
            return f"KOOK not reachable at {settings.api_base} ({exc})"
        return None

    return await asked("channel kook /v3/user/me", ask, failed, session.close)


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="kook",
    settings=KookSettings,
    factory=build,
    summary="KOOK bots (guild channels and DMs: WebSocket gateway)",
    extra="kook",
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        markdown="KMarkdown",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection",),
    ),
)
