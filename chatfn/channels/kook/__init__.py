"""The KOOK channel: a KOOK (formerly KaiHeiLa) bot in guild text channels and direct
messages, by KOOK's WebSocket gateway and HTTP API (channel.py; the API api.py, the gateway
gateway.py, chat ids and what comes in parse.py, the way out send.py). This module is the
channel's declaration, found through the `chatfn.channels` entry point `kook`; it needs only
aiohttp, a base dependency (KOOK publishes no Python SDK)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.kook.settings import KookSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: KookSettings) -> Any:
    from chatfn.channels.kook.channel import KookChannel

    return KookChannel(host, settings)


async def check(settings: KookSettings, online: bool) -> list[Probe]:
    if (why := settings.problem()) is not None:
        return [Probe("fail", why)]
    probes = [Probe("ok", f"WebSocket gateway and API at {settings.api_base}")]
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: KookSettings) -> Probe:
    """GET /v3/user/me: the bot, or why the token or the API is not usable."""
    import aiohttp

    from chatfn.channels.kook.api import KookApi, KookApiError, KookAuthError

    name = "channel kook /v3/user/me"
    async with aiohttp.ClientSession() as session:
        try:
            me = await KookApi(settings, session).call("GET", "/v3/user/me", timeout=15)
        except KookAuthError as exc:
            return Probe("fail", f"KOOK refused channels.kook.token ({exc})", name=name)
        except KookApiError as exc:
            return Probe("fail", f"KOOK GET /v3/user/me failed: {exc}", name=name)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Probe("fail", f"KOOK not reachable at {settings.api_base} ({exc})", name=name)
    me = me if isinstance(me, dict) else {}
    return Probe(
        "ok", f"bot {me.get('username')} (id {me.get('id')}) at {settings.api_base}", name=name
    )


SPEC = ChannelSpec(
    name="kook",
    settings=KookSettings,
    factory=build,
    summary="KOOK bots (guild channels and DMs: WebSocket gateway)",
    extra="kook",
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
        markdown="KMarkdown",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection",),
    ),
)
