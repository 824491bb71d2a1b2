"""One connection to one MCP server, kept alive for the bot's lifetime.

The official SDK's transports and sessions are anyio task groups that must be entered and left
in the same task, so each server gets one supervising task that connects, registers the tools,
waits (pinging now and then, refreshing on `notifications/tools/list_changed`) and, when the
connection fails or drops, reconnects with a doubling backoff. Tool calls come from the bot's
message tasks and only use the session's streams.

While a server is down its tools stay registered but their `allow` rule refuses them: the model
does not see them and a slash command gets a short sentence instead of an unknown command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from function_calls import (
    FunctionDefinitionError,
    FunctionResult,
    MessageContext,
    PluginHost,
    schema_function,
)
from function_calls.builtins.mcp.settings import McpServerSettings, McpSettings

State = Literal["connecting", "connected", "down", "stopped"]
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def function_name(prefix: str, tool: str) -> str:
    """`<prefix>__<tool>` with characters providers reject replaced by `_`, at most 64 long."""
    return f"{prefix}__{_INVALID.sub('_', tool)}"[:64]


def result_for(result: types.CallToolResult) -> FunctionResult:
    """An MCP tool result as a FunctionResult: text for the model (structured content as JSON
    when there is no text), `isError` as an error result, images described as "[image]"."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)  # type: ignore[union-attr]
        elif kind == "image":
            parts.append("[image]")
        elif kind == "audio":
            parts.append("[audio]")
        elif kind == "resource":
            resource = block.resource  # type: ignore[union-attr]
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    structured = result.structured_content
    if structured is not None and not any(getattr(b, "type", "") == "text" for b in result.content):
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts) or "(the tool returned no content)"
    metadata: dict[str, Any] = {"structured": structured} if structured is not None else {}
    return FunctionResult(llm_content=text, metadata=metadata, is_error=bool(result.is_error))


class ConnectionLost(Exception):
    """The server stopped answering; the supervisor reconnects."""


@dataclass(slots=True)
class ToolEntry:
    function: str
    tool: types.Tool


