"""The WeCom (企业微信) channel: a self-built app (callback + message API) or an intelligent
robot (callback + streaming reply). The callback's encryption is chatfn/channels/wxcrypt.py
(shared with the WeChat Official Account channel); the API api.py; the way out send.py; the
robot aibot.py; the callback channel.py. This module is the declaration, found through the
`chatfn.channels` entry point `wecom`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.wecom.settings import WecomSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: WecomSettings) -> Any:
    if settings.mode == "aibot":
        from chatfn.channels.wecom.aibot import AibotChannel

        return AibotChannel(host, settings)
    from chatfn.channels.wecom.channel import WecomChannel

    return WecomChannel(host, settings)


def offline(settings: WecomSettings) -> list[Probe]:
    what = "intelligent robot" if settings.mode == "aibot" else f"app {settings.agent_id}"
    return [
        Probe(
            "ok",
            f"{what}: callback at {settings.webhook_path} on the HTTP channel's port (needs "
            f"--channel http), API at {settings.api_base}",
        )
    ]


#: gettoken and agent/get: the app's own connect (kit/probe.py), as the bot asks it at start.
agent_get = connects(build, "channel wecom agent/get")


async def who_am_i(settings: WecomSettings) -> list[Probe]:
    """The app's name, or which key was refused (a robot: nothing to ask; its connect calls
    no API)."""
    return [] if settings.mode == "aibot" else [await agent_get(settings)]


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="wecom",
    settings=WecomSettings,
    factory=build,
    summary="WeCom (企业微信) self-built apps and intelligent robots (callback)",
    extra="wecom",
    modules=("cryptography",),
    check=check,
    readme=readme(__file__),
    # groups: the robot's group chats (an app gets none); images and voice: app mode (the
    # robot's stream carries no voice); edits: the robot's stream grows as the model writes.
    capabilities=replace(
        CHAT,
        replies=False,
        markdown="plain (app), Markdown (robot)",
        edits=True,
        confirm_stored=True,
        connection=("webhook",),
    ),
)
