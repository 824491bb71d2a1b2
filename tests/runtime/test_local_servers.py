"""Local servers and small models (issue 22 §5), through the whole bot and the real SDKs against
local servers that answer the way llama-cpp-python's server did with SmolLM2-135M: streams
without token counts, empty streams, the turn note copied into answers; plus `tool_choice` in
each protocol and the prompt-mode tool list's compaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from loguru import logger
from pydantic import BaseModel, ValidationError

from chatfn.testing import TestBot
from function_calls.context import MessageContext
from function_calls.registry import Registry, tool_function
from function_calls.spec import FunctionResult
from providers.config import ModelConfig
from providers.factory import build_model
from providers.types import StreamEvent
from tests.fakes.protocols import Turn, model_config, openai_body, openai_events, reply
from tests.fakes.raw_replay import RawReplayServer, sse_reply
from tests.runtime.functions import make_registry

NOTE = "[Current time: 2027-01-15 08:00 (Friday), time zone UTC (UTC+0000). From: alice.]"


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(m.record["message"]), level="WARNING")
    yield seen
    logger.remove(sink)


def _sse(events: list[Any]) -> str:
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)


def stream_without_usage(turn: Turn, round_: int = 1):
    """A Chat Completions stream that ignores `stream_options.include_usage`, as
    llama-cpp-python's server does: no usage chunk at all."""
    return sse_reply(_sse(openai_events(turn, round_, deepseek=False, usage=False)))


def empty_stream(_received: Any) -> web.Response:
    """HTTP 200, an event stream, and not one chunk."""
    return web.Response(text="", content_type="text/event-stream")


def whole(turn: Turn, round_: int = 1, usage: bool = True):
    def handler(_received: Any) -> web.Response:
        body = openai_body(turn, round_, deepseek=False)
        if not usage:
            body.pop("usage", None)
        return web.json_response(body)

    return handler


def _bot(tmp_path: Path, url: str, config: dict[str, Any] | None = None, **model: Any) -> TestBot:
    cfg = model_config("openai", url, stream=True).model_copy(update=model)
    return TestBot(
        tmp_path,
        model=build_model("local", cfg),
        registry=make_registry([]),
        builtins=False,
        config=config,
    )


class Seen:
    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    async def __call__(self, event: StreamEvent) -> None:
        self.events.append(event)

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if e.type == "text")

    def types(self) -> list[str]:
        return [e.type for e in self.events]


# ------------------------------------------------------------------ (a) no token counts


async def test_a_stream_without_usage_is_estimated_marked_and_limited(
    tmp_path: Path, server: RawReplayServer, warnings: list[str]
) -> None:
    server.queue = [
        stream_without_usage(Turn(text="Hi there, I am a small model."), r) for r in (1, 2, 3)
    ]
    # Counted as 0 tokens (before issue 22) the day's budget of 1 token never ran out.
    config = {"limits": {"per_user": {"tokens_per_day": 1}}}
    tb = _bot(tmp_path, server.url, config)
    other = _bot(tmp_path / "other", server.url)
    try:
        assert await tb.send("hello", on_stream=Seen()) == ["Hi there, I am a small model."]
        refused = await tb.send("and again", on_stream=Seen())
        for text in ("hello", "again"):
            assert await other.send(text, on_stream=Seen()) == ["Hi there, I am a small model."]
    finally:
        await tb.aclose()
        await other.aclose()
    assert "1 tokens per day" in refused[0] or "1 token per day" in refused[0]
    [row] = tb.bot.storage.chat_state.usage_rows()
    assert row.estimated and row.streamed and row.outcome == "ok"
    assert row.prompt_tokens > 20 and 0 < row.completion_tokens < 20
    estimates = [w for w in warnings if "reported no token counts" in w]
    # Once per model (three estimated answers, two models: each bot has its own).
    assert len(estimates) == 2 and all("model local" in w for w in estimates)


