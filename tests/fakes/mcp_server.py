"""A small MCP server over streamable HTTP for the MCP client tests, written with the official
SDK and run as its own process: `python tests/fakes/mcp_server.py PORT [STARTED]`.

Tools: `add(a, b)`; `fail(reason)` answers with `isError`; `slow(seconds)` sleeps (the tests
kill the process mid-call), first creating the file STARTED when given, so a test knows the
call is in the server; `grow()` adds the tool `extra` and notifies the client that the tool
list changed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent

server = MCPServer("test-server")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Always fails with the given reason.")
def fail(reason: str) -> CallToolResult:
    text = TextContent(type="text", text=f"failed: {reason}")
    return CallToolResult(content=[text], is_error=True)


@server.tool(description="Sleep for some seconds, then say so.")
async def slow(seconds: float) -> str:
    if len(sys.argv) > 2:
        Path(sys.argv[2]).touch()
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def extra() -> str:
    """An extra tool added at runtime."""
    return "extra!"


@server.tool(description="Add the tool `extra` and announce the change.")
async def grow(ctx: Context) -> str:
    server.add_tool(extra, description="An extra tool added at runtime.")
    await ctx.session.send_tool_list_changed()  # notifications/tools/list_changed
    return "grown"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
