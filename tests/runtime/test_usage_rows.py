"""A usage row per model request, through the whole bot on the real SDKs of every protocol,
whole and streamed: tokens as each provider reports them (cached prompt and reasoning parts
included), the model's name and id, latency and outcome; streamed OpenAI-protocol requests ask
for usage (`stream_options.include_usage`), without which the server sends none."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatfn.testing import TestBot
from providers.factory import build_model
from providers.types import StreamEvent
from tests.fakes.protocols import PROTOCOLS, Protocol, Turn, model_config, replies
from tests.fakes.raw_replay import RawReplayServer
from tests.runtime.functions import make_registry

MODEL_IDS = {
    "openai": "gpt-4o",
    "deepseek": "deepseek-chat",
    "anthropic": "claude-test",
    "gemini": "gemini-test",
}
# (prompt, completion, cached, cache written, reasoning), as scripted in tests/fakes/protocols.
EXPECTED = {
    "openai": (20, 10, 8, 0, 4),
    "deepseek": (20, 10, 8, 0, 4),
    "anthropic": (20, 10, 8, 2, 0),
    "gemini": (20, 10, 8, 0, 4),
}


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_request_leaves_a_usage_row(
    tmp_path: Path, protocol: Protocol, stream: bool
) -> None:
    async with RawReplayServer() as server:
        turns = [Turn(calls=[("weather", {"city": "Oslo"})]), Turn(text="Sunny in Oslo.")]
        server.queue = list(replies(protocol, turns, stream=stream))
        model = build_model("main", model_config(protocol, server.url, stream=stream))
        tb = TestBot(tmp_path, model=model, registry=make_registry([]), builtins=False)
        events: list[StreamEvent] = []

        async def observe(event: StreamEvent) -> None:
            events.append(event)

        try:
            answer = await tb.send(
                "weather in Oslo?", group="group:g", at_bot=True, on_stream=observe
            )
        finally:
            await tb.aclose()
    assert answer == ["Sunny in Oslo."]
    rows = tb.bot.storage.chat_state.usage_rows()
    assert len(rows) == 2  # one per request of the tool loop
    for row in rows:
        got = (
            row.prompt_tokens,
            row.completion_tokens,
            row.cached_tokens,
            row.cache_write_tokens,
            row.reasoning_tokens,
        )
        assert got == EXPECTED[protocol]
        assert (row.model_name, row.model_id, row.outcome) == ("main", MODEL_IDS[protocol], "ok")
        assert (row.chat_id, row.sender_id, row.streamed) == ("group:g", "alice", stream)
        assert row.latency_ms > 0
    if protocol in ("openai", "deepseek") and stream:
        assert all(b["stream_options"] == {"include_usage": True} for b in server.bodies())
    if stream:
        assert any(e.type == "text" for e in events)


async def test_a_failed_request_is_on_record_too(tmp_path: Path) -> None:
    async with RawReplayServer() as server:  # an empty queue answers 500
        model = build_model("main", model_config("openai", server.url))
        tb = TestBot(tmp_path, model=model, builtins=False)
        try:
            answer = await tb.send("hello")
        finally:
            await tb.aclose()
    assert "not available" in answer[0]
    [row] = tb.bot.storage.chat_state.usage_rows()
    assert row.outcome != "ok" and row.prompt_tokens == 0 and row.model_name == "main"
