"""The QQ channel: a bot of the QQ open platform (the official bot API, not OneBot) in QQ
groups, C2C chats, guild channels and guild DMs (channel.py; the token and calls api.py, the
WebSocket gateway gateway.py, webhook signatures webhook.py, chat ids parse.py, the way out
send.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `qq`; it needs aiohttp (a base dependency) and, for webhook mode, cryptography
(the `qq` extra)."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit.declare import readme
from chatfn.channels.qq.settings import QQSettings
from chatfn.runtime.channel_host import Capabilities, ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: QQSettings) -> Any:
    from chatfn.channels.qq.channel import QQChannel

    return QQChannel(host, settings)


async def check(settings: QQSettings, online: bool) -> list[Probe]:
    if (missing := settings.missing()) is not None:
        return [Probe("fail", missing)]
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
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: QQSettings) -> Probe:
    """An access token, then GET /users/@me: the bot, or why the credentials or the API are
    not usable (the channel's own words: QQApi.who_am_i)."""
    import aiohttp

    from chatfn.channels.kit.errors import NotDelivered
    from chatfn.channels.qq.api import QQApi

    name = "channel qq /users/@me"
    async with aiohttp.ClientSession() as session:
        try:
            me = await QQApi(settings, session).who_am_i()
        except NotDelivered as exc:
            return Probe("fail", str(exc), name=name)
    bot = f"bot {me.get('username')} (id {me.get('id')}) at {settings.api_root}"
    return Probe("ok", bot, name=name)


SPEC = ChannelSpec(
    name="qq",
    settings=QQSettings,
    factory=build,
    summary="QQ official bots (groups, C2C, guilds: WebSocket gateway or webhook)",
    extra="qq",
    modules=("cryptography",),
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        dms=True,
        groups=True,
        mentions=True,
        replies=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        delivery_ids=True,
        confirm_stored=True,
        connection=("webhook", "long connection"),
    ),
)
