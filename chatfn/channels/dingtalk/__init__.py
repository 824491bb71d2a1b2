"""The DingTalk channel: an internal app's robot, messages by the Stream connection (DingTalk's
official SDK, dingtalk-stream) or the signed HTTP callback (channel.py; REST and the token
api.py, chat ids and messages parse.py, Markdown render.py, the way out send.py, stream.py,
webhook.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `dingtalk`; dingtalk-stream is imported only when the channel is built."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.dingtalk.settings import DingTalkSettings
from chatfn.channels.kit.declare import CHAT, asked, checks, readme
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


async def who_am_i(settings: DingTalkSettings) -> Probe:
    """The app's access token (/v1.0/oauth2/accessToken): the credentials work, or why not."""
    from chatfn.channels.dingtalk.api import NETWORK_ERRORS, AuthRefused, DingTalkApi, DingTalkError

    api = DingTalkApi(settings)

    async def ask() -> str:
        await api.token()
        return f"app {settings.client_id} has an access token at {settings.api_base}"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, AuthRefused):
            return f"DingTalk refused channels.dingtalk.client_id / client_secret ({exc})"
        if isinstance(exc, DingTalkError):
            return f"DingTalk accessToken failed: {exc}"
        if isinstance(exc, NETWORK_ERRORS):
            return f"DingTalk not reachable at {settings.api_base}: {exc}"
        return None

    return await asked("channel dingtalk accessToken", ask, failed, api.aclose)


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
