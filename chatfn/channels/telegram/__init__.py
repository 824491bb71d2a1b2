"""The Telegram channel: a bot account through the Bot API (channel.py; chat ids and mentions
parse.py, the way out send.py). This module is the channel's declaration, found through the
`chatfn.channels` entry point `telegram`; python-telegram-bot is imported only when the channel
is built or probed online."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.telegram.settings import DEFAULT_BASE_URL, TelegramSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: TelegramSettings) -> Any:
    # python-telegram-bot 22 warns on every 429 until time periods are timedeltas; send.py
    # reads either type, so opt in (the later majors' behaviour) and keep the log clean.
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    from chatfn.channels.telegram.channel import TelegramChannel

    return TelegramChannel(host, settings)


def offline(settings: TelegramSettings) -> list[Probe]:
    where = settings.webhook_url if settings.mode == "webhook" else "getUpdates long polling"
    probes = [Probe("ok", f"{settings.mode} mode ({where}) via {settings.base_url}")]
    if settings.mode == "webhook" and settings.secret_token is None:
        probes.append(
            Probe(
                "warn", "channels.telegram.secret_token is not set: webhook POSTs are not checked"
            )
        )
    if settings.mode == "webhook" and settings.base_url == DEFAULT_BASE_URL:
        parts = urlsplit(settings.webhook_url or "")
        if parts.scheme != "https" or (parts.port or 443) not in (443, 80, 88, 8443):
            probes.append(
                Probe(
                    "warn",
                    f"channels.telegram.webhook_url {settings.webhook_url}: api.telegram.org "
                    "delivers only to https URLs on port 443, 80, 88 or 8443",
                )
            )
    return probes


#: getMe: the channel's own connect (kit/probe.py), as the bot asks it at start.
who_am_i = connects(build, "channel telegram getMe")


check = checks(offline, who_am_i)  # problem(): the token not set

SPEC = ChannelSpec(
    name="telegram",
    settings=TelegramSettings,
    factory=build,
    summary="Telegram bots (Bot API: long polling or webhook)",
    extra="telegram",
    modules=("telegram",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        threads=True,
        buttons=True,
        markdown="HTML",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection", "webhook"),
    ),
)
