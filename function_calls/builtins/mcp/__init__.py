"""Built-in `mcp`: the tools of Model Context Protocol servers as functions.

Each server under `mcp.servers` is connected at start (stdio: a process the bot starts and
owns; or streamable HTTP) and each of its tools is registered as `<prefix>__<tool>` with the
tool's JSON schema, so the permission rules, per-chat lists, timeouts, retries, audit rows and
slash commands apply as to any function. `mcp.expose` (the other direction: the bot as an MCP
server) is said to the runtime by `@plugin.program_caller`, which the MCP channel asks.

The `mcp` SDK is an optional dependency (`pip install 'chatfn[mcp]'`); without it the plugin is
off and says so, and the rest of the bot runs.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from function_calls import (
    CheckLine,
    ConsoleView,
    HealthList,
    Plugin,
    PluginHost,
    ProgramCaller,
    Status,
)
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

# The servers' states as the console draws them (the overview's health panel, a table on the
# plugins page), from the `mcp_servers` entry of the health answer below.
SERVERS = HealthList(
    "mcp_servers",
    title="mcp.servers",
    states="mcp.",
    good=("connected",),
    columns=(("tools", "mcp.tools"),),
)
CONSOLE_TEXTS = {
    "en": {
        "mcp.servers": "MCP servers",
        "mcp.tools": "Tools",
        "mcp.connected": "connected",
        "mcp.connecting": "connecting",
        "mcp.down": "down",
        "mcp.stopped": "stopped",
    },
    "zh": {
        "mcp.servers": "MCP 服务器",
        "mcp.tools": "工具",
        "mcp.connected": "已连接",
        "mcp.connecting": "连接中",
        "mcp.down": "已断开",
        "mcp.stopped": "已停止",
    },
}

plugin = Plugin(
    "mcp",
    settings=McpSettings,
    console=[ConsoleView("mcp", texts=CONSOLE_TEXTS, health=[SERVERS])],
)


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


@plugin.program_caller
def exposed_as(cfg: McpSettings) -> ProgramCaller:
    """Who an MCP client of the bot is (`mcp.expose`): its identity, chat, admin flag and the
    functions it sees."""
    expose = cfg.expose
    return ProgramCaller(
        user_id=expose.as_user,
        chat_id=expose.chat_id,
        admin=expose.admin,
        include=tuple(expose.functions.include),
        exclude=tuple(expose.functions.exclude),
        setting="mcp.expose",
    )


@plugin.function_patterns
def tool_names(cfg: McpSettings) -> list[str]:
    """Tools are only known once a server answers; `chats:` rules may name them before."""
    return [f"{s.prefix or key}__*" for key, s in cfg.servers.items() if s.enabled]


@plugin.health
def servers(host: PluginHost, detail: bool) -> dict[str, Any]:
    """The console's health panel (a tool count) and plugins page (the tool names): each
    server's state."""
    clients = host.service(McpClients)
    if clients is None:
        return {"mcp_servers": []}
    return {
        "mcp_servers": [
            {
                "name": key,
                "state": conn.state,
                "tools": sorted(conn.tools) if detail else len(conn.tools),
                "detail": conn.error or "",
            }
            for key, conn in clients.connections.items()
        ]
    }


@plugin.check
def check_servers(cfg: McpSettings, online: bool) -> list[CheckLine]:
    """One line per server of `mcp.servers` in `chatfn check`: ✗ when its command cannot be
    found (or, with --online, when it does not start or answer `tools/list`), else its tools."""
    import asyncio
    import shutil
    import time

    lines = []
    for key, server in cfg.servers.items():
        label = f"mcp {key}"
        if not server.enabled:
            lines.append(CheckLine(label, "warn", f"off (enabled: false): {server.describe()}"))
        elif not sdk_installed():
            why = "the mcp package is not installed: pip install 'chatfn[mcp]'"
            lines.append(CheckLine(label, "fail", why))
        elif server.command is not None and shutil.which(server.command) is None:
            why = f"command {server.command!r} not found ({server.describe()})"
            lines.append(CheckLine(label, "fail", why))
        elif not online:
            why = f"{server.describe()}; tools not listed (use --online)"
            lines.append(CheckLine(label, "ok", why))
        else:
            from function_calls.builtins.mcp.client import probe, short_error

            started = time.perf_counter()
            try:
                names = asyncio.run(probe(server, cfg.connect_timeout))
            except BaseException as exc:  # noqa: BLE001 - any failure to start or answer is the result
                if isinstance(exc, KeyboardInterrupt):
                    raise
                why = f"down: {short_error(exc)} ({server.describe()})"
                lines.append(CheckLine(label, "fail", why))
                continue
            elapsed = (time.perf_counter() - started) * 1000
            shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
            why = f"up, {len(names)} tool(s) in {elapsed:.0f} ms: {shown}"
            lines.append(CheckLine(label, "ok", why))
    return lines


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
