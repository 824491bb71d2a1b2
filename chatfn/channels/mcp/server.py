"""The bot's functions as an MCP server (the official `mcp` SDK's low-level server).

    python bot.py --channel mcp        MCP over stdio, for a desktop client that starts the bot
    channels.http.mcp: true            streamable HTTP at /mcp on the HTTP channel (its token)

Every request acts as the identity of `mcp.expose` (user, chat, admin, function filter): the
functions listed are those that identity may use, and each call goes through the same checks
and audit row as a chat message's call. A function's messages and `llm_content` come back as
text content, its `metadata` as structured content, a refusal or failure as `isError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import MutableMapping
from typing import Any

import mcp_types as types
from aiohttp import web
from loguru import logger
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from chatfn.channels.base import Channel
from chatfn.common.messages import OutgoingMessage
from chatfn.runtime.channel_host import ApiHost, ChannelHost, api_of


def build_server(host: ApiHost) -> Server[Any]:
    """An MCP server listing and calling `host`'s functions as the `mcp.expose` identity."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        caller = host.exposure.caller()
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=f["name"], description=f["description"], input_schema=f["input_schema"]
                )
                for f in await host.exposure.functions_for(caller)
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        exposure = host.exposure
        done = await exposure.call_function(exposure.caller(), params.name, params.arguments or {})
        structured = _jsonable(done["metadata"]) if done["metadata"] else None
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=t) for t in done["texts"]],
            structured_content=structured,
            is_error=not done["ok"],
        )

    return Server(
        host.settings.bot.name,
        version="0.1.0",
        instructions="The functions of a chatfn chat bot.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata as JSON (dates and other objects as their text)."""
    return json.loads(json.dumps(value, default=str))


class McpStdioChannel(Channel):
    """MCP over this process's stdin/stdout; ends when the client closes stdin."""

    platform = "mcp"

    def __init__(
        self, host: ChannelHost, settings: object = None, *, api: ApiHost | None = None
    ) -> None:
        super().__init__(host)
        self.server = build_server(api if api is not None else api_of(host))

    async def run(self) -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    async def send(self, message: OutgoingMessage) -> None:
        # An MCP client has no chat to receive messages the bot starts on its own.
        logger.info("mcp: not delivered to {}: {}", message.chat_id, message.text[:80])


class McpHttpEndpoint:
    """Streamable HTTP at `/mcp` on an aiohttp application: the SDK's session manager is an ASGI
    app, so each request is handed over as an ASGI scope and its answer streamed back."""

    def __init__(self, host: ApiHost) -> None:
        self.manager = StreamableHTTPSessionManager(
            build_server(host), stateless=True, json_response=True
        )
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="mcp-http")
        await self._ready.wait()

    async def _run(self) -> None:
        async with self.manager.run():
            self._ready.set()
            await self._stop.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.scheme,
            "path": request.path,
            "raw_path": request.raw_path.encode(),
            "query_string": request.query_string.encode(),
            "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.raw_headers],
            "client": (request.remote or "", 0),
            "server": (request.host, 0),
        }
        sent_body = False
        disconnected = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnected.wait()
            return {"type": "http.disconnect"}

        response: web.StreamResponse | None = None

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal response
            if message["type"] == "http.response.start":
                response = web.StreamResponse(status=message["status"])
                for key, value in message.get("headers", []):
                    response.headers.add(key.decode(), value.decode())
                await response.prepare(request)
            elif message["type"] == "http.response.body" and response is not None:
                await response.write(message.get("body", b""))
                if not message.get("more_body", False):
                    await response.write_eof()

        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            disconnected.set()
        if response is None:
            return web.Response(status=500, text="MCP request produced no response")
        return response
