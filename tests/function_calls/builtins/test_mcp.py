"""Built-in mcp: MCP servers' tools as functions, with real server processes.

`mcp-server-time` (the third-party package from PyPI) runs over stdio; `tests/fakes/mcp_server.py`
(written with the official SDK) runs over streamable HTTP and is killed and restarted here.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chatfn.common.messages import IncomingMessage
from chatfn.testing import ScriptedModel, TestBot, call, say
from function_calls.builtins.mcp import McpClients
from tests.kit import free_port, until, until_sync

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_time")

ROOT = Path(__file__).resolve().parents[3]
FAKE = ROOT / "tests" / "fakes" / "mcp_server.py"
TIME = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
FAST = {"ping_interval": 0.5, "reconnect_initial": 0.2, "reconnect_max": 1, "connect_timeout": 10}


class FakeServer:
    """tests/fakes/mcp_server.py as a process on a fixed port (told before it starts: it must
    come back at the same URL after a kill). `slow_started` appears once a `slow` call is in
    the server."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.slow_started = folder / "slow-started"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> FakeServer:
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE), str(self.port), str(self.slow_started)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        until_sync(self._listening, 20, "the fake MCP server did not start", interval=0.05)
        return self

    def _listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def fake_server(tmp_path: Path):
    server = FakeServer(tmp_path).start()
    yield server
    server.kill()


def connection(tb: TestBot, key: str):
    clients = tb.bot.service(McpClients)
    assert clients is not None
    return clients.connections[key]


async def test_time_server_through_the_tool_loop_and_as_a_command(testbot) -> None:
    model = ScriptedModel(
        [call("time__get_current_time", timezone="Asia/Tokyo"), say("It is morning in Tokyo.")]
    )
    tb = await testbot(model=model, config={"mcp": {"servers": {"time": TIME}}})
    names = {s.name for s in tb.bot.registry.all()}
    assert {"time__get_current_time", "time__convert_time"} <= names

    assert await tb.send("what time is it in Tokyo?") == ["It is morning in Tokyo."]
    offered = {t.name: t for t in model.requests[0].tools}
    schema = offered["time__get_current_time"].parameters
    assert schema["required"] == ["timezone"]
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool" and not tool_message.is_error
    assert json.loads(tool_message.content)["timezone"] == "Asia/Tokyo"

    reply = await tb.send("/time__get_current_time timezone=Asia/Tokyo")
    assert json.loads(reply[0])["timezone"] == "Asia/Tokyo"
    free_text = await tb.send("/time__get_current_time Europe/Paris")
    assert json.loads(free_text[0])["timezone"] == "Europe/Paris"
    bad = await tb.send("/time__get_current_time timezone=5")
    assert "Invalid arguments for time__get_current_time: timezone: 5 is not of type" in bad[0]

    rows = tb.bot.storage.tool_calls()
    assert [(r.function, r.source, r.outcome) for r in rows] == [
        ("time__get_current_time", "llm", "ok"),
        ("time__get_current_time", "command", "ok"),
        ("time__get_current_time", "command", "ok"),
        ("time__get_current_time", "command", "invalid"),
    ]


async def test_server_rules_filter_and_prefix_apply_to_every_tool(testbot) -> None:
    server = {
        **TIME,
        "prefix": "clock",
        "admin_only": True,
        "scope": "private",
        "timeout": 5,
        "tools": {"include": ["*_time"], "exclude": ["convert_*"]},
    }
    tb = await testbot(config={"mcp": {"servers": {"time": server}}})
    specs = {s.name: s for s in tb.bot.registry.all() if s.name.startswith("clock__")}
    assert list(specs) == ["clock__get_current_time"]
    assert specs["clock__get_current_time"].timeout == 5
    refused = await tb.send("/clock__get_current_time timezone=UTC", admin=False)
    assert refused == ["clock__get_current_time is for admins only."]
    in_group = await tb.send("/clock__get_current_time timezone=UTC", admin=True, group="g1")
    assert in_group == ["clock__get_current_time only works in private chats."]
    ok = await tb.send("/clock__get_current_time timezone=UTC", admin=True)
    assert json.loads(ok[0])["timezone"] == "UTC"

    tb2 = await testbot(
        config={
            "mcp": {"servers": {"time": TIME}},
            "function_calls": {"chats": {"private:alice": {"disabled": ["time__convert_time"]}}},
        }
    )
    command = "/time__convert_time source_timezone=UTC time=10:00 target_timezone=Asia/Tokyo"
    assert await tb2.send(command) == ["time__convert_time is disabled in this chat."]
    converted = await tb2.send(command, sender="bob")
    assert json.loads(converted[0])["target"]["timezone"] == "Asia/Tokyo"


