"""The WeCom (企业微信) channel: a self-built app (callback + message API) or an intelligent
robot (callback + streaming reply). The callback's encryption is chatfn/channels/wxcrypt.py
(shared with the WeChat Official Account channel); the API api.py; the way out send.py; the
robot aibot.py; the callback channel.py. This module is the declaration, found through the
`chatfn.channels` entry point `wecom`."""

from __future__ import annotations

from typing import Any

from chatfn.channels.kit import Capabilities
from chatfn.channels.kit.declare import readme
from chatfn.channels.wecom.settings import WecomSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: WecomSettings) -> Any:
    if settings.mode == "aibot":
        from chatfn.channels.wecom.aibot import AibotChannel

        return AibotChannel(host, settings)
    from chatfn.channels.wecom.channel import WecomChannel

    return WecomChannel(host, settings)


def _offline(settings: WecomSettings) -> Probe:
    why = settings.problem()
    if why:
        return Probe("fail", why)
    what = "intelligent robot" if settings.mode == "aibot" else f"app {settings.agent_id}"
    return Probe(
        "ok",
        f"{what}: callback at {settings.webhook_path} on the HTTP channel's port (needs "
        f"--channel http), API at {settings.api_base}",
    )


async def check(settings: WecomSettings, online: bool) -> list[Probe]:
    first = _offline(settings)
    if first.status == "fail" or not online or settings.mode == "aibot":
        return [first]
    return [first, await who_am_i(settings)]


async def who_am_i(settings: WecomSettings) -> Probe:
    """gettoken and agent/get: the app's name, or which key was refused."""
    from chatfn.channels.wecom.api import WecomApi
    from chatfn.channels.wxapi import NETWORK_ERRORS, AuthRefused
    from chatfn.channels.wxapi import WxError as WecomError

    name = "channel wecom agent/get"
    api = WecomApi(settings)
    try:
        agent = await api.agent()
    except AuthRefused as exc:
        return Probe(
            "fail",
            f"WeCom refused channels.wecom.corp_id / secret / agent_id ({exc})",
            name=name,
        )
    except WecomError as exc:
        return Probe(
            "fail", f"WeCom refused channels.wecom.agent_id {settings.agent_id} ({exc})", name=name
        )
    except NETWORK_ERRORS as exc:
        return Probe("fail", f"WeCom not reachable at {settings.api_base}: {exc}", name=name)
    finally:
        await api.aclose()
    return Probe("ok", f"app {agent.get('name')} (agent {settings.agent_id})", name=name)


SPEC = ChannelSpec(
    name="wecom",
    settings=WecomSettings,
    factory=build,
    summary="WeCom (企业微信) self-built apps and intelligent robots (callback)",
    extra="wecom",
    modules=("cryptography",),
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        dms=True,
        groups=True,  # the robot's group chats (an app gets none)
        mentions=True,
        images_in=True,  # app mode
        images_out=True,  # app mode
        voice_in=True,  # app mode
        voice_out=True,  # app mode (the robot's stream carries no voice)
        markdown="plain (app), Markdown (robot)",
        edits=True,  # the robot's stream grows as the model writes
        confirm_stored=True,
        connection=("webhook",),
    ),
)
