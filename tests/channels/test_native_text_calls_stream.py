"""A native-mode model served without a tool parser streams `<tool_call>{...}</tool_call>` as
plain text, a few characters per chunk. On the real `openai` SDK against a local streaming
server: the user's stream (console, `POST /v1/messages/stream`) never shows the markup, the
text around it still streams as it arrives, and the function runs once."""

from __future__ import annotations

import asyncio
import json
from io import StringIO
from pathlib import Path
from typing import Any

from aiohttp import web

from chatfn.channels.console.channel import ConsoleChannel
from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from providers.factory import build_model
from tests.channels.test_channel_streaming import post_stream
from tests.fakes.protocols import Turn, model_config, replies
from tests.fakes.raw_replay import RawReplayServer, raw
from tests.kit import until

CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
BEFORE = "Let me check the weather for you.\n"
ANSWER = Turn(text="Sunny in Oslo, 21°C.")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "qwen",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


def streamed_text(text: str, size: int = 3, gate: asyncio.Event | None = None) -> Any:
    """A stream answering `text` as content, `size` characters a chunk (no native calls: a
    server without a tool parser). With `gate`, the stream pauses after `BEFORE` until set."""

    @raw
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_chunk({"role": "assistant", "content": ""}).encode())
        for i in range(0, len(text), size):
            if gate is not None and i >= len(BEFORE) and not gate.is_set():
                await gate.wait()
            await response.write(_chunk({"content": text[i : i + size]}).encode())
        await response.write(_chunk({}, "stop").encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    return handler


def _bot(tmp_path: Path, server: RawReplayServer, ran: list[str]) -> TestBot:
    from tests.runtime.functions import make_registry

    cfg = model_config("openai", server.url, stream=True)
    return TestBot(
        tmp_path, model=build_model("default", cfg), registry=make_registry(ran), builtins=False
    )


async def test_console_never_shows_the_markup(tmp_path: Path, server: RawReplayServer) -> None:
    """The text before the call is on screen while the server still holds the call back (low
    latency kept); the call's markup never is; the function runs once and the answer follows."""
    gate = asyncio.Event()
    server.queue = [
        streamed_text(BEFORE + CALL, gate=gate),
        *replies("openai", [ANSWER], stream=True),
    ]
    ran: list[str] = []
    tb = _bot(tmp_path, server, ran)
    out = StringIO()
    task = asyncio.create_task(
        ConsoleChannel(tb.bot.channel_host, stdin=StringIO(""), stdout=out).handle_line(
            "weather in Oslo?"
        )
    )
    await until(lambda: "for you." in out.getvalue(), 10, "the streamed text not shown")
    gate.set()
    await asyncio.wait_for(task, 10)
    shown = out.getvalue()
    assert "tool_call" not in shown and '"name"' not in shown, shown
    assert shown == (
        "chatfn> Let me check the weather for you.\n"  # the text's own line break, streamed
        "\n"
        "  [calling weather]\n"
        "chatfn> Sunny in Oslo, 21°C.\n"
    )
    assert ran == ["weather Oslo"]
    # The model got the result back as a native tool turn.
    last = server.received[-1].body["messages"]
    assert last[-1]["role"] == "tool" and last[-1]["content"] == "Oslo: 21°C, sunny"
    assert last[-2]["tool_calls"][0]["function"]["name"] == "weather"
    await tb.aclose()


async def test_http_sse_never_shows_the_markup(tmp_path: Path, server: RawReplayServer) -> None:
    """One character a chunk, so every prefix of `<tool_call>` arrives alone: none is streamed.
    The call is reported like a native one (tool_call_start/end), text after it still shows,
    and a call to a function not offered stays text."""
    odd = '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'
    server.queue = [
        streamed_text(BEFORE + CALL + "\n", size=1),
        *replies("openai", [ANSWER], stream=True),
        streamed_text(f"I would call {odd} here.", size=2),
    ]
    ran: list[str] = []
    tb = _bot(tmp_path, server, ran)
    channel = HttpChannel(tb.bot.channel_host, port=0)
    await channel.start()
    try:
        events = await post_stream(channel, "weather in Oslo?")
        names = [n for n, _ in events]
        texts = "".join(d["text"] for n, d in events if n == "text")
        assert texts == BEFORE + "\n" + "Sunny in Oslo, 21°C."  # the "\n" after the call
        assert names.count("tool_call_start") == 1 and names.count("tool_call_end") == 1
        end = next(d for n, d in events if n == "tool_call_end")
        assert end["name"] == "weather" and json.loads(end["arguments"]) == {"city": "Oslo"}
        assert names.index("tool_call_end") < len(names) - 3  # before the answer's text
        assert events[-1] == ("done", {"replies": [{"text": "Sunny in Oslo, 21°C.", "at": None}]})
        assert ran == ["weather Oslo"]

        events = await post_stream(channel, "what would you call?")
        texts = "".join(d["text"] for n, d in events if n == "text")
        assert texts == f"I would call {odd} here."
        assert "tool_call_start" not in [n for n, _ in events] and ran == ["weather Oslo"]
    finally:
        await channel.stop()
        await tb.aclose()
