"""The WeChat channel: a personal WeChat account as a bot through Tencent's iLink bot API
(2026), the protocol of the `@tencent-weixin/openclaw-weixin` plugin that AstrBot (weixin_oc),
LangBot (openclaw_weixin), Hermes Agent and nanobot speak too (channel.py; the API api.py,
messages parse.py, the way out send.py, images media.py, the QR login login.py, what is kept
state.py). This module is the channel's declaration, found through the `chatfn.channels`
entry point `weixin`; its extra adds `cryptography` (the CDN's AES) and `qrcode` (the login's
QR code in the terminal)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import SecretStr

from chatfn.channels.kit.declare import CHAT, asked, checks, readme
from chatfn.channels.weixin.settings import WeixinSettings
from chatfn.runtime.channel_host import ChannelHost, ChannelLogin, ChannelSpec, Probe


def build(host: ChannelHost, settings: WeixinSettings) -> Any:
    from chatfn.channels.weixin.channel import WeixinChannel

    return WeixinChannel(host, settings)


def unset(settings: WeixinSettings) -> str | None:
    if settings.token_value():
        return None
    return (
        "no WeChat login: run `chatfn login weixin` and scan the QR code "
        "(or set channels.weixin.token)"
    )


def offline(settings: WeixinSettings) -> list[Probe]:
    return [Probe("ok", f"iLink bot API at {settings.base_url}")]


async def token_works(settings: WeixinSettings) -> Probe:
    """POST ilink/bot/getconfig with the token: iLink answers -14 once the login expired."""
    import aiohttp

    from chatfn.channels.weixin.api import IlinkApi, IlinkError

    session = aiohttp.ClientSession()

    async def ask() -> str:
        api = IlinkApi(session, settings.base_url, settings.token_value())
        await api.post("getconfig", {"ilink_user_id": ""}, timeout=15)
        return f"the token works at {settings.base_url}"

    def failed(exc: Exception) -> str | None:
        if isinstance(exc, IlinkError) and exc.expired:
            return (
                f"WeChat refused the token (channels.weixin.token or the stored login): "
                f"the login has expired ({exc}); run `chatfn login weixin` again"
            )
        if isinstance(exc, IlinkError):
            return f"WeChat getconfig failed: {exc}"
        if isinstance(exc, (aiohttp.ClientError, TimeoutError)):
            return f"iLink not reachable at {settings.base_url} ({exc})"
        return None

    return await asked("channel weixin getconfig", ask, failed, session.close)


check = checks(offline, token_works, unset=unset)


async def login(settings: WeixinSettings, show: Any) -> str:
    """The QR login (login.py): what to keep, as text."""
    from chatfn.channels.weixin.login import qr_login

    if settings.token_value():
        show("status", "note: channels.weixin.token is set in the config and wins over this login")
    return (await qr_login(settings, show)).dumps()


def apply_login(settings: WeixinSettings, kept: str) -> WeixinSettings:
    """`settings` with the stored login's token and API host (the config's token wins)."""
    from chatfn.channels.weixin.state import Login

    found = Login.loads(kept)
    if found is None or settings.token_value():
        return settings
    update: dict[str, Any] = {"token": SecretStr(found.token)}
    if found.base_url:
        update["base_url"] = found.base_url
    return settings.model_copy(update=update)


SPEC = ChannelSpec(
    name="weixin",
    settings=WeixinSettings,
    factory=build,
    summary="personal WeChat (Tencent's iLink bot API: QR login, long polling)",
    extra="weixin",
    modules=("cryptography", "qrcode"),
    check=check,
    readme=readme(__file__),
    login=ChannelLogin(flow=login, apply=apply_login),
    capabilities=replace(
        CHAT,
        mentions=False,
        replies=False,
        confirm_stored=True,
        connection=("long connection",),
    ),
)
