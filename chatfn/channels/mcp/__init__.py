"""The MCP channel: the bot's functions as an MCP server over stdio (server.py; the same
server is served over streamable HTTP at /mcp by the HTTP channel when `channels.http.mcp` is
on). Found through the `chatfn.channels` entry point `mcp`; needs the `mcp` extra."""

from __future__ import annotations

import importlib.util
from typing import Any

from chatfn.common.config import Section
from chatfn.runtime.channel_host import ApiHost, Capabilities, ChannelHost, ChannelSpec, Probe

README = """\
### MCP (stdio)

`python bot.py --channel mcp` serves the bot's functions to an MCP client that starts the bot
(Claude Desktop, an IDE) over stdin/stdout; logs go to stderr. Who the client is and which
functions it sees: `mcp.expose`. Needs `pip install "chatfn[mcp]"`.
"""


class McpChannelSettings(Section):
    """No settings of its own: `mcp.expose` (the MCP built-in's section) says who the client
    is."""


def build(host: ChannelHost, settings: McpChannelSettings, api: ApiHost) -> Any:
    from chatfn.channels.mcp.server import McpStdioChannel

    return McpStdioChannel(host, settings, api=api)


def sdk_installed() -> bool:
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False


async def check(settings: McpChannelSettings, online: bool) -> list[Probe]:
    if not sdk_installed():
        return [Probe("fail", 'the MCP SDK is not installed: pip install "chatfn[mcp]"')]
    return [Probe("ok", "MCP over stdio; identity from mcp.expose")]


SPEC = ChannelSpec(
    name="mcp",
    settings=McpChannelSettings,
    factory=build,
    summary="the bot's functions as an MCP server over stdio",
    extra="mcp",
    modules=("mcp",),
    check=check,
    readme=README,
    api=True,
    capabilities=Capabilities(
        dms=True, markdown="Markdown (as the model wrote it)", connection=("HTTP API", "local")
    ),
)
