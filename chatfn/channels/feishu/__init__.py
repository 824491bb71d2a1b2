"""The Feishu / Lark channel: a custom app's bot through lark-oapi (channel.py; the REST calls
and the tenant token api.py, chat ids and incoming content parse.py, the card markdown
render.py, the way out send.py, events by the long connection ws.py or by webhook
webhook.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `feishu`; lark-oapi is imported only when the channel is built or probed
online."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: FeishuSettings) -> Any:
    from chatfn.channels.feishu.channel import FeishuChannel

    return FeishuChannel(host, settings)


def offline(settings: FeishuSettings) -> list[Probe]:
    if settings.mode != "webhook":
        return [
            Probe("ok", f"events by the long connection (websocket), API at {settings.base_url}")
        ]
    how = (
        f"webhook at {settings.webhook_path} on the HTTP channel's port (needs --channel "
        "http), " + ("encrypted and signed" if settings.encrypt_key else "not encrypted")
    )
    probes = [Probe("ok", f"events by {how}, API at {settings.base_url}")]
    if settings.encrypt_key is None:
        probes.append(
            Probe(
                "warn",
                "channels.feishu.encrypt_key is not set: webhook events arrive unencrypted "
                "and unsigned (only the verification_token is checked)",
            )
        )
    return probes


#: A tenant_access_token and bot/v3/info: the channel's own connect (kit/probe.py), as the bot
#: asks it at start (the bot's name and open_id, or why not).
who_am_i = connects(build, "channel feishu bot/v3/info")


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="feishu",
    settings=FeishuSettings,
    factory=build,
    summary="Feishu / Lark apps (long connection or webhook)",
    extra="feishu",
    modules=("lark_oapi",),
    check=check,
    readme=readme(__file__),
    capabilities=replace(
        CHAT,
        buttons=True,
        markdown="post (rich text)",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection", "webhook"),
    ),
)
