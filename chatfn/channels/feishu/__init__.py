"""The Feishu / Lark channel: a custom app's bot through lark-oapi (channel.py; the REST calls
and the tenant token api.py, chat ids and incoming content parse.py, the card markdown
render.py, the way out send.py, events by the long connection ws.py or by webhook
webhook.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `feishu`; lark-oapi is imported only when the channel is built or probed
online."""

from __future__ import annotations

from typing import Any

from chatfn.channels.feishu.settings import FeishuSettings
from chatfn.channels.kit.declare import readme
from chatfn.runtime.channel_host import Capabilities, ChannelHost, ChannelSpec, Probe


def build(host: ChannelHost, settings: FeishuSettings) -> Any:
    from chatfn.channels.feishu.channel import FeishuChannel

    return FeishuChannel(host, settings)


def _offline(settings: FeishuSettings) -> Probe:
    if why := settings.problem():  # app_id or app_secret not set
        return Probe("fail", why)
    if settings.mode == "webhook":
        how = (
            f"webhook at {settings.webhook_path} on the HTTP channel's port (needs --channel "
            "http), " + ("encrypted and signed" if settings.encrypt_key else "not encrypted")
        )
    else:
        how = "the long connection (websocket)"
    return Probe("ok", f"events by {how}, API at {settings.base_url}")


async def check(settings: FeishuSettings, online: bool) -> list[Probe]:
    first = _offline(settings)
    if first.status == "fail":
        return [first]
    probes = [first]
    if settings.mode == "webhook" and settings.encrypt_key is None:
        probes.append(
            Probe(
                "warn",
                "channels.feishu.encrypt_key is not set: webhook events arrive unencrypted "
                "and unsigned (only the verification_token is checked)",
            )
        )
    if online:
        probes.append(await who_am_i(settings))
    return probes


async def who_am_i(settings: FeishuSettings) -> Probe:
    """A tenant_access_token and bot/v3/info: the bot's name and open_id, or why not."""
    from chatfn.channels.feishu.api import ERRORS, FeishuApi

    name = "channel feishu bot/v3/info"
    api = FeishuApi(settings)
    try:
        bot = await api.bot_info()
    except ERRORS.every as exc:
        why = ERRORS.for_connect(exc, "bot/v3/info", settings.base_url)
        return Probe("fail", str(why), name=name)
    finally:
        await api.aclose()
    return Probe(
        "ok", f"bot {bot.get('app_name')} ({bot.get('open_id')}) at {settings.base_url}", name=name
    )


SPEC = ChannelSpec(
    name="feishu",
    settings=FeishuSettings,
    factory=build,
    summary="Feishu / Lark apps (long connection or webhook)",
    extra="feishu",
    modules=("lark_oapi",),
    check=check,
    readme=readme(__file__),
    capabilities=Capabilities(
        dms=True,
        groups=True,
        mentions=True,
        replies=True,
        images_in=True,
        images_out=True,
        voice_in=True,
        voice_out=True,
        buttons=True,
        markdown="post (rich text)",
        delivery_ids=True,
        confirm_stored=True,
        connection=("long connection", "webhook"),
    ),
)
