"""The OneBot v11 channel: QQ through NapCat, LLOneBot, Lagrange (channel.py; sockets and
actions link.py, the way out send.py, the message codec message.py, "was it sent already?"
history.py, what was said while the bot was away catchup.py). This module is the channel's
declaration, found through the `chatfn.channels` entry point `onebot`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loguru import logger

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.onebot.settings import OneBotSettings
from chatfn.channels.probes import open_without_token, port_probe
from chatfn.common.config import CoreSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: OneBotSettings) -> Any:
    from chatfn.channels.onebot.channel import OneBotChannel

    return OneBotChannel(host, settings)


def offline(settings: OneBotSettings) -> list[Probe]:
    where = f"ws://{settings.host}:{settings.port}/onebot/v11/ws"
    probes = [Probe("ok", f"listening on {where} (the account connects to the bot)")]
    warning = open_without_token("onebot", "access_token", settings.host, settings.access_token)
    return probes if warning is None else [*probes, warning]


async def online(settings: OneBotSettings) -> Probe:
    """Reverse WebSocket: the account's "who am I" comes when it connects; the port is free."""
    return await port_probe("onebot", settings.host, settings.port)


check = checks(offline, online, unset=lambda settings: None)  # nothing of it must be set


def adopt(core: CoreSettings, settings: OneBotSettings) -> None:
    """`channels.onebot.quote_replies` came before `bot.reply_with_quote`: still read."""
    if settings.quote_replies:
        logger.warning("channels.onebot.quote_replies is deprecated: use bot.reply_with_quote")
        if "reply_with_quote" not in core.bot.model_fields_set:
            core.bot.reply_with_quote = True


SPEC = ChannelSpec(
    name="onebot",
    settings=OneBotSettings,
    factory=build,
    summary="QQ through a OneBot v11 implementation (reverse WebSocket)",
    check=check,
    readme=readme(__file__),
    adopt=adopt,
    capabilities=replace(CHAT, delivery_ids=True, connection=("long connection",)),
)
