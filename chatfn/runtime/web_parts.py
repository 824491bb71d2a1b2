"""The bot's parts on its web server: what the main listener serves whichever channel gives it
its address, mounted by each part's owner, not by a channel.

    ops      /healthz, /metrics and the shutting-down gate   chatfn/runtime/ops_web.py
    console  the admin console, /admin/                       chatfn/channels/http/admin
    mcp      /mcp, when `channels.http.mcp` is on             chatfn/channels/mcp/web.py

Each is a `serve(api)` function mounting on `api.web` (the `ApiHost`'s `WebServer`). The
runtime registers them with the server when the bot is built (`register`); the server runs
them at every start at which its main listener has an address (chatfn/runtime/web.py,
`WebServer.part`), so a process that serves no web (a worker, the console alone) imports none
of them. The console and /mcp live with the channels' code (the web side of the console, the
MCP server): they are named here by module path and imported when mounted, as the built-in
channels are found (chatfn/runtime/channel_registry.py's `BUILTIN`), so the runtime does not
import a layer above it. Their settings stay where the documentation puts them:
`channels.http.token` (the bearer token of /metrics, /mcp and the console's scripts),
`channels.http.trust_proxy`, `channels.http.mcp`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from chatfn.runtime.channel_host import ApiHost
from chatfn.runtime.web import WebServer

__all__ = ["PARTS", "register"]

#: name -> "module:function", each `function(api: ApiHost) -> None`, mounted in this order.
PARTS: dict[str, str] = {
    "ops": "chatfn.runtime.ops_web:serve",
    "console": "chatfn.channels.http.admin:serve",
    "mcp": "chatfn.channels.mcp.web:serve",
}


def load(target: str) -> Callable[[ApiHost], None]:
    """The `serve` function a `PARTS` target names."""
    module, _, attr = target.partition(":")
    serve: Callable[[ApiHost], None] = getattr(importlib.import_module(module), attr)
    return serve


def register(server: WebServer, api: ApiHost) -> None:
    """Register every part of `PARTS` with `server`, for the bot behind `api`."""
    for target in PARTS.values():
        server.part(_mounter(target, api))


def _mounter(target: str, api: ApiHost) -> Callable[[Any], None]:
    def mount(_server: Any) -> None:
        load(target)(api)

    mount.__qualname__ = f"part {target}"
    return mount