async def test_http_server_error_result_list_change_and_kill_mid_call(testbot, fake_server) -> None:
    model = ScriptedModel([call("t__fail", reason="disk full"), say("It failed: disk full.")])
    config = {"mcp": {**FAST, "servers": {"t": {"url": fake_server.url, "timeout": 20}}}}
    tb = await testbot(model=model, config=config)
    conn = connection(tb, "t")
    assert conn.connected and set(conn.tools) == {"t__add", "t__fail", "t__slow", "t__grow"}
    assert await tb.send("/t__add a=2 b=40") == ["42"]

    # isError: an error result for the model, a failure for a person.
    assert await tb.send("please fail") == ["It failed: disk full."]
    result = model.requests[1].messages[-1]
    assert result.is_error and "failed: disk full" in result.content
    assert await tb.send("/t__fail reason=nope") == ["failed: nope"]
    assert tb.bot.storage.tool_calls()[-1].outcome == "error"

    # notifications/tools/list_changed refreshes the functions.
    assert await tb.send("/t__grow") == ["grown"]
    await until(lambda: "t__extra" in tb.bot.registry, 20, "the new tool was not listed")
    assert await tb.send("/t__extra") == ["extra!"]

    # Killed mid-call: a short sentence, hidden from the model, then reconnected and working.
    pending = asyncio.create_task(tb.send("/t__slow seconds=10"))
    await until(fake_server.slow_started.exists, 20, "the slow call did not reach the server")
    fake_server.kill()
    started = time.monotonic()
    reply = await pending
    assert time.monotonic() - started < 5
    assert reply == [
        "The MCP server t disconnected during the call; it is being reconnected, "
        "try again in a moment."
    ]
    await until(lambda: not conn.connected, 20, "the drop was not noticed")
    down = await tb.send("/t__add a=1 b=1")
    assert down == ["the MCP server t is not connected right now; try again in a minute."]
    message = IncomingMessage(platform="test", chat_id="private:a", sender_id="a", text="hi")
    ctx = tb.bot.context_for(message, tb._collect)
    assert not [s for s in ctx.usable_functions(via_command=False) if s.name.startswith("t__")]

    fake_server.start()
    await until(lambda: conn.connected, 20, "not reconnected")
    assert await tb.send("/t__add a=2 b=3") == ["5"]
    assert "t__extra" not in tb.bot.registry  # the restarted server lists its own tools


async def test_a_server_that_never_starts_does_not_stop_the_bot(testbot) -> None:
    broken = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    config = {"mcp": {**FAST, "servers": {"broken": broken, "time": TIME}}}
    started = time.monotonic()
    tb = await testbot(config=config)
    assert time.monotonic() - started < 15
    assert connection(tb, "time").connected
    conn = connection(tb, "broken")
    assert not conn.connected and conn.error
    assert not any(s.name.startswith("broken__") for s in tb.bot.registry.all())
    assert await tb.send("/help")  # the bot answers


def test_check_system_lists_each_server(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "storage: {url: 'sqlite:///x.db'}\n"
        "mcp:\n  servers:\n"
        f"    time: {{command: {sys.executable}, args: [-m, mcp_server_time]}}\n"
        f"    broken: {{command: {sys.executable}, args: [-c, 'import sys; sys.exit(3)']}}\n"
        "    missing: {command: no-such-mcp-server-here}\n"
    )
    cmd = [sys.executable, str(ROOT / "check_system.py"), "--json", "--config", str(config)]
    offline = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout)
    checks = {c["name"]: c for c in offline["checks"]}
    assert checks["mcp missing"]["status"] == "fail"
    assert "not found" in checks["mcp missing"]["detail"]
    assert checks["mcp time"]["status"] == "ok"
    assert "3 server(s)" in checks["built-in mcp"]["detail"]

    proc = subprocess.run([*cmd, "--online"], capture_output=True, text=True, timeout=90)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert proc.returncode == 1
    assert checks["mcp time"]["status"] == "ok"
    assert "2 tool(s)" in checks["mcp time"]["detail"]
    assert checks["mcp broken"]["status"] == "fail"
    assert checks["mcp broken"]["detail"].startswith("down:")
