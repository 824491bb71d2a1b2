"""`/mcp`: the bot's functions over MCP's streamable HTTP, a part of the bot's web server.

Mounted on the main listener by the runtime (chatfn/runtime/web_parts.py) whenever that
listens and `channels.http.mcp` is true, behind the bearer token `channels.http.token` (both
keys stay in the HTTP section, where the documentation keeps them). The MCP SDK is optional:
server.py, which needs it, is imported only when `/mcp` is on.
"""

from __future__ import annotations

from aiohttp import web

from chatfn.channels.http.settings import HttpSettings
from chatfn.common import bearer
from chatfn.runtime.channel_host import ApiHost, section_of

__all__ = ["serve"]


def serve(api: ApiHost) -> None:
    """The web part: `/mcp` on `api.web`'s main listener, its session manager running while
    the server does; nothing when `channels.http.mcp` is off."""
    cfg = section_of(api.settings, "http", HttpSettings)
    if not cfg.mcp:
        return
    from chatfn.channels.mcp.server import McpHttpEndpoint

    endpoint = McpHttpEndpoint(api)
    token = cfg.token

    async def handle(request: web.Request) -> web.StreamResponse:
        if not bearer.admitted(request, token):
            return bearer.refusal()
        return await endpoint.handle(request)

    api.web.main.mount("*", "/mcp", handle)
    api.web.lifespan(endpoint.start, endpoint.stop)