class McpConnection:
    """The supervisor of one configured server and the functions made of its tools."""

    def __init__(self, key: str, cfg: McpServerSettings, root: McpSettings, host: PluginHost):
        self.key = key
        self.cfg = cfg
        self.root = root
        self.host = host
        self.prefix = cfg.prefix or key
        self.state: State = "connecting"
        self.error: str | None = None
        self.tools: dict[str, ToolEntry] = {}  # function name -> tool
        self.connected_at: float | None = None
        self.connects = 0
        self._session: ClientSession | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._refresh_wanted = False
        self._first_attempt = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Start supervising; wait (at most `connect_timeout`) for the first attempt, so the
        tools of a healthy server are there for the first message."""
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.key}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.root.connect_timeout + 1):
                await self._first_attempt.wait()

    async def stop(self) -> None:
        """Close the session; a stdio server's process is stopped by the SDK's transport."""
        self._stop.set()
        self._wake.set()
        if self._task is not None:
            try:
                async with asyncio.timeout(self.root.connect_timeout + 10):
                    await asyncio.shield(self._task)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        self.state = "stopped"
        for name in list(self.tools):
            self.host.remove_function(name)
        self.tools.clear()

    @property
    def connected(self) -> bool:
        return self.state == "connected" and self._session is not None

    def summary(self) -> str:
        """ "connected, 2 tools" / "down (reason), retrying" for status lines and logs."""
        if self.connected:
            return f"connected, {len(self.tools)} tool(s)"
        why = f" ({self.error})" if self.error else ""
        return f"{self.state}{why}, {len(self.tools)} tool(s) known"

    # -- the supervising task --------------------------------------------------------------
    async def _supervise(self) -> None:
        delay = self.root.reconnect_initial
        log = self.host_logger()
        while not self._stop.is_set():
            self.state = "connecting"
            try:
                await self._serve_once()
            except Exception as exc:  # every failure means: reconnect later
                self.error = short_error(exc)
            finally:
                self._session = None
                self._first_attempt.set()
            if self._stop.is_set():
                break
            if self.connected_at is not None and time.monotonic() - self.connected_at > delay:
                delay = self.root.reconnect_initial  # it worked for a while: start over
            self.state = "down"
            self.connected_at = None
            log.warning("MCP server {} down ({}); retry in {:g} s", self.key, self.error, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop.wait()
            delay = min(delay * 2, self.root.reconnect_max)

    async def _serve_once(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=self._on_message)
            )
            with anyio.fail_after(self.root.connect_timeout):
                await session.initialize()
                self._session = session
                await self._refresh(session)
            self.state = "connected"
            self.error = None
            self.connected_at = time.monotonic()
            self.connects += 1
            self.host_logger().info("MCP server {}: {}", self.key, self.summary())
            self._first_attempt.set()
            await self._watch(session)

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        cfg = self.cfg
        if cfg.command is not None:
            params = StdioServerParameters(
                command=cfg.command, args=cfg.args, env=cfg.env or None, cwd=cfg.cwd
            )
            return stdio_client(params)
        return _http_transport(cfg.url or "", cfg.headers)

    async def _watch(self, session: ClientSession) -> None:
        """Until stopped or the connection drops: ping when idle, refresh when told to."""
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.root.ping_interval):
                    await self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._refresh_wanted:
                self._refresh_wanted = False
                with anyio.fail_after(self.root.connect_timeout):
                    await self._refresh(session)
                continue
            try:
                with anyio.fail_after(min(self.root.connect_timeout, 10)):
                    await session.send_ping()
            except Exception as exc:
                raise ConnectionLost(f"ping failed: {short_error(exc)}") from exc
            self.state = "connected"  # a call's failure that was not a drop after all

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh_wanted = True
            self._wake.set()
        elif isinstance(message, Exception):  # a transport fault: check the connection now
            self._wake.set()

    # -- tools -----------------------------------------------------------------------------
    async def _refresh(self, session: ClientSession) -> None:
        """List the tools (all pages) and make the registry match: new tools added, changed
        ones replaced, vanished ones removed."""
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        wanted: dict[str, ToolEntry] = {}
        for tool in listed:
            if not self.cfg.tools.allows(tool.name):
                continue
            name = function_name(self.prefix, tool.name)
            if name in wanted:
                self.host_logger().warning(
                    "MCP server {}: tools {!r} and {!r} both map to {}; keeping the first",
                    self.key,
                    wanted[name].tool.name,
                    tool.name,
                    name,
                )
                continue
            wanted[name] = ToolEntry(name, tool)
        for name in list(self.tools):
            if name not in wanted:
                self.host.remove_function(name)
                del self.tools[name]
        for name, entry in wanted.items():
            old = self.tools.get(name)
            if old is not None and old.tool == entry.tool:
                continue
            if old is not None:
                self.host.remove_function(name)
            try:
                self.host.add_function(self._spec(entry))
            except FunctionDefinitionError as exc:
                self.host_logger().error("MCP server {}: tool {} skipped: {}", self.key, name, exc)
                continue
            self.tools[name] = entry

    def _spec(self, entry: ToolEntry) -> Any:
        tool = entry.tool
        description = (tool.description or tool.title or "").strip()
        if not description:
            description = f"The {tool.name} tool of the MCP server {self.key}."
        cfg = self.cfg

        async def handler(ctx: MessageContext, arguments: dict[str, Any]) -> FunctionResult:
            return await self.call(tool.name, arguments)

        handler.__qualname__ = entry.function
        return schema_function(
            entry.function,
            description,
            dict(tool.input_schema or {}),
            handler,
            scope=cfg.scope,
            require_at=cfg.require_at,
            admin_only=cfg.admin_only,
            timeout=cfg.timeout,
            allow=self._allow,
            source=f"MCP server {self.key} ({cfg.describe()})",
        )

    def _allow(self, _ctx: Any) -> str | None:
        if self.connected:
            return None
        return f"the MCP server {self.key} is not connected right now; try again in a minute"

    async def call(self, tool: str, arguments: dict[str, Any]) -> FunctionResult:
        session = self._session
        if session is None or not self.connected:
            return FunctionResult(llm_content=self._allow(None) or "", is_error=True)
        try:
            result = await session.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                return self._lost(exc)
            return FunctionResult(llm_content=f"{exc.error.message}", is_error=True)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            return self._lost(exc)
        return result_for(result)

    def _lost(self, exc: BaseException) -> FunctionResult:
        self.error = f"lost during a call: {short_error(exc)}"
        if self.state == "connected":
            self.state = "down"
        self._wake.set()  # the watcher pings, fails and reconnects
        return FunctionResult(
            llm_content=f"The MCP server {self.key} disconnected during the call; "
            "it is being reconnected, try again in a moment.",
            is_error=True,
        )

    @staticmethod
    def host_logger() -> Any:
        from loguru import logger

        return logger


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> Any:
    async with (
        create_mcp_http_client(headers=headers or None) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def short_error(exc: BaseException) -> str:
    """One line naming a failure; exception groups (anyio) are unwrapped to their first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


async def probe(cfg: McpServerSettings, timeout: float = 15.0) -> list[str]:
    """Connect once, list the tools, disconnect: `check_system.py --online`. Raises on failure."""
    transport = (
        stdio_client(StdioServerParameters(command=cfg.command, args=cfg.args, env=cfg.env or None))
        if cfg.command is not None
        else _http_transport(cfg.url or "", cfg.headers)
    )
    async with transport as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(timeout):
            await session.initialize()
            names: list[str] = []
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                names += [t.name for t in page.tools if cfg.tools.allows(t.name)]
                cursor = page.next_cursor
                if not cursor:
                    return names
