"""The console in a real terminal (a pseudo-terminal, its screen rendered by pyte): the line is
edited with the arrow keys, Up recalls an earlier line, and a log line or a message that
arrives while the user types is printed above the prompt, leaving the typed text intact."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest
import yaml

from tests.bot.conftest import PYTHON, ROOT

pexpect = pytest.importorskip("pexpect", reason="pexpect is not installed (the test extra)")
pyte = pytest.importorskip("pyte", reason="pyte is not installed (the test extra)")

# Prints a log line and sends a message on its own once the test creates the file `trigger`:
# output that arrives while the prompt waits for the user.
TICKER = """
import asyncio
from pathlib import Path

from loguru import logger

from function_calls import OutgoingMessage, Plugin, PluginHost

plugin = Plugin("ticker")
tasks = []


@plugin.on_startup
async def start(host: PluginHost) -> None:
    async def watch() -> None:
        while not Path("trigger").exists():
            await asyncio.sleep(0.02)
        logger.warning("a log line while you type")
        await host.send(OutgoingMessage("console", "private:you", "a message while you type"))

    tasks.append(asyncio.get_running_loop().create_task(watch()))
"""


class Terminal:
    """`python bot.py` on a pseudo-terminal of 100x30, its screen kept by pyte."""

    def __init__(self, cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CHATFN_"))}
        # pyte answers no cursor-position request; without this prompt_toolkit says so once.
        env.update(PYTHONPATH=str(ROOT), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
        self.child = pexpect.spawn(
            PYTHON,
            [str(ROOT / "bot.py"), "--config", "config.yaml"],
            cwd=str(cwd),
            env=env,
            dimensions=(30, 100),
            encoding="utf-8",
        )
        self.screen = pyte.Screen(100, 30)
        self.stream = pyte.Stream(self.screen)

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display if line.strip()]

    def wait(self, predicate, what: str, timeout: float = 20) -> list[str]:  # type: ignore[no-untyped-def]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                self.stream.feed(self.child.read_nonblocking(4096, timeout=0.05))
            except pexpect.TIMEOUT:
                pass
            lines = self.lines()
            if predicate(lines):
                return lines
        raise AssertionError(f"{what} not seen; screen:\n" + "\n".join(self.lines()))

    def send(self, keys: str) -> None:
        self.child.send(keys)


def test_line_editing_history_and_output_above_the_prompt(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "ticker.py").write_text(TICKER)
    config = {"storage": {"url": "sqlite:///bot.db"}, "plugins": {"paths": ["plugins"]}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    term = Terminal(tmp_path)
    try:
        term.wait(lambda s: s and s[-1] == ">", "the prompt")
        term.send("hel")
        term.wait(lambda s: s[-1] == "> hel", "the typed text")
        (tmp_path / "trigger").touch()
        lines = term.wait(
            lambda s: any("a message while you type" in x for x in s) and s[-1] == "> hel",
            "the output above the prompt",
        )
        log = next(i for i, x in enumerate(lines) if "a log line while you type" in x)
        message = next(i for i, x in enumerate(lines) if "a message while you type" in x)
        assert log < len(lines) - 1 and message < len(lines) - 1  # above the prompt line
        # Left twice, then an X: the text is edited where the cursor is, not at the end.
        term.send("\x1b[D\x1b[DX\r")
        term.wait(lambda s: "> hXel" in s and s[-1] == ">", "the edited line, sent")
        term.send("\x1b[A")  # Up: the line sent last
        term.wait(lambda s: s[-1] == "> hXel", "the recalled line")
        term.send("\x15/help\r")  # Ctrl-U clears it; /help runs
        term.wait(lambda s: any("/help" in x and "What you can use" in x for x in s), "/help")
        term.send("\x04")  # Ctrl-D ends the console and the bot
        term.child.expect(pexpect.EOF, timeout=20)
    finally:
        term.child.close(force=True)
    assert term.child.exitstatus == 0


async def test_a_streamed_answer_ends_before_the_next_prompt(tmp_path: Path) -> None:
    import asyncio

    from tests.fakes.protocols import Turn, replies
    from tests.fakes.raw_replay import RawReplayServer

    async with RawReplayServer() as server:
        answer = Turn(text="Streamed answer, line one.\nAnd line two of it.")
        server.queue = list(replies("openai", [answer], stream=True))
        model = {
            "provider": "openai",
            "model": "gpt-4o",
            "base_url": f"{server.url}/v1",
            "api_key": "k",
            "streaming": True,
        }
        config = {
            "storage": {"url": "sqlite:///bot.db"},
            "plugins": {"paths": []},
            "models": {"m": model},
        }
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        term = Terminal(tmp_path)
        try:
            await asyncio.to_thread(term.wait, lambda s: s and s[-1] == ">", "the prompt")
            term.send("hello there\r")
            lines = await asyncio.to_thread(
                term.wait, lambda s: any("line two" in x for x in s) and s[-1] == ">", "the answer"
            )
            assert lines[-4:] == [
                "> hello there",
                "chatfn> Streamed answer, line one.",
                "And line two of it.",
                ">",
            ]
            term.send("\x04")
            await asyncio.to_thread(term.child.expect, pexpect.EOF, 20)
        finally:
            term.child.close(force=True)


async def test_ctrl_c_stops_a_streamed_reply_and_keeps_what_was_shown(tmp_path: Path) -> None:
    """Ctrl-C while a reply streams stops it at once (the model here would hold the rest back
    for a minute): the text shown so far is the stored reply, the prompt is back, and a second
    Ctrl-C, at the prompt, leaves as before (issue 34, item 4)."""
    import asyncio
    import json
    import sqlite3

    from aiohttp import web

    from tests.fakes.protocols import Turn, openai_events
    from tests.fakes.raw_replay import RawReplayServer, raw

    shown = "The first part of a long answer"
    # The stream brings the answer in two halves: the second never comes before the stop.
    chunks = openai_events(Turn(text=shown + ", then the rest of it, at last."), 1, deepseek=False)
    head = chunks[:2]  # the role chunk and the first half of the text
    assert head[1]["choices"][0]["delta"]["content"] == shown
    release = asyncio.Event()

    @raw
    async def held_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write("".join(f"data: {json.dumps(c)}\n\n" for c in head).encode())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                await release.wait()
        return response

    async with RawReplayServer() as server:
        server.queue = [held_stream]
        model = {
            "provider": "openai",
            "model": "gpt-4o",
            "base_url": f"{server.url}/v1",
            "api_key": "k",
            "streaming": True,
        }
        config = {
            "storage": {"url": "sqlite:///bot.db"},
            "plugins": {"paths": []},
            "models": {"m": model},
        }
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        term = Terminal(tmp_path)
        try:
            await asyncio.to_thread(term.wait, lambda s: s and s[-1] == ">", "the prompt")
            term.send("tell me everything\r")
            await asyncio.to_thread(
                term.wait, lambda s: any(f"chatfn> {shown}" in x for x in s), "the first part"
            )
            started = time.monotonic()
            term.send("\x03")  # Ctrl-C while the reply streams
            lines = await asyncio.to_thread(
                term.wait,
                lambda s: s[-1] == ">" and "-- (stopped)" in s,
                "the reply stopped and the prompt back",
                10,
            )
            assert time.monotonic() - started < 5
            # The terminal echoes the key as ^C after the text shown.
            assert [x.removesuffix("^C") for x in lines[-3:]] == [
                f"chatfn> {shown}",
                "-- (stopped)",
                ">",
            ]
            term.send("\x03")  # Ctrl-C at the prompt: leave
            await asyncio.to_thread(term.child.expect, pexpect.EOF, 20)
        finally:
            release.set()
            term.child.close(force=True)
    assert term.child.exitstatus == 0
    with contextlib.closing(sqlite3.connect(tmp_path / "bot.db")) as db:
        rows = db.execute("SELECT role, text FROM messages ORDER BY id").fetchall()
        usage = db.execute("SELECT outcome, finish_reason FROM model_usage").fetchall()
    assert rows == [("user", "tell me everything"), ("assistant", shown)]
    assert usage == [("ok", "stopped")]
