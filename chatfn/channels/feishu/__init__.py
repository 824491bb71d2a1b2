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
from chatfn.channels.kit.declare import CHAT, asked, checks, readme
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


async def who_am_i(settings: FeishuSettings) -> Probe:
    """A tenant_access_token and bot/v3/info: the bot's name and open_id, or why not."""
    from chatfn.channels.feishu.api import ERRORS, FeishuApi

    api = FeishuApi(settings)

    async def ask() -> str:
        bot = await api.bot_info()
        return f"bot {bot.get('app_name')} ({bot.get('open_id')}) at {settings.base_url}"

    def failed(exc: Exception) -> str | None:
        if not isinstance(exc, ERRORS.every):
            return None
        return str(ERRORS.for_connect(exc, "bot/v3/info", settings.base_url))

    return await asked("channel feishu bot/v3/info", ask, failed, api.aclose)


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
