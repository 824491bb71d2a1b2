"""Streaming through the channels, on the real `openai` SDK against a local streaming
OpenAI-compatible server: the console prints text as it arrives, `POST /v1/messages/stream`
answers the documented Server-Sent Events, and a stream cut off mid-call ends in the short
outage sentence with the history kept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web

from chatfn.channels.console.channel import ConsoleChannel
from chatfn.channels.http.channel import HttpChannel
from chatfn.testing import TestBot
from providers.factory import build_model
from tests.fakes.protocols import Protocol, Turn, model_config, openai_events, replies
from tests.fakes.raw_replay import RawReplayServer, cut_off_after, raw
from tests.kit import until
from tests.runtime.functions import make_registry

OUTAGE = (
    "Sorry, the model is not available right now. Your message is saved; please try "
    "again in a moment."
)
WEATHER = Turn(text="Checking.", calls=[("weather", {"city": "Oslo"})], thinking="Look it up.")
ANSWER = Turn(text="Sunny in Oslo.", thinking="Say it.")


def _bot(
    tmp_path: Path, server: RawReplayServer, protocol: Protocol = "openai", **thinking: Any
) -> TestBot:
    cfg = model_config(
        protocol,
        server.url,
        stream=True,
        thinking={"enabled": True, **thinking} if thinking else True,
    )
    return TestBot(
        tmp_path, model=build_model("default", cfg), registry=make_registry(), builtins=False
    )


def _sse_text(chunks: list[Any]) -> str:
    return "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)


# ------------------------------------------------------------------------ console


async def test_console_prints_text_as_it_arrives(tmp_path: Path, server: RawReplayServer) -> None:
    """The answer's first half is on screen while the server still holds the second half;
    the finished reply is not printed a second time."""
    gate = asyncio.Event()
    chunks = openai_events(ANSWER, 2, deepseek=False)
    head, tail = chunks[:2], chunks[2:]  # role chunk + the first half of the text

    @raw
    async def held_stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_sse_text(head).encode())
        await gate.wait()
        await response.write(_sse_text(tail).encode())
        return response

    server.queue = [*replies("openai", [WEATHER], stream=True), held_stream]
    tb = _bot(tmp_path, server)
    out = StringIO()
    console = ConsoleChannel(tb.bot.channel_host, stdin=StringIO(""), stdout=out)
    task = asyncio.create_task(console.handle_line("weather in Oslo?\n"))
    await until(
        lambda: "chatfn> Sunny " in out.getvalue(), 10, "the first streamed piece not shown"
    )
    assert "in Oslo." not in out.getvalue()  # the rest has not arrived yet
    gate.set()
    await asyncio.wait_for(task, 10)
    assert out.getvalue() == ("chatfn> Checking.\n  [calling weather]\nchatfn> Sunny in Oslo.\n")
    await tb.aclose()


async def test_console_cut_off_stream_prints_the_outage_message(
    tmp_path: Path, server: RawReplayServer
) -> None:
    server.queue = [cut_off_after(_sse_text(openai_events(WEATHER, 1, deepseek=False)[:4]))]
    tb = _bot(tmp_path, server)
    out = StringIO()
    console = ConsoleChannel(tb.bot.channel_host, stdin=StringIO(""), stdout=out)
    await console.handle_line("weather in Oslo?")
    assert out.getvalue().endswith(f"chatfn> {OUTAGE}\n")
    await tb.aclose()


async def test_console_shows_thinking_only_when_configured(
    tmp_path: Path, server: RawReplayServer
) -> None:
    for show, expected in (
        (False, "chatfn> Checking.\n  [calling weather]\nchatfn> Sunny in Oslo.\n"),
        (
            True,
            "  (thinking) Look it up.\nchatfn> Checking.\n"
            "  [calling weather]\n  (thinking) Say it.\n"
            "chatfn> Sunny in Oslo.\n",
        ),
    ):
        server.queue = list(replies("deepseek", [WEATHER, ANSWER], stream=True))
        tb = _bot(tmp_path / str(show), server, "deepseek", show=show)
        out = StringIO()
        await ConsoleChannel(tb.bot.channel_host, stdin=StringIO(""), stdout=out).handle_line(
            "weather?"
        )
        assert out.getvalue() == expected
        await tb.aclose()


# ------------------------------------------------------------------------ HTTP


async def post_stream(channel: HttpChannel, text: str) -> list[tuple[str, dict[str, Any]]]:
    """POST /v1/messages/stream as alice in chat c1: the events as (name, data)."""
    url = f"http://127.0.0.1:{channel.bound_port}/v1/messages/stream"
    async with (
        ClientSession() as session,
        session.post(url, json={"chat_id": "c1", "sender_id": "alice", "text": text}) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/event-stream"
        body = await resp.text()
    events = []
    for block in body.strip().split("\n\n"):
        name, data = block.split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


@pytest.fixture
async def http(tmp_path: Path, server: RawReplayServer) -> AsyncIterator[Any]:
    """Start an in-process HttpChannel for a bot built by the test; yields a post function."""
    started: list[tuple[HttpChannel, TestBot]] = []

    async def post(tb: TestBot, text: str) -> list[tuple[str, dict[str, Any]]]:
        if not started:
            channel = HttpChannel(tb.bot.channel_host, port=0)
            await channel.start()
            started.append((channel, tb))
        return await post_stream(started[0][0], text)

    yield post
    for channel, tb in started:
        await channel.stop()
        await tb.aclose()


def _collapse(names: list[str]) -> list[str]:
    """Event names with repeats folded: text deltas come in several pieces."""
    return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]


@pytest.mark.parametrize("protocol", ["openai", "deepseek"])
async def test_http_stream_event_sequence(
    tmp_path: Path, server: RawReplayServer, http: Any, protocol: Protocol
) -> None:
    server.queue = list(replies(protocol, [WEATHER, ANSWER], stream=True))
    tb = _bot(tmp_path, server, protocol)
    events = await http(tb, "weather in Oslo?")
    names = [name for name, _ in events]
    assert _collapse(names) == ["text", "tool_call_start", "tool_call_end", "text", "reply", "done"]
    texts = [data["text"] for name, data in events if name == "text"]
    assert len(texts) == 4 and "".join(texts) == "Checking.Sunny in Oslo."
    start = next(data for name, data in events if name == "tool_call_start")
    end = next(data for name, data in events if name == "tool_call_end")
    assert start == {"id": "call_1_0", "name": "weather"}
    assert end == {**start, "arguments": '{"city": "Oslo"}'}
    assert events[-2] == ("reply", {"text": "Sunny in Oslo.", "at": None})
    assert events[-1] == ("done", {"replies": [{"text": "Sunny in Oslo.", "at": None}]})
    # DeepSeek's reasoning stays out of the stream (thinking.show is off) but is stored.
    [_, reply] = tb.bot.storage.recent_messages("http", "c1", 5)
    expected = "Look it up.\n\nSay it." if protocol == "deepseek" else None
    assert tb.bot.storage.thinking_of(reply.id) == expected


async def test_http_stream_shows_thinking_when_configured(
    tmp_path: Path, server: RawReplayServer, http: Any
) -> None:
    server.queue = list(replies("deepseek", [WEATHER, ANSWER], stream=True))
    tb = _bot(tmp_path, server, "deepseek", show=True)
    events = await http(tb, "weather in Oslo?")
    assert _collapse([n for n, _ in events]) == [
        "thinking",
        "text",
        "tool_call_start",
        "tool_call_end",
        "thinking",
        "text",
        "reply",
        "done",
    ]
    assert "".join(d["text"] for n, d in events if n == "thinking") == "Look it up.Say it."


async def test_http_stream_cut_off_mid_call(
    tmp_path: Path, server: RawReplayServer, http: Any
) -> None:
    """The server drops the connection in the middle of the call's arguments: no function
    runs, the user gets one short sentence, and the question stays in history for the next
    message."""
    ran: list[str] = []
    cut = _sse_text(openai_events(WEATHER, 1, deepseek=False)[:5])  # name + half the args
    assert '"arguments": "{\\"city' in cut and 'finish_reason": "tool_calls' not in cut
    server.queue = [cut_off_after(cut), *replies("openai", [ANSWER], stream=True)]
    cfg = model_config("openai", server.url, stream=True)
    tb = TestBot(
        tmp_path, model=build_model("default", cfg), registry=make_registry(ran), builtins=False
    )
    events = await http(tb, "weather in Oslo?")
    names = [n for n, _ in events]
    assert "tool_call_end" not in names and ran == []
    assert events[-2:] == [
        ("reply", {"text": OUTAGE, "at": None}),
        ("done", {"replies": [{"text": OUTAGE, "at": None}]}),
    ]
    rows = tb.bot.storage.recent_messages("http", "c1", 5)
    assert [(r.role, r.text) for r in rows] == [("user", "weather in Oslo?"), ("notice", OUTAGE)]
    # The next message works, and the model sees the unanswered question.
    events = await http(tb, "hello?")
    assert events[-2] == ("reply", {"text": "Sunny in Oslo.", "at": None})
    contents = [m.get("content") for m in server.received[-1].body["messages"]]
    assert "weather in Oslo?" in contents and contents[-1].endswith("</context>\nhello?")


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
async def test_an_empty_200_stream_is_retried_once_without_streaming(
    tmp_path: Path, server: RawReplayServer, protocol: Protocol
) -> None:
    """HTTP 200, not one chunk: not an outage to report but a broken stream; the same request
    without streaming answers."""

    async def empty(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write_eof()
        return response

    server.queue = [raw(empty), *replies(protocol, [ANSWER], stream=False)]
    tb = _bot(tmp_path, server, protocol)
    seen: list[str] = []

    async def on_stream(event: Any) -> None:
        seen.append(event.type)

    assert await tb.send("weather?", on_stream=on_stream) == ["Sunny in Oslo."]
    # The raw (streamed) request is not recorded; the one recorded is the plain retry.
    [retry] = server.received
    assert "stream" not in retry.path.lower() and not (retry.body or {}).get("stream")
