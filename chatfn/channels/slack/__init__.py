"""The Slack channel: a Slack app's bot user through the Web API, events by Socket Mode or the
Events API (channel.py; chat ids and incoming markup parse.py, the way out send.py). This
module is the channel's declaration, found through the `chatfn.channels` entry point `slack`;
slack_sdk is imported only when the channel is built or probed online."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
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


async def who_am_i(settings: SlackSettings) -> Probe:
    """auth.test: the bot user and workspace, or the reason the token or the API is not
    usable."""

    async def call(client: Any) -> str:
        me = await client.auth_test()
        who = f"bot user {me.get('user')} ({me.get('user_id')}) in {me.get('team')}"
        return f"{who} at {settings.api_base}"

    return await _probe(settings, "auth.test", "bot_token", call)


async def socket_mode_open(settings: SlackSettings) -> Probe:
    """apps.connections.open with the app-level token (the URL it gives is left unused)."""

    async def call(client: Any) -> str:
        await client.apps_connections_open(app_token=settings.secret_text("app_token"))
        return "Socket Mode accepts channels.slack.app_token"

    return await _probe(settings, "apps.connections.open", "app_token", call)


async def _probe(
    settings: SlackSettings, method: str, token: str, call: Callable[[Any], Awaitable[str]]
) -> Probe:
    """One Web API call with a client of its own: what it says, or why it failed (the
    setting `token` refused, another error, or the network)."""
    import aiohttp
    from slack_sdk.errors import SlackApiError

    from chatfn.channels.slack.channel import web_client
    from chatfn.channels.slack.send import error_code, token_refused

    client = web_client(settings, settings.secret_text("bot_token"))

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, SlackApiError):
            refused = token_refused(exc, token)
            return str(refused) if refused else f"Slack {method} failed: {error_code(exc) or exc}"
        if isinstance(exc, (aiohttp.ClientError, TimeoutError)):
            return f"Slack not reachable at {settings.api_base}: {exc}"
        return None

    async def close() -> None:
        if client.session is not None:
            await client.session.close()

    return await asked(f"channel slack {method}", lambda: call(client), failed, close)


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
