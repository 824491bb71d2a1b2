"""The QQ channel: a bot of the QQ open platform (the official bot API, not OneBot) in QQ
groups, C2C chats, guild channels and guild DMs (channel.py; the token and calls api.py, the
WebSocket gateway gateway.py, webhook signatures webhook.py, chat ids parse.py, the way out
send.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `qq`; it needs aiohttp (a base dependency) and, for webhook mode, cryptography
(the `qq` extra)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.qq.settings import QQSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: QQSettings) -> Any:
    from chatfn.channels.qq.channel import QQChannel

    return QQChannel(host, settings)


def offline(settings: QQSettings) -> list[Probe]:
    how = (
        "the WebSocket gateway"
        if settings.mode == "websocket"
        else f"webhook at {settings.webhook_path} on the HTTP channel's port (needs --channel http)"
    )
    probes = [Probe("ok", f"bot {settings.app_id}: events by {how} via {settings.api_root}")]
    if settings.public_url is None:
        probes.append(
            Probe(
                "warn",
                "channels.qq.public_url is not set: pictures to groups and C2C chats are "
                "uploaded as file_data, which QQ marks 'not yet supported'",
            )
        )
    return probes


#: An access token, then GET /users/@me: the channel's own connect (kit/probe.py), as the bot
#: asks it at start (the bot, or why the credentials or the API are not usable).
who_am_i = connects(build, "channel qq /users/@me")


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="qq",
    settings=QQSettings,
    factory=build,
    summary="QQ official bots (groups, C2C, guilds: WebSocket gateway or webhook)",
    extra="qq",
    modules=("cryptography",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        delivery_ids=True,
        confirm_stored=True,
        connection=("webhook", "long connection"),
    ),
)