async def test_reported_usage_is_not_marked_estimated(
    tmp_path: Path, server: RawReplayServer
) -> None:
    server.queue = [lambda r: reply("openai", Turn(text="ok"), 1, stream=True, request=r.body)]
    tb = _bot(tmp_path, server.url)
    try:
        assert await tb.send("hello", on_stream=Seen()) == ["ok"]
    finally:
        await tb.aclose()
    [row] = tb.bot.storage.chat_state.usage_rows()
    assert not row.estimated and row.prompt_tokens == 20


# ------------------------------------------------------------------ (b) the echoed turn note


async def test_an_echoed_note_is_never_shown_when_streamed(
    tmp_path: Path, server: RawReplayServer
) -> None:
    # openai_events sends the text in two pieces: the stream splits the note in the middle.
    server.queue = [stream_without_usage(Turn(text=f"Hello alice!\n\n{NOTE}"))]
    tb = _bot(tmp_path, server.url)
    seen = Seen()
    try:
        assert await tb.send("hi", on_stream=seen) == ["Hello alice!"]
    finally:
        await tb.aclose()
    assert seen.text == "Hello alice!"
    [body] = server.bodies()
    newest = body["messages"][-1]["content"]
    # The note opens the newest message as metadata; the user's words end the prompt.
    assert newest.startswith("<context>Current time: ") and newest.endswith("</context>\nhi")
    stored = [r.text for r in tb.bot.storage.recent_messages("test", "private:alice", 10)]
    assert stored == ["hi", "Hello alice!"]


async def test_an_echoed_note_is_cut_from_a_whole_answer(
    tmp_path: Path, server: RawReplayServer
) -> None:
    tagged = NOTE.replace("[", "<context>").replace("]", "</context>")
    server.queue = [whole(Turn(text=f"{tagged}\nHello alice! {NOTE}\n\nHow can I help?"))]
    tb = _bot(tmp_path, server.url, streaming=False)
    try:
        assert await tb.send("hi") == ["Hello alice!\n\nHow can I help?"]
    finally:
        await tb.aclose()
    stored = [r.text for r in tb.bot.storage.recent_messages("test", "private:alice", 10)]
    assert stored == ["hi", "Hello alice!\n\nHow can I help?"]


# ------------------------------------------------------------------ (c) tool_choice


class CityArgs(BaseModel):
    city: str


def _weather_registry() -> Registry:
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Current weather in a city.")
        async def weather(ctx: MessageContext, args: CityArgs) -> FunctionResult:
            return FunctionResult(llm_content=f"{args.city}: sunny")

    return registry


@pytest.mark.parametrize(
    ("protocol", "choice", "sent"),
    [
        ("openai", "auto", "auto"),
        ("openai", "required", "required"),
        ("openai", None, None),
        ("anthropic", "required", {"type": "any"}),
        ("anthropic", "none", {"type": "none"}),
        ("gemini", "required", "ANY"),
        ("gemini", "auto", "AUTO"),
        ("gemini", None, None),
    ],
)
async def test_tool_choice_is_sent_in_each_protocols_words(
    tmp_path: Path, server: RawReplayServer, protocol: Any, choice: str | None, sent: Any
) -> None:
    server.queue = [lambda r: reply(protocol, Turn(text="Sunny."), 1, stream=False, request=r.body)]
    cfg = model_config(protocol, server.url, thinking=False).model_copy(
        update={"tool_choice": choice}
    )
    tb = TestBot(
        tmp_path, model=build_model("m", cfg), registry=_weather_registry(), builtins=False
    )
    try:
        assert await tb.send("weather?") == ["Sunny."]
    finally:
        await tb.aclose()
    [body] = server.bodies()
    if protocol == "openai":
        got = body.get("tool_choice")
    elif protocol == "anthropic":
        got = body.get("tool_choice")
    else:
        got = (body.get("toolConfig") or {}).get("functionCallingConfig", {}).get("mode")
    assert got == sent


