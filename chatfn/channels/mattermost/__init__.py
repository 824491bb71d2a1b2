"""The Mattermost channel: the WebSocket's events in, REST API v4 out (channel.py, send.py,
api.py; aiohttp: the `mattermostdriver` library's last release is of January 2022). This
module is the declaration, found through the `chatfn.channels` entry point `mattermost`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.mattermost.settings import MattermostSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: MattermostSettings) -> Any:
    from chatfn.channels.mattermost.channel import MattermostChannel

    return MattermostChannel(host, settings)


async def check(settings: MattermostSettings, online: bool) -> list[Probe]:
    why = settings.problem()
    if why:
        return [Probe("fail", why)]
    probes = [Probe("ok", f"{settings.api}, team {settings.team}")]
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: MattermostSettings) -> Probe:
    """GET /users/me and /teams/name/{team}: the bot's name, or what failed."""
    from chatfn.channels.mattermost.api import NETWORK_ERRORS, ApiError, MattermostApi

    name = "channel mattermost bot"
    api = MattermostApi(settings)
    try:
        me = await api.me()
        await api.team(settings.team)
    except ApiError as exc:
        if exc.status == 401:
            return Probe(
                "fail", f"Mattermost refused channels.mattermost.token ({exc.message})", name=name
            )
        if exc.status in (403, 404):
            return Probe(
                "fail",
                f"Mattermost: no team channels.mattermost.team {settings.team!r} for the bot "
                f"({exc.message})",
                name=name,
            )
        return Probe("fail", f"Mattermost answered {exc} at {settings.url}", name=name)
    except NETWORK_ERRORS as exc:
        return Probe("fail", f"Mattermost not reachable at {settings.url}: {exc!r}", name=name)
    finally:
        await api.aclose()
    return Probe("ok", f"@{me.get('username')} ({me.get('id')}) in team {settings.team}", name=name)


SPEC = ChannelSpec(
    name="mattermost",
    settings=MattermostSettings,
    factory=build,
    summary="Mattermost (WebSocket events and REST API v4)",
    extra="mattermost",
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
        threads=True,
        markdown="Markdown",
        connection=("long connection",),
    ),
)
