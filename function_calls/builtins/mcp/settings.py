"""The `mcp:` section of config.yaml: the MCP servers whose tools become functions (`servers`),
and how the bot's own functions are offered to MCP clients (`expose`)."""

from __future__ import annotations

import fnmatch
import re
from typing import Literal

from pydantic import Field, model_validator

from function_calls import ConfigPath, Section

_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")


class NameFilter(Section):
    """`include` / `exclude` glob patterns (`search_*`); an empty `include` means all."""

    # Only names matching one of these (empty: every name).
    include: list[str] = Field(default_factory=list)
    # Never names matching one of these; wins over `include`.
    exclude: list[str] = Field(default_factory=list)

    def allows(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)


class McpServerSettings(Section):
    """One server: `command` (+ `args`, `env`, `cwd`) for stdio, or `url` (+ `headers`) for
    streamable HTTP. The permission fields are the decorator's, applied to every tool."""

    # stdio: the program started as the server ("npx", "uvx", "python").
    command: str | None = None
    # stdio: its arguments.
    args: list[str] = Field(default_factory=list)
    # stdio: environment variables added for it (`${VAR}` keeps secrets out of the file).
    env: dict[str, str] = Field(default_factory=dict)
    # stdio: its working folder; relative: to the config file's folder.
    cwd: ConfigPath | None = None
    # Streamable HTTP: the server's URL (http:// or https://).
    url: str | None = None
    # Streamable HTTP: headers sent with every request (an Authorization token).
    headers: dict[str, str] = Field(default_factory=dict)
    # Which of the server's tools become functions (glob patterns).
    tools: NameFilter = Field(default_factory=NameFilter)
    # Where its tools may be used: group chats, private chats, or both.
    scope: Literal["group", "private", "both"] = "both"
    # Only the bot's admins may use its tools.
    admin_only: bool = False
    # In groups, its tools run only when the message mentions the bot.
    require_at: bool = False
    # Seconds a tool call may take; None: function_calls.call_timeout.
    timeout: float | None = Field(default=None, gt=0)
    # Function names are `<prefix>__<tool>`; default: the server's key.
    prefix: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,40}$")
    # Off: the server is not started and its tools are not offered.
    enabled: bool = True

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        if self.command is not None:
            return "stdio: " + " ".join([self.command, *self.args])
        return f"http: {self.url}"


class ExposeSettings(Section):
    """Who an MCP client is, for the permission rules, when it lists and calls the bot's
    functions (`python bot.py --channel mcp`, `/mcp` on the HTTP channel)."""

    # The sender id an MCP client acts as (limits, usage rows and permissions use it).
    as_user: str = Field(default="mcp-client", min_length=1)
    # The client counts as a bot admin (admin_only functions become callable).
    admin: bool = False
    # The chat its calls are made in (chat rules, history, approvals on the console).
    chat_id: str = Field(default="mcp", min_length=1)
    # Which of the bot's functions the client sees (glob patterns).
    functions: NameFilter = Field(default_factory=NameFilter)


class McpSettings(Section):
    """`mcp:`: MCP servers whose tools become the bot's functions, and what MCP clients of the
    bot itself see."""

    # The servers, by key (the default prefix of their function names).
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    # The bot as an MCP server (`--channel mcp`, `/mcp` on the HTTP channel).
    expose: ExposeSettings = Field(default_factory=ExposeSettings)
    # Seconds the bot waits at start for a server's first connection before it goes on without.
    connect_timeout: float = Field(default=15.0, gt=0)
    # Reconnection backoff after a failure or a drop: doubles from `reconnect_initial` up to
    # `reconnect_max` seconds.
    reconnect_initial: float = Field(default=1.0, gt=0)
    # The longest wait between two reconnection attempts.
    reconnect_max: float = Field(default=60.0, gt=0)
    # Seconds between pings that notice an idle connection's drop.
    ping_interval: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _keys_are_names(self) -> McpSettings:
        for key, server in self.servers.items():
            if server.prefix is None and not _NAME.fullmatch(key):
                raise ValueError(
                    f"servers.{key}: the key is the default prefix of function names and must "
                    "match [A-Za-z0-9_-]{1,40}; rename it or set `prefix`"
                )
        return self
