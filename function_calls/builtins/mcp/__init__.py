"""Built-in `mcp`: the tools of Model Context Protocol servers as functions.

Each server under `mcp.servers` is connected at start (stdio: a process the bot starts and
owns; or streamable HTTP) and each of its tools is registered as `<prefix>__<tool>` with the
tool's JSON schema, so the permission rules, per-chat lists, timeouts, retries, audit rows and
slash commands apply as to any function. `mcp.expose` (the other direction: the bot as an MCP
server) is read by the runtime and the MCP channel.

The `mcp` SDK is an optional dependency (`pip install 'chatfn[mcp]'`); without it the plugin is
off and says so, and the rest of the bot runs.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from function_calls import Plugin, PluginHost, Status
from function_calls.builtins.mcp.settings import (
    ExposeSettings,
    McpServerSettings,
    McpSettings,
    NameFilter,
)

__all__ = [
    "ExposeSettings",
    "McpClients",
    "McpServerSettings",
    "McpSettings",
    "NameFilter",
    "sdk_installed",
]

plugin = Plugin("mcp", settings=McpSettings)


def sdk_installed() -> bool:
    return importlib.util.find_spec("mcp") is not None


class McpClients:
    """The running connections, one per enabled server (a service: `ctx.service(McpClients)`)."""

    def __init__(self) -> None:
        self.connections: dict[str, Any] = {}  # key -> client.McpConnection

    def summary(self) -> dict[str, str]:
        return {key: conn.summary() for key, conn in self.connections.items()}


@plugin.status
def status(cfg: McpSettings) -> Status:
    servers = {k: s for k, s in cfg.servers.items() if s.enabled}
    if not servers:
        return Status("off", "no MCP servers configured (mcp.servers)")
    if not sdk_installed():
        return Status("off", "the mcp package is not installed: pip install 'chatfn[mcp]'")
    listed = "; ".join(f"{k} ({s.describe()})" for k, s in servers.items())
    return Status("on", f"{len(servers)} server(s): {listed}")


@plugin.function_patterns
def tool_names(cfg: McpSettings) -> list[str]:
    """Tools are only known once a server answers; `chats:` rules may name them before."""
    return [f"{s.prefix or key}__*" for key, s in cfg.servers.items() if s.enabled]


@plugin.on_setup
def create_clients(host: PluginHost) -> None:
    host.provide(McpClients())


@plugin.on_startup
async def connect(host: PluginHost) -> None:
    """Connect every server concurrently; a server that fails does not stop the bot (its
    connection keeps retrying with backoff)."""
    import asyncio

    from function_calls.builtins.mcp.client import McpConnection

    cfg = host.section(McpSettings)
    clients = host.service(McpClients)
    assert clients is not None
    for key, server in cfg.servers.items():
        if server.enabled:
            clients.connections[key] = McpConnection(key, server, cfg, host)
    await asyncio.gather(*(c.start() for c in clients.connections.values()))


@plugin.on_shutdown
async def disconnect(host: PluginHost) -> None:
    import asyncio

    clients = host.service(McpClients)
    if clients is not None:
        await asyncio.gather(*(c.stop() for c in clients.connections.values()))
        clients.connections.clear()
