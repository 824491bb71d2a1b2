"""The HTTP channel: the JSON API, Server-Sent Events, the webhook and the web chat page
(static/) (channel.py); it gives the bot's web server its main address, where the bot's own
parts are served beside them: /healthz and /metrics, the admin console (admin/) and /mcp
(chatfn/runtime/web_parts.py), whose settings stay in this channel's section. This module is
the channel's declaration, found through the `chatfn.channels` entry point `http`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from chatfn.channels.http.settings import HttpSettings
from chatfn.channels.kit.declare import CHAT
from chatfn.channels.probes import open_without_token, port_probe
from chatfn.runtime.channel_host import ApiHost, ChannelHost, ChannelSpec, Probe

README = """\
### HTTP API and web page

`python bot.py --channel http` serves `POST /v1/messages`, `/v1/messages/stream` (SSE),
`GET /v1/events` (every message the bot sends, resumable with `Last-Event-ID`), `/metrics`,
the web chat page at `/`, `/mcp` when `channels.http.mcp` is true, and the admin console at
`/admin/` when `admin.users` is set (README, "Admin console"). Settings:
`channels.http.host`, `port`, `token` (Bearer token for every /v1 route), `webhook_url`,
`mcp`. See docs/channels.md.
"""


def build(host: ChannelHost, settings: HttpSettings, api: ApiHost) -> Any:
    from chatfn.channels.http.channel import HttpChannel

    return HttpChannel(host, settings, api=api)


async def check(settings: HttpSettings, online: bool) -> list[Probe]:
    probes = [Probe("ok", f"http://{settings.host}:{settings.port}")]
    warning = open_without_token("http", "token", settings.host, settings.token)
    if warning is not None:
        probes.append(warning)
    if settings.mcp:
        from chatfn.channels.mcp import sdk_installed

        if not sdk_installed():
            probes.append(
                Probe("fail", 'channels.http.mcp needs the MCP SDK: pip install "chatfn[mcp]"')
            )
    if online:
        probes.append(await port_probe("http", settings.host, settings.port))
    return probes


SPEC = ChannelSpec(
    name="http",
    settings=HttpSettings,
    factory=build,
    summary="JSON API, Server-Sent Events, webhook, web chat page, /mcp",
    check=check,
    readme=README,
    api=True,
    capabilities=replace(
        CHAT,
        mentions=False,
        replies=False,
        markdown="Markdown (as the model wrote it)",
        confirm_stored=True,
        connection=("HTTP API",),
    ),
)