def test_tool_choice_is_checked_in_the_config() -> None:
    with pytest.raises(ValidationError, match="tool_choice"):
        ModelConfig(model="m", tool_choice="always")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="tool_choice: Anthropic refuses 'required'"):
        ModelConfig(provider="anthropic", model="c", tool_choice="required", thinking=True)
    assert ModelConfig(model="m").tool_choice is None


# ------------------------------------------------------------------ (d) empty streams


async def test_an_empty_stream_is_answered_whole_to_the_streaming_client(
    tmp_path: Path, server: RawReplayServer, warnings: list[str]
) -> None:
    server.queue = [
        empty_stream,
        whole(Turn(calls=[("weather", {"city": "Oslo"})]), 1),
        empty_stream,
        whole(Turn(text="Sunny in Oslo."), 2),
        # Two empty streams in a row: from now on the model is asked whole.
        whole(Turn(text="Still sunny."), 3),
    ]
    cfg = model_config("openai", server.url, stream=True)
    tb = TestBot(
        tmp_path, model=build_model("local", cfg), registry=_weather_registry(), builtins=False
    )
    seen = Seen()
    later = Seen()
    try:
        assert await tb.send("weather in Oslo?", on_stream=seen) == ["Sunny in Oslo."]
        assert await tb.send("and now?", on_stream=later) == ["Still sunny."]
    finally:
        await tb.aclose()
    # The retried answers reached the streaming client: the call, then the text.
    assert seen.types() == ["tool_call_start", "tool_call_end", "text"]
    assert seen.events[0].tool_call is not None and seen.events[0].tool_call.name == "weather"
    assert seen.text == "Sunny in Oslo." and later.text == "Still sunny."
    bodies = server.bodies()
    assert [bool(b.get("stream")) for b in bodies] == [True, False, True, False, False]
    rows = tb.bot.storage.chat_state.usage_rows()
    assert [r.streamed for r in rows] == [False, False, False]
    switched = [w for w in warnings if "unstreamed from now on" in w]
    assert len(switched) == 1 and "local" in switched[0]


async def test_a_stream_that_works_resets_the_count(
    tmp_path: Path, server: RawReplayServer
) -> None:
    server.queue = [
        empty_stream,
        whole(Turn(text="one"), 1),
        stream_without_usage(Turn(text="two"), 2),
        empty_stream,
        whole(Turn(text="three"), 3),
        stream_without_usage(Turn(text="four"), 4),
    ]
    tb = _bot(tmp_path, server.url)
    try:
        for word in ("one", "two", "three", "four"):
            assert await tb.send(word, on_stream=Seen()) == [word]
    finally:
        await tb.aclose()
    assert [bool(b.get("stream")) for b in server.bodies()] == [
        True,
        False,
        True,
        True,
        False,
        True,
    ]


# ------------------------------------------------------------------ (e) prompt-mode compaction


class SearchArgs(BaseModel):
    query: str
    limit: int | None = None


async def test_the_prompt_mode_tool_list_is_compacted(
    tmp_path: Path, server: RawReplayServer
) -> None:
    server.queue = [whole(Turn(text="No need to search."))]
    registry = Registry()
    with registry.collecting():

        @tool_function(description="Search the notes.")
        async def search(ctx: MessageContext, args: SearchArgs) -> FunctionResult:
            return FunctionResult(llm_content="nothing")

    cfg = model_config("openai", server.url).model_copy(update={"native_tools": False})
    tb = TestBot(tmp_path, model=build_model("small", cfg), registry=registry, builtins=False)
    try:
        assert await tb.send("search?") == ["No need to search."]
    finally:
        await tb.aclose()
    [body] = server.bodies()
    assert "tools" not in body
    system = body["messages"][0]["content"]
    line = next(x for x in system.splitlines() if x.startswith("- search:"))
    schema = json.loads(line.split("Parameters: ", 1)[1])
    # As the native list: no titles, and `limit` (default None) optional without its null.
    assert schema == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }
