"""The WeChat Official Account (微信公众号) channel: the signed (plain or safe-mode encrypted)
callback with its five-second passive reply, and the customer-service message API
(channel.py, send.py, api.py; the encryption chatfn/channels/wxcrypt.py, shared with WeCom).
This module is the declaration, found through the `chatfn.channels` entry point
`wechat_mp`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.kit.declare import CHAT, checks, readme
from chatfn.channels.kit.probe import connects
from chatfn.channels.wechat_mp.settings import WechatMpSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: WechatMpSettings) -> Any:
    from chatfn.channels.wechat_mp.channel import WechatMpChannel

    return WechatMpChannel(host, settings)


def offline(settings: WechatMpSettings) -> list[Probe]:
    mode = "safe mode" if settings.encoding_aes_key else "plain mode"
    probes = [
        Probe(
            "ok",
            f"account {settings.app_id} ({mode}): callback at {settings.webhook_path} on the "
            f"HTTP channel's port (needs --channel http), API at {settings.api_base}",
        )
    ]
    if settings.encoding_aes_key is None:
        probes.append(
            Probe(
                "warn",
                "channels.wechat_mp.encoding_aes_key is not set: plain mode, messages "
                "unencrypted (only the signature is checked)",
            )
        )
    return probes


#: An access_token from /cgi-bin/token and a call with it (get_api_domain_ip): the channel's own
#: connect (kit/probe.py), as the bot asks it at start and every five minutes.
who_am_i = connects(build, "channel wechat_mp access_token")


check = checks(offline, who_am_i)

SPEC = ChannelSpec(
    name="wechat_mp",
    settings=WechatMpSettings,
    factory=build,
    summary="WeChat Official Accounts (微信公众号, callback and customer-service messages)",
    extra="wechat_mp",
    modules=("cryptography",),
    check=check,
    readme=readme(__file__),
    # voice out: customer-service messages (customer_service: true)
    capabilities=replace(
        CHAT,
        groups=False,
        mentions=False,
        replies=False,
        confirm_stored=True,
        connection=("webhook",),
    ),
)
