"""The Slack channel: a Slack app's bot user through the Web API, events by Socket Mode or the
Events API (channel.py; chat ids and incoming markup parse.py, the way out send.py). This
module is the channel's declaration, found through the `chatfn.channels` entry point `slack`;
slack_sdk is imported only when the channel is built or probed online."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.slack.settings import SlackSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: SlackSettings) -> Any:
    from chatfn.channels.slack.channel import SlackChannel

    return SlackChannel(host, settings)


def offline(settings: SlackSettings) -> list[Probe]:
    how = (
        "Socket Mode (app_token)"
        if settings.mode == "socket"
        else "Events API at /slack/events on the HTTP channel's port (needs --channel http)"
    )
    return [Probe("ok", f"{how} via {settings.api_base}")]


async def online(settings: SlackSettings) -> list[Probe]:
    probes = [await who_am_i(settings)]
    if settings.mode == "socket":
        probes.append(await socket_mode_open(settings))
    return probes


#: auth.test: the channel's own connect (kit/probe.py), as the bot asks it at start (the bot
#: user and workspace, or the reason the token or the API is not usable).
who_am_i = connects(build, "channel slack auth.test")


async def socket_mode_open(settings: SlackSettings) -> Probe:
    """apps.connections.open with the app-level token (the URL it gives is left unused): what
    connect does not ask (the channel opens Socket Mode only once it serves)."""
    import aiohttp
    from slack_sdk.errors import SlackApiError

    from chatfn.channels.slack.channel import web_client
    from chatfn.channels.slack.send import error_code, token_refused

    method = "apps.connections.open"
    client = web_client(settings, settings.secret_text("bot_token"))

    async def ask() -> str:
        await client.apps_connections_open(app_token=settings.secret_text("app_token"))
        return "Socket Mode accepts channels.slack.app_token"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, SlackApiError):
            refused = token_refused(exc, "app_token")
            return str(refused) if refused else f"Slack {method} failed: {error_code(exc) or exc}"
        if isinstance(exc, (aiohttp.ClientError, TimeoutError)):
            return f"Slack not reachable at {settings.api_base} ({exc})"
        return None

    async def close() -> None:
        if client.session is not None:
            await client.session.close()

    return await asked(f"channel slack {method}", ask, failed, close)


check = checks(offline, online)  # problem(): no bot token, or no way for events to come

SPEC = ChannelSpec(
    name="slack",
    settings=SlackSettings,
    factory=build,
    summary="Slack apps (Socket Mode or the Events API)",
    extra="slack",
    modules=("slack_sdk",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        threads=True,
        buttons=True,
        markdown="mrkdwn",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection", "webhook"),
    ),
)
