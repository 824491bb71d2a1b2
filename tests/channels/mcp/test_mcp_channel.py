"""The bot's functions as an MCP server: the official SDK's client lists and calls them over
stdio (`python bot.py --channel mcp`, a real process) and over `/mcp` on the HTTP channel."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from aiohttp import ClientSession as HttpSession

from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]

PLUGIN = """
from pydantic import BaseModel
from function_calls import FunctionResult, MessageContext, tool_function


class EchoArgs(BaseModel):
    text: str


@tool_function(description="Echo the text back.")
async def echo(ctx: MessageContext, args: EchoArgs) -> FunctionResult:
    return FunctionResult(
        messages=[f"echo: {args.text}"], metadata={"by": ctx.message.sender_id}
    )


@tool_function(description="Data for the model only.")
async def lookup(ctx: MessageContext) -> FunctionResult:
    return FunctionResult(llm_content="42 rows", metadata={"rows": 42})


@tool_function(description="Wipe everything (admins only).", admin_only=True)
async def wipe(ctx: MessageContext) -> FunctionResult:
    return FunctionResult(messages=["wiped"])
"""


def write_plugin(tmp_path: Path) -> Path:
    path = tmp_path / "plug.py"
    path.write_text(PLUGIN)
    return path


async def test_sdk_client_over_stdio(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"storage: {{url: 'sqlite:///{tmp_path / 'bot.db'}'}}\n"
        f"plugins: {{paths: ['{plugin}']}}\n"
        "mcp: {expose: {as_user: desk, chat_id: desk-chat, functions: {exclude: [reminder_*]}}}\n"
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "bot.py"), "--channel", "mcp", "--config", str(config)],
        cwd=str(tmp_path),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"echo", "lookup", "help"} <= set(tools)
        assert "wipe" not in tools  # admin-only, and the identity is not an admin
        assert not any(n.startswith("reminder_") for n in tools)  # expose.functions.exclude
        assert tools["echo"].input_schema["required"] == ["text"]

        echoed = await session.call_tool("echo", {"text": "hi"})
        assert not echoed.is_error
        assert [c.text for c in echoed.content] == ["echo: hi"]
        assert echoed.structured_content == {"by": "desk"}

        looked = await session.call_tool("lookup", {})
        assert [c.text for c in looked.content] == ["42 rows"]
        assert looked.structured_content == {"rows": 42}

        refused = await session.call_tool("wipe", {})
        assert refused.is_error and refused.content[0].text == "wipe is for admins only."
        invalid = await session.call_tool("echo", {})
        assert invalid.is_error and "text: Field required" in invalid.content[0].text
        hidden = await session.call_tool("reminder_list", {})
        assert hidden.is_error

    from chatfn.storage.db import Storage

    storage = Storage(f"sqlite:///{tmp_path / 'bot.db'}")
    rows = [(r.function, r.source, r.outcome, r.chat_id) for r in storage.tool_calls()]
    storage.close()
    assert rows == [
        ("echo", "mcp", "ok", "desk-chat"),
        ("lookup", "mcp", "ok", "desk-chat"),
        ("wipe", "mcp", "refused", "desk-chat"),
        ("echo", "mcp", "invalid", "desk-chat"),
        ("reminder_list", "mcp", "refused", "desk-chat"),  # hidden by expose, still audited
    ]


@pytest.mark.parametrize("admin", [False, True])
async def test_sdk_client_over_http_needs_the_token(tmp_path: Path, admin: bool) -> None:
    plugin = write_plugin(tmp_path)
    tb = TestBot(
        tmp_path,
        plugins=[str(plugin)],
        config={
            "channels": {"http": {"token": "s3cret", "mcp": True}},
            "mcp": {"expose": {"admin": admin}},
        },
    )
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    url = f"http://127.0.0.1:{channel.bound_port}/mcp"
    try:
        async with HttpSession() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            assert (await http.post(url, json=body)).status == 401
            wrong = {"Authorization": "Bearer nope"}
            assert (await http.post(url, json=body, headers=wrong)).status == 401

        headers = {"Authorization": "Bearer s3cret"}
        async with (
            create_mcp_http_client(headers=headers) as client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert "echo" in names
            assert ("wipe" in names) is admin
            echoed = await session.call_tool("echo", {"text": "over http"})
            assert echoed.content[0].text == "echo: over http"
            wiped = await session.call_tool("wipe", {})
            assert wiped.is_error is (not admin)
            assert wiped.content[0].text == ("wiped" if admin else "wipe is for admins only.")
    finally:
        await channel.stop()
        await tb.bot.aclose()


async def test_no_mcp_route_unless_configured(tmp_path: Path) -> None:
    tb = TestBot(tmp_path, builtins=False)
    channel = HttpChannel(tb.bot.channel_host, bind="127.0.0.1", port=0)
    await channel.start()
    try:
        async with HttpSession() as http:
            resp = await http.post(f"http://127.0.0.1:{channel.bound_port}/mcp", json={})
            assert resp.status == 404
    finally:
        await channel.stop()
        await tb.bot.aclose()
