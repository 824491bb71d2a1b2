"""The DingTalk channel: an internal app's robot, messages by the Stream connection (DingTalk's
official SDK, dingtalk-stream) or the signed HTTP callback (channel.py; REST and the token
api.py, chat ids and messages parse.py, Markdown render.py, the way out send.py, stream.py,
webhook.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `dingtalk`; dingtalk-stream is imported only when the channel is built."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.dingtalk.settings import DingTalkSettings
from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: DingTalkSettings) -> Any:
    from chatfn.channels.dingtalk.channel import DingTalkChannel

    return DingTalkChannel(host, settings)


def unset(settings: DingTalkSettings) -> str | None:
    if settings.client_id and settings.client_secret is not None:
        return None
    return (
        "channels.dingtalk.client_id and client_secret are not set (the app's "
        "Credentials & Basic Info page)"
    )


def offline(settings: DingTalkSettings) -> list[Probe]:
    if settings.mode == "webhook":
        how = (
            f"HTTP callback at {settings.webhook_path} on the HTTP channel's port (needs "
            "--channel http), signed with client_secret"
        )
    else:
        how = "the Stream connection"
    return [Probe("ok", f"messages by {how}, API at {settings.api_base}")]


#: The app's access token (/v1.0/oauth2/accessToken): the channel's own connect (kit/probe.py),
#: as the bot asks it at start.
who_am_i = connects(build, "channel dingtalk accessToken")


check = checks(offline, who_am_i, unset=unset)

SPEC = ChannelSpec(
    name="dingtalk",
    settings=DingTalkSettings,
    factory=build,
    summary="DingTalk robots (Stream connection or HTTP callback)",
    extra="dingtalk",
    modules=("dingtalk_stream",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        replies=False,
        markdown="Markdown (sampleMarkdown)",
        confirm_stored=True,
        connection=("long connection", "webhook"),
    ),
)
