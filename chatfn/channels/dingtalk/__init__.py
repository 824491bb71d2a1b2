"""The DingTalk channel: an internal app's robot, messages by the Stream connection (DingTalk's
official SDK, dingtalk-stream) or the signed HTTP callback (channel.py; REST and the token
api.py, chat ids and messages parse.py, Markdown render.py, the way out send.py, stream.py,
webhook.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `dingtalk`; dingtalk-stream is imported only when the channel is built."""

from __future__ import annotations

from typing import Any

from chatfn.channels.dingtalk.settings import DingTalkSettings
from chatfn.channels.kit.declare import readme
from chatfn.runtime.channel_host import Capabilities, ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: DingTalkSettings) -> Any:
    from chatfn.channels.dingtalk.channel import DingTalkChannel

    return DingTalkChannel(host, settings)


def _offline(settings: DingTalkSettings) -> Probe:
    if not settings.client_id or settings.client_secret is None:
        return Probe(
            "fail",
            "channels.dingtalk.client_id and client_secret are not set (the app's "
            "Credentials & Basic Info page)",
        )
    if settings.mode == "webhook":
        how = (
            f"HTTP callback at {settings.webhook_path} on the HTTP channel's port (needs "
            "--channel http), signed with client_secret"
        )
    else:
        how = "the Stream connection"
    return Probe("ok", f"messages by {how}, API at {settings.api_base}")


async def check(settings: DingTalkSettings, online: bool) -> list[Probe]:
    first = _offline(settings)
    if first.status == "fail" or not online:
        return [first]
    return [first, await who_am_i(settings)]


async def who_am_i(settings: DingTalkSettings) -> Probe:
    """The app's access token (/v1.0/oauth2/accessToken): the credentials work, or why not."""
    from chatfn.channels.dingtalk.api import NETWORK_ERRORS, AuthRefused, DingTalkApi, DingTalkError

    name = "channel dingtalk accessToken"
    api = DingTalkApi(settings)
    try:
        await api.token()
    except AuthRefused as exc:
        return Probe(
            "fail",
            f"DingTalk refused channels.dingtalk.client_id / client_secret ({exc})",
            name=name,
        )
    except DingTalkError as exc:
        return Probe("fail", f"DingTalk accessToken failed: {exc}", name=name)
    except NETWORK_ERRORS as exc:
        return Probe("fail", f"DingTalk not reachable at {settings.api_base}: {exc}", name=name)
    finally:
        await api.aclose()
    return Probe(
        "ok", f"app {settings.client_id} has an access token at {settings.api_base}", name=name
    )


SPEC = ChannelSpec(
    name="dingtalk",
    settings=DingTalkSettings,
    factory=build,
    summary="DingTalk robots (Stream connection or HTTP callback)",
    extra="dingtalk",
    modules=("dingtalk_stream",),
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        groups=True,
        dms=True,
        mentions=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        markdown="Markdown (sampleMarkdown)",
        confirm_stored=True,
        connection=("long connection", "webhook"),
    ),
)
