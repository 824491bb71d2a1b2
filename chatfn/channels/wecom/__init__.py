"""The WeCom (企业微信) channel: a self-built app (callback + message API) or an intelligent
robot (callback + streaming reply). The callback's encryption is chatfn/channels/wxcrypt.py
(shared with the WeChat Official Account channel); the API api.py; the way out send.py; the
robot aibot.py; the callback channel.py. This module is the declaration, found through the
`chatfn.channels` entry point `wecom`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
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


async def who_am_i(settings: WecomSettings) -> list[Probe]:
    """gettoken and agent/get: the app's name, or which key was refused (a robot: nothing to
    ask)."""
    from chatfn.channels.wecom.api import WecomApi
    from chatfn.channels.wxapi import NETWORK_ERRORS, AuthRefused
    from chatfn.channels.wxapi import WxError as WecomError

    if settings.mode == "aibot":
        return []
    api = WecomApi(settings)

    async def ask() -> str:
        agent = await api.agent()
        return f"app {agent.get('name')} (agent {settings.agent_id})"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, AuthRefused):
            return f"WeCom refused channels.wecom.corp_id / secret / agent_id ({exc})"
        if isinstance(exc, WecomError):
            return f"WeCom refused channels.wecom.agent_id {settings.agent_id} ({exc})"
        if isinstance(exc, NETWORK_ERRORS):
            return f"WeCom not reachable at {settings.api_base}: {exc}"
        return None

    return [await asked("channel wecom agent/get", ask, failed, api.aclose)]


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
