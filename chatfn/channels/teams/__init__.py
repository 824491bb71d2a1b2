"""The Microsoft Teams channel: Bot Framework activities in (a JWT checked against the Bot
Framework's OpenID keys), the Bot Connector REST API out (channel.py, send.py, api.py,
auth.py). Over aiohttp with PyJWT for the token check: the Bot Framework SDK for Python
(botbuilder-python) is archived, its support ended. This module is the declaration, found
through the `chatfn.channels` entry point `teams`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.teams.settings import TeamsSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: TeamsSettings) -> Any:
    from chatfn.channels.teams.channel import TeamsChannel

    return TeamsChannel(host, settings)


async def check(settings: TeamsSettings, online: bool) -> list[Probe]:
    why = settings.problem()
    if why:
        return [Probe("fail", why)]
    probes = [Probe("ok", f"app {settings.app_id}, messaging endpoint {settings.webhook_path}")]
    if online:
        probes += await who_am_i(settings)
    return probes


async def who_am_i(settings: TeamsSettings) -> list[Probe]:
    """A token from the login endpoint (the credentials) and the Bot Framework's keys."""
    from chatfn.channels.teams.api import NETWORK_ERRORS, TeamsApi
    from chatfn.channels.teams.auth import TokenError

    api = TeamsApi(settings)
    key_errors: tuple[type[BaseException], ...] = (*NETWORK_ERRORS, ValueError, KeyError)
    out = []
    try:
        try:
            await api.tokens.token(fresh=True)
            out.append(
                Probe("ok", f"a token for app {settings.app_id}", name="channel teams login")
            )
        except TokenError as exc:
            what = (
                "Microsoft refused channels.teams.app_id / channels.teams.app_password"
                if exc.status in (400, 401, 403)
                else "the login endpoint answered"
            )
            out.append(
                Probe("fail", f"{what} ({exc}) at {settings.token_url}", name="channel teams login")
            )
        except NETWORK_ERRORS as exc:
            out.append(
                Probe(
                    "fail",
                    f"{settings.token_url} not reachable: {exc!r}",
                    name="channel teams login",
                )
            )
        try:
            await api.keys.refresh()
            out.append(Probe("ok", f"{len(api.keys.keys)} signing keys", name="channel teams keys"))
        except key_errors as exc:
            out.append(
                Probe(
                    "fail",
                    f"channels.teams.openid_metadata_url: keys not read ({exc!r})",
                    name="channel teams keys",
                )
            )
    finally:
        await api.aclose()
    return out


SPEC = ChannelSpec(
    name="teams",
    settings=TeamsSettings,
    factory=build,
    summary="Microsoft Teams (Bot Framework activities and the Bot Connector API)",
    extra="teams",
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
        markdown="Markdown",
        confirm_stored=True,
        connection=("webhook",),
    ),
)
